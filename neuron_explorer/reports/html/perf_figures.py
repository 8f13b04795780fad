"""The report's performance-model figures: the roofline of the op groups and the op categories.

Both read the analysis's ``op_perf`` / ``op_categories`` tables (analyzers.perf) and return
plain Plotly ``{"data", "layout"}`` dicts, or None when there is nothing to draw. Strings shown
by Plotly go through ``plotly_text``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.reports.html.escape import plotly_text

#: Op groups drawn on the roofline at most (the costliest; the table holds the rest).
ROOFLINE_POINTS = 200
CATEGORY_LABELS = {
    "gemm": "GEMM",
    "attention": "attention",
    "conv": "convolution",
    "elementwise": "elementwise",
    "reduction": "reduction",
    "norm": "norm",
    "communication": "communication",
    "other": "other",
}


def roofline_figure(op_perf: pd.DataFrame | None, perf_summary: dict[str, Any] | None) -> dict[str, Any] | None:
    """Achieved TFLOP/s against arithmetic intensity (log-log), one marker per modelled op
    group sized by its device time, one trace per category, under the device's roofs."""
    if op_perf is None or not len(op_perf) or "flops_per_byte" not in op_perf:
        return None
    df = op_perf[(op_perf["flops_per_byte"] > 0) & (op_perf["tflops_per_s"] > 0)]
    df = df.nlargest(ROOFLINE_POINTS, "kernel_time_us")
    if not len(df):
        return None
    size = np.sqrt(df["kernel_time_us"].to_numpy(np.float64))
    size = 6 + 30 * size / max(float(size.max()), 1e-9)
    df = df.assign(_size=size)
    data: list[dict[str, Any]] = []
    for cat, g in df.groupby("category", sort=False):
        hover = [
            plotly_text(
                f"{n}<br>{s}<br>{d}<br>{c} calls, {t / 1e3:.3f} ms, {b} bound, {p:.1f}% of peak"
                if p == p
                else f"{n}<br>{s}<br>{d}<br>{c} calls, {t / 1e3:.3f} ms"
            )
            for n, s, d, c, t, b, p in zip(
                g["name"], g["shapes"], g["dtypes"], g["count"], g["kernel_time_us"], g["bound"], g["pct_of_peak"]
            )
        ]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": CATEGORY_LABELS.get(str(cat), plotly_text(cat)),
                "x": g["flops_per_byte"].round(6).tolist(),
                "y": g["tflops_per_s"].round(6).tolist(),
                "marker": {"size": g["_size"].round(2).tolist(), "opacity": 0.75},
                "hovertext": hover,
                "hovertemplate": "%{hovertext}<br>%{x:.3g} FLOP/byte, %{y:.3g} TFLOP/s<extra></extra>",
            }
        )
    summary = perf_summary or {}
    device = summary.get("device")
    if device:
        data.extend(_roofs(device, float(df["flops_per_byte"].min()), float(df["flops_per_byte"].max())))
        title = f"{device['name']} ({summary.get('device_source', '')}; {device.get('source', '')})"
    else:
        title = f"No device spec ({summary.get('device_source', 'unknown')}): no roofs; use --device-spec"
    layout = {
        "title": {"text": plotly_text(title), "font": {"size": 12}, "x": 0.01, "xanchor": "left"},
        "xaxis": {"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}},
        "yaxis": {"type": "log", "title": {"text": "achieved TFLOP/s"}},
        "legend": {"orientation": "h", "y": -0.2},
        "height": 460,
    }
    return {"data": data, "layout": layout}


def _roofs(device: dict[str, Any], lo: float, hi: float) -> list[dict[str, Any]]:
    """One roof per matrix dtype and the fp32 vector roof: min(peak, intensity * bandwidth)."""
    bw = float(device["mem_bw_tb_per_s"])
    x = np.logspace(np.log10(max(lo / 4, 1e-4)), np.log10(max(hi * 4, 10.0)), 64)
    roofs = [(f"{k} matrix", float(v)) for k, v in (device.get("matrix_tflops") or {}).items() if k in ("bf16", "fp8")]
    vec = (device.get("vector_tflops") or {}).get("fp32")
    if vec:
        roofs.append(("fp32 vector", float(vec)))
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": plotly_text(f"{device['name']} {label} roof ({peak:g} TFLOP/s, {bw:g} TB/s)"),
            "x": x.round(6).tolist(),
            "y": np.minimum(peak, x * bw).round(6).tolist(),
            "line": {"dash": "dot", "width": 1.5},
            "hoverinfo": "skip",
        }
        for label, peak in roofs
    ]


def _coverage_title(cats: pd.DataFrame) -> str:
    total = float(cats["kernel_time_us"].sum())
    if total <= 0:
        return ""
    other = float(cats.loc[cats["category"] == "other", "kernel_time_us"].sum())
    covered = float((cats["kernel_time_us"] * cats["modelled_pct"].fillna(0) / 100).sum())
    return f"{100 * (total - other) / total:.1f}% of device time in a category, {100 * covered / total:.1f}% modelled"


def categories_figure(op_categories: pd.DataFrame | None) -> dict[str, Any] | None:
    """Device time per op category, split into the part the models cover and the rest."""
    if op_categories is None or not len(op_categories) or "kernel_time_us" not in op_categories:
        return None
    df = op_categories
    labels = [CATEGORY_LABELS.get(str(c), plotly_text(c)) for c in df["category"]]
    total_ms = df["kernel_time_us"].to_numpy(np.float64) / 1e3
    covered = total_ms * df["modelled_pct"].fillna(0).to_numpy(np.float64) / 100
    if not (total_ms > 0).any():
        return None
    pct = df["device_time_pct"].fillna(0).round(1).tolist()
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "x": values.round(4).tolist(),
            "y": labels,
            "customdata": pct,
            "hovertemplate": f"%{{y}}: %{{x:.3f}} ms {name} (category: %{{customdata}}% of device time)<extra></extra>",
        }
        for name, values in (("modelled", covered), ("not modelled", total_ms - covered))
    ]
    layout = {
        "barmode": "stack",
        "xaxis": {"title": {"text": "device time (ms)"}},
        "title": {"text": plotly_text(_coverage_title(df)), "font": {"size": 12}, "x": 0.01, "xanchor": "left"},
        "yaxis": {"autorange": "reversed", "type": "category", "automargin": True},
        "legend": {"orientation": "h", "y": -0.3},
        "height": 120 + 30 * len(labels),
    }
    return {"data": data, "layout": layout}
