"""From raw profiler records to a ``Trace``: kinds, devices, call tree, links, steps, source.

Every collector (JSON import, in-process capture, Neuron import) hands ``build_trace`` the same
``RawEvents`` columns; this module resolves, once, everything later code would otherwise
re-derive:

- ``kind`` and ``device_type`` from category, phase and name;
- ``parent_id``: the call tree of host spans per thread (one stack walk, the only per-event
  Python loop; measured faster than any vectorized alternative we tried);
- string columns (category, ph, name, src_*) as integer codes into their distinct values:
  classification, lower-casing and matching run once per distinct value, never per event;
- ``launch_id`` (device work -> runtime call, by correlation id, else by ac2g flow),
  ``op_id`` (-> the framework op named by External id, else the innermost enclosing op),
  ``fwd_id`` (backward op -> forward op, by fwdbwd flow), ``step`` (ProfilerStep spans);
- source attribution: the collector's exact lines when it has them, else the innermost user
  Python frame (function level); backward ops inherit their forward op's line, device work
  its launching op's.

Ancestor look-ups ("nearest enclosing X") use pointer jumping over ``parent_id`` arrays:
log2(depth) whole-column steps instead of a walk per event.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer import __version__
from neuron_explorer.collectors.build import graph_replay
from neuron_explorer.collectors.build._conversion import release_freed_memory
from neuron_explorer.collectors.build.deferred import DeferredTrace
from neuron_explorer.collectors.build.nesting import enclosing_spans
from neuron_explorer.collectors.build.source_attribution import attribute_source
from neuron_explorer.collectors.build.source_map import UserCode
from neuron_explorer.collectors.build.step_tail import STEP_MARKER, trailing_partial_step
from neuron_explorer.collectors.kineto.kineto_carry import CARRIED
from neuron_explorer.trace.arrow import (
    bool_array,
    dict_parts,
    dictionary_from_codes,
    from_numpy,
    string_array,
    to_numpy,
)
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.repairs import NULLED, Repairs
from neuron_explorer.trace.schema import COLUMN_BY_NAME, EVENTS_SCHEMA, SCHEMA_VERSION, Kind

KINDS: tuple[str, ...] = (
    Kind.CPU_OP,
    Kind.PYTHON,
    Kind.ANNOTATION,
    Kind.STEP,
    Kind.RUNTIME,
    Kind.SYNC,
    Kind.KERNEL,
    Kind.COLLECTIVE,
    Kind.MEMCPY,
    Kind.MEMSET,
    Kind.DEVICE_ANNOTATION,
    Kind.MEMORY,
    Kind.INSTANT,
    Kind.FLOW,
    Kind.METADATA,
    Kind.TRACE,
    Kind.OTHER,
)
K = {k: np.int8(i) for i, k in enumerate(KINDS)}

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
_MEMCPY_NAME = re.compile(r"(?i)memcpy\s*(HtoD|DtoH|DtoD|HtoH|PtoP|DtoA|AtoD)")
_AMD_COPY = {"CopyHostToDevice": "HtoD", "CopyDeviceToHost": "DtoH", "CopyDeviceToDevice": "DtoD"}


def is_ac2g_category(category: str) -> bool:
    """A launch flow (runtime call -> device work) by its category."""
    return category.lower() in ("ac2g", "async_gpu", "async_cpu_to_gpu")


def is_fwdbwd_category(category: str) -> bool:
    """A forward -> backward flow by its category."""
    return category.lower() == "fwdbwd"


def is_autograd_wrapper(name: str) -> bool:
    """The autograd engine's span around a backward node (the same backward work)."""
    return name.startswith("autograd::engine::evaluate_function")


#: c10::DeviceType codes written in [memory] events.
_C10_DEVICE = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 15: "hpu", 19: "mtia", 20: "privateuseone"}


