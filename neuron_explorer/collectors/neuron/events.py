"""From ``DeviceProfile`` tables to trace rows: one queue per engine, DMA queue and CC stream.

Instructions become ``kernel`` events on their engine's queue (Tensor 0, Vector 1, Scalar 2,
GpSimd 3, Sync 4), DMA transfers ``memcpy`` events on their DMA queue (100+) with bytes and
direction, collective operations (and DMAs flagged as collective traffic) ``collective`` events
(900+); system-profile runtime calls become host ``runtime`` events. Everything goes through
``collectors.build.normalize.build_trace``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from neuron_explorer.collectors.build.normalize import build_trace
from neuron_explorer.collectors.build.raw_events import RawEvents
from neuron_explorer.collectors.neuron.align import Alignment, align
from neuron_explorer.collectors.neuron.frames import MAX_TIME_NS
from neuron_explorer.collectors.neuron.metadata import profile_metadata, trace_metadata
from neuron_explorer.collectors.neuron.model import (
    CC_STREAM_BASE,
    DMA_STREAM_BASE,
    ENGINE_STREAM,
    ENGINES,
    PCORE_STRIDE,
    DeviceProfile,
)
from neuron_explorer.trace.errors import TraceFormatError
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.repairs import DROPPED, Repairs
from neuron_explorer.trace.schema import Kind, Precision

CAT_INSTRUCTION = "neuron_kernel"
CAT_DMA = "neuron_dma_memcpy"
CAT_CC = "neuron_cc_kernel"
CAT_RUNTIME = "neuron_runtime"
CAT_HW = "neuron_hw_user_annotation"
CAT_FRAMEWORK = "neuron_framework"
CAT_WINDOW = "neuron_profile_window"


def _raw(
    n: int,
    cat: str,
    name: Any,
    pid: Any,
    tid: Any,
    start: np.ndarray,
    dur: np.ndarray,
    args: Any,
    columns: dict[str, pa.Array],
    typed: dict[str, pa.Array] | None = None,
    src: dict[str, pa.Array] | None = None,
) -> RawEvents:
    return RawEvents(
        n=n,
        ph=pa.array(["X"] * n, pa.string()),
        cat=pa.array([cat] * n, pa.string()),
        name=pa.array(np.asarray(name, dtype=object), pa.string(), from_pandas=True),
        pid=pa.array(np.asarray(pid, np.int64)),
        tid=pa.array(np.asarray(tid, np.int64)),
        start_ns=np.asarray(start, np.int64),
        dur_ns=np.asarray(dur, np.int64),
        flow_id=pa.nulls(n, pa.int64()),
        args=pa.array(np.asarray(args, dtype=object), pa.string(), from_pandas=True),
        extra=pa.nulls(n, pa.string()),
        typed=typed or {},
        src=src or {},
        columns=columns,
    )


def _device_columns(n: int, device: int, stream: np.ndarray, kind: str) -> dict[str, pa.Array]:
    return {
        "device_type": pa.array(["neuron"] * n, pa.string()),
        "device": pa.array(np.full(n, device, np.int32)),
        "stream": pa.array(np.asarray(stream, np.int64)),
        "kind": pa.array([kind] * n, pa.string()),
    }


def _opt_int(series: pd.Series) -> pa.Array:
    """int64 with nulls where the value is missing (never NaN cast to int64's minimum)."""
    v = pd.to_numeric(series, errors="coerce").to_numpy(np.float64)
    ok = np.isfinite(v) & (np.abs(v) < 9.2e18)
    return pa.array(np.where(ok, v, 0).astype(np.int64), pa.int64(), mask=~ok)


def _opt_str(series: pd.Series) -> pa.Array:
    v = series.astype(str).astype(object).where(series.notna(), None)
    return pa.array(v.to_numpy(dtype=object), pa.string(), from_pandas=True)


def empty_rows() -> RawEvents:
    """No events (a metrics-only profile still becomes a trace, with its metadata)."""
    empty = np.zeros(0, np.int64)
    return _raw(0, CAT_INSTRUCTION, [], empty, empty, empty, empty, [], _device_columns(0, 0, empty, Kind.KERNEL))


def dma_queue_streams(profile: DeviceProfile) -> dict[tuple[int, str], int]:
    dma = profile.dmas
    if not len(dma):
        return {}
    keys = sorted(set(zip(dma["pcore"].tolist(), dma["queue"].tolist())))  # distinct queues, not events
    per_core: dict[int, int] = {}
    out = {}
    for pcore, queue in keys:
        i = per_core.get(pcore, 0)
        per_core[pcore] = i + 1
        out[(pcore, queue)] = pcore * PCORE_STRIDE + DMA_STREAM_BASE + i
    return out


def profile_rows(profile: DeviceProfile, alignment: Alignment) -> tuple[list[RawEvents], list[dict[str, Any]]]:
    """Trace rows of one device profile (device times put on the host clock by ``alignment``)."""
    parts: list[RawEvents] = []
    streams: list[dict[str, Any]] = []
    dev = profile.device
    ins = profile.instructions
    if len(ins):
        n = len(ins)
        stream = ins["pcore"].to_numpy(np.int64) * PCORE_STRIDE + ins["engine"].map(ENGINE_STREAM).to_numpy(np.int64)
        cols = _device_columns(n, dev, stream, Kind.KERNEL)
        # Semaphore waits stay on their engine's queue as annotations: never compute.
        wait = ins["is_wait"].to_numpy(bool)
        cols["kind"] = pa.array(np.where(wait, Kind.DEVICE_ANNOTATION, Kind.KERNEL).astype(object), pa.string())
        cols["flops"] = _opt_int(ins["raw_flops"])
        cols["hlo_name"] = _opt_str(ins["hlo_name"])
        has_src = ins["src_line"].to_numpy() >= 0
        src = {
            "src_file": pa.array(
                ins["src_file"].where(has_src).astype(object).to_numpy(), pa.string(), from_pandas=True
            ),
            "src_line": pa.array(np.where(has_src, ins["src_line"], -1), pa.int64()),
            "src_func": pa.array(
                ins["src_func"].where(has_src).astype(object).to_numpy(), pa.string(), from_pandas=True
            ),
            "src_precision": pa.array(np.where(has_src, Precision.LINE, None).astype(object), pa.string()),
            # The compiler's framework layer is the module path the instruction ran under.
            "src_module": _opt_str(ins["layer"]),
        }
        parts.append(
            _raw(
                n,
                CAT_INSTRUCTION,
                ins["opcode"].to_numpy(),
                np.full(n, dev),
                stream,
                alignment.apply(ins["start_ns"].to_numpy()),
                ins["dur_ns"].to_numpy(),
                ins["args"].to_numpy(),
                cols,
                src=src,
            )
        )
        for pcore in sorted(ins["pcore"].unique().tolist()):
            for engine in ENGINES:
                if ((ins["pcore"] == pcore) & (ins["engine"] == engine)).any():
                    streams.append(
                        {
                            "device": dev,
                            "stream": pcore * PCORE_STRIDE + ENGINE_STREAM[engine],
                            "name": engine,
                            "type": "engine",
                            "pcore": pcore,
                        }
                    )
    dma = profile.dmas
    if len(dma):
        qmap = dma_queue_streams(profile)
        n = len(dma)
        keys = pd.Series(list(zip(dma["pcore"].tolist(), dma["queue"].tolist())), index=dma.index)
        stream = keys.map(qmap).to_numpy(np.int64)
        is_cc = dma["is_cc"].to_numpy(bool)
        transfer = dma["is_transfer"].to_numpy(bool) if "is_transfer" in dma else np.ones(n, bool)
        # Transfers are the copies; packets of an aggregated transfer are annotations beside it.
        kind = np.where(~transfer, Kind.DEVICE_ANNOTATION, np.where(is_cc, Kind.COLLECTIVE, Kind.MEMCPY))
        cols = _device_columns(n, dev, stream, Kind.MEMCPY)
        cols["kind"] = pa.array(kind.astype(object), pa.string())
        src_mem, dst_mem = dma["src_mem"].fillna("unknown"), dma["dst_mem"].fillna("unknown")
        known = (src_mem != "unknown").to_numpy() & (dst_mem != "unknown").to_numpy()
        direction = np.where(
            src_mem.to_numpy() == "HOST",
            "HtoD",
            np.where(dst_mem.to_numpy() == "HOST", "DtoH", np.where(known, "DtoD", "DMA")),
        )
        mk = pd.Series(direction, index=dma.index) + " (" + src_mem + "->" + dst_mem + ")"
        cols["memcpy_kind"] = pa.array(mk.to_numpy(dtype=object), pa.string())
        cols["bytes"] = _opt_int(dma["bytes"])
        cols["bandwidth_gbps"] = pa.array(
            pd.to_numeric(dma["throughput"], errors="coerce").to_numpy(np.float64) / 1e9, pa.float64()
        )
        cols["collective_name"] = pa.array(np.where(is_cc, "cc_dma", None).astype(object), pa.string())
        queue = dma["queue"].astype(str)
        name = np.where(is_cc, "CC DMA " + queue, np.where(transfer, "DMA ", "DMA packet ") + queue)
        parts.append(
            _raw(
                n,
                CAT_DMA,
                name,
                np.full(n, dev),
                stream,
                alignment.apply(dma["start_ns"].to_numpy()),
                dma["dur_ns"].to_numpy(),
                dma["args"].to_numpy(),
                cols,
            )
        )
        qtype = dict(zip(dma["queue"].astype(str), dma["queue_type"])) if "queue_type" in dma else {}
        for (pcore, q), s in qmap.items():
            t = qtype.get(q)
            streams.append(
                {"device": dev, "stream": s, "name": q, "type": "dma", "pcore": pcore, "queue_type": _scalar(t)}
            )
    cc = profile.ccops
    if len(cc):
        n = len(cc)
        stream = CC_STREAM_BASE + cc["stream"].to_numpy(np.int64)
        cols = _device_columns(n, dev, stream, Kind.COLLECTIVE)
        cols["bytes"] = _opt_int(cc["bytes"])
        cols["collective_name"] = pa.array(cc["operation"].str.lower().to_numpy(dtype=object), pa.string())
        parts.append(
            _raw(
                n,
                CAT_CC,
                cc["operation"].to_numpy(),
                np.full(n, dev),
                stream,
                alignment.apply(cc["start_ns"].to_numpy()),
                cc["dur_ns"].to_numpy(),
                cc["args"].to_numpy(),
                cols,
            )
        )
        for s in sorted(set(stream.tolist())):
            streams.append(
                {
                    "device": dev,
                    "stream": s,
                    "name": f"CC stream {s - CC_STREAM_BASE}",
                    "type": "collective",
                    "pcore": 0,
                }
            )
    if profile.span_ns and parts:
        parts.append(_window_row(profile, alignment))
    sp = profile.system
    if len(sp):
        parts.extend(_system_rows(sp, dev))
    return parts, streams


def _window_row(profile: DeviceProfile, alignment: Alignment) -> RawEvents:
    """The profiled window itself (first to last hardware timestamp, = the Summary's total_time):
    an annotation on the NeuronCore, so the trace's span is the profile's even when the first
    or last instruction is not at its edge."""
    cols = {
        "device_type": pa.array(["neuron"], pa.string()),
        "device": pa.array([profile.device], pa.int32()),
        "stream": pa.array([None], pa.int64()),
        "kind": pa.array([Kind.DEVICE_ANNOTATION], pa.string()),
    }
    start = alignment.apply(np.zeros(1, np.int64))
    return _raw(
        1, CAT_WINDOW, ["NeuronCore profile"], [profile.device], [-1], start, [int(profile.span_ns or 0)], [None], cols
    )


def _scalar(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and v != v) else str(v)


def _system_rows(sp: pd.DataFrame, dev: int) -> list[RawEvents]:
    out = []
    source = sp["source"].astype(str).to_numpy()
    for src_name, cat, kind in (
        ("neuron_rt", CAT_RUNTIME, Kind.RUNTIME),
        ("neuron_hw", CAT_HW, Kind.DEVICE_ANNOTATION),
        ("framework", CAT_FRAMEWORK, Kind.ANNOTATION),
    ):
        rows = sp[source == src_name] if src_name != "neuron_rt" else sp[~np.isin(source, ["neuron_hw", "framework"])]
        if not len(rows):
            continue
        n = len(rows)
        if kind == Kind.DEVICE_ANNOTATION:
            nc = pd.to_numeric(rows["nc_idx"], errors="coerce").fillna(dev).to_numpy(np.int64)
            cols = {
                "device_type": pa.array(["neuron"] * n, pa.string()),
                "device": pa.array(nc.astype(np.int32)),
                "stream": pa.array(np.full(n, -1, np.int64), mask=np.ones(n, bool)),
                "kind": pa.array([kind] * n, pa.string()),
            }
            pid, tid = nc, np.full(n, -1)
        else:
            cols = {"device_type": pa.array(["cpu"] * n, pa.string()), "kind": pa.array([kind] * n, pa.string())}
            pid = pd.to_numeric(rows["pid"], errors="coerce").fillna(0).to_numpy(np.int64)
            tid = pd.to_numeric(rows["tid"], errors="coerce").fillna(0).to_numpy(np.int64)
        out.append(
            _raw(
                n,
                cat,
                rows["name"].astype(str).to_numpy(),
                pid,
                tid,
                rows["start_ns"].to_numpy(),
                rows["dur_ns"].to_numpy(),
                rows["args"].to_numpy(),
                cols,
            )
        )
    return out


def build_device_trace(profiles: list[DeviceProfile], alignments: list[Alignment] | None = None) -> Trace:
    """A trace of device profiles alone (times on the host clock where an alignment allows)."""
    alignments = alignments or [align(p) for p in profiles]
    parts: list[RawEvents] = []
    streams = []
    for p, a in zip(profiles, alignments):
        rows, s = profile_rows(p, a)
        parts.extend(rows)
        streams.extend(s)
    neuron = profile_metadata(profiles, alignments, streams)
    meta = trace_metadata(profiles, neuron)
    repairs = Repairs()
    for p in profiles:
        repairs.merge(p.repairs)
        p.repairs.warn(p.source, stacklevel=4)
    if not parts:
        if not all(p.metrics_only for p in profiles):
            raise TraceFormatError("the Neuron profile holds no events", profiles[0].source)
        parts = [empty_rows()]  # a summary-json export: metrics only
    late = Repairs()
    raw = _within_time_range(RawEvents.concat(parts), late, profiles[0].source)
    late.warn(profiles[0].source, stacklevel=4)
    repairs.merge(late)
    repairs.record(meta)
    return build_trace(raw, meta, source=profiles[0].source)


def _within_time_range(raw: RawEvents, repairs: Repairs, path: Path) -> RawEvents:
    """Drop the rows that alignment to the host clock moved past +-4e18 ns (each device time is
    within it before: ``frames.event_times``)."""
    start, dur = np.asarray(raw.start_ns, np.int64), np.asarray(raw.dur_ns, np.int64)
    keep = (np.abs(start) <= MAX_TIME_NS) & (dur >= 0) & (dur <= MAX_TIME_NS)
    if keep.all():
        return raw
    repairs.add("device events past +-4e18 ns on the host clock", DROPPED, int(np.count_nonzero(~keep)))
    if not keep.any():
        raise TraceFormatError("no valid event: every device event is past +-4e18 ns on the host clock", path)
    return raw.filter(keep)
