"""Live memory: what is alive at the peaks and which line made it, what outlives its step, and
how the caching allocator holds memory.

This package owns the replay of the allocator events (``[memory]`` instants, recorded with
``profile_memory=True`` / ``record --memory``):

- ``blocks``: each allocation paired with its free by address per device, and the check of the
  replay against the trace's own ``Total Allocated`` (the offset of what was allocated before
  the trace began, and where and why the two disagree);
- ``phases``: what each block is for (parameters and state from before the first step,
  activations saved for backward, gradients, optimizer state, temporaries, retained);
- ``peaks``: the live set at the trace's peak and at each step's peak, by source line, op,
  nn.Module path and phase (``memory_at_peak``), and per step what was allocated, what
  outlived the step and what was never freed (``memory_live``);
- ``fragmentation``: reserved against allocated, the largest gap, driver allocation calls
  inside the steady steps.

Everything is whole-column work: a sort and neighbour comparison pairs the events, the live
sets of all peaks come from two ``searchsorted`` and one groupby. Rules (``memory_leak``,
``memory_capacity``, ``memory_fragmentation``) read these tables; nothing here reads a rule.

Imports ``core/`` only; ``metrics/`` and ``perf/`` are its independent siblings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.memory_live.blocks import memory_events, pair_blocks, replay_check
from neuron_explorer.analyzers.memory_live.fragmentation import fragmentation_table
from neuron_explorer.analyzers.memory_live.peaks import (
    AT_PEAK_COLUMNS,
    STEP_COLUMNS,
    live_at_peaks,
    op_names,
    peak_points,
    step_memory,
)
from neuron_explorer.analyzers.memory_live.phases import PHASES, classify

__all__ = [
    "AT_PEAK_COLUMNS",
    "PHASES",
    "STEP_COLUMNS",
    "LiveMemory",
    "activations_by_module",
    "at_peak_view",
    "live_memory",
    "retained_by_line",
]


@dataclass
class LiveMemory:
    """The replay of one trace's allocator events."""

    #: the memory events in order, with dev_key, replayed_bytes, offset_bytes, allocated_bytes
    events: pd.DataFrame
    #: one row per block (``blocks.pair_blocks``) with ``phase`` (index into PHASES) and ``op``
    blocks: pd.DataFrame
    #: the ``memory_at_peak`` table
    at_peak: pd.DataFrame
    #: the ``memory_live`` table (per device and step), with ``dev_key``
    steps: pd.DataFrame
    #: per device: does the replay agree with Total Allocated (``blocks.replay_check``)
    replay: pd.DataFrame
    #: per device: reserved against allocated, allocator calls (``fragmentation``)
    fragmentation: pd.DataFrame
    timings_s: dict[str, float] = field(default_factory=dict)


def live_memory(frames: TraceFrames, steps: pd.DataFrame) -> LiveMemory:
    """Replay the trace's allocator events. ``steps`` is the step table (``steps.step_table``:
    its warm-up flags keep one-time allocator growth out of the steady-state figures)."""
    mem = memory_events(frames)
    blocks = pair_blocks(mem)
    blocks["phase"] = classify(blocks, frames)
    ops = op_names(blocks, frames) if len(blocks) else pd.Series(pd.Categorical([]))
    blocks["op"] = ops.to_numpy()
    points = peak_points(mem)
    at_peak = live_at_peaks(mem, blocks, points, ops)
    per_step = step_memory(mem, blocks, frames.step_windows, points)
    return LiveMemory(
        events=mem,
        blocks=blocks,
        at_peak=at_peak,
        steps=per_step,
        replay=replay_check(mem, blocks),
        fragmentation=fragmentation_table(mem, per_step, steps, frames),
    )


def published_steps(live: LiveMemory) -> pd.DataFrame:
    """``memory_live`` as exported (no internal device key)."""
    return live.steps[STEP_COLUMNS] if len(live.steps) else pd.DataFrame(columns=STEP_COLUMNS)