@dataclass
class RawEvents:
    """Columns of raw profiler records, in any order, as collectors produce them.

    ``start_ns`` is relative to ``metadata['base_time_ns']`` when that is set, else absolute.
    ``typed`` holds arguments already pulled out of ``args`` (keys as in ``kineto_json._Args``);
    ``src`` optional exact source columns (src_file, src_line, src_func, src_module,
    src_precision) from a collector that knows calling lines; ``columns`` any finished schema
    columns a collector sets itself (e.g. ``device_type``, ``cycle``).

    Columns may be ``pa.Array`` or ``pa.ChunkedArray`` (``concat`` of streamed chunks copies
    nothing); string columns may be plain or dictionary-encoded (chunks with different
    dictionaries are unified). ``build_trace`` consumes the object: it frees each input column
    as soon as its reordered copy exists, when the caller holds no other reference.
    """

    n: int
    ph: pa.Array
    cat: pa.Array
    name: pa.Array
    pid: pa.Array
    tid: pa.Array
    start_ns: np.ndarray
    dur_ns: np.ndarray
    flow_id: pa.Array
    args: pa.Array
    extra: pa.Array
    typed: dict[str, pa.Array] = field(default_factory=dict)
    src: dict[str, pa.Array] = field(default_factory=dict)
    columns: dict[str, pa.Array] = field(default_factory=dict)
    #: Repairs made while building the columns: (what, action) -> count (``trace.repairs``).
    issues: dict[tuple[str, str], int] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.n

    @classmethod
    def concat(cls, parts: list[RawEvents]) -> RawEvents:
        """The parts as one ``RawEvents`` whose columns are ``ChunkedArray``s: nothing is
        copied (``build_trace`` reorders them into single arrays in one pass)."""
        if len(parts) == 1:
            return parts[0]
        n = sum(p.n for p in parts)

        def chunked(arrays: list[Any], typ: pa.DataType | None = None) -> pa.ChunkedArray:
            chunks: list[pa.Array] = []
            for a in arrays:
                chunks.extend(a.chunks if isinstance(a, pa.ChunkedArray) else [a])
            if typ is None:
                types = {c.type for c in chunks}
                if all(pa.types.is_dictionary(t) for t in types):
                    typ = pa.dictionary(pa.int32(), pa.string())
                else:
                    typ = types.pop() if len(types) == 1 else pa.string()
            return pa.chunked_array([_coerce(c, typ) for c in chunks], typ)

        def merge(dicts: list[dict[str, Any]]) -> dict[str, pa.ChunkedArray]:
            keys = list(dict.fromkeys(k for d in dicts for k in d))
            out: dict[str, pa.ChunkedArray] = {}
            for k in keys:
                pieces = [d.get(k) for d in dicts]
                types = {p.type for p in pieces if p is not None and not pa.types.is_null(p.type)}
                typ = types.pop() if len(types) == 1 else (pa.string() if types else pa.null())
                out[k] = chunked([pa.nulls(part.n, typ) if p is None else p for p, part in zip(pieces, parts)], typ)
            return out

        string_or_dict = [(p.ph, p.cat, p.name) for p in parts]
        return cls(
            n=n,
            ph=chunked([s[0] for s in string_or_dict]),
            cat=chunked([s[1] for s in string_or_dict]),
            name=chunked([s[2] for s in string_or_dict]),
            pid=chunked([p.pid for p in parts], pa.int64()),
            tid=chunked([p.tid for p in parts], pa.int64()),
            start_ns=np.concatenate([p.start_ns for p in parts]),
            dur_ns=np.concatenate([p.dur_ns for p in parts]),
            flow_id=chunked([p.flow_id for p in parts], pa.int64()),
            args=chunked([p.args for p in parts], pa.string()),
            extra=chunked([p.extra for p in parts], pa.string()),
            typed=merge([p.typed for p in parts]),
            src=merge([p.src for p in parts]),
            columns=merge([p.columns for p in parts]),
            issues=_sum_issues([p.issues for p in parts]),
        )

    def filter(self, keep: np.ndarray) -> RawEvents:
        """Only the rows where ``keep`` is True (every column, typed and source ones too)."""
        mask = bool_array(keep)

        def f(arr: Any) -> Any:
            return arr.filter(mask)

        return RawEvents(
            n=int(np.count_nonzero(keep)),
            ph=f(self.ph),
            cat=f(self.cat),
            name=f(self.name),
            pid=f(self.pid),
            tid=f(self.tid),
            start_ns=np.asarray(self.start_ns)[keep],
            dur_ns=np.asarray(self.dur_ns)[keep],
            flow_id=f(self.flow_id),
            args=f(self.args),
            extra=f(self.extra),
            typed={k: f(v) for k, v in self.typed.items()},
            src={k: f(v) for k, v in self.src.items()},
            columns={k: f(v) for k, v in self.columns.items()},
            issues=dict(self.issues),
        )


def _sum_issues(parts: list[dict[tuple[str, str], int]]) -> dict[tuple[str, str], int]:
    total: dict[tuple[str, str], int] = {}
    for part in parts:
        for key, count in part.items():
            total[key] = total.get(key, 0) + count
    return total


