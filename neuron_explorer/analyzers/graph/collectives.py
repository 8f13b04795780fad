"""Collectives across ranks: a matched instance cannot transfer before its last rank arrives.

An NCCL-style kernel starts when its rank reaches the collective (its *arrival*) and spins
until every peer has arrived; then the transfer runs. In a trace holding several ranks (a run
directory), each collective kernel that ``analyzers/ranks/__init__.py`` matches to an instance held by
two or more ranks (same process group, step and order in the step) becomes, on its stream:

- an **arrival** node (zero length) where the kernel starts: it takes the kernel's incoming
  edges (its launch, a cross-stream wait, the stream before it);
- the kernel itself, whose modelled start is the instance's last arrival (the time before is
  the wait, carried by the edges below), so its measured duration less the wait is the
  transfer;

and the instance gets a **join** node (zero length, its own chain, shown under the rank that
arrived last): every arrival -> join -> every kernel of the instance (edge kind
``collective``, no modelled delay). So the graph spans ranks: a late rank's work delays every
other rank's transfer and what follows it, an edit of that work moves them, and a critical
path walking back from one rank's step end crosses to the late rank at the join.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph.edges import COLLECTIVE, LAUNCH, STREAM_WAIT, edge_table
from neuron_explorer.analyzers.graph.nodes import ARRIVAL, JOIN


def instances(frames: TraceFrames) -> pd.DataFrame:
    """Collective kernels matched across at least two ranks: ``rank``, ``event_id``,
    ``instance`` (a dense code), ``arrival_ns``."""
    from neuron_explorer.analyzers.ranks import collective_ranks

    if len(frames.ranks) < 2:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in ("rank", "event_id", "instance", "arrival_ns")})
    arr = frames.memo("collective_ranks", lambda: collective_ranks(frames))
    key = pd.MultiIndex.from_arrays([arr["pg"].astype(str).to_numpy(), arr["step"].to_numpy(), arr["seq"].to_numpy()])
    inst = pd.factorize(key)[0].astype(np.int64)
    ranks_per = pd.Series(arr["rank"].to_numpy()).groupby(inst).nunique()
    keep = ranks_per.reindex(inst).to_numpy() >= 2
    out = pd.DataFrame(
        {
            "rank": arr["rank"].to_numpy()[keep].astype(np.int64),
            "event_id": arr["event_id"].to_numpy()[keep].astype(np.int64),
            "instance": pd.factorize(inst[keep])[0].astype(np.int64),
            "arrival_ns": arr["arrival_ns"].to_numpy()[keep].astype(np.int64),
        }
    )
    return out


def add_collectives(
    frames: TraceFrames, nodes: pd.DataFrame, edges: pd.DataFrame, device: pd.DataFrame, t0: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``nodes`` and ``edges`` with the arrivals, joins and collective edges (module docstring)."""
    inst = instances(frames)
    if not len(inst) or not len(nodes):
        return nodes, edges
    dev_row = lookup(
        ukey(device["rank"].to_numpy(), device["event_id"].to_numpy()),
        ukey(inst["rank"].to_numpy(), inst["event_id"].to_numpy()),
    )
    node_of_row = np.full(len(device), -1, np.int64)
    dr = nodes["device_row"].to_numpy()
    node_of_row[dr[dr >= 0]] = np.flatnonzero(dr >= 0)
    kern = np.where(dev_row >= 0, node_of_row[np.maximum(dev_row, 0)], -1)
    ok = kern >= 0
    inst, kern = inst[ok].reset_index(drop=True), kern[ok]
    if not len(kern):
        return nodes, edges
    order = np.argsort(kern, kind="stable")
    inst, kern = inst.iloc[order].reset_index(drop=True), kern[order]
    n = len(nodes)
    # insert one arrival before each kernel: old node q moves to q + (arrivals inserted at or before q)
    shift = np.searchsorted(kern, np.arange(n), side="right")
    new_of_old = np.arange(n) + shift
    new_kern = new_of_old[kern]
    new_arrival = new_kern - 1
    grown = len(nodes) + len(kern)
    take = np.full(grown, -1, np.int64)
    take[new_of_old] = np.arange(n)
    take[new_arrival] = kern  # an arrival copies its kernel's row, then becomes zero-length
    out = nodes.iloc[take].reset_index(drop=True)
    out.loc[new_arrival, "dur_ns"] = 0
    out.loc[new_arrival, "node_kind"] = np.int8(ARRIVAL)
    # the joins: one zero-length node per instance on its own chain, after every other chain,
    # at the instance's last arrival, shown under the rank that arrived last
    n_inst = int(inst["instance"].max()) + 1
    last = inst.sort_values(["instance", "arrival_ns"], kind="stable").groupby("instance").tail(1)
    last = last.sort_values("instance")
    join = pd.DataFrame(
        {
            "rank": last["rank"].to_numpy(),
            "chain": int(out["chain"].max()) + 1 + np.arange(n_inst),
            "start_ns": last["arrival_ns"].to_numpy() - t0,
            "dur_ns": 0,
            "node_kind": np.int8(JOIN),
            "is_device": True,
            "host_row": -1,
            "device_row": out["device_row"].to_numpy()[new_kern][last.index.to_numpy()],
            "blocking_end": False,
        }
    )
    join_node = grown + np.arange(n_inst)
    out = pd.concat([out, join], ignore_index=True)
    # edges: renumber; what led into a kernel (its launch, a stream wait) leads into its arrival
    src = new_of_old[edges["src"].to_numpy()]
    dst = new_of_old[edges["dst"].to_numpy()]
    is_kern = np.zeros(len(out), bool)
    is_kern[new_kern] = True
    into = is_kern[dst] & np.isin(edges["kind"].to_numpy(), [LAUNCH, STREAM_WAIT])
    dst = np.where(into, dst - 1, dst)
    kinds = edges["kind"].to_numpy()
    delay = edges["delay_ns"].to_numpy()
    parts = [(src[kinds == k], dst[kinds == k], int(k), delay[kinds == k]) for k in set(kinds.tolist())]
    j = join_node[inst["instance"].to_numpy()]
    zeros = np.zeros(len(kern), np.int64)
    parts.append((new_arrival, j, COLLECTIVE, zeros))
    parts.append((j, new_kern, COLLECTIVE, zeros))
    return out, edge_table(parts, len(out))