def at_peak_view(live: LiveMemory, by: str, scope: str = "trace", step: int = -1) -> pd.DataFrame:
    """The live set at one peak summed by one key: ``line`` (src_file, src_line, src_func),
    ``op``, ``module`` or ``phase``; largest first, with each key's share of the peak."""
    t = live.at_peak
    t = t[(t["scope"] == scope) & (t["step"] == step)] if len(t) else t
    keys = {"line": ["src_file", "src_line", "src_func"], "op": ["op"], "module": ["src_module"], "phase": ["phase"]}[
        by
    ]
    if not len(t):
        return pd.DataFrame(columns=["rank", "device_type", "device", *keys, "live_bytes", "blocks", "pct_of_peak"])
    g = (
        t.groupby(["rank", "device_type", "device", *keys], dropna=False, sort=False)
        .agg(live_bytes=("live_bytes", "sum"), blocks=("blocks", "sum"), pct_of_peak=("pct_of_peak", "sum"))
        .reset_index()
    )
    return g.sort_values("live_bytes", ascending=False, kind="stable").reset_index(drop=True)


def activations_by_module(live: LiveMemory, rank: int, device_type: str, device: int, depth: int = 2) -> pd.DataFrame:
    """Activations saved for backward alive at the trace's peak of one device, by nn.Module path
    cut to ``depth`` components (``Model_0.Block_3``: what ``torch.utils.checkpoint`` would wrap),
    with the module's class (the path's last component without its ``_N`` index) and the
    total of all modules of that class."""
    t = live.at_peak
    cols = ["module", "module_class", "live_bytes", "class_bytes", "class_modules"]
    if not len(t):
        return pd.DataFrame(columns=cols)
    t = t[
        (t["scope"] == "trace")
        & (t["phase"] == "activations")
        & (t["rank"] == rank)
        & (t["device_type"] == device_type)
        & (t["device"] == device)
        & t["src_module"].notna()
    ]
    if not len(t):
        return pd.DataFrame(columns=cols)
    # the at-peak table is already aggregated (one row per line, op, module and phase): a few rows
    paths = t["src_module"].astype(str).str.split(".")
    module = paths.map(lambda p: ".".join(p[:depth]))
    g = pd.DataFrame({"module": module.to_numpy(), "live_bytes": t["live_bytes"].to_numpy()}).groupby("module").sum()
    g = g.reset_index()
    g["module_class"] = g["module"].str.split(".").str[-1].str.replace(r"_\d+$", "", regex=True)
    cls = g.groupby("module_class")["live_bytes"].agg(["sum", "size"])
    g["class_bytes"] = g["module_class"].map(cls["sum"]).astype(np.int64)
    g["class_modules"] = g["module_class"].map(cls["size"]).astype(np.int64)
    return g.sort_values("live_bytes", ascending=False).reset_index(drop=True)[cols]


def retained_by_line(live: LiveMemory, steps: pd.DataFrame) -> pd.DataFrame:
    """Blocks allocated in the given (rank, step) pairs and never freed in the trace, summed per
    device, step and allocating line (with the op and module): the evidence of a leak."""
    b = live.blocks
    cols = ["rank", "device_type", "device", "step", "src_file", "src_line", "src_func", "src_module", "op",
            "retained_bytes", "blocks"]  # fmt: skip
    if not len(b) or not len(steps):
        return pd.DataFrame(columns=cols)
    keep = (b["free_row"].to_numpy() < 0) & (b["alloc_row"].to_numpy() >= 0)
    key = pd.MultiIndex.from_arrays([b["rank"], b["step"]])
    keep &= key.isin(pd.MultiIndex.from_frame(steps[["rank", "step"]]))
    r = b[keep]
    if not len(r):
        return pd.DataFrame(columns=cols)
    g = (
        r.groupby(
            ["rank", "device_type", "device", "step", "src_file", "src_line", "src_func", "src_module", "op"],
            observed=True,
            dropna=False,
            sort=False,
        )
        .agg(retained_bytes=("size_bytes", "sum"), blocks=("size_bytes", "size"))
        .reset_index()
    )
    g = g[g["blocks"] > 0]
    g["retained_bytes"] = g["retained_bytes"].astype(np.int64)
    return g[cols].reset_index(drop=True)
