"""What each event is: its ``kind`` and ``device_type``, from category, phase and name.

String columns are taken as their distinct values and a code per row (``_Words``): classifying,
lower-casing and matching run once per distinct value, never per event. Here too are the kind
code sets the build steps select rows with (device work, host spans, ...), the name patterns of
steps and collectives, the accelerator type of a trace (``accelerator_type``) and each device
work kind's family in a CUDA/HIP graph (``_GRAPH_FAMILY_OF``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from neuron_explorer.collectors.build import graph_replay
from neuron_explorer.collectors.build.raw_events import K, _int_column
from neuron_explorer.trace.arrow import dict_parts
from neuron_explorer.trace.schema import Kind

_CATEGORY_KIND: dict[str, str] = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "python_function": Kind.PYTHON,
    "user_annotation": Kind.ANNOTATION,
    "gpu_user_annotation": Kind.DEVICE_ANNOTATION,
    "kernel": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "cuda_sync": Kind.SYNC,
    "ac2g": Kind.FLOW,
    "fwdbwd": Kind.FLOW,
    "async_gpu": Kind.FLOW,
    "async_cpu_to_gpu": Kind.FLOW,
    "flow": Kind.FLOW,
    "trace": Kind.TRACE,
    "overhead": Kind.TRACE,
    "mtia_ccp_events": Kind.KERNEL,
    "cpu_instant_event": Kind.INSTANT,
}
_DEVICE_KIND_CODES = np.array([K[Kind.KERNEL], K[Kind.COLLECTIVE], K[Kind.MEMCPY], K[Kind.MEMSET]])
_ON_DEVICE_CODES = np.concatenate([_DEVICE_KIND_CODES, [K[Kind.SYNC], K[Kind.DEVICE_ANNOTATION]]])
_HOST_SPAN_CODES = np.array([K[k] for k in (Kind.CPU_OP, Kind.PYTHON, Kind.ANNOTATION, Kind.STEP, Kind.RUNTIME)])
_HOST_CHILD_CODES = np.concatenate([_HOST_SPAN_CODES, [K[Kind.MEMORY], K[Kind.INSTANT]]])
#: Host events linked to the op named by their External id, else the innermost enclosing op.
_HOST_LINKED_CODES = np.array([K[k] for k in (Kind.RUNTIME, Kind.MEMORY, Kind.INSTANT, Kind.ANNOTATION)])

_COLLECTIVE_NAME = re.compile(
    r"(?i)^(nccl|rccl)|^c10d::|allreduce|all_reduce|allgather|all_gather|reducescatter|reduce_scatter|alltoall|all_to_all"
)
_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")

#: c10::DeviceType codes written in [memory] events.
_C10_DEVICE = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 15: "hpu", 19: "mtia", 20: "privateuseone"}

#: Device work kind -> the family a graph's capture call and its replayed event share.
_GRAPH_FAMILY_OF = {
    Kind.KERNEL: graph_replay.KERNEL,
    Kind.COLLECTIVE: graph_replay.KERNEL,
    Kind.MEMCPY: graph_replay.COPY,
    Kind.MEMSET: graph_replay.SET,
}


@dataclass
class _Words:
    """A string column as its distinct values and a code per row (-1 = null)."""

    words: list[Any]
    codes: np.ndarray

    @classmethod
    def of(cls, arr: pa.Array | pa.ChunkedArray) -> _Words:
        words, codes = dict_parts(arr)
        return cls(words, codes)

    def test(self, predicate: Any) -> np.ndarray:
        """Per row: ``predicate(value)`` evaluated once per distinct value ("" for nulls)."""
        table = np.array([bool(predicate(w if w is not None else "")) for w in self.words] + [bool(predicate(""))])
        return table[self.codes]

    def isin(self, values: tuple[str, ...] | list[str]) -> np.ndarray:
        return self.test(lambda w: w in values)

    def values(self, rows: np.ndarray) -> list[Any]:
        words = [*self.words, None]
        return [words[c] for c in self.codes[rows].tolist()]


def _classify(
    ph: _Words, cat: _Words, name: _Words, typed: dict[str, Any], metadata: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Kind codes and device-type codes (index into the returned device type list)."""
    n = len(ph.codes)
    cats = [c if c is not None else "" for c in cat.words]
    cat_idx = cat.codes
    # Classified once per distinct category; the extra last entry is for null categories.
    cat_kind = np.array([K[_category_kind(c)] for c in cats] + [K[_category_kind("")]], np.int8)
    kind = cat_kind[cat_idx] if n else np.zeros(0, np.int8)

    kind[ph.isin(("M",))] = K[Kind.METADATA]
    flow_ph = ph.isin(("s", "f", "t"))
    kind[flow_ph] = K[Kind.FLOW]
    instant = ph.isin(("i", "I", "n")) & ~flow_ph
    is_memory_name = name.isin(("[memory]",))
    kind[instant & (kind != K[Kind.SYNC])] = K[Kind.INSTANT]
    kind[instant & is_memory_name] = K[Kind.MEMORY]
    kind[ph.isin(("C",))] = K[Kind.OTHER]
    is_step_name = name.test(_STEP_NAME.match)
    kind[(kind == K[Kind.ANNOTATION]) & is_step_name] = K[Kind.STEP]
    is_coll_name = name.test(_COLLECTIVE_NAME.search)
    kind[(kind == K[Kind.KERNEL]) & is_coll_name] = K[Kind.COLLECTIVE]
    # A [memory] event Kineto did not categorize still is one.
    kind[(kind == K[Kind.OTHER]) & is_memory_name] = K[Kind.MEMORY]

    names = [*name.words, ""]
    runtime_names = {names[i] for i in np.unique(name.codes[kind == K[Kind.RUNTIME]]).tolist()} if n else set()
    accel = accelerator_type(cats, metadata, runtime_names)
    dtypes = ["cpu", accel]
    dev = np.zeros(n, np.int8)
    on_device = np.isin(kind, _ON_DEVICE_CODES)
    dev[on_device] = 1
    # Category prefixes name the device outright where they can (hip_runtime, mtia_..., xpu_...).
    for i, c in enumerate(cats):
        prefix = c.split("_", 1)[0].lower()
        if prefix in ("hip", "mtia", "xpu", "hpu") and "_" in c:
            rows = (cat_idx == i) & on_device
            if rows.any():
                if prefix not in dtypes:
                    dtypes.append(prefix)
                dev[rows] = dtypes.index(prefix)
    mem_rows = kind == K[Kind.MEMORY]
    if mem_rows.any() and "mem_device_type" in typed:
        codes = _int_column(typed["mem_device_type"], n)
        for code in np.unique(codes[mem_rows]):
            dev_name = _C10_DEVICE.get(int(code), "cpu" if code < 0 else f"device{int(code)}")
            if dev_name in ("cuda", "privateuseone") and accel not in ("cpu",):
                dev_name = accel  # ROCm reports CUDA, a renamed PrivateUse1 backend its own name
            if dev_name not in dtypes:
                dtypes.append(dev_name)
            dev[mem_rows & (codes == code)] = dtypes.index(dev_name)
    return kind, dev, dtypes


