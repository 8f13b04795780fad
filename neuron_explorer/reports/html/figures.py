"""The report's static Plotly figures, as plain ``{"data": [...], "layout": {...}}`` dicts.

Each function takes one analysis table and returns a figure, or None when the table has nothing
to draw (the page then says why instead of showing an empty chart). Colors, fonts and the
light/dark theme are applied by the page, so a figure here holds only data and structure.
Every trace string shown by Plotly (labels, hover text) goes through ``plotly_text``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import CATEGORIES, HOST_ONLY_LABELS
from neuron_explorer.reports.colors import CATEGORY_COLORS, part_color
from neuron_explorer.reports.html.escape import plotly_text
from neuron_explorer.reports.names import demangle, short_kernel_name

#: Bars in a "top N" chart; the sortable table beside it holds the rest.
TOP_N = 15
#: Stacked bars at most in the breakdown; with more (rank, step) rows it is a stacked area.
MAX_BARS = 240
#: Points per memory series at most (peaks are kept: each bin keeps its maximum).
MEMORY_POINTS = 4_000
#: Step-time attribution categories, in stacking (priority) order, with their labels.
BREAKDOWN_PARTS = tuple((f"{name}_ns", label) for name, label in CATEGORIES)
HOST_ONLY_NAMES = {f"{name}_ns": label for name, label in HOST_ONLY_LABELS.items()}
LABEL_CHARS = 60
NS_PER_MS = 1e6


def breakdown_figure(breakdown: pd.DataFrame | None) -> dict[str, Any] | None:
    """Stacked bars of each step's wall time by attribution category (``Analysis.attribution``),
    per rank (and device) when several."""
    if breakdown is None or not len(breakdown) or "wall_ns" not in breakdown:
        return None
    df = breakdown.sort_values([c for c in ("rank", "step", "device") if c in breakdown.columns], kind="stable")
    labels = _step_labels(df)
    # Without a device, the compute is the framework ops on the CPU.
    host_only = "device_type" in df and (df["device_type"].astype(str) == "cpu").all()
    names = HOST_ONLY_NAMES if host_only else dict(BREAKDOWN_PARTS)
    data = []
    for col, name in ((c, names.get(c, n)) for c, n in BREAKDOWN_PARTS):
        if col not in df.columns or not pd.to_numeric(df[col], errors="coerce").fillna(0).any():
            continue
        ms = (pd.to_numeric(df[col], errors="coerce").fillna(0).to_numpy(np.float64) / NS_PER_MS).round(4)
        wall = pd.to_numeric(df["wall_ns"], errors="coerce").fillna(0).to_numpy(np.float64)
        pct = np.divide(ms * NS_PER_MS * 100, wall, out=np.zeros_like(ms), where=wall > 0).round(1)
        trace: dict[str, Any] = {
            "type": "bar",
            "name": name,
            "x": labels,
            "y": ms.tolist(),
            "customdata": pct.tolist(),
            "hovertemplate": f"%{{x}}<br>{name}: %{{y:.3f}} ms (%{{customdata}}%)<extra></extra>",
            "meta": {"part": col},
            "marker": {"color": part_color(col)},
        }
        if len(labels) > MAX_BARS:  # thousands of SVG bars are slow and thinner than a pixel
            trace.update(
                type="scatter", mode="lines", stackgroup="parts", line={"width": 0.5, "color": part_color(col)}
            )
        data.append(trace)
    layout = {
        "barmode": "stack",
        "yaxis": {"title": {"text": "ms"}},
        "xaxis": {"type": "category", "automargin": True},
        "legend": {"orientation": "h", "y": -0.25},
    }
    return {"data": data, "layout": layout}


def top_bar_figure(
    df: pd.DataFrame | None, label: str, value: str, title: str, category: str = "compute"
) -> dict[str, Any] | None:
    """Horizontal bars of the ``TOP_N`` rows with the largest ``value`` (ns, shown in ms), in
    the colour of ``category``; kernel names are demangled and shortened so labels stay apart,
    the full (and mangled) name in the tooltip."""
    if df is None or not len(df) or value not in df.columns:
        return None
    top = df.assign(_v=pd.to_numeric(df[value], errors="coerce").fillna(0)).nlargest(TOP_N, "_v")
    if not (top["_v"] > 0).any():
        return None
    names = [str(n) for n in top[label].astype("object")]
    hover = [plotly_text(demangle(n)) + (f"<br>{plotly_text(n)}" if demangle(n) != n else "") for n in names]
    trace = {
        "type": "bar",
        "orientation": "h",
        "name": title,
        "x": (top["_v"].to_numpy(np.float64) / NS_PER_MS).round(4).tolist(),
        "y": [f"{i + 1}. {plotly_text(label)}" for i, label in enumerate(distinct_labels(names, LABEL_CHARS))],
        "hovertext": hover,
        "hovertemplate": "%{hovertext}<br>%{x:.3f} ms<extra></extra>",
        "marker": {"color": CATEGORY_COLORS[category]},
    }
    layout = {
        "xaxis": {"title": {"text": f"{title} (ms)"}},
        "yaxis": {"autorange": "reversed", "automargin": True, "type": "category"},
        "showlegend": False,
    }
    return {"data": [trace], "layout": layout}


def ops_figure(ops: pd.DataFrame | None) -> dict[str, Any] | None:
    """Top ops by host self time and by device time, side by side as grouped bars."""
    if ops is None or not len(ops):
        return None
    key = ops[["host_self_ns", "device_ns"]].max(axis=1) if {"host_self_ns", "device_ns"} <= set(ops) else None
    if key is None or not (key > 0).any():
        return None
    top = ops.assign(_k=key).nlargest(TOP_N, "_k")
    names = [str(n) for n in top["name"].astype("object")]
    y = [f"{i + 1}. {plotly_text(_shorten(n))}" for i, n in enumerate(names)]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "x": (pd.to_numeric(top[col]).to_numpy(np.float64) / NS_PER_MS).round(4).tolist(),
            "y": y,
            "hovertext": [plotly_text(n) for n in names],
            "hovertemplate": f"%{{hovertext}}<br>{name}: %{{x:.3f}} ms<extra></extra>",
            "marker": {"color": CATEGORY_COLORS[category]},
        }
        for col, name, category in (("host_self_ns", "host self time", "host"), ("device_ns", "device time", "compute"))
    ]
    layout = {
        "barmode": "group",
        "xaxis": {"title": {"text": "ms"}},
        "yaxis": {"autorange": "reversed", "automargin": True, "type": "category"},
        "legend": {"orientation": "h", "y": -0.15},
    }
    return {"data": data, "layout": layout}


def lines_figure(lines: pd.DataFrame | None) -> dict[str, Any] | None:
    """Top source lines: host and device time stacked per file:line."""
    if lines is None or not len(lines) or "location" not in lines:
        return None
    top = lines.head(TOP_N)
    host = pd.to_numeric(top.get("host_ns", 0), errors="coerce").fillna(0).to_numpy(np.float64)
    device = pd.to_numeric(top.get("device_ns", 0), errors="coerce").fillna(0).to_numpy(np.float64)
    if not (host + device > 0).any():
        return None
    labels = [str(x) for x in (top["label"] if "label" in top else top["location"])]
    locs = [str(x) for x in (top["path"] if "path" in top else top["location"])]
    y = [f"{i + 1}. {plotly_text(label)}" for i, label in enumerate(labels)]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "x": (vals / NS_PER_MS).round(4).tolist(),
            "y": y,
            "hovertext": [plotly_text(loc) for loc in locs],
            "hovertemplate": f"%{{hovertext}}<br>{name}: %{{x:.3f}} ms<extra></extra>",
            "marker": {"color": CATEGORY_COLORS[category]},
        }
        for vals, name, category in ((host, "host time", "host"), (device, "device time", "compute"))
    ]
    layout = {
        "barmode": "group",
        "xaxis": {"title": {"text": "ms"}},
        "yaxis": {"autorange": "reversed", "automargin": True, "type": "category"},
        "legend": {"orientation": "h", "y": -0.15},
    }
    return {"data": data, "layout": layout}


def memory_figure(memory: pd.DataFrame | None) -> dict[str, Any] | None:
    """Allocated and reserved bytes over time per device (downsampled, peaks kept), in the
    binary unit that suits the largest value."""
    if memory is None or not len(memory) or "start_ns" not in memory or "allocated_bytes" not in memory:
        return None
    keys = [c for c in ("rank", "device_type", "device") if c in memory.columns]
    t0 = int(pd.to_numeric(memory["start_ns"]).min())
    peak = float(pd.to_numeric(memory[["allocated_bytes", "reserved_bytes"]].stack(), errors="coerce").max() or 0)
    unit, scale = _byte_unit(peak)
    multi_rank = "rank" in memory and memory["rank"].nunique() > 1
    data = []
    for key, g in memory.groupby(keys, sort=True, dropna=False):
        parts = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        device = parts.get("device", -1)
        where = f"{parts.get('device_type', 'device')}:{device}" if device is not None and device >= 0 else "host"
        prefix = f"rank {parts['rank']} · " if multi_rank else ""
        g = g.sort_values("start_ns", kind="stable")
        for col, what in (("allocated_bytes", "allocated"), ("reserved_bytes", "reserved")):
            values = pd.to_numeric(g[col], errors="coerce") if col in g else None
            if values is None or values.isna().all() or not (values.fillna(0) > 0).any():
                continue
            x, y = downsample_max(
                pd.to_numeric(g["start_ns"]).to_numpy(np.int64) - t0,
                values.fillna(0).to_numpy(np.float64),
                MEMORY_POINTS,
            )
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "line": {"shape": "hv", "dash": "solid" if what == "allocated" else "dot"},
                    "name": plotly_text(f"{prefix}{where} {what}"),
                    "x": (x / NS_PER_MS).round(4).tolist(),
                    "y": (y / scale).round(3).tolist(),
                    "hovertemplate": f"%{{x:.3f}} ms: %{{y:.2f}} {unit}<extra>%{{fullData.name}}</extra>",
                }
            )
    if not data:
        return None
    layout = {
        "xaxis": {"title": {"text": "time since the first memory event (ms)"}},
        "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.25},
    }
    return {"data": data, "layout": layout}


#: Fill colours of the memory phases (stacked timeline), in stacking order.
PHASE_COLORS = {
    "before_trace": "#9e9e9e",
    "before_first_step": "#5c6bc0",
    "optimizer_state": "#8e24aa",
    "gradients": "#e53935",
    "activations": "#fb8c00",
    "retained": "#6d4c41",
    "temporaries": "#43a047",
}


def memory_phase_figure(timeline: pd.DataFrame | None, peaks: pd.DataFrame | None) -> dict[str, Any] | None:
    """Live memory by phase over time, stacked, for the device with the highest peak, with the
    trace's peak marked (``analyzers.memory_live.timeline.phase_timeline``)."""
    if timeline is None or not len(timeline):
        return None
    top = timeline.loc[timeline["allocated_bytes"].idxmax()]
    dev = timeline[
        (timeline["rank"] == top["rank"])
        & (timeline["device_type"] == top["device_type"])
        & (timeline["device"] == top["device"])
    ]
    unit, scale = _byte_unit(float(dev["allocated_bytes"].max()))
    t0 = int(dev["start_ns"].min())
    x_all = dev["start_ns"].to_numpy(np.int64) - t0
    # the same points for every phase, chosen by the total, so the stack stays consistent
    idx = downsample_idx(dev["allocated_bytes"].to_numpy(np.float64), MEMORY_POINTS)
    x = (x_all[idx] / NS_PER_MS).round(4).tolist()
    data = []
    for phase, color in PHASE_COLORS.items():
        col = f"{phase}_bytes"
        if col not in dev or not (dev[col] > 0).any():
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "stackgroup": "phases",
                "line": {"shape": "hv", "width": 0.5, "color": color},
                "name": phase.replace("_", " "),
                "x": x,
                "y": (dev[col].to_numpy(np.float64)[idx] / scale).round(3).tolist(),
                "hovertemplate": f"%{{x:.3f}} ms: %{{y:.2f}} {unit}<extra>%{{fullData.name}}</extra>",
            }
        )
    if not data:
        return None
    shapes, notes = [], []
    if peaks is not None and len(peaks):
        p = peaks[(peaks["scope"] == "trace") & (peaks["device_type"] == top["device_type"])]
        p = p[(p["rank"] == top["rank"]) & (p["device"] == top["device"])]
        if len(p):
            px = (int(p["peak_ns"].iloc[0]) - t0) / NS_PER_MS
            shapes.append({"type": "line", "x0": px, "x1": px, "yref": "paper", "y0": 0, "y1": 1,
                           "line": {"dash": "dash", "width": 1}})  # fmt: skip
            notes.append({"x": px, "yref": "paper", "y": 1, "text": "peak", "showarrow": False, "yanchor": "bottom"})
    where = f"{top['device_type']}:{int(top['device'])}" if int(top["device"]) >= 0 else "host"
    layout = {
        "title": {"text": plotly_text(f"Live memory by phase, {where}")},
        "xaxis": {"title": {"text": "time since the first memory event (ms)"}},
        "yaxis": {"title": {"text": unit}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.25},
        "shapes": shapes,
        "annotations": notes,
    }
    return {"data": data, "layout": layout}


