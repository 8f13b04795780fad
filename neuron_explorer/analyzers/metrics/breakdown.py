"""Temporal breakdown: where each step's wall time went, per rank, step and device.

Every instant of a step window is given to exactly one part, by priority, like the PyTorch
Profiler TensorBoard plugin: compute kernel > memcpy > memset > communication kernel > host
(an op or runtime call running while the device does nothing: exposed host time) > idle. So
the parts sum to the window's wall time and overlapped work is counted once, under the
higher-priority part (``communication_ns`` is therefore *exposed* communication).

``temporal_breakdown`` is the per-rank, HolisticTraceAnalysis-compatible view (docs/rules.md,
"Definitions and HTA"): over the span from the first to the last device event, busy compute,
busy non-compute and idle.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.intervals import clip_to_windows, union_length
from neuron_explorer.analyzers.metrics.kernels import hta_kernel_type
from neuron_explorer.trace.schema import Kind

PARTS = ("compute_ns", "memcpy_ns", "memset_ns", "communication_ns", "host_exposed_ns")
#: host span kinds that count as "the host is busy" for exposed host time (python frames and
#: annotations are excluded: they enclose whole stacks and would hide real idleness)
HOST_BUSY_KINDS = (Kind.CPU_OP, Kind.RUNTIME, Kind.SYNC)


def device_part(frames: TraceFrames) -> np.ndarray:
    """Priority class of every device event: 0 compute, 1 memcpy, 2 memset, 3 communication."""
    dev = frames.device
    kind = dev["kind"].astype(str).to_numpy()
    cat = frames.device_category.to_numpy()
    part = np.zeros(len(dev), np.int8)
    part[(cat == "communication")] = 3
    part[kind == Kind.MEMSET] = 2
    part[kind == Kind.MEMCPY] = 1
    return part


def device_slots(dev: pd.DataFrame, windows: pd.DataFrame) -> pd.DataFrame:
    """The (rank, device, device_type) rows a per-step split has, sorted: every device of each
    rank, and for a rank without device work one host-only row (device -1, type cpu)."""
    devices = dev[["rank", "device", "device_type"]].drop_duplicates(["rank", "device"])
    devices = devices.assign(device_type=devices["device_type"].astype(str))
    host_only = sorted(set(windows["rank"]) - set(devices["rank"]))
    return (
        pd.concat([devices, pd.DataFrame({"rank": host_only, "device": -1, "device_type": "cpu"})], ignore_index=True)
        .sort_values(["rank", "device"])
        .reset_index(drop=True)
    )


def step_breakdown(frames: TraceFrames) -> pd.DataFrame:
    """Per (rank, step, device): wall_ns and the parts above, plus a ``*_pct`` of wall for each."""
    w = frames.step_windows.reset_index(drop=True)
    dev = frames.device
    cols = ["rank", "step", "device", "device_type", "start_ns", "wall_ns", *PARTS, "idle_ns"]
    if not len(w):
        return _with_pct(pd.DataFrame({c: pd.Series(dtype="int64") for c in cols}))
    devices = device_slots(dev, w)
    n_dev = len(devices)
    dev_slot = pd.Series(np.arange(n_dev), index=pd.MultiIndex.from_frame(devices[["rank", "device"]]))

    win = (w["rank"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy())
    # device pieces
    rows, wi, ps, pe = clip_to_windows(
        dev["rank"].to_numpy(), dev["start_ns"].to_numpy(), (dev["start_ns"] + dev["dur_ns"]).to_numpy(), *win
    )
    slot = dev_slot.reindex(
        pd.MultiIndex.from_arrays([dev["rank"].to_numpy()[rows], dev["device"].to_numpy()[rows]])
    ).to_numpy()
    d_group = wi * n_dev + slot
    d_part = device_part(frames)[rows]
    # host pieces, replicated onto every device of their rank
    host = frames.host_of(*HOST_BUSY_KINDS)
    hrows, hwi, hps, hpe = clip_to_windows(
        host["rank"].to_numpy(), host["start_ns"].to_numpy(), (host["start_ns"] + host["dur_ns"]).to_numpy(), *win
    )
    hrank = host["rank"].to_numpy()[hrows]
    rank_devs = devices.reset_index().groupby("rank")["index"].apply(np.asarray)
    h_groups, h_s, h_e = [], [], []
    for r, slots in rank_devs.items():  # one pass per (rank, device): a handful, not per event
        m = hrank == r
        for s in slots:
            h_groups.append(hwi[m] * n_dev + s)
            h_s.append(hps[m])
            h_e.append(hpe[m])
    groups = np.concatenate([d_group, *h_groups]).astype(np.int64)
    starts = np.concatenate([ps, *h_s])
    ends = np.concatenate([pe, *h_e])
    parts = np.concatenate([d_part, np.full(len(groups) - len(d_group), 4, np.int8)])

    n_groups = len(w) * n_dev
    prefix = [union_length(groups[parts <= k], starts[parts <= k], ends[parts <= k], n_groups) for k in range(5)]
    out = pd.DataFrame(
        {
            "win": np.repeat(np.arange(len(w)), n_dev),
            "slot": np.tile(np.arange(n_dev), len(w)),
        }
    )
    out["rank"] = w["rank"].to_numpy()[out["win"]]
    out = out[out["rank"].to_numpy() == devices["rank"].to_numpy()[out["slot"]]]
    keep = out.index.to_numpy()
    out["step"] = w["step"].to_numpy()[out["win"]]
    out["device"] = devices["device"].to_numpy()[out["slot"]]
    out["device_type"] = devices["device_type"].to_numpy()[out["slot"]]
    out["start_ns"] = w["start_ns"].to_numpy()[out["win"]]
    out["wall_ns"] = w["dur_ns"].to_numpy()[out["win"]]
    prev = np.zeros(n_groups, np.int64)
    for name, cum in zip(PARTS, prefix):
        out[name] = (cum - prev)[keep]
        prev = cum
    out["idle_ns"] = out["wall_ns"] - prefix[-1][keep]
    return _with_pct(out[cols].reset_index(drop=True))


def _with_pct(df: pd.DataFrame) -> pd.DataFrame:
    wall = df["wall_ns"].astype("float64").replace(0, np.nan)
    for name in (*PARTS, "idle_ns"):
        df[name.replace("_ns", "_pct")] = (100.0 * df[name] / wall).fillna(0.0)
    return df


def hta_device_events(frames: TraceFrames) -> pd.DataFrame:
    """The device events HTA's analyses see: those launched by a runtime call in the trace, and,
    when the trace has two or more steps, launched before the last step started (HTA drops the
    last step, which the profiler often cuts short). Adds ``launch_start_ns``."""
    dev = frames.device
    runtime = frames.host_of(Kind.RUNTIME)
    pos = lookup(
        ukey(runtime["rank"].to_numpy(), runtime["event_id"].to_numpy()),
        ukey(dev["rank"].to_numpy(), dev["launch_id"].to_numpy()),
    )
    ls = (
        np.where(pos >= 0, runtime["start_ns"].to_numpy()[np.maximum(pos, 0)], -1)
        if len(runtime)
        else np.full(len(dev), -1)
    )
    dev = dev.assign(launch_start_ns=ls, category=frames.device_category.to_numpy())
    dev = dev[pos >= 0] if len(runtime) else dev.iloc[:0]
    w = frames.step_windows
    if frames.has_steps:
        counts = w.groupby("rank")["step"].transform("count")
        last = w[counts >= 2].groupby("rank")["start_ns"].max()
        cutoff = dev["rank"].map(last)
        dev = dev[cutoff.isna() | (dev["launch_start_ns"] < cutoff)]
    return dev


def temporal_breakdown(frames: TraceFrames, hta_events: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rank, over the device-active span (first device event start to last end), HTA's way:
    span_ns, idle_ns, compute_ns, non_compute_ns (communication + memory) and their *_pct."""
    dev = hta_device_events(frames) if hta_events is None else hta_events
    cols = [
        "rank",
        "span_ns",
        "busy_ns",
        "idle_ns",
        "compute_ns",
        "non_compute_ns",
        "idle_pct",
        "compute_pct",
        "non_compute_pct",
    ]
    if not len(dev):
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    rank_codes, groups = np.unique(dev["rank"].to_numpy(), return_inverse=True)
    start = dev["start_ns"].to_numpy()
    end = start + dev["dur_ns"].to_numpy()
    n = len(rank_codes)
    busy = union_length(groups, start, end, n)
    compute_mask = hta_kernel_type(dev) == "COMPUTATION"
    compute = union_length(groups[compute_mask], start[compute_mask], end[compute_mask], n)
    span = np.zeros(n, np.int64)
    first = pd.Series(start).groupby(groups).min().reindex(range(n)).to_numpy()
    last = pd.Series(end).groupby(groups).max().reindex(range(n)).to_numpy()
    span = (last - first).astype(np.int64)
    out = pd.DataFrame(
        {
            "rank": rank_codes,
            "span_ns": span,
            "busy_ns": busy,
            "idle_ns": span - busy,
            "compute_ns": compute,
            "non_compute_ns": busy - compute,
        }
    )
    denom = out["span_ns"].replace(0, np.nan).astype("float64")
    for name in ("idle", "compute", "non_compute"):
        out[f"{name}_pct"] = (100.0 * out[f"{name}_ns"] / denom).fillna(0.0)
    return out[cols]
