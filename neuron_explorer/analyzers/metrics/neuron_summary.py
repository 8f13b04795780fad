"""Trainium / Inferentia at a glance: engine and DMA activity, the verdict, the Operator Table.

A NeuronCore's engines run ``EVENT_SEMAPHORE`` instructions while they wait, so summing
instruction time calls an idle core busy. These views read the engine active time the importer
stored (the export's Summary, else the union of its active-time intervals, semaphore waits
excluded) against the profile's ``total_time`` (``metadata["neuron"]``, see docs/neuron.md).
``operator_table`` is AWS's Operator Table: device time by framework layer and HLO op.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from neuron_explorer.collectors.neuron.window import ENGINE_TABLE_COLUMNS

#: Below this share of the run for both the engines and the DMA queues, a core is "mostly idle".
IDLE_BELOW_PCT = 20.0
OPERATOR_COLUMNS = ("device", "layer", "hlo_op", "hlo_name", "instructions", "device_ns", "device_pct", "engines")


def fmt_pct(value: float | None) -> str:
    """A percentage that stays readable when tiny: 0.42%, 0.0031%, 27.31%."""
    if value is None:
        return "-"
    if 0 < abs(value) < 0.1:
        return f"{value:.2g}%"
    return f"{value:.2f}%"


def _num(metrics: Mapping[str, Any], key: str) -> float | None:
    v = metrics.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def neuron_overview(metadata: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per NeuronCore: span, kernel window, engine and DMA active % (over the span and over the
    kernel), MFU over both, and the profile's own warnings.

    ``engines_dma_active_pct`` is the Summary's ``total_active_time_percent``, which covers
    engines and DMA together on real files; ``engines_active_pct`` is the engines alone (the
    union of their active intervals, from the events)."""
    out = []
    for d in (metadata.get("neuron") or {}).get("devices") or []:
        m = d.get("metrics") or {}
        derived = d.get("derived_metrics") or {}
        engines = _num(derived, "engines_active_time_pct")
        if engines is None:  # no events: the busiest engine is a lower bound
            per = [_num(m, f"{e}_engine_active_time_pct") for e in ("tensor", "vector", "scalar", "gpsimd", "sync")]
            per = [v for v in per if v is not None]
            engines = max(per) if per else None
        both = (
            _num(m, "total_active_time_pct")
            if d.get("metric_source", {}).get("total_active_time_pct") == "summary"
            else None
        )
        if both is None:
            both = _num(m, "engines_dma_active_time_pct")
        out.append(
            {
                "device": d.get("device"),
                "total_time_ns": _num(m, "total_time_ns"),
                "kernel_time_ns": _num(m, "kernel_time_ns"),
                "kernel_start_ns": _num(m, "kernel_start_ns"),
                "kernel_window": dict(d.get("kernel_window") or {}),
                "engines_active_pct": engines,
                "engines_dma_active_pct": both,
                "dma_active_pct": _num(m, "dma_active_time_pct"),
                "kernel_engines_active_pct": _num(m, "kernel_engines_active_pct"),
                "kernel_dma_active_pct": _num(m, "kernel_dma_active_pct"),
                "kernel_engines_dma_active_pct": _num(m, "kernel_engines_dma_active_pct"),
                "mfu_pct": _num(m, "mfu_estimated_pct"),
                "mfu_kernel_pct": _num(m, "mfu_kernel_pct"),
                "mbu_kernel_pct": _num(m, "mbu_kernel_pct"),
                "dma_bytes": _num(m, "dma_transfer_total_bytes"),
                "metrics_only": bool(d.get("metrics_only")),
                "profile_warnings": list(d.get("file_warnings") or []),
            }
        )
    return out


def fmt_time(ns: float | None) -> str:
    if ns is None:
        return "-"
    if ns >= 1e6:
        return f"{ns / 1e6:,.3f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:,.2f} us"
    return f"{ns:.0f} ns"


def _label(engines: float | None, dma: float | None) -> str:
    e, d = engines or 0.0, dma or 0.0
    if max(e, d) < IDLE_BELOW_PCT:
        return "mostly idle"
    return "mostly compute-bound" if e >= d else "mostly DMA-bound"


def neuron_verdict(overview: list[dict[str, Any]]) -> str | None:
    """One sentence per NeuronCore. With a kernel window (the events show one), the verdict is
    read inside it: the fixed semaphore wait before the kernel is not the kernel's idleness.
    Without events, from the engines' active time against the profiled time."""
    parts = []
    for o in overview:
        total, kernel = o["total_time_ns"], o["kernel_time_ns"]
        if kernel and o["kernel_engines_active_pct"] is not None:
            eng, dma = o["kernel_engines_active_pct"], o["kernel_dma_active_pct"]
            text = (
                f"NeuronCore {o['device']} kernel {fmt_time(kernel)}"
                + (f" of a {fmt_time(total)} profile" if total else "")
                + f": {_label(eng, dma)} (in the kernel: engines alone active {fmt_pct(eng)}, DMA active "
                f"{fmt_pct(dma)}, engines plus DMA {fmt_pct(o['kernel_engines_dma_active_pct'])}"
            )
            if o["mfu_kernel_pct"] is not None:
                text += f"; MFU {fmt_pct(o['mfu_kernel_pct'])} over the kernel, {fmt_pct(o['mfu_pct'])} over the span"
            parts.append(text + ")")
            continue
        eng, dma = o["engines_active_pct"], o["dma_active_pct"]
        if eng is None and dma is None:
            continue
        both = o["engines_dma_active_pct"]
        over = f" of {total / 1e6:,.3f} ms" if total else ""
        both_text = f", engines plus DMA {fmt_pct(both)}" if both is not None else ""
        parts.append(
            f"NeuronCore {o['device']} {_label(eng, dma)} (engines active {fmt_pct(eng)}, DMA active "
            f"{fmt_pct(dma)}{both_text}{over})"
        )
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


