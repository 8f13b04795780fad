"""Allocator events -> blocks: each allocation paired with its free, and the replay check.

A block is one allocation (a ``[memory]`` event with ``bytes > 0``) and its free: the next
event at the same address on the same device (rank, device type, index) when that event is a
free. Pairing is one sort by (device, address, event order) and a look at each row's
neighbour; nothing loops per event.

A free with no allocation before it at its address frees a block allocated before the trace
began (``alloc_row == -1``). An allocation followed by another allocation at the same address
lost its free (the trace dropped it): the block is kept alive and counted in the replay check.

The replay check adds up ``bytes`` per device in event order and holds the running sum
against the trace's own ``Total Allocated`` after every event. The difference is constant
(the bytes allocated before the trace began: an offset) when every allocation and free of the
device is in the trace; where it is not, the check says from which event, by how much, and why.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames

#: free_row of a block never freed in the trace
NEVER = -1
#: alloc_row of a block allocated before the trace began
BEFORE_TRACE = -1


def memory_events(frames: TraceFrames) -> pd.DataFrame:
    """``frames.memory`` in event order (rank, time, file order) with ``dev_key`` (one integer per
    rank, device type and index), ``allocated_bytes`` (the trace's Total Allocated, else the
    replay plus the offset) and ``replayed_bytes`` (running sum of ``bytes`` per device)."""
    mem = frames.memory
    if not len(mem):
        return mem.assign(dev_key=pd.Series(dtype="int64"))
    mem = mem.copy()
    if "mem_addr" not in mem:
        mem["mem_addr"] = -1
    mem["dev_key"] = mem.groupby(["rank", "device_type", "device"], observed=True, sort=True).ngroup().to_numpy()
    b = mem["bytes"].to_numpy(np.int64)
    replay = pd.Series(b).groupby(mem["dev_key"].to_numpy()).cumsum().to_numpy(np.int64)
    mem["replayed_bytes"] = replay
    total = mem["mem_total_allocated_bytes"].to_numpy(np.int64)
    have = total >= 0
    off = pd.Series(np.where(have, total - replay, np.nan)).groupby(mem["dev_key"].to_numpy()).transform("first")
    offset = np.nan_to_num(off.to_numpy(), nan=0.0).astype(np.int64)
    mem["offset_bytes"] = offset
    mem["allocated_bytes"] = np.where(have, total, replay + offset)
    return mem


def pair_blocks(mem: pd.DataFrame) -> pd.DataFrame:
    """One row per block: the allocations of ``mem`` (rows of ``memory_events``) and the frees of
    blocks allocated before the trace.

    Columns: ``dev_key``, ``rank``, ``device_type``, ``device``, ``addr``, ``size_bytes``,
    ``alloc_row`` / ``free_row`` (row positions in ``mem``; -1: before the trace / never freed),
    ``alloc_ns`` / ``free_ns`` (free_ns is int64 max when never freed), ``alloc_event_id``,
    ``free_event_id``, ``step`` (of the allocation), ``op_id``, the ``src_*`` columns and
    ``lost_free`` (another allocation reused the address with no free between).
    """
    n = len(mem)
    cols = ["dev_key", "rank", "device_type", "device", "addr", "size_bytes", "alloc_row", "free_row", "alloc_ns",
            "free_ns", "alloc_event_id", "free_event_id", "step", "op_id", "src_file", "src_line", "src_func",
            "src_module", "src_precision", "lost_free", "size_mismatch"]  # fmt: skip
    if not n:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    dev = mem["dev_key"].to_numpy(np.int64)
    addr = mem["mem_addr"].to_numpy(np.int64)
    b = mem["bytes"].to_numpy(np.int64)
    rows = np.arange(n, dtype=np.int64)
    # an event without an address pairs with nothing: give each its own address
    addr = np.where(addr < 0, -1 - rows, addr)
    idx = np.lexsort((rows, addr, dev))
    sd, sa, sb = dev[idx], addr[idx], b[idx]
    same_next = np.zeros(n, bool)
    same_next[:-1] = (sd[1:] == sd[:-1]) & (sa[1:] == sa[:-1])
    is_alloc, is_free = sb > 0, sb < 0
    next_free = np.r_[is_free[1:], False]
    next_alloc = np.r_[is_alloc[1:], False]
    paired = is_alloc & same_next & next_free
    free_of = np.full(n, NEVER, np.int64)
    free_of[paired] = idx[np.flatnonzero(paired) + 1]
    prev_paired = np.r_[False, paired[:-1]]
    orphan = is_free & ~prev_paired
    lost = is_alloc & same_next & next_alloc
    mismatch = np.zeros(n, bool)
    pi = np.flatnonzero(paired)
    mismatch[pi] = sb[pi] != -sb[pi + 1]

    alloc_rows = idx[is_alloc]
    free_rows = free_of[is_alloc]
    orphan_rows = idx[orphan]
    start = mem["start_ns"].to_numpy(np.int64)
    eid = mem["event_id"].to_numpy(np.int64)
    never = np.iinfo(np.int64).max
    a_alloc = alloc_rows
    block_alloc_row = np.r_[a_alloc, np.full(len(orphan_rows), BEFORE_TRACE)]
    block_free_row = np.r_[free_rows, orphan_rows]
    src_row = np.r_[a_alloc, orphan_rows]  # where device, rank (and, for allocations, the line) come from
    out = pd.DataFrame(
        {
            "dev_key": dev[src_row],
            "rank": mem["rank"].to_numpy()[src_row],
            "device_type": mem["device_type"].to_numpy()[src_row],
            "device": mem["device"].to_numpy()[src_row],
            "addr": mem["mem_addr"].to_numpy(np.int64)[src_row],
            "size_bytes": np.abs(b[src_row]),
            "alloc_row": block_alloc_row,
            "free_row": block_free_row,
            "alloc_ns": np.r_[start[a_alloc], np.full(len(orphan_rows), np.iinfo(np.int64).min)],
            "free_ns": np.where(block_free_row >= 0, start[np.maximum(block_free_row, 0)], never),
            "alloc_event_id": np.r_[eid[a_alloc], np.full(len(orphan_rows), -1)],
            "free_event_id": np.where(block_free_row >= 0, eid[np.maximum(block_free_row, 0)], -1),
            "lost_free": np.r_[lost[is_alloc], np.zeros(len(orphan_rows), bool)],
            "size_mismatch": np.r_[mismatch[is_alloc], np.zeros(len(orphan_rows), bool)],
        }
    )
    na = len(a_alloc)
    for col, fill in (("step", -1), ("op_id", -1), ("src_line", -1)):
        v = mem[col].to_numpy(np.int64) if col in mem else np.full(n, fill, np.int64)
        out[col] = np.r_[v[a_alloc], np.full(len(orphan_rows), fill, np.int64)]
    # a block from before the trace: the line that made it is not in the trace (its free's is)
    for col in ("src_file", "src_func", "src_module", "src_precision"):
        v = mem[col] if col in mem else pd.Series(pd.Categorical([None] * n))
        cat = v.astype("category")
        codes = np.r_[cat.cat.codes.to_numpy()[a_alloc], np.full(len(orphan_rows), -1)]
        out[col] = pd.Categorical.from_codes(codes, categories=cat.cat.categories)
    if len(orphan_rows):
        out.loc[na:, "step"] = mem["step"].to_numpy(np.int64)[orphan_rows]  # the step it was freed in
    return out.sort_values(["alloc_row", "free_row"], kind="stable").reset_index(drop=True)


def replay_check(mem: pd.DataFrame, blocks: pd.DataFrame) -> pd.DataFrame:
    """Per device: does the replay of allocations and frees agree with the trace's ``Total
    Allocated`` at every event? Columns: rank, device_type, device, events, events_with_total,
    agreeing_events, offset_bytes (allocated before the trace began), first_mismatch_event_id,
    first_mismatch_ns, mismatched_events, max_diff_bytes, lost_frees, size_mismatches,
    agrees (bool), reason (why not, or what the offset is)."""
    cols = ["rank", "device_type", "device", "events", "events_with_total", "agreeing_events", "offset_bytes",
            "first_mismatch_event_id", "first_mismatch_ns", "mismatched_events", "max_diff_bytes", "lost_frees",
            "size_mismatches", "agrees", "reason"]  # fmt: skip
    if not len(mem):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    total = mem["mem_total_allocated_bytes"].to_numpy(np.int64)
    have = total >= 0
    diff = np.where(have, total - mem["replayed_bytes"].to_numpy(np.int64) - mem["offset_bytes"].to_numpy(), 0)
    bad = have & (diff != 0)
    dev = mem["dev_key"].to_numpy()
    # a mismatch the very next event of the device repairs is an ordering artefact, not a loss
    nxt_same = np.r_[dev[1:] == dev[:-1], False]
    nxt_ok = np.r_[~bad[1:], True] & nxt_same
    prev_same = np.r_[False, dev[1:] == dev[:-1]]
    transient = bad & nxt_ok & prev_same
    frame = pd.DataFrame(
        {
            "dev_key": dev,
            "have": have,
            "bad": bad,
            "transient": transient,
            "absdiff": np.abs(diff),
            "first_bad_row": np.where(bad, np.arange(len(mem)), len(mem)),
        }
    )
    g = frame.groupby("dev_key").agg(
        events=("have", "size"),
        events_with_total=("have", "sum"),
        mismatched_events=("bad", "sum"),
        transient=("transient", "sum"),
        max_diff_bytes=("absdiff", "max"),
        first_bad_row=("first_bad_row", "min"),
    )
    first = mem.groupby("dev_key").head(1).set_index("dev_key")
    bl = blocks.groupby("dev_key").agg(lost=("lost_free", "sum"), mism=("size_mismatch", "sum"))
    g = g.join(first[["rank", "device_type", "device", "offset_bytes"]]).join(bl).fillna({"lost": 0, "mism": 0})
    rows: list[dict[str, Any]] = []
    eid = mem["event_id"].to_numpy()
    start = mem["start_ns"].to_numpy()
    for _key, r in g.iterrows():  # one row per device: a handful
        fb = int(r["first_bad_row"])
        has_bad = fb < len(mem)
        row = {
            "rank": int(r["rank"]),
            "device_type": str(r["device_type"]),
            "device": int(r["device"]),
            "events": int(r["events"]),
            "events_with_total": int(r["events_with_total"]),
            "agreeing_events": int(r["events_with_total"] - r["mismatched_events"]),
            "offset_bytes": int(r["offset_bytes"]),
            "first_mismatch_event_id": int(eid[fb]) if has_bad else -1,
            "first_mismatch_ns": int(start[fb]) if has_bad else -1,
            "mismatched_events": int(r["mismatched_events"]),
            "max_diff_bytes": int(r["max_diff_bytes"]),
            "lost_frees": int(r["lost"]),
            "size_mismatches": int(r["mism"]),
        }
        row["agrees"] = row["events_with_total"] > 0 and row["mismatched_events"] == 0
        row["reason"] = _reason(row, int(r["transient"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def _reason(row: dict[str, Any], transient: int) -> str:
    off = row["offset_bytes"]
    before = (
        f"{off:,} bytes were allocated before the trace began (a constant offset)"
        if off > 0
        else "nothing allocated before the trace began is still counted"
        if off == 0
        else f"the trace's totals start {-off:,} bytes below the replay"
    )
    if row["events_with_total"] == 0:
        return "the trace's memory events carry no Total Allocated: the replay cannot be checked"
    if row["agrees"]:
        return f"agrees at every event; {before}"
    why = []
    if transient:
        why.append(
            f"{transient} events are recorded out of order (several at the same time or on several threads): "
            "the next event agrees again"
        )
    persistent = row["mismatched_events"] - transient
    if persistent:
        why.append(
            f"from event {row['first_mismatch_event_id']} on, the totals move by up to {row['max_diff_bytes']:,} bytes "
            "that no allocation or free in the trace explains (events dropped by the profiler, or another allocator "
            "or process using the device)"
        )
    if row["lost_frees"]:
        why.append(f"{row['lost_frees']} addresses were allocated again with no free between (a free is missing)")
    if row["size_mismatches"]:
        why.append(f"{row['size_mismatches']} blocks were freed with another size than they were allocated with")
    return (
        f"{row['mismatched_events']} of {row['events_with_total']} events disagree: " + "; ".join(why) + f"; {before}"
    )
