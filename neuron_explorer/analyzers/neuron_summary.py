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
    """Per NeuronCore: total time, engine and DMA active %, MFU, and the profile's own warnings."""
    out = []
    for d in (metadata.get("neuron") or {}).get("devices") or []:
        m = d.get("metrics") or {}
        engines = _num(m, "total_active_time_pct")
        if engines is None:  # no Summary total: the busiest engine is a lower bound
            per = [_num(m, f"{e}_engine_active_time_pct") for e in ("tensor", "vector", "scalar", "gpsimd", "sync")]
            per = [v for v in per if v is not None]
            engines = max(per) if per else None
        out.append(
            {
                "device": d.get("device"),
                "total_time_ns": _num(m, "total_time_ns"),
                "engines_active_pct": engines,
                "dma_active_pct": _num(m, "dma_active_time_pct"),
                "mfu_pct": _num(m, "mfu_estimated_pct"),
                "metrics_only": bool(d.get("metrics_only")),
                "profile_warnings": list(d.get("file_warnings") or []),
            }
        )
    return out


def neuron_verdict(overview: list[dict[str, Any]]) -> str | None:
    """One sentence from the engines' real active time against the profiled time, or None."""
    parts = []
    for o in overview:
        eng, dma, total = o["engines_active_pct"], o["dma_active_pct"], o["total_time_ns"]
        if eng is None and dma is None:
            continue
        e, d = eng or 0.0, dma or 0.0
        if max(e, d) < IDLE_BELOW_PCT:
            label = "mostly idle"
        elif e >= d:
            label = "mostly compute-bound"
        else:
            label = "mostly DMA-bound"
        over = f" of {total / 1e6:,.3f} ms" if total else ""
        dma_text, eng_text = fmt_pct(dma), fmt_pct(eng)
        parts.append(f"NeuronCore {o['device']} {label} (engines active {eng_text}, DMA active {dma_text}{over})")
    if not parts:
        return None
    text = "; ".join(parts)
    return text[0].upper() + text[1:]


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
