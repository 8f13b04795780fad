"""Operator table: per framework op name, host total and self time and the device time it issued.

Host self time is the op's duration minus its direct host children's (ops, runtime calls,
python frames nested in it). Device time is that of the kernels whose issuing op (``op_id``,
the innermost framework op) is an op of that name, so it is the op's *self* device time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.trace.schema import Kind


def op_table(frames: TraceFrames) -> pd.DataFrame:
    """Per op name: count, host_total_ns, host_self_ns, device_ns, kernel_count (most costly first)."""
    host = frames.host
    cols = ["name", "count", "host_total_ns", "host_self_ns", "device_ns", "kernel_count"]
    ops_mask = (host["kind"] == Kind.CPU_OP).to_numpy()
    if not ops_mask.any():
        return pd.DataFrame({c: pd.Series(dtype="object" if c == "name" else "int64") for c in cols})
    ops = pd.DataFrame(
        {
            "rank": host["rank"].to_numpy()[ops_mask],
            "event_id": host["event_id"].to_numpy()[ops_mask],
            "name": host["name"][ops_mask].cat.remove_unused_categories()
            if isinstance(host["name"].dtype, pd.CategoricalDtype)
            else host["name"][ops_mask],
            "dur_ns": host["dur_ns"].to_numpy()[ops_mask],
            "self_ns": frames.host_self_ns.to_numpy()[ops_mask],
        }
    )
    dev = frames.device
    dev = dev[dev["op_id"] >= 0]
    pos = lookup(
        ukey(ops["rank"].to_numpy(), ops["event_id"].to_numpy()), ukey(dev["rank"].to_numpy(), dev["op_id"].to_numpy())
    )
    ok = pos >= 0
    ops["device_ns"] = np.rint(np.bincount(pos[ok], weights=dev["dur_ns"].to_numpy()[ok], minlength=len(ops))).astype(
        np.int64
    )
    ops["kernel_count"] = np.bincount(pos[ok], minlength=len(ops)).astype(np.int64)
    g = ops.groupby("name", sort=False, observed=True).agg(
        count=("dur_ns", "count"),
        host_total_ns=("dur_ns", "sum"),
        host_self_ns=("self_ns", "sum"),
        device_ns=("device_ns", "sum"),
        kernel_count=("kernel_count", "sum"),
    )
    g = g.reset_index()
    g["name"] = g["name"].astype(str)
    g["_key"] = np.maximum(g["device_ns"], g["host_self_ns"])
    return g.sort_values(["_key", "host_total_ns"], ascending=False).drop(columns="_key").reset_index(drop=True)[cols]
