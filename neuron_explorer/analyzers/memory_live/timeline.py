"""Live bytes by phase over time: after every memory event of a device, how much of what is
allocated is activations, gradients, optimizer state, temporaries, ... (for the report's
stacked memory timeline). Each block adds its size to its phase at its allocation and takes it
away at its free; one cumulative sum per device and phase. What no block in the trace explains
(allocated before the trace began) is ``before_trace``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.memory_live.phases import PHASES


def phase_timeline(events: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    """One row per memory event: rank, device_type, device, start_ns, allocated_bytes and one
    ``<phase>_bytes`` column per phase (they sum to allocated_bytes)."""
    cols = ["rank", "device_type", "device", "start_ns", "allocated_bytes", *(f"{p}_bytes" for p in PHASES)]
    n = len(events)
    if not n or not len(blocks):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    delta = np.zeros((n, len(PHASES)), np.int64)
    phase = blocks["phase"].to_numpy(np.int64)
    size = blocks["size_bytes"].to_numpy(np.int64)
    a, f = blocks["alloc_row"].to_numpy(), blocks["free_row"].to_numpy()
    made = a >= 0  # blocks from before the trace are in the remainder
    np.add.at(delta, (a[made], phase[made]), size[made])
    freed = made & (f >= 0)
    np.add.at(delta, (f[freed], phase[freed]), -size[freed])
    live = pd.DataFrame(delta).groupby(events["dev_key"].to_numpy()).cumsum().to_numpy().copy()
    alloc = events["allocated_bytes"].to_numpy(np.int64)
    before = PHASES.index("before_trace")
    live[:, before] = alloc - (live.sum(axis=1) - live[:, before])
    out = pd.DataFrame(
        {
            "rank": events["rank"].to_numpy(),
            "device_type": events["device_type"].astype(str).to_numpy(),
            "device": events["device"].to_numpy(),
            "start_ns": events["start_ns"].to_numpy(),
            "allocated_bytes": alloc,
        }
    )
    for i, p in enumerate(PHASES):
        out[f"{p}_bytes"] = live[:, i]
    return out
