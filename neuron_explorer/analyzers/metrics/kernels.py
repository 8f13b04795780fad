"""Kernel breakdown: device time per kernel name, with a category (GEMM, attention, conv, ...).

Classification runs on the distinct kernel names only (a trace has thousands of events but a
few hundred names), then maps back to the events through the categorical codes.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.trace.schema import Kind


def kernel_breakdown(frames: TraceFrames) -> pd.DataFrame:
    """Per kernel name: category, device_type, count, total/mean/min/max ns and % of device time."""
    dev = frames.device
    cols = ["name", "category", "device_type", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "pct"]
    if not len(dev):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c == "pct" else "object") for c in cols})
    # group on the categorical codes; a name has one category, so it is taken per group
    df = pd.DataFrame(
        {
            "name": dev["name"],
            "device_type": dev["device_type"],
            "dur_ns": dev["dur_ns"],
            "category": frames.device_category.to_numpy(),
        }
    )
    g = (
        df.groupby(["name", "device_type"], observed=True, sort=False)
        .agg(
            category=("category", "first"),
            count=("dur_ns", "count"),
            total_ns=("dur_ns", "sum"),
            mean_ns=("dur_ns", "mean"),
            min_ns=("dur_ns", "min"),
            max_ns=("dur_ns", "max"),
        )
        .reset_index()
    )
    g["name"] = g["name"].astype(str)
    g["device_type"] = g["device_type"].astype(str)
    total = g["total_ns"].sum()
    g["mean_ns"] = g["mean_ns"].round().astype("int64")
    g["pct"] = 100.0 * g["total_ns"] / total if total else 0.0
    return g.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)[cols]


def category_breakdown(kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernel time per category: count, total_ns, pct."""
    if not len(kernels):
        return pd.DataFrame({"category": [], "count": [], "total_ns": [], "pct": []})
    g = (
        kernels.groupby("category", observed=True)
        .agg(count=("count", "sum"), total_ns=("total_ns", "sum"))
        .reset_index()
    )
    total = g["total_ns"].sum()
    g["pct"] = 100.0 * g["total_ns"] / total if total else 0.0
    return g.sort_values("total_ns", ascending=False).reset_index(drop=True)


HTA_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY")


_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"^(?:Memcpy|Memset|dma)")


def hta_kernel_type(events: pd.DataFrame) -> np.ndarray:
    """HTA's kernel type of each device event, by HTA's own name rules (``^nccl.*Kernel``:
    COMMUNICATION; ``^Memcpy|^Memset|^dma``: MEMORY; the rest COMPUTATION) plus our event kinds
    (collective, memcpy, memset), which name the same events on devices whose names differ."""
    from neuron_explorer.analyzers.core.columns import name_mask

    kind = events["kind"].astype(str).to_numpy()
    comm = name_mask(events["name"], _HTA_COMM) | (kind == Kind.COLLECTIVE)
    memory = name_mask(events["name"], _HTA_MEMORY) | (kind == Kind.MEMCPY) | (kind == Kind.MEMSET)
    return np.where(comm, "COMMUNICATION", np.where(memory, "MEMORY", "COMPUTATION"))


def kernel_type_breakdown(events: pd.DataFrame) -> pd.DataFrame:
    """Device time by HTA kernel type, overlap counted once: for every instant, the set of types
    running (e.g. "COMPUTATION overlapping COMMUNICATION") gets the time. Per rank: kernel_type,
    total_ns, pct. ``events`` are device events (``breakdown.hta_device_events``)."""
    cols = ["rank", "kernel_type", "total_ns", "pct"]
    if not len(events):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    types = hta_kernel_type(events)
    bit = np.select([types == t for t in HTA_TYPES], [1, 2, 4]).astype(np.int64)
    start = events["start_ns"].to_numpy()
    end = start + events["dur_ns"].to_numpy()
    rank = events["rank"].to_numpy()
    # sweep: +1/-1 per type at each boundary; the running counts give the active set
    t = np.concatenate([start, end])
    r = np.concatenate([rank, rank])
    b = np.concatenate([bit, bit])
    sign = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((t, r))
    t, r, b, sign = t[order], r[order], b[order], sign[order]
    counts = np.stack([np.cumsum(np.where(b == k, sign, 0)) for k in (1, 2, 4)], axis=1)
    state = (counts[:, 0] > 0) * 1 + (counts[:, 1] > 0) * 2 + (counts[:, 2] > 0) * 4
    dt = np.zeros(len(t), np.int64)
    same = r[1:] == r[:-1]
    dt[:-1] = np.where(same, t[1:] - t[:-1], 0)
    df = pd.DataFrame({"rank": r, "state": state, "dt": dt})
    df = df[df["state"] > 0]
    g = df.groupby(["rank", "state"], as_index=False)["dt"].sum()
    names = {s: " overlapping ".join(n for k, n in zip((1, 2, 4), HTA_TYPES) if s & k) for s in range(1, 8)}
    g["kernel_type"] = g["state"].map(names)
    g = g.rename(columns={"dt": "total_ns"})
    g["pct"] = 100.0 * g["total_ns"] / g.groupby("rank")["total_ns"].transform("sum")
    return g.sort_values(["rank", "total_ns"], ascending=[True, False]).reset_index(drop=True)[cols]
