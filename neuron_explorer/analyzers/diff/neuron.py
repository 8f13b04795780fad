"""``diff`` of two Neuron device profiles: the kernel window, per-engine time, DMA bytes and the
Operator Table, side by side.

The span of a device profile is mostly the fixed semaphore wait before the kernel (~1.85 ms
on real inf2/trn1 exports, against a 6-12 us kernel), so the step-time comparison of two such
profiles says "nothing changed" while the kernel grew by a third. These rows compare what the
kernel did; the ``kernel`` metric joins the step-time table so ``--fail-on-regression`` gates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

#: (metric key in metadata["neuron"]["devices"][i]["metrics"], label, unit)
ROWS = (
    ("kernel_time_ns", "kernel window", "ns"),
    ("total_time_ns", "span (total_time)", "ns"),
    ("dma_transfer_total_bytes", "DMA bytes", "bytes"),
    ("dma_transfer_count", "DMA transfers", "count"),
    ("dma_packet_count", "DMA packets", "count"),
    ("hardware_flops", "FLOPs", "count"),
    ("mfu_kernel_pct", "MFU over the kernel", "%"),
    ("mbu_kernel_pct", "MBU over the kernel", "%"),
    ("kernel_engines_active_pct", "engines active in the kernel", "%"),
    ("kernel_dma_active_pct", "DMA active in the kernel", "%"),
)
COLUMNS = ("metric", "unit", "base", "new", "delta", "change_pct")


def _devices(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((meta.get("neuron") or {}).get("devices") or [])


def is_device_profile(meta: Mapping[str, Any]) -> bool:
    return any((d.get("metrics") or {}).get("kernel_time_ns") for d in _devices(meta))


def _sum(devices: list[dict[str, Any]], key: str) -> float | None:
    vals = [(d.get("metrics") or {}).get(key) for d in devices]
    vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not vals:
        return None
    return max(vals) if key.endswith("_pct") or key in ("kernel_time_ns", "total_time_ns") else sum(vals)


def _row(metric: str, unit: str, b: float | None, n: float | None) -> dict[str, Any]:
    delta = None if b is None or n is None else n - b
    change = 100.0 * delta / b if delta is not None and b else None
    return {"metric": metric, "unit": unit, "base": b, "new": n, "delta": delta, "change_pct": change}


def neuron_diff(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, pd.DataFrame] | None:
    """``{"summary": ..., "engines": ..., "operators": ...}`` when both sides are device profiles."""
    if not (is_device_profile(base) and is_device_profile(new)):
        return None
    bd, nd = _devices(base), _devices(new)
    summary = pd.DataFrame([_row(label, unit, _sum(bd, key), _sum(nd, key)) for key, label, unit in ROWS])

    def engines(devs: list[dict[str, Any]]) -> pd.DataFrame:
        rows = [r for d in devs for r in d.get("engines") or []]
        if not rows:
            return pd.DataFrame(columns=["unit", "type", "active_ns", "bytes"])
        return pd.DataFrame(rows).groupby(["unit", "type"], as_index=False)[["active_ns", "bytes"]].sum(min_count=1)

    e = engines(bd).merge(engines(nd), on=["unit", "type"], how="outer", suffixes=("_base", "_new"))
    eng = pd.DataFrame(
        [
            _row(
                ("DMA " if r["type"] == "dma" else "") + str(r["unit"]) + " active",
                "ns",
                _f(r["active_ns_base"]),
                _f(r["active_ns_new"]),
            )
            for r in e.to_dict(orient="records")
        ],
        columns=list(COLUMNS),
    )

    def ops(devs: list[dict[str, Any]]) -> pd.DataFrame:
        rows = [r for d in devs for r in d.get("operators") or []]
        if not rows:
            return pd.DataFrame(columns=["layer", "hlo_op", "device_ns", "instructions"])
        df = pd.DataFrame(rows)
        df["layer"] = df["layer"].fillna("(no layer)")
        df["hlo_op"] = df["hlo_op"].fillna("(no HLO op)")
        return df.groupby(["layer", "hlo_op"], as_index=False)[["device_ns", "instructions"]].sum()

    o = ops(bd).merge(ops(nd), on=["layer", "hlo_op"], how="outer", suffixes=("_base", "_new"))
    operators = pd.DataFrame(
        [
            _row(f"{r['layer']} / {r['hlo_op']}", "ns", _f(r["device_ns_base"]), _f(r["device_ns_new"]))
            for r in o.to_dict(orient="records")
        ],
        columns=list(COLUMNS),
    )
    if len(operators):
        operators = operators.sort_values("delta", key=lambda s: -s.abs().fillna(np.inf), kind="stable")
    return {"summary": summary, "engines": eng, "operators": operators.reset_index(drop=True)}


def _f(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and v == v else None


def kernel_metric_row(summary: pd.DataFrame) -> dict[str, Any] | None:
    """The ``kernel`` row of the step-time table: base, new, delta and the change as a % of the
    base kernel window (what ``--fail-on-regression`` compares)."""
    r = summary.set_index("metric").loc["kernel window"]
    if r["base"] is None or r["new"] is None or not r["base"]:
        return None
    delta = float(r["new"]) - float(r["base"])
    pct = 100.0 * delta / float(r["base"])
    return {
        "metric": "kernel",
        "base_ns": float(r["base"]),
        "new_ns": float(r["new"]),
        "delta_ns": delta,
        "delta_pct": pct,
        "own_pct": pct,
        "confidence": np.nan,
        "ci_low_ns": np.nan,
        "ci_high_ns": np.nan,
    }


def sentence(summary: pd.DataFrame) -> str:
    """ "Kernel window 4.3 us -> 21.7 us (+410%); DMA bytes 141,312 -> 595,968 (4.22x)"."""
    s = summary.set_index("metric")
    parts = []
    k = s.loc["kernel window"]
    if k["base"] is not None and k["new"] is not None:
        parts.append(f"Kernel window {_us(k['base'])} -> {_us(k['new'])} ({_pct(k['change_pct'])})")
    b = s.loc["DMA bytes"]
    if b["base"] is not None and b["new"] is not None:
        ratio = f"{b['new'] / b['base']:.2f}x" if b["base"] else "new"
        parts.append(f"DMA bytes {int(b['base']):,} -> {int(b['new']):,} ({ratio})")
    m = s.loc["MFU over the kernel"]
    if m["base"] is not None and m["new"] is not None:
        parts.append(f"MFU over the kernel {m['base']:.2f}% -> {m['new']:.2f}%")
    return "; ".join(parts)


def _us(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms" if ns >= 1e6 else f"{ns / 1e3:,.2f} us"


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:+.1f}%"
