"""Communication / computation overlap per rank and device.

``overlap_pct`` is the share of communication time during which compute kernels also ran
(HTA's comm-comp overlap); the rest, ``exposed_comm_ns``, is what the step pays for.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.intervals import union_length


def comm_overlap(frames: TraceFrames) -> pd.DataFrame:
    """rank, device, comm_ns, compute_ns, overlapped_ns, exposed_comm_ns, overlap_pct."""
    dev = frames.device
    cols = ["rank", "device", "comm_ns", "compute_ns", "overlapped_ns", "exposed_comm_ns", "overlap_pct"]
    cat = frames.device_category.to_numpy()
    comm = cat == "communication"
    if not comm.any():
        return pd.DataFrame({c: pd.Series(dtype="float64") for c in cols})
    compute = ~np.isin(cat, ["communication", "memory"])
    keys = pd.MultiIndex.from_arrays([dev["rank"].to_numpy(), dev["device"].to_numpy()])
    codes, uniques = pd.factorize(keys)
    n = len(uniques)
    start = dev["start_ns"].to_numpy()
    end = start + dev["dur_ns"].to_numpy()
    u_comm = union_length(codes[comm], start[comm], end[comm], n)
    u_comp = union_length(codes[compute], start[compute], end[compute], n)
    both = comm | compute
    u_both = union_length(codes[both], start[both], end[both], n)
    overlapped = u_comm + u_comp - u_both
    out = pd.DataFrame(
        {
            "rank": uniques.get_level_values(0),
            "device": uniques.get_level_values(1),
            "comm_ns": u_comm,
            "compute_ns": u_comp,
            "overlapped_ns": overlapped,
            "exposed_comm_ns": u_comm - overlapped,
        }
    )
    out["overlap_pct"] = (100.0 * out["overlapped_ns"] / out["comm_ns"].replace(0, np.nan)).fillna(0.0)
    return out[out["comm_ns"] > 0].reset_index(drop=True)[cols]