def downsample_idx(y: np.ndarray, points: int) -> np.ndarray:
    """Indices of at most ``points`` values: each equal-count bin's maximum, and the last."""
    if len(y) <= points:
        return np.arange(len(y))
    bins = np.arange(len(y)) * points // len(y)
    order = np.lexsort((-y, bins))
    first = np.flatnonzero(np.r_[True, bins[order][1:] != bins[order][:-1]])
    return np.unique(np.r_[order[first], len(y) - 1])


def _byte_unit(peak: float) -> tuple[str, float]:
    for unit, scale in (("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if peak >= scale:
            return unit, scale
    return "bytes", 1.0


def downsample_max(x: np.ndarray, y: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``points`` points: the series cut into equal-count bins, each keeping its maximum
    (so a peak is never lost) plus the last point (so the line ends where the data ends)."""
    if len(x) <= points:
        return x, y
    bins = np.arange(len(x)) * points // len(x)
    order = np.lexsort((-y, bins))  # within each bin, the largest value first
    first = np.flatnonzero(np.r_[True, bins[order][1:] != bins[order][:-1]])
    idx = np.unique(np.r_[order[first], len(x) - 1])
    return x[idx], y[idx]


def _step_labels(df: pd.DataFrame) -> list[str]:
    ranks = df["rank"].nunique() if "rank" in df else 1
    devices = df.groupby("rank")["device"].nunique().max() if {"rank", "device"} <= set(df.columns) else 1
    labels = []
    for row in df.itertuples(index=False):  # one per (rank, step, device): a few hundred rows at most
        step = int(getattr(row, "step", -1))
        text = "whole trace" if step < 0 else f"step {step}"
        if devices > 1:
            text += f" · {plotly_text(getattr(row, 'device_type', ''))}:{int(getattr(row, 'device', -1))}"
        if ranks > 1:
            text = f"rank {int(getattr(row, 'rank', 0))} · {text}"
        labels.append(text)
    return labels


def distinct_labels(names: list[str], width: int) -> list[str]:
    """Short kernel labels; names whose short labels come out the same show, after the head,
    the part of the name where they differ, so no two bars read alike."""
    labels = [short_kernel_name(n, width) for n in names]
    groups: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, []).append(i)
    for label, members in groups.items():
        if len(members) < 2:
            continue
        fulls = [demangle(names[i]) for i in members]
        # the first character where the names differ
        differ = next((k for k, chars in enumerate(zip(*fulls)) if len(set(chars)) > 1), min(map(len, fulls)))
        head = label[: width // 3]
        for i, full in zip(members, fulls):
            start = max(differ - 8, len(head))
            tail = full[start : start + width - len(head) - 2]
            labels[i] = f"{head}…{tail}…"
    return labels


def _shorten(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
