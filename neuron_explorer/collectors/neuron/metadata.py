"""The trace metadata of imported Neuron profiles: metrics with units, the Operator Table,
warnings, device properties (``metadata["neuron"]``, documented in docs/neuron.md)."""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from neuron_explorer.collectors.neuron.align import Alignment
from neuron_explorer.collectors.neuron.dtypes import matmul_dtypes
from neuron_explorer.collectors.neuron.model import ENGINES, DeviceProfile, derived_metrics, normalize_summary
from neuron_explorer.collectors.neuron.window import engine_table, kernel_metrics, kernel_window
from neuron_explorer.version import __version__


def profile_metadata(
    profiles: list[DeviceProfile], alignments: list[Alignment], streams: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``neuron`` block of the trace metadata: metrics with units, streams, warnings."""
    per_device = []
    for p, a in zip(profiles, alignments):
        summary = normalize_summary(p.summary_raw, p)
        derived = derived_metrics(p)
        window = kernel_window(p)  # once: the metrics and the engine table read the same window
        derived.update(kernel_metrics(p, derived.get("total_time_ns"), window))
        derived.update(matmul_dtypes(p))
        metrics = {**derived, **summary}
        source = {k: ("summary" if k in summary else "derived") for k in metrics}
        # The Summary's dma_transfer_* fields miss the packet groups without an aggregated row
        # (AWS deprecates them: "they do not cover all DMA traffic, and they are 0 in many
        # profiles"); where the events hold the DMA rows, their figures win. The Summary's own
        # values stay beside, as summary_dma_transfer_*.
        for key in _DMA_FROM_EVENTS:
            if key in derived and key in summary:
                metrics[f"summary_{key}"] = summary[key]
                metrics[key] = derived[key]
                source[key], source[f"summary_{key}"] = "derived", "summary"
        sizes = [summary.get(k) for k in ("static_dma_size", "software_dynamic_dma_size", "hardware_dynamic_dma_size")]
        if any(isinstance(v, (int, float)) for v in sizes):
            metrics["dma_total_size"] = sum(v for v in sizes if isinstance(v, (int, float)))
            source["dma_total_size"] = "summary"
        metrics.update(kernel_utilization(metrics))
        per_device.append(
            {
                "device": p.device,
                "source": str(p.source),
                "format": p.format,
                "profile_schema_version": p.schema_version,
                "tables": p.tables,
                "metrics": metrics,
                "metric_source": {k: source.get(k, "derived") for k in metrics},
                "summary_raw": p.summary_raw,
                "metadata_raw": p.metadata_raw,
                "dma_granularity": p.dma_granularity,
                "span_ns": p.span_ns,
                "alignment": a.to_dict(),
                "executions": len(p.executions),
                "unknown_columns": {k: v for k, v in p.unknown_columns.items() if v},
                "tables_not_imported": dict(p.other_tables),
                "warnings": list(p.warnings),
                "file_warnings": list(p.file_warnings),
                "metrics_only": p.metrics_only,
                "derived_metrics": derived,
                "kernel_window": window.to_dict() if window is not None else None,
                "operators": operator_table(p),
                "engines": engine_table(p, metrics.get("total_time_ns") or p.span_ns, window),
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


#: DMA figures the events count better than the Summary (every packet group, aggregated or not).
_DMA_FROM_EVENTS = ("dma_transfer_total_bytes", "dma_transfer_count", "dma_transfer_average_bytes")

#: Run-level utilizations the Summary states over the whole span (``total_time``), rescaled to
#: the kernel window: the FLOPs and bytes all fall inside it, so over the kernel each is the
#: span figure times span / kernel time.
_OVER_SPAN = ("mfu_estimated_pct", "hfu_estimated_pct", "mbu_estimated_pct")


def kernel_utilization(metrics: dict[str, Any]) -> dict[str, Any]:
    """``mfu_kernel_pct``, ``hfu_kernel_pct``, ``mbu_kernel_pct`` over
    the kernel window, from the Summary's span figures; empty without a kernel window."""
    span, kernel = metrics.get("total_time_ns"), metrics.get("kernel_time_ns")
    if not isinstance(span, (int, float)) or not isinstance(kernel, (int, float)) or kernel <= 0 or span <= 0:
        return {}
    out = {}
    for key in _OVER_SPAN:
        v = metrics.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key.replace("_estimated_pct", "_kernel_pct")] = float(v) * span / kernel
    # The bytes are not all the kernel's: the identity matrix and the instruction fetch move in
    # the preamble (measured on the matmul exports). MBU over the kernel counts the kernel's.
    moved = [metrics.get(f"{p}_dma_bytes") for p in ("preamble", "fixed_wait", "kernel")]
    if "mbu_kernel_pct" in out and all(isinstance(v, (int, float)) for v in moved) and sum(moved) > 0:
        out["mbu_kernel_pct"] *= moved[2] / sum(moved)
    return out


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
