"""From ``DeviceProfile`` tables to trace rows: one queue per engine, DMA queue and CC stream.

Instructions become ``kernel`` events on their engine's queue (Tensor 0, Vector 1, Scalar 2,
GpSimd 3, Sync 4), DMA transfers ``memcpy`` events on their DMA queue (100+) with bytes and
direction, collective operations (and DMAs flagged as collective traffic) ``collective`` events
(900+); system-profile runtime calls become host ``runtime`` events. Everything goes through
``collectors.normalize.build_trace``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from neuron_explorer import __version__
from neuron_explorer.collectors.neuron.align import Alignment
from neuron_explorer.collectors.neuron.model import (
    CC_STREAM_BASE,
    DMA_STREAM_BASE,
    ENGINE_STREAM,
    ENGINES,
    PCORE_STRIDE,
    DeviceProfile,
    derived_metrics,
    normalize_summary,
)
from neuron_explorer.collectors.normalize import RawEvents
from neuron_explorer.trace.schema import Kind, Precision

CAT_INSTRUCTION = "neuron_kernel"
CAT_DMA = "neuron_dma_memcpy"
CAT_CC = "neuron_cc_kernel"
CAT_RUNTIME = "neuron_runtime"
CAT_HW = "neuron_hw_user_annotation"
CAT_FRAMEWORK = "neuron_framework"


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
    sp = profile.system
    if len(sp):
        parts.extend(_system_rows(sp, dev))
    return parts, streams


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


def profile_metadata(
    profiles: list[DeviceProfile], alignments: list[Alignment], streams: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``neuron`` block of the trace metadata: metrics with units, streams, warnings."""
    per_device = []
    for p, a in zip(profiles, alignments):
        summary = normalize_summary(p.summary_raw, p)
        derived = derived_metrics(p)
        metrics = {**derived, **summary}
        per_device.append(
            {
                "device": p.device,
                "source": str(p.source),
                "format": p.format,
                "profile_schema_version": p.schema_version,
                "tables": p.tables,
                "metrics": metrics,
                "metric_source": {k: ("summary" if k in summary else "derived") for k in metrics},
                "summary_raw": p.summary_raw,
                "metadata_raw": p.metadata_raw,
                "dma_granularity": p.dma_granularity,
                "span_ns": p.span_ns,
                "alignment": a.to_dict(),
                "executions": len(p.executions),
                "unknown_columns": {k: v for k, v in p.unknown_columns.items() if v},
                "warnings": list(p.warnings),
                "file_warnings": list(p.file_warnings),
                "metrics_only": p.metrics_only,
                "derived_metrics": derived,
                "operators": operator_table(p),
            }
        )
    first = profiles[0]
    return {
        "devices": per_device,
        "streams": streams,
        "engines": list(ENGINES),
        "warnings": [w for d in per_device for w in d["warnings"]],
        "file_warnings": [w for d in per_device for w in d["file_warnings"]],
        "metrics_only": all(p.metrics_only for p in profiles),
        "source": str(first.source),
    }


def operator_table(profile: DeviceProfile, limit: int = 500) -> list[dict[str, Any]]:
    """Device time by framework layer and HLO op (AWS's Operator Table), waits excluded.

    ``hlo_op`` is the HLO instruction name without its ``.N`` suffix (``dot.12`` -> ``dot``).
    """
    ins = profile.instructions
    if not len(ins):
        return []
    work = ins[~ins["is_wait"]] if "is_wait" in ins else ins
    if not len(work):
        return []
    layer = work["layer"].astype(object).where(work["layer"].notna(), "").astype(str)
    hlo = work["hlo_name"].astype(object).where(work["hlo_name"].notna(), "").astype(str)
    df = pd.DataFrame({"layer": layer, "hlo_name": hlo, "engine": work["engine"], "dur_ns": work["dur_ns"]})
    g = (
        df.groupby(["layer", "hlo_name"], sort=False)
        .agg(instructions=("dur_ns", "size"), device_ns=("dur_ns", "sum"), engines=("engine", "nunique"))
        .reset_index()
        .sort_values("device_ns", ascending=False)
    )
    total = float(g["device_ns"].sum()) or 1.0
    g["device_pct"] = 100.0 * g["device_ns"] / total
    g["hlo_op"] = g["hlo_name"].str.replace(r"\.\d+$", "", regex=True)
    g = g.head(limit)
    return [
        {
            "layer": r.layer or None,
            "hlo_name": r.hlo_name or None,
            "hlo_op": r.hlo_op or None,
            "instructions": int(r.instructions),
            "device_ns": int(r.device_ns),
            "device_pct": float(r.device_pct),
            "engines": int(r.engines),
        }
        for r in g.itertuples(index=False)
    ]


def trace_metadata(profiles: list[DeviceProfile], neuron: dict[str, Any]) -> dict[str, Any]:
    first = profiles[0]
    meta = first.metadata_raw
    props = []
    for p in profiles:
        m = p.metadata_raw
        instance = p.summary_raw.get("instance_type") or m.get("instance_type")
        props.append(
            {
                "id": p.device,
                "device_type": "neuron",
                "name": f"{instance} NeuronCore" if instance else "NeuronCore",
                "instance_type": instance,
                "ticks_per_nanosec": m.get("ticks_per_nanosec"),
                "tensor_engine_clock_freq_ghz": m.get("tensor_engine_clock_freq", m.get("pe_clock_freq")),
                "pe_num_rows": m.get("pe_num_rows", m.get("tensor_engine_num_rows")),
                "pe_num_cols": m.get("pe_num_cols", m.get("tensor_engine_num_cols")),
                "hbm_ddr_bandwidth_bytes_per_s": m.get("hbm_ddr_bandwidth"),
                "dma_ddr_bandwidth_bytes_per_s": m.get("dma_ddr_bandwidth"),
                "tensor_engine_num_rows": m.get("tensor_engine_num_rows"),
                "tensor_engine_num_cols": m.get("tensor_engine_num_cols"),
            }
        )
    return {
        "collector": f"neuron_{first.format}",
        "collector_version": __version__,
        "source_file": os.path.abspath(first.source),
        "base_time_ns": None,
        "device_type": "neuron",
        "device_properties": props,
        "distributed_info": None,
        "rank": 0,
        "rank_known": False,
        "world_size": None,
        "trace_metadata": {k: v for k, v in meta.items() if isinstance(v, (str, int, float, bool))},
        "neuron": neuron,
    }
