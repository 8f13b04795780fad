"""The caching allocator: reserved against allocated over time, and the allocator's own calls.

A device's caching allocator (CUDA, HIP) reserves segments from the driver and hands out
blocks inside them; ``Total Reserved - Total Allocated`` is memory held but not in use. A gap
that stays large while the allocator keeps reserving more, or ``cudaMalloc``/``hipMalloc`` and
``cudaFree``/``hipFree`` calls inside the steady steps (a free there is the allocator releasing
its cache to retry an allocation that did not fit, or ``empty_cache()``), is the pattern of
fragmentation: blocks of many sizes that no longer fit the segments.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import name_mask
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.trace.schema import Kind

ALLOC_CALL = re.compile(r"^(cuda|hip)(Malloc|MallocAsync|MallocManaged|Free|FreeAsync)$")
_FREE_CALL = re.compile(r"Free")
COLUMNS = [
    "rank",
    "device_type",
    "device",
    "peak_reserved_bytes",
    "allocated_at_reserved_peak_bytes",
    "reserved_gap_at_peak_bytes",
    "largest_gap_bytes",
    "largest_gap_ns",
    "largest_gap_event_id",
    "largest_gap_pct",
    "steady_steps",
    "reserved_growth_steady_bytes",
    "malloc_calls_in_steps",
    "free_calls_in_steps",
    "allocator_call_ns_in_steps",
]


def fragmentation_pattern(row: object, min_gap_pct: float = 30.0, min_gap_bytes: float = float(1 << 30)) -> bool:
    """A row of ``fragmentation_table`` shows fragmentation: at the reserved peak at least
    ``min_gap_pct`` of the reservation (and ``min_gap_bytes``) is not allocated, while the steady
    steps still grow the reservation, allocate from the driver, or free to it (a retry). A gap
    with a flat reservation is a cache being reused; driver calls with no gap are growth."""
    gap = float(getattr(row, "reserved_gap_at_peak_bytes", 0))
    reserved = max(float(getattr(row, "peak_reserved_bytes", 0)), 1.0)
    if 100.0 * gap / reserved < min_gap_pct or gap < min_gap_bytes:
        return False
    return bool(
        getattr(row, "reserved_growth_steady_bytes", 0) > 0
        or getattr(row, "malloc_calls_in_steps", 0) > 0
        or getattr(row, "free_calls_in_steps", 0) > 0
    )


def allocator_calls(frames: TraceFrames, steps: pd.DataFrame) -> pd.DataFrame:
    """Per rank: driver allocation and free calls inside steady (non-warm-up) steps, and their time."""
    rt = frames.host_of(Kind.RUNTIME)
    if not len(rt):
        return pd.DataFrame(
            columns=["rank", "malloc_calls_in_steps", "free_calls_in_steps", "allocator_call_ns_in_steps"]
        )
    rt = rt[name_mask(rt["name"], ALLOC_CALL)]
    rt = rt[rt["step"] >= 0]
    if len(steps) and "is_warmup" in steps:
        warm = steps.loc[steps["is_warmup"], ["rank", "step"]]
        key = pd.MultiIndex.from_arrays([rt["rank"], rt["step"]])
        rt = rt[~key.isin(pd.MultiIndex.from_frame(warm))]
    frees = name_mask(rt["name"], _FREE_CALL) if len(rt) else np.zeros(0, bool)
    g = pd.DataFrame(
        {"rank": rt["rank"].to_numpy(), "m": ~frees, "f": frees, "ns": rt["dur_ns"].to_numpy(np.int64)}
    ).groupby("rank")
    return g.agg(
        malloc_calls_in_steps=("m", "sum"), free_calls_in_steps=("f", "sum"), allocator_call_ns_in_steps=("ns", "sum")
    ).reset_index()


def fragmentation_table(
    mem: pd.DataFrame, memory_steps: pd.DataFrame, steps: pd.DataFrame, frames: TraceFrames
) -> pd.DataFrame:
    """One row per device whose allocator reports reserved memory (columns: ``COLUMNS``)."""
    if not len(mem):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in COLUMNS})
    res = mem["mem_total_reserved_bytes"].to_numpy(np.int64)
    alloc = mem["allocated_bytes"].to_numpy(np.int64)
    ok = (res > 0) & (alloc >= 0)
    if not ok.any():
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in COLUMNS})
    frame = pd.DataFrame(
        {
            "dev_key": mem["dev_key"].to_numpy()[ok],
            "res": res[ok],
            "alloc": alloc[ok],
            "gap": (res - alloc)[ok],
            "t": mem["start_ns"].to_numpy()[ok],
            "eid": mem["event_id"].to_numpy()[ok],
        }
    ).reset_index(drop=True)
    at_res = frame.loc[frame.groupby("dev_key")["res"].idxmax()].set_index("dev_key")
    at_gap = frame.loc[frame.groupby("dev_key")["gap"].idxmax()].set_index("dev_key")
    first = mem.groupby("dev_key").head(1).set_index("dev_key")
    out = pd.DataFrame(
        {
            "rank": first["rank"].reindex(at_res.index).to_numpy(),
            "device_type": first["device_type"].astype(str).reindex(at_res.index).to_numpy(),
            "device": first["device"].reindex(at_res.index).to_numpy(),
            "peak_reserved_bytes": at_res["res"].to_numpy(),
            "allocated_at_reserved_peak_bytes": at_res["alloc"].to_numpy(),
            "reserved_gap_at_peak_bytes": at_res["gap"].to_numpy(),
            "largest_gap_bytes": at_gap["gap"].to_numpy(),
            "largest_gap_ns": at_gap["t"].to_numpy(),
            "largest_gap_event_id": at_gap["eid"].to_numpy(),
            "largest_gap_pct": 100.0 * at_gap["gap"].to_numpy() / np.maximum(at_gap["res"].to_numpy(), 1),
        },
        index=at_res.index,
    )
    # reserved growth over the steady steps: the allocator still asking the driver for more
    ms = memory_steps[memory_steps["peak_reserved_bytes"] >= 0]
    if len(ms) and len(steps) and "is_warmup" in steps:
        warm = steps.loc[steps["is_warmup"], ["rank", "step"]]
        ms = ms[~pd.MultiIndex.from_arrays([ms["rank"], ms["step"]]).isin(pd.MultiIndex.from_frame(warm))]
    g = ms.sort_values("step").groupby("dev_key")["peak_reserved_bytes"] if len(ms) else None
    out["steady_steps"] = g.size().reindex(out.index).fillna(0).to_numpy(np.int64) if g is not None else 0
    out["reserved_growth_steady_bytes"] = (
        (g.last() - g.first()).reindex(out.index).fillna(0).to_numpy(np.int64) if g is not None else 0
    )
    calls = allocator_calls(frames, steps).set_index("rank")
    for c in ("malloc_calls_in_steps", "free_calls_in_steps", "allocator_call_ns_in_steps"):
        out[c] = calls[c].reindex(out["rank"].to_numpy()).fillna(0).to_numpy(np.int64) if len(calls) else 0
    return out.reset_index(drop=True)[COLUMNS]
