"""Kernel launch statistics: launch (runtime call) duration, launch delay and queue depth.

Launch delay is the device event's start minus its launching runtime call's start (how long
the work waited before the device started it); queue depth at a launch is the number of device
events on the same stream already launched but not yet finished (HTA's "queue length").
HTA's cutoffs flag launches over 50 us on the host and delays over 100 us.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames

LONG_LAUNCH_NS = 50_000
LONG_DELAY_NS = 100_000
SHORT_KERNEL_NS = 10_000


def launch_table(frames: TraceFrames) -> pd.DataFrame:
    """Per (rank, device, stream): launch counts and launch duration / delay / queue depth stats."""
    ev = frames.launch_events
    cols = [
        "rank",
        "device",
        "stream",
        "launches",
        "launch_dur_mean_ns",
        "launch_dur_p95_ns",
        "launch_delay_mean_ns",
        "launch_delay_p50_ns",
        "launch_delay_p95_ns",
        "queue_depth_mean",
        "queue_depth_max",
        "long_launches",
        "long_delays",
        "short_kernels",
    ]
    if not len(ev):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    ev = ev.assign(
        long_launch=(ev["launch_dur_ns"] > LONG_LAUNCH_NS).astype(np.int64),
        long_delay=(ev["launch_delay_ns"] > LONG_DELAY_NS).astype(np.int64),
        short=(ev["dur_ns"] < SHORT_KERNEL_NS).astype(np.int64),
    )
    keys = ["rank", "device", "stream"]
    g = ev.groupby(keys)
    out = g.agg(
        launches=("dur_ns", "count"),
        launch_dur_mean_ns=("launch_dur_ns", "mean"),
        launch_delay_mean_ns=("launch_delay_ns", "mean"),
        launch_delay_p50_ns=("launch_delay_ns", "median"),
        queue_depth_mean=("queue_depth", "mean"),
        queue_depth_max=("queue_depth", "max"),
        long_launches=("long_launch", "sum"),
        long_delays=("long_delay", "sum"),
        short_kernels=("short", "sum"),
    )
    q = g[["launch_dur_ns", "launch_delay_ns"]].quantile(0.95)
    out["launch_dur_p95_ns"] = q["launch_dur_ns"]
    out["launch_delay_p95_ns"] = q["launch_delay_ns"]
    out = out.reset_index()
    return out[cols]


def launch_summary(table: pd.DataFrame) -> dict[str, Any]:
    """Totals over every stream (launch-weighted means)."""
    if not len(table):
        return {"launches": 0}
    n = table["launches"].to_numpy(np.float64)
    total = float(n.sum())

    def wmean(col: str) -> float:
        return float((table[col].to_numpy(np.float64) * n).sum() / total)

    return {
        "launches": int(total),
        "launch_dur_mean_ns": wmean("launch_dur_mean_ns"),
        "launch_delay_mean_ns": wmean("launch_delay_mean_ns"),
        "queue_depth_mean": wmean("queue_depth_mean"),
        "queue_depth_max": int(table["queue_depth_max"].max()),
        "long_launch_pct": 100.0 * float(table["long_launches"].sum()) / total,
        "long_delay_pct": 100.0 * float(table["long_delays"].sum()) / total,
        "short_kernel_pct": 100.0 * float(table["short_kernels"].sum()) / total,
    }
