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

from neuron_explorer.analyzers.core.context import TraceFrames, group_codes, lookup, ukey
from neuron_explorer.trace.schema import Kind

LONG_LAUNCH_NS = 50_000
LONG_DELAY_NS = 100_000
SHORT_KERNEL_NS = 10_000


def launch_events(frames: TraceFrames) -> pd.DataFrame:
    """One row per device event with its launch: rank, device, stream, start_ns, dur_ns,
    launch_start_ns, launch_dur_ns, launch_delay_ns, queue_depth, name, category."""
    dev = frames.device
    rt = frames.host_of(Kind.RUNTIME)
    pos = lookup(
        ukey(rt["rank"].to_numpy(), rt["event_id"].to_numpy()),
        ukey(dev["rank"].to_numpy(), dev["launch_id"].to_numpy()),
    )
    m = pos >= 0
    safe = np.maximum(pos, 0)
    ls = rt["start_ns"].to_numpy()[safe] if len(rt) else np.zeros(len(dev), np.int64)
    ld = rt["dur_ns"].to_numpy()[safe] if len(rt) else np.zeros(len(dev), np.int64)
    out = pd.DataFrame(
        {
            "rank": dev["rank"].to_numpy()[m],
            "device": dev["device"].to_numpy()[m],
            "stream": dev["stream"].to_numpy()[m],
            "event_id": dev["event_id"].to_numpy()[m],
            "name": dev["name"].to_numpy()[m],
            "category": frames.device_category.to_numpy()[m],
            "start_ns": dev["start_ns"].to_numpy()[m],
            "dur_ns": dev["dur_ns"].to_numpy()[m],
            "launch_start_ns": ls[m].astype(np.int64),
            "launch_dur_ns": ld[m].astype(np.int64),
        }
    )
    out["launch_delay_ns"] = out["start_ns"] - out["launch_start_ns"]
    out["queue_depth"] = _queue_depth(out)
    return out


def _queue_depth(ev: pd.DataFrame) -> np.ndarray:
    """Per event: events on its stream launched at or before its launch and not finished by then."""
    if not len(ev):
        return np.zeros(0, np.int64)
    codes = group_codes(ev["rank"].to_numpy(), ev["device"].to_numpy(), ev["stream"].to_numpy())
    launch = ev["launch_start_ns"].to_numpy()
    end = (ev["start_ns"] + ev["dur_ns"]).to_numpy()
    n_streams = int(codes.max()) + 1
    if n_streams == 1:  # one stream: its own times, no shared axis
        return _in_flight(launch, end, _NO_FLOOR)
    t0 = int(min(launch.min(), end.min()))
    span = int(max(launch.max(), end.max())) - t0 + 1
    if n_streams * span >= 1 << 63:  # streams' times too far apart for one int64 axis
        out = np.zeros(len(ev), np.int64)
        for code in range(n_streams):
            rows = np.flatnonzero(codes == code)
            out[rows] = _in_flight(launch[rows], end[rows], _NO_FLOOR)
        return out
    # each stream on its own stretch of one axis, starting at code x span
    return _in_flight((launch - t0) + codes * span, (end - t0) + codes * span, codes * span)


_NO_FLOOR = np.int64(np.iinfo(np.int64).min)


def _in_flight(launch: np.ndarray, end: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Per event: those launched at or before its launch and not finished by then, itself aside;
    ``floor``: the lowest time of its stream's stretch of the axis (``_NO_FLOOR`` for one stream)."""
    ls, es = np.sort(launch), np.sort(end)
    launched = np.searchsorted(ls, launch, side="right") - np.searchsorted(ls, floor, side="left")
    finished = np.searchsorted(es, launch, side="right") - np.searchsorted(es, floor, side="left")
    # minus itself when it is in flight at its own launch; (a kernel that starts before its launch,
    # clock skew, could make it negative)
    return np.maximum(launched - finished - (end > launch), 0)


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