#: Columns of the ``neuron_summary`` table, first: then every other metric of the profile.
SUMMARY_LEAD = (
    "device",
    "source",
    "total_time_ns",
    "kernel_time_ns",
    "kernel_start_ns",
    "mfu_estimated_pct",
    "mfu_kernel_pct",
    "hfu_estimated_pct",
    "hfu_kernel_pct",
    "mbu_estimated_pct",
    "mbu_kernel_pct",
    "mfu_max_achievable_estimated_pct",
    "kernel_engines_active_pct",
    "kernel_dma_active_pct",
    "kernel_engines_dma_active_pct",
    "engines_active_time_pct",
    "total_active_time_pct",
    "dma_active_time_pct",
    "dma_transfer_count",
    "dma_packet_count",
    "dma_transfer_total_bytes",
    "static_dma_size",
    "software_dynamic_dma_size",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "hardware_flops",
    "arithmetic_intensity",
    "bound",
)


def _bound(m: Mapping[str, Any]) -> str | None:
    """Compute- or memory-bound from arithmetic intensity (FLOPs per HBM byte) against the
    ridge point of the NeuronCore's roofline (Tensor-engine peak / HBM bandwidth)."""
    ai = _num(m, "arithmetic_intensity")
    if ai is None:
        flops, moved = _num(m, "hardware_flops"), (_num(m, "hbm_read_bytes") or 0) + (_num(m, "hbm_write_bytes") or 0)
        ai = flops / moved if flops and moved else None
    ridge = _num(m, "_ridge_flops_per_byte")
    if ai is None or ridge is None:
        return None
    return "compute" if ai >= ridge else "memory"


def summary_table(metadata: Mapping[str, Any]) -> pd.DataFrame:
    """``neuron_summary``: one row per NeuronCore, AWS's Summary fields (our units: ``_ns``,
    ``_pct`` 0-100) and what we derive (kernel window, kernel MFU/MBU, DMA bytes from every
    packet group) as columns."""
    rows = []
    props = {p.get("id"): p for p in metadata.get("device_properties") or [] if isinstance(p, dict)}
    for d in (metadata.get("neuron") or {}).get("devices") or []:
        m = dict(d.get("metrics") or {})
        p = props.get(d.get("device")) or {}
        clock, r, c = p.get("tensor_engine_clock_freq_ghz"), p.get("pe_num_rows"), p.get("pe_num_cols")
        bw = p.get("hbm_ddr_bandwidth_bytes_per_s")
        if all(isinstance(v, (int, float)) for v in (clock, r, c, bw)) and bw:
            m["_ridge_flops_per_byte"] = 2 * r * c * clock * 1e9 / bw
        row = {"device": d.get("device"), "source": d.get("source")}
        row.update({k: v for k, v in m.items() if not k.startswith("_") and isinstance(v, (int, float, str, bool))})
        row["bound"] = _bound(m)
        rows.append(row)
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in SUMMARY_LEAD})
    df = pd.DataFrame(rows)
    lead = [c for c in SUMMARY_LEAD if c in df]
    return df[lead + sorted(c for c in df.columns if c not in lead)]


#: the per-engine table's columns, as the importer writes them into the metadata (one list)
ENGINE_COLUMNS = ENGINE_TABLE_COLUMNS


def engine_table(metadata: Mapping[str, Any]) -> pd.DataFrame:
    """``neuron_engines``: per NeuronCore, one row per engine (Tensor, Vector, Scalar, GpSimd,
    Sync) and per DMA queue: instructions, active time, utilization over the kernel and span."""
    rows = [r for d in (metadata.get("neuron") or {}).get("devices") or [] for r in d.get("engines") or []]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in ENGINE_COLUMNS})
    df = pd.DataFrame(rows)
    return df[[c for c in ENGINE_COLUMNS if c in df]]


def profile_warnings(metadata: Mapping[str, Any]) -> list[str]:
    """The warnings the Neuron profile itself carries (e.g. that its DMA figures may be wrong)."""
    return [str(w) for w in (metadata.get("neuron") or {}).get("file_warnings") or []]


def operator_table(metadata: Mapping[str, Any]) -> pd.DataFrame:
    """Device time by (device, framework layer, HLO op), most time first (waits excluded)."""
    rows = [
        {"device": d.get("device"), **r}
        for d in (metadata.get("neuron") or {}).get("devices") or []
        for r in d.get("operators") or []
    ]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in OPERATOR_COLUMNS})
    df = pd.DataFrame(rows)
    return df[[c for c in OPERATOR_COLUMNS if c in df]].sort_values("device_ns", ascending=False, kind="stable")
