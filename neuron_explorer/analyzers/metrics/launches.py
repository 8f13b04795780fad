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


#: The least launch latency allowed before launched work counts as queued: a launch onto an
#: idle NVIDIA GPU starts its kernel 1-4 us after the call returns (p10-p90 on the bundled
#: H100/H200/B200 traces), so 10 us covers it.
MIN_GRACE_NS = 10_000
#: The most: a longer "latency" is a dependency or clock skew, not the launch path.
MAX_GRACE_NS = 200_000
#: Launches onto an idle device a rank needs for its latency to be measured rather than assumed.
MIN_IDLE_LAUNCHES = 3
#: The measured latency is the p90 over those launches times this margin.
GRACE_MARGIN = 1.25


def idle_launch_grace(frames: TraceFrames) -> dict[int, int]:
    """Per rank: how long after its launch call returns a device event may start and still be
    the launch path's latency, not a wait: measured on the rank's launches onto an idle device
    (nothing ran on the device between the launch call's start and the work's start), p90 x
    ``GRACE_MARGIN``, within [``MIN_GRACE_NS``, ``MAX_GRACE_NS``]. HIP on MI300X pays 23-25 us
    there (measured: TraceLens's qwen_mi300 trace, 24 launches), which a fixed 10 us called
    "a dependency the trace does not record" (issue 40). Ranks with fewer than
    ``MIN_IDLE_LAUNCHES`` such launches are absent (callers use ``MIN_GRACE_NS``)."""
    return frames.memo("idle_launch_grace", lambda: _idle_launch_grace(frames))


def _idle_launch_grace(frames: TraceFrames) -> dict[int, int]:
    ev = frames.launch_events
    dev = frames.device
    if not len(ev) or not len(dev):
        return {}
    # per device event, the latest end of the device's earlier events (rows sorted by rank, device, start)
    end = dev["start_ns"].to_numpy().astype(np.int64) + dev["dur_ns"].to_numpy().astype(np.int64)
    group = dev["rank"].to_numpy().astype(np.int64) * (1 << 32) + dev["device"].to_numpy().astype(np.int64)
    order = np.lexsort((dev["start_ns"].to_numpy(), group))
    g, e = group[order], end[order]
    running = pd.Series(e).groupby(g).cummax().to_numpy()
    before = np.r_[np.iinfo(np.int64).min, running[:-1]]
    before[np.r_[True, g[1:] != g[:-1]]] = np.iinfo(np.int64).min
    busy_until = pd.Series(
        before, index=pd.MultiIndex.from_arrays([dev["rank"].to_numpy()[order], dev["event_id"].to_numpy()[order]])
    )
    key = pd.MultiIndex.from_arrays([ev["rank"].to_numpy(), ev["event_id"].to_numpy()])
    prior = busy_until.reindex(key).to_numpy()
    launch_start = ev["launch_start_ns"].to_numpy().astype(np.int64)
    launch_end = launch_start + ev["launch_dur_ns"].to_numpy().astype(np.int64)
    idle = ~np.isnan(prior.astype(np.float64)) & (prior <= launch_start)
    latency = ev["start_ns"].to_numpy().astype(np.int64) - launch_end
    df = pd.DataFrame({"rank": ev["rank"].to_numpy()[idle], "latency": latency[idle]})
    out: dict[int, int] = {}
    for rank, lat in df.groupby("rank")["latency"]:  # (one per rank)
        if len(lat) >= MIN_IDLE_LAUNCHES:
            grace = float(np.percentile(lat.to_numpy(), 90)) * GRACE_MARGIN
            out[int(rank)] = int(min(max(grace, MIN_GRACE_NS), MAX_GRACE_NS))
    return out


def grace_of(frames: TraceFrames, rank: np.ndarray) -> np.ndarray:
    """``idle_launch_grace`` per row of ``rank`` (``MIN_GRACE_NS`` where not measured)."""
    measured = idle_launch_grace(frames)
    rank = np.asarray(rank).astype(np.int64)
    if not measured:
        return np.full(len(rank), MIN_GRACE_NS, np.int64)
    keys = np.array(sorted(measured), np.int64)
    values = np.array([measured[k] for k in keys], np.int64)
    pos = np.clip(np.searchsorted(keys, rank), 0, len(keys) - 1)
    return np.where(keys[pos] == rank, values[pos], MIN_GRACE_NS)