def _category_kind(cat: str) -> str:
    c = cat.lower()
    if c in _CATEGORY_KIND:
        return _CATEGORY_KIND[c]
    if c.endswith("_runtime") or c.endswith("_driver") or c == "runtime":
        return Kind.RUNTIME
    if c.endswith("_kernel") or c == "kernel":
        return Kind.KERNEL
    if "memcpy" in c:
        return Kind.MEMCPY
    if "memset" in c:
        return Kind.MEMSET
    if c.endswith("_sync"):
        return Kind.SYNC
    if c.endswith("_user_annotation"):
        return Kind.DEVICE_ANNOTATION
    return Kind.OTHER


def accelerator_type(categories: list[str], metadata: dict[str, Any], runtime_names: set[str] | None = None) -> str:
    """The device type of the trace's device events, from its categories, runtime API names
    (hipLaunchKernel) and metadata (ROCm versions, AMD device names)."""
    top = metadata.get("trace_metadata") or {}
    forced = metadata.get("device_type")
    if forced:
        return str(forced)
    lowered = [c.lower() for c in categories]
    if (
        any(k in top for k in ("roctracer_version", "hip_runtime_version", "hip_driver_version"))
        or any(c.startswith("hip_") for c in lowered)
        or any(r.startswith("hip") for r in runtime_names or ())
        or any(
            any(tag in str(p.get("name", "")) for tag in ("AMD", "Instinct", "Radeon"))
            for p in metadata.get("device_properties") or []
            if isinstance(p, dict)
        )
    ):
        return "hip"
    if any(c.startswith("mtia_") for c in lowered):
        return "mtia"
    if any(c.startswith("xpu_") for c in lowered):
        return "xpu"
    if any(c.startswith("hpu_") for c in lowered):
        return "hpu"
    if any(c.startswith("privateuse1_") for c in lowered):
        return str(metadata.get("privateuse1_backend") or "privateuseone")
    return "cuda"