def _coerce(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    if arr.type == typ:
        return arr
    if pa.types.is_dictionary(typ) and not pa.types.is_dictionary(arr.type):
        return arr.cast(pa.string()).dictionary_encode().cast(typ)
    if pa.types.is_string(typ) and pa.types.is_dictionary(arr.type):
        return arr.cast(pa.string())
    try:
        return arr.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([None if v is None else str(v) for v in arr.to_pylist()], typ)


# ------------------------------------------------------------------------------- helpers
def _int_column(arr: pa.Array | None, n: int) -> np.ndarray:
    """An int64 numpy column with -1 for null or non-numeric values."""
    if arr is None:
        return np.full(n, -1, np.int64)
    if pa.types.is_integer(arr.type) and arr.type in (pa.int8(), pa.int16(), pa.int32(), pa.int64()):
        return to_numpy(arr, fill=-1).astype(np.int64, copy=True)
    if pa.types.is_floating(arr.type):
        return _floats_to_int64(to_numpy(arr.cast(pa.float64()), fill=np.nan))
    if pa.types.is_null(arr.type):
        return np.full(n, -1, np.int64)
    if pa.types.is_integer(arr.type):
        return to_numpy(arr.cast(pa.int64()), fill=-1).astype(np.int64, copy=True)
    return _floats_to_int64(_numbers(arr.to_pylist()))


#: Floats at or beyond 2**63 have no int64 value (casting them is undefined behaviour).
_INT64_LIMIT = float(2**63)


def _floats_to_int64(v: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (np.abs(v) < _INT64_LIMIT)
    return np.where(ok, v, -1).astype(np.int64)


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _narrow_int32(values: np.ndarray, what: str, issues: dict[tuple[str, str], int]) -> np.ndarray:
    """int64 values for an int32 column: those beyond int32 become -1 (null), counted."""
    beyond = (values > _INT32_MAX) | (values < _INT32_MIN)
    k = int(np.count_nonzero(beyond))
    if not k:
        return values
    key = (f"{what} beyond int32", NULLED)
    issues[key] = issues.get(key, 0) + k
    return np.where(beyond, -1, values)


def _element_count(arr: pa.Array | None, n: int, what: str, issues: dict[tuple[str, str], int]) -> pa.Array:
    """A count argument (a collective's message elements) as int64: null where absent, not an
    integer within int64, or negative (counted)."""
    values = _int_column(arr, n)
    negative = _float_column(arr, n) < 0
    k = int(np.count_nonzero(negative))
    if k:
        key = (f"negative {what}", NULLED)
        issues[key] = issues.get(key, 0) + k
        values = np.where(negative, -1, values)
    return _nullable(values, pa.int64())


def _float_column(arr: pa.Array | None, n: int) -> np.ndarray:
    if arr is None or pa.types.is_null(arr.type):
        return np.full(n, np.nan)
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):
        return to_numpy(arr.cast(pa.float64()), fill=np.nan).astype(np.float64, copy=True)
    return _numbers(arr.to_pylist())


def _numbers(values: list[Any]) -> np.ndarray:
    """Mixed-type argument values (numbers written as strings by some profilers) as float64,
    NaN where a value is not a number. Only used when a column is not already numeric."""
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if v is None or isinstance(v, (list, dict, bool)):
            continue
        with contextlib.suppress(TypeError, ValueError):
            out[i] = float(v)
    return out


def masked_array(values: np.ndarray, typ: pa.DataType, mask: np.ndarray) -> pa.Array:
    """``pa.array(values, typ, mask=mask)`` without pyarrow's masked-conversion path, which
    imports pandas (0.5 s of a command's start-up)."""
    return from_numpy(values, typ, mask)


def _nullable(values: np.ndarray, typ: pa.DataType, null: Any = -1) -> pa.Array:
    mask = np.isnan(values) if values.dtype.kind == "f" else values == null
    return masked_array(values, typ, mask)


def nearest_marked_ancestor(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """For each row, the nearest row among itself and its ancestors with ``marked >= 0``
    (the value of ``marked`` there), else -1. ``parent`` is -1 at roots. Pointer jumping."""
    val = marked.copy()
    jump = parent.copy()
    while True:
        need = (val < 0) & (jump >= 0)
        if not need.any():
            return val
        idx = np.nonzero(need)[0]
        val[idx] = val[jump[idx]]
        active = jump >= 0
        jump[active] = jump[jump[active]]


def _host_parents(kind: np.ndarray, pid: np.ndarray, tid: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Innermost enclosing host span of every host event on its thread (rows already sorted
    by start, longer first)."""
    n = len(kind)
    parent = np.full(n, -1, np.int64)
    rows = np.nonzero(np.isin(kind, _HOST_CHILD_CODES))[0]
    if rows.size == 0:
        return parent
    order = rows[np.lexsort((rows, tid[rows], pid[rows]))]  # stable by thread, keeps start order
    p, t = pid[order], tid[order]
    new_thread = np.ones(order.size, bool)
    new_thread[1:] = (p[1:] != p[:-1]) | (t[1:] != t[:-1])
    del p, t
    is_span = np.isin(kind[order], _HOST_SPAN_CODES) & (dur[order] > 0)
    s_ord = start[order]
    found = enclosing_spans(s_ord, s_ord + dur[order], is_span, new_thread)
    parent[order] = np.where(found >= 0, order[np.maximum(found, 0)], -1)
    return parent


def _map_keys(keys: np.ndarray, targets_keys: np.ndarray, targets_rows: np.ndarray) -> np.ndarray:
    """For each key, the row of the (last) target with the same key, else -1 (keys < 0 never match)."""
    out = np.full(len(keys), -1, np.int64)
    valid_t = targets_keys >= 0
    tk, tr = targets_keys[valid_t], targets_rows[valid_t]
    if tk.size == 0:
        return out
    order = np.argsort(tk, kind="stable")
    tk, tr = tk[order], tr[order]
    # keep the last target of each key: innermost for External id, since rows are start-ordered
    last = np.ones(tk.size, bool)
    last[:-1] = tk[1:] != tk[:-1]
    tk, tr = tk[last], tr[last]
    q = keys >= 0
    pos = np.searchsorted(tk, keys[q])
    pos_c = np.minimum(pos, tk.size - 1)
    hit = tk[pos_c] == keys[q]
    res = np.where(hit, tr[pos_c], -1)
    out[q] = res
    return out


def _bind_flow_endpoints(
    flow_rows: np.ndarray, cand_rows: np.ndarray, pid: np.ndarray, tid: np.ndarray, start: np.ndarray
) -> np.ndarray:
    """The candidate event at the same (pid, tid, start) as each flow endpoint (the first, i.e.
    outermost, when several), else -1."""
    out = np.full(flow_rows.size, -1, np.int64)
    if flow_rows.size == 0 or cand_rows.size == 0:
        return out
    # One int64 key per (thread, start): thread index in the high bits, start offset below.
    rows = np.concatenate([cand_rows, flow_rows])
    thread = _pair_codes(pid[rows], tid[rows])
    offset = start[rows] - start[rows].min()
    if offset.max() >= (1 << 43) or thread.max() >= (1 << 19):  # > 2.4 h or > 500k pid x tid
        return _bind_flow_endpoints_slow(flow_rows, cand_rows, pid, tid, start)
    key = (thread.astype(np.int64).ravel() << 43) | offset
    cand_key, flow_key = key[: cand_rows.size], key[cand_rows.size :]
    return _map_keys_first(flow_key, cand_key, cand_rows)


def _pair_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A dense code per distinct (a, b) pair (two 1-D factorizations: np.unique(axis=0) sorts
    row views and is ~20x slower)."""
    _, ai = np.unique(a, return_inverse=True)
    bu, bi = np.unique(b, return_inverse=True)
    return ai.astype(np.int64).ravel() * max(len(bu), 1) + bi.ravel()


def _map_keys_first(keys: np.ndarray, target_keys: np.ndarray, target_rows: np.ndarray) -> np.ndarray:
    """Like ``_map_keys`` but the first target of each key wins (rows are start-ordered, the
    outermost event first)."""
    order = np.argsort(target_keys, kind="stable")
    tk, tr = target_keys[order], target_rows[order]
    first = np.ones(tk.size, bool)
    first[1:] = tk[1:] != tk[:-1]
    tk, tr = tk[first], tr[first]
    pos = np.minimum(np.searchsorted(tk, keys), tk.size - 1)
    return np.where(tk[pos] == keys, tr[pos], -1)


def _bind_flow_endpoints_slow(
    flow_rows: np.ndarray, cand_rows: np.ndarray, pid: np.ndarray, tid: np.ndarray, start: np.ndarray
) -> np.ndarray:
    first: dict[tuple[int, int, int], int] = {}
    for r, k in zip(
        cand_rows.tolist(), zip(pid[cand_rows].tolist(), tid[cand_rows].tolist(), start[cand_rows].tolist())
    ):
        first.setdefault(k, r)
    keys = zip(pid[flow_rows].tolist(), tid[flow_rows].tolist(), start[flow_rows].tolist())
    return np.array([first.get(k, -1) for k in keys], np.int64)


# ------------------------------------------------------------------------------- kinds
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


# ------------------------------------------------------------------------------- main


#: Traces with at least this many events give freed memory back to the system while they are
#: built (``release_freed_memory``).
TRIM_MIN_EVENTS = 1 << 20


def _no_trim() -> None:
    return None


def build_trace(
    raw: RawEvents,
    metadata: dict[str, Any],
    source: str | Path | None = None,
    user_code: UserCode | None = None,
) -> Trace:
    """Normalize raw records into a ``Trace`` (see the module docstring for what is resolved)."""
    user_code = user_code or UserCode.default()
    n = raw.n
    issues = dict(raw.issues)
    # Handing freed heap pages back pays on millions of events; on a capture of 100k it is
    # only ~30 calls walking the program's whole heap.
    trim = release_freed_memory if n >= TRIM_MIN_EVENTS else _no_trim
    base = metadata.get("base_time_ns")
    start_rel = np.asarray(raw.start_ns, np.int64)
    start_abs = start_rel + (int(base) if isinstance(base, int) else 0)
    dur_all = np.maximum(np.asarray(raw.dur_ns, np.int64), 0)

    # Rows sorted by start, the longer (enclosing) event first, then source order.
    order = np.lexsort((np.arange(n), -dur_all, start_abs))
    take = from_numpy(order, pa.int64())
    ph, cat, name = _Words.of(raw.ph), _Words.of(raw.cat), _Words.of(raw.name)
    ph.codes, cat.codes, name.codes = ph.codes[order], cat.codes[order], name.codes[order]
    pid = _int_column(raw.pid, n)[order]
    tid = _int_column(raw.tid, n)[order]
    start, dur = start_abs[order], dur_all[order]
    del start_rel, start_abs, dur_all
    # Reorder column by column on a shallow copy, so that (when the caller passed its last
    # reference) each input column is freed as soon as its reordered copy exists.
    raw = dataclasses.replace(raw, ph=None, cat=None, name=None, pid=None, tid=None, start_ns=None, dur_ns=None)
    raw.typed, raw.src, raw.columns = dict(raw.typed), dict(raw.src), dict(raw.columns)
    # The wide text columns stay in input order: the trace gathers them in event order one
    # row group at a time when it is written (see collectors.build.deferred).
    deferred = {"args": raw.args, "extra": raw.extra}
    for out_name, key in (("input_shapes", "input_dims"), ("input_types", "input_type")):
        if key in raw.typed:
            deferred[out_name] = raw.typed.pop(key)
    for out_name in _DEFERRED_COLUMNS:
        if out_name in raw.columns:  # a collector's own column wins, as below
            deferred[out_name] = raw.columns.pop(out_name)
    raw.args = raw.extra = None
    trim()
    raw.flow_id = _reorder(raw.flow_id, take)
    for d in (raw.typed, raw.src, raw.columns):
        for k in list(d):
            d[k] = _reorder(d[k], take)
            trim()  # the input chunks just freed
    del take
    typed = raw.typed
    # Columns a Chrome export of ours carried (``collectors.kineto.kineto_carry``) win where carried.
    # (one mask per carried column: a row carries only the columns the importer would not
    # derive back the same, so each is restored where carried and derived elsewhere)
    carried = {k[len(CARRIED) + 1 :]: raw.columns.pop(k) for k in list(raw.columns) if k.startswith(CARRIED + ":")}

    kind, dev_code, dtypes = _classify(ph, cat, name, typed, metadata)
    on_device = np.isin(kind, _ON_DEVICE_CODES)
    is_cpu_op = kind == K[Kind.CPU_OP]
    is_runtime = kind == K[Kind.RUNTIME]
    is_mem = kind == K[Kind.MEMORY]

    # --- device and stream
    # (Each input and intermediate is dropped as soon as it is used: on millions of events
    # every int64 column is tens of MB.)
    dev_arg = _int_column(typed.pop("device", None), n)
    device = np.where(on_device, np.where(dev_arg >= 0, dev_arg, pid), -1)
    del dev_arg
    mem_dev = _int_column(typed.pop("mem_device_id", None), n)
    not_cpu = np.array([d != "cpu" for d in dtypes])[dev_code]  # per device type, not per event
    device = _nullable(_narrow_int32(np.where(is_mem & not_cpu, mem_dev, device), "device", issues), pa.int32())
    del mem_dev, not_cpu
    stream_arg = _int_column(typed.pop("stream", None), n)
    stream = _nullable(np.where(on_device, np.where(stream_arg >= 0, stream_arg, tid), -1), pa.int64())
    del stream_arg
    typed.pop("mem_device_type", None)
    trim()

    # --- call tree
    parent = _host_parents(kind, pid, tid, start, dur)

    # --- links
    external = _int_column(typed.pop("external_id", None), n)
    correlation = _int_column(typed.pop("correlation", None), n)
    flow_id = _int_column(raw.flow_id, n)
    is_flow = kind == K[Kind.FLOW]
    is_s = ph.isin(("s",))

    # Device work without a correlation arg (old traces) takes it from its ac2g flow's id.
    ac2g = is_flow & cat.test(is_ac2g_category)
    if ac2g.any() and (on_device & (correlation < 0)).any():
        f_rows = np.nonzero(ac2g & ~is_s)[0]
        bound = _bind_flow_endpoints(f_rows, np.nonzero(on_device)[0], pid, tid, start)
        ok = (bound >= 0) & (correlation[np.maximum(bound, 0)] < 0)
        correlation[bound[ok]] = flow_id[f_rows[ok]]
        s_rows = np.nonzero(ac2g & is_s)[0]
        bound = _bind_flow_endpoints(s_rows, np.nonzero(is_runtime)[0], pid, tid, start)
        ok = (bound >= 0) & (correlation[np.maximum(bound, 0)] < 0)
        correlation[bound[ok]] = flow_id[s_rows[ok]]

    rows = np.arange(n, dtype=np.int64)
    launch = np.where(
        on_device, _map_keys(np.where(on_device, correlation, -1), np.where(is_runtime, correlation, -1), rows), -1
    )

    op_by_ext = _map_keys(external, np.where(is_cpu_op, external, -1), rows)
    enclosing_op = nearest_marked_ancestor(parent, np.where(is_cpu_op, rows, -1))
    enclosing_op_excl = np.where(parent >= 0, enclosing_op[np.maximum(parent, 0)], -1)
    del enclosing_op
    op = np.full(n, -1, np.int64)
    host_linked = np.isin(kind, _HOST_LINKED_CODES)
    op[host_linked] = np.where(op_by_ext[host_linked] >= 0, op_by_ext[host_linked], enclosing_op_excl[host_linked])
    del host_linked, enclosing_op_excl
    via_launch = on_device & (launch >= 0)
    op[via_launch] = op[launch[via_launch]]
    del via_launch
    direct = on_device & (op < 0)
    op[direct] = op_by_ext[direct]
    del direct, op_by_ext
    trim()

    # fwdbwd flows: 's' sits on the forward op, 'f' on the backward node; they share an id.
    fwd = np.full(n, -1, np.int64)
    fb = is_flow & cat.test(is_fwdbwd_category)
    if fb.any():
        s_rows = np.nonzero(fb & is_s)[0]
        f_rows = np.nonzero(fb & ph.isin(("f",)))[0]
        cpu_rows = np.nonzero(is_cpu_op)[0]
        s_op = _bind_flow_endpoints(s_rows, cpu_rows, pid, tid, start)
        f_op = _bind_flow_endpoints(f_rows, cpu_rows, pid, tid, start)
        fwd_of_flow = _map_keys(flow_id[f_rows], np.where(s_op >= 0, flow_id[s_rows], -1), s_op)
        ok = (f_op >= 0) & (fwd_of_flow >= 0)
        fwd[f_op[ok]] = fwd_of_flow[ok]
        # The autograd engine wraps each node in "evaluate_function: XBackward0"; it is the
        # same backward work, so it links to the same forward op.
        wrapper = parent[f_op[ok]]
        has_wrapper = wrapper >= 0
        if has_wrapper.any():
            w = wrapper[has_wrapper]
            is_wrap = name.test(is_autograd_wrapper)[w]
            fwd[w[is_wrap]] = fwd_of_flow[ok][has_wrapper][is_wrap]
        # Ops nested inside a backward node belong to the same forward op.
        fwd = np.where(is_cpu_op, nearest_marked_ancestor(parent, fwd), -1)
    del flow_id, is_flow, is_s, ac2g, fb
    trim()

    # --- steps (a trailing partial step is demoted to a plain annotation, see collectors.build.step_tail)
    # (inferred steps, collectors.capture.inferred_steps, end where the work ends: none is a tail)
    dropped_steps = [] if metadata.get("steps_from") else _drop_trailing_step(kind, name, start, dur)
    step = _narrow_int32(_assign_steps(kind, name, start, dur, op, launch, on_device), "step number", issues)

    # --- source attribution (work replayed from a CUDA/HIP graph: the lines of its capture)
    graph = _graph_replays(kind, name, pid, tid, start, launch, typed.get("graph_id"))
    src = attribute_source(
        raw.src, name, kind, parent, op, fwd, on_device | is_runtime | is_mem, user_code, launch, graph
    )
    raw.src = {}
    capture_op = np.full(n, -1, np.int64)
    if graph is not None:
        capture_op[graph.rows] = op[graph.calls]

    kind_arr = pa.DictionaryArray.from_arrays(from_numpy(kind, pa.int32()), string_array(list(KINDS)))
    dtype_arr = pa.DictionaryArray.from_arrays(from_numpy(dev_code, pa.int32()), string_array(dtypes))
    if "device_type" in raw.columns:  # a collector that knows better (in-process capture)
        given = raw.columns["device_type"].cast(pa.string())
        dtype_arr = pc.if_else(pc.is_null(given), dtype_arr.cast(pa.string()), given)

    rank = int(metadata.get("rank", 0) or 0)

    def pop(key: str) -> Any:  # each typed input is released as soon as its output column exists
        trim()  # (the previous one's)
        return typed.pop(key, None)

    cols: dict[str, Any] = {
        "event_id": from_numpy(rows, pa.int64()),
        "rank": from_numpy(np.full(n, rank, np.int32), pa.int32()),
        "kind": kind_arr,
        "category": dictionary_from_codes(cat.codes, cat.words),
        "ph": dictionary_from_codes(ph.codes, ph.words),
        "name": dictionary_from_codes(name.codes, name.words),
        "device_type": dtype_arr,
        "device": device,
        "stream": stream,
        "pid": from_numpy(pid, pa.int64()),
        "tid": from_numpy(tid, pa.int64()),
        "start_ns": from_numpy(start, pa.int64()),
        "dur_ns": from_numpy(dur, pa.int64()),
        "parent_id": _nullable(parent, pa.int64()),
        "correlation_id": _nullable(correlation, pa.int64()),
        "external_id": _nullable(external, pa.int64()),
        "launch_id": _nullable(launch, pa.int64()),
        "op_id": _nullable(op, pa.int64()),
        "fwd_id": _nullable(fwd, pa.int64()),
        "capture_op_id": _nullable(capture_op, pa.int64()),
        "step": _nullable(step, pa.int32()),
        "cycle": _zero_null(raw.columns.get("cycle"), n),
        **src,
        **typed_columns(typed, kind, name, n, issues, pop),
        "flow_id": raw.flow_id,
    }
    for k, v in raw.columns.items():
        if k in COLUMN_BY_NAME and k not in ("device_type", "cycle"):
            mask = carried.get(k)
            if mask is not None and k not in cols:  # a column this importer never derives (hlo_name)
                cols[k] = pa.nulls(n, _plain_type(COLUMN_BY_NAME[k].type))
            cols[k] = v if mask is None else _where(mask, v, cols[k])
    raw.flow_id = None
    del pid, tid, start, dur, parent, correlation, external, launch, op, fwd, step, device, stream, src, capture_op
    trim()
    table = schema_table(cols, n, skip=deferred)
    meta = dict(metadata)
    meta.setdefault("collector_version", __version__)
    meta["schema_version"] = SCHEMA_VERSION
    repairs = Repairs()
    repairs.merge(issues)
    repairs.record(meta)
    meta["device_types"] = sorted({dtypes[c] for c in np.unique(dev_code).tolist()}) if n else []
    if dropped_steps:
        meta["dropped_steps"] = [{"rank": rank, **d} for d in dropped_steps]
    if graph is not None:
        meta["graph_replay"] = graph.metadata
    trim()
    return DeferredTrace(table, deferred, order, meta)


#: Device work kind -> the family a graph's capture call and its replayed event share.
_GRAPH_FAMILY_OF = {
    Kind.KERNEL: graph_replay.KERNEL,
    Kind.COLLECTIVE: graph_replay.KERNEL,
    Kind.MEMCPY: graph_replay.COPY,
    Kind.MEMSET: graph_replay.SET,
}


def _graph_replays(
    kind: np.ndarray,
    name: _Words,
    pid: np.ndarray,
    tid: np.ndarray,
    start: np.ndarray,
    launch: np.ndarray,
    graph_id: Any,
) -> graph_replay.GraphReplays | None:
    """The CUDA/HIP graph replay plan of the trace (``collectors.build.graph_replay``), or None."""
    is_runtime = kind == K[Kind.RUNTIME]
    role_w, family_w = graph_replay.runtime_roles(name.words, np.unique(name.codes[is_runtime]))
    role = role_w[name.codes]
    calls = np.nonzero(is_runtime & (role != graph_replay.NONE))[0]
    if not (role[calls] == graph_replay.GRAPH_LAUNCH).any() and not (role[calls] == graph_replay.BEGIN).any():
        return None
    launched = launch[launch >= 0]
    ran = np.zeros(len(kind), bool)
    ran[launched] = True
    family_of_kind = np.full(len(KINDS), -1, np.int8)
    for k, fam in _GRAPH_FAMILY_OF.items():
        family_of_kind[K[k]] = fam
    dev = np.nonzero((family_of_kind[kind] >= 0) & (launch >= 0))[0]
    gid = _int_column(graph_id, len(kind))
    return graph_replay.plan_replays(
        calls,
        role[calls],
        family_w[name.codes[calls]],
        pid[calls],
        tid[calls],
        start[calls],
        ran[calls],
        dev,
        launch[dev],
        family_of_kind[kind[dev]],
        start[dev],
        gid[dev],
    )


def typed_columns(
    typed: dict[str, Any], kind: np.ndarray, name: _Words, n: int, issues: dict[tuple[str, str], int], pop: Any = None
) -> dict[str, pa.Array]:
    """The output columns that are a function of each event's own typed arguments, kind and
    name alone (sizes, kernel launch figures, memory and collective arguments). Row by row, so
    the in-memory build and the spooled one (``collectors.kineto.spooled``, batch by batch) share it;
    ``pop(key)`` takes an argument out of ``typed`` (the in-memory build frees each as it goes)."""
    take = pop or (lambda key: typed.pop(key, None))
    is_mem = kind == K[Kind.MEMORY]
    is_device_work = np.isin(kind, _DEVICE_KIND_CODES)
    size_bytes = np.where(is_mem, _int_column(take("mem_bytes"), n), -1)
    sized = (kind == K[Kind.MEMCPY]) | (kind == K[Kind.MEMSET])
    size_bytes = np.where(sized, _int_column(take("bytes"), n), size_bytes)
    coll_bytes = _int_column(take("in_msg_size"), n)
    size_bytes = np.where((size_bytes == -1) & (coll_bytes >= 0), coll_bytes, size_bytes)
    del coll_bytes
    return {
        "sequence_nr": _nullable(_int_column(take("sequence_nr"), n), pa.int64()),
        "flops": _nullable(_int_column(take("flops"), n), pa.int64()),
        "bytes": masked_array(size_bytes, pa.int64(), size_bytes == -1),
        "bandwidth_gbps": _nullable(_float_column(take("bandwidth"), n), pa.float64()),
        "memcpy_kind": _memcpy_kinds(name, kind == K[Kind.MEMCPY]),
        "grid": _shape_column(take("grid"), n, "grid", issues),
        "block": _shape_column(take("block"), n, "block", issues),
        "registers_per_thread": _nullable(
            _narrow_int32(_int_column(take("registers"), n), "registers per thread", issues), pa.int32()
        ),
        "shared_memory_bytes": _nullable(_int_column(take("shared_memory"), n), pa.int64()),
        "blocks_per_sm": _nullable(_float_column(take("blocks_per_sm"), n), pa.float64()),
        "warps_per_sm": _nullable(_float_column(take("warps_per_sm"), n), pa.float64()),
        "occupancy_pct": _nullable(_float_column(take("occupancy"), n), pa.float64()),
        "mem_total_allocated_bytes": _nullable(
            np.where(is_mem, _int_column(take("total_allocated"), n), -1), pa.int64()
        ),
        "mem_total_reserved_bytes": _nullable(np.where(is_mem, _int_column(take("total_reserved"), n), -1), pa.int64()),
        "mem_addr": _nullable(np.where(is_mem, _int_column(take("addr"), n), -1), pa.int64()),
        "graph_id": _nullable(np.where(is_device_work, _int_column(take("graph_id"), n), -1), pa.int64()),
        "collective_name": _string_column(take("collective_name"), n),
        "group_size": _nullable(_narrow_int32(_int_column(take("group_size"), n), "group size", issues), pa.int32()),
        "process_group": _string_column(take("process_group"), n),
        "process_group_desc": _string_column(take("process_group_desc"), n),
        "in_msg_nelems": _element_count(take("in_msg_nelems"), n, "In msg nelems", issues),
        "out_msg_nelems": _element_count(take("out_msg_nelems"), n, "Out msg nelems", issues),
        "msg_dtype": _string_column(take("msg_dtype"), n),
    }


def schema_table(cols: dict[str, Any], n: int, skip: Any = ()) -> pa.Table:
    """``cols`` (consumed) as a table of the ``EVENTS_SCHEMA`` columns not in ``skip``, in schema
    order and types; a column not given is all null."""
    arrays, fields = [], []
    for f in EVENTS_SCHEMA:
        if f.name in skip:
            continue
        fields.append(f)
        v = cols.pop(f.name, None)
        if v is None:
            arrays.append(pa.nulls(n, f.type))
            continue
        if isinstance(v, pa.ChunkedArray):
            v = v.combine_chunks()
        if v.type != f.type:
            v = (
                v.cast(f.type)
                if not pa.types.is_dictionary(f.type)
                else pc.cast(
                    v.cast(pa.string()) if pa.types.is_dictionary(v.type) else v, pa.string()
                ).dictionary_encode()
            )
        arrays.append(v)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


#: Text columns left in input order until the trace is written (``collectors.build.deferred``).
_DEFERRED_COLUMNS = ("args", "extra", "input_shapes", "input_types")


def _zero_null(arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None:
        return from_numpy(np.zeros(n, np.int32), pa.int32())
    return arr.fill_null(0) if arr.null_count else arr


def _plain_type(typ: pa.DataType) -> pa.DataType:
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def _where(mask: pa.Array, given: pa.Array, derived: pa.Array) -> pa.Array:
    """``given`` where ``mask`` is true, else ``derived`` (as plain, undictionaried types)."""
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    given, derived = ((a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a) for a in (given, derived))
    given, derived = (a.cast(a.type.value_type) if pa.types.is_dictionary(a.type) else a for a in (given, derived))
    if given.type != derived.type:
        given = given.cast(derived.type)
    return pc.if_else(mask.fill_null(False), given, derived)


def _reorder(arr: pa.Array | pa.ChunkedArray, take: pa.Array) -> pa.Array:
    out = arr.take(take)
    return out.chunk(0) if isinstance(out, pa.ChunkedArray) and out.num_chunks == 1 else out


def _drop_trailing_step(kind: np.ndarray, name: _Words, start: np.ndarray, dur: np.ndarray) -> list[dict[str, Any]]:
    """Demote the trailing partial ``ProfilerStep#N`` span (if any) to an annotation, in place;
    returns what was dropped, for the trace metadata (``dropped_steps``)."""
    step_rows = np.nonzero(kind == K[Kind.STEP])[0]
    markers = np.nonzero(name.test(STEP_MARKER.match))[0]
    tail, dropped = trailing_step(name.values(step_rows), start[step_rows], dur[step_rows], start[markers])
    kind[step_rows[tail]] = K[Kind.ANNOTATION]
    return dropped


def trailing_step(
    names: list[str], start: np.ndarray, dur: np.ndarray, marker_start: np.ndarray
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Of the step spans (``ProfilerStep#N`` names, starts, durations, in event order; the
    start of every step-marker event), which are the trailing partial step (``step_tail``),
    and the ``dropped_steps`` metadata entry for it (both builds use this)."""
    none = np.zeros(len(names), bool)
    if len(names) < 2:
        return none, []
    parsed = [int(_STEP_NAME.match(nm).group(1)) for nm in names]  # type: ignore[union-attr]
    if not all(0 <= x < 2**31 for x in parsed):
        return none, []  # step numbers past int32 are repaired with the step column (see _assign_steps)
    numbers = np.array(parsed, np.int64)
    tail = trailing_partial_step(numbers, start, dur, marker_start)
    if tail is None:
        return none, []
    rows = numbers == tail
    return rows, [{"step": tail, "dur_ns": int(dur[rows].max()), "reason": "trailing partial step"}]


class StepTimes:
    """Which step span (latest start first) holds each instant (``_assign_steps``'s rule)."""

    def __init__(self, start: np.ndarray, dur: np.ndarray, numbers: np.ndarray) -> None:
        self.order = np.argsort(start, kind="stable")
        self.s0, self.s1, self.numbers = start[self.order], (start + dur)[self.order], numbers[self.order]

    def by_time(self, t: np.ndarray) -> np.ndarray:
        if self.s0.size == 0:
            return np.full(len(t), -1, np.int64)
        idx = np.searchsorted(self.s0, t, side="right") - 1
        ok = (idx >= 0) & (t < self.s1[np.maximum(idx, 0)])
        return np.where(ok, self.numbers[np.maximum(idx, 0)], -1)


def _assign_steps(
    kind: np.ndarray,
    name: _Words,
    start: np.ndarray,
    dur: np.ndarray,
    op: np.ndarray,
    launch: np.ndarray,
    on_device: np.ndarray,
) -> np.ndarray:
    n = len(kind)
    step = np.full(n, -1, np.int64)
    step_rows = np.nonzero(kind == K[Kind.STEP])[0]
    if step_rows.size == 0:
        return step
    names = name.values(step_rows)
    # (A step number beyond int64 is kept as -1 here; beyond int32 is nulled by the caller.)
    numbers = np.array([_step_number(nm) for nm in names], np.int64)
    by_time = StepTimes(start[step_rows], dur[step_rows], numbers).by_time(start)
    step = np.where(~on_device, by_time, -1)
    step[step_rows] = numbers
    # Device work belongs to the step its launch (or op) happened in, not where it ran.
    dev_step = np.where(op >= 0, step[np.maximum(op, 0)], -1)
    dev_step = np.where((dev_step < 0) & (launch >= 0), step[np.maximum(launch, 0)], dev_step)
    dev_step = np.where(dev_step < 0, by_time, dev_step)
    step = np.where(on_device, dev_step, step)
    return step


def _step_number(name: str) -> int:
    number = int(_STEP_NAME.match(name).group(1))  # type: ignore[union-attr]
    return number if number <= _INT32_MAX else _INT32_MAX + 1


def _memcpy_kinds(name: _Words, is_copy: np.ndarray) -> pa.Array:
    labels: list[str | None] = []
    for nm in name.words:
        nm = nm or ""
        m = _MEMCPY_NAME.search(nm)
        if m:
            # "Memcpy DtoH (Device -> Pageable)", "Memcpy HtoD (Pageable -> Device)": host memory on either side
            memory = next((w for w in ("Pageable", "Pinned") if w in nm[m.end(1) :]), None)
            labels.append(f"{m.group(1)} ({memory})" if memory else m.group(1))
        else:
            labels.append(next((v for k, v in _AMD_COPY.items() if k in nm), None))
    return dictionary_from_codes(np.where(is_copy, name.codes, -1), labels)


def _shape_column(arr: pa.Array | None, n: int, what: str, issues: dict[tuple[str, str], int]) -> pa.Array:
    """A list<int32> column (kernel grid, block); a value that is not a list of int32 integers
    is null, and counted when it is a list (its text stays in ``args``)."""
    if arr is None or pa.types.is_null(arr.type):
        return pa.nulls(n, pa.list_(pa.int32()))
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        try:
            return arr.cast(pa.list_(pa.int32()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    out: list[list[int] | None] = []
    unusable = 0
    for v in arr.to_pylist():
        ok = isinstance(v, list) and all(type(x) is int and _INT32_MIN <= x <= _INT32_MAX for x in v)
        out.append(v if ok else None)
        unusable += isinstance(v, list) and not ok  # (triton's text "grid(100,)" is no list: not counted)
    if unusable:
        key = (f"{what} not a list of int32", NULLED)
        issues[key] = issues.get(key, 0) + unusable
    return pa.array(out, pa.list_(pa.int32()))


def _string_column(arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None or pa.types.is_null(arr.type):
        return pa.nulls(n, pa.string())
    return arr if pa.types.is_string(arr.type) else _coerce(arr, pa.string())
