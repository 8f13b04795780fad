"""Device idle time per rank, device and stream, split the way HolisticTraceAnalysis does.

For consecutive device events on one stream, the gap before an event is:
- host wait: its launch (runtime call) started after the previous event ended: the host was
  not enqueuing work fast enough;
- kernel wait: otherwise, a gap under ``KERNEL_WAIT_NS`` (30 us): the inherent delay of
  launching back-to-back kernels;
- other: anything else (the stream waited on another stream, an event, a sync, ...).
The events are those HTA analyses (see ``breakdown.hta_device_events``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.metrics.breakdown import hta_device_events

KERNEL_WAIT_NS = 30_000


def idle_breakdown(
    frames: TraceFrames, hta_events: pd.DataFrame | None = None, kernel_wait_ns: int = KERNEL_WAIT_NS
) -> pd.DataFrame:
    """Per (rank, device, stream): idle_ns, host_wait_ns, kernel_wait_ns, other_ns and *_pct of idle."""
    dev = hta_device_events(frames) if hta_events is None else hta_events
    cols = [
        "rank",
        "device",
        "stream",
        "idle_ns",
        "host_wait_ns",
        "kernel_wait_ns",
        "other_ns",
        "host_wait_pct",
        "kernel_wait_pct",
        "other_pct",
        "gaps",
    ]
    if not len(dev):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    d = dev[["rank", "device", "stream", "start_ns", "dur_ns", "launch_start_ns"]].sort_values(
        ["rank", "device", "stream", "start_ns"], kind="stable"
    )
    key = d[["rank", "device", "stream"]].to_numpy()
    same = np.zeros(len(d), bool)
    same[1:] = (key[1:] == key[:-1]).all(axis=1)
    end = (d["start_ns"] + d["dur_ns"]).to_numpy()
    prev_end = np.empty_like(end)
    prev_end[0] = 0
    prev_end[1:] = end[:-1]
    gap = np.where(same, d["start_ns"].to_numpy() - prev_end, 0)
    host_wait = same & (d["launch_start_ns"].to_numpy() > prev_end)
    kernel_wait = same & ~host_wait & (gap < kernel_wait_ns)
    other = same & ~host_wait & ~kernel_wait
    frame = pd.DataFrame(
        {
            "rank": d["rank"].to_numpy(),
            "device": d["device"].to_numpy(),
            "stream": d["stream"].to_numpy(),
            "idle_ns": np.where(same, gap, 0),
            "host_wait_ns": np.where(host_wait, gap, 0),
            "kernel_wait_ns": np.where(kernel_wait, gap, 0),
            "other_ns": np.where(other, gap, 0),
            "gaps": same.astype(np.int64),
        }
    )
    out = frame.groupby(["rank", "device", "stream"], sort=True).sum().reset_index()
    idle = out["idle_ns"].replace(0, np.nan).astype("float64")
    for name in ("host_wait", "kernel_wait", "other"):
        out[f"{name}_pct"] = (100.0 * out[f"{name}_ns"] / idle).fillna(0.0)
    return out[cols]
