"""Device and host memory: the allocation timeline, peaks against capacity, and churn.

Built from the profiler's ``[memory]`` events (``profile_memory=True``), which carry the
allocator's running totals after each allocation or free.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames

#: What a trace without allocator events lacks, and how to record them.
NO_MEMORY_EVENTS = (
    "the trace has no [memory] events (allocations and frees): record with `neuron-explorer record --memory` "
    "or torch.profiler.profile(profile_memory=True)"
)


def memory_timeline(frames: TraceFrames) -> pd.DataFrame:
    """rank, device_type, device, start_ns, allocated_bytes, reserved_bytes, delta_bytes, step."""
    mem = frames.memory
    cols = ["rank", "device_type", "device", "start_ns", "allocated_bytes", "reserved_bytes", "delta_bytes", "step"]
    if not len(mem):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    return pd.DataFrame(
        {
            "rank": mem["rank"].to_numpy(),
            "device_type": mem["device_type"].astype(str).to_numpy(),
            "device": mem["device"].to_numpy(),
            "start_ns": mem["start_ns"].to_numpy(),
            "allocated_bytes": mem["mem_total_allocated_bytes"].to_numpy(),
            "reserved_bytes": mem["mem_total_reserved_bytes"].to_numpy(),
            "delta_bytes": mem["bytes"].to_numpy(),
            "step": mem["step"].to_numpy(),
        }
    )


def device_capacity(frames: TraceFrames) -> dict[int, int]:
    """Device index -> total memory in bytes, from the trace's device properties."""
    caps: dict[int, int] = {}
    for i, props in enumerate(frames.device_properties):
        total = props.get("totalGlobalMem") or props.get("total_memory") or props.get("totalMemory")
        if total:
            caps[int(props.get("id", i))] = int(total)
    return caps


def memory_summary(frames: TraceFrames, timeline: pd.DataFrame) -> dict[str, Any]:
    """Per (rank, device): peaks, capacity, allocations per step and churn; plus overall peak_pct."""
    if not len(timeline):
        return {"devices": [], "has_memory_events": False, "missing": NO_MEMORY_EVENTS}
    caps = device_capacity(frames)
    num_steps = max(1, int(frames.step_windows["step"].nunique()))
    t = timeline.assign(
        alloc=np.where(timeline["delta_bytes"] > 0, timeline["delta_bytes"], 0),
        is_alloc=(timeline["delta_bytes"] > 0).astype(np.int64),
    )
    g = (
        t.groupby(["rank", "device_type", "device"])
        .agg(
            peak_allocated_bytes=("allocated_bytes", "max"),
            peak_reserved_bytes=("reserved_bytes", "max"),
            alloc_bytes=("alloc", "sum"),
            alloc_count=("is_alloc", "sum"),
        )
        .reset_index()
    )
    devices = []
    for row in g.to_dict(orient="records"):  # one row per device: a handful
        cap = caps.get(int(row["device"])) if row["device_type"] != "cpu" else None
        peak = max(int(row["peak_allocated_bytes"]), int(row["peak_reserved_bytes"]))
        row.update(
            capacity_bytes=cap,
            peak_pct=(100.0 * peak / cap) if cap else None,
            allocs_per_step=row["alloc_count"] / num_steps,
            alloc_bytes_per_step=row["alloc_bytes"] / num_steps,
            churn_ratio=(row["alloc_bytes"] / num_steps / row["peak_allocated_bytes"])
            if row["peak_allocated_bytes"] > 0
            else None,
        )
        devices.append({k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()})
    peaks = [d["peak_pct"] for d in devices if d["peak_pct"] is not None]
    return {"devices": devices, "has_memory_events": True, "max_peak_pct": max(peaks) if peaks else None}
