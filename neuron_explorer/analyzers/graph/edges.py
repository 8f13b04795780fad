"""The cross edges of the dependency graph of one trace (``build`` owns the nodes and chains).

``EDGE_KINDS``:
- ``launch``: the host segment that ends where a launch call begins -> the device work it
  launched, modelled delay = the launch latency (device start - launch start, 0 to
  ``LAUNCH_LATENCY_MAX_NS``); a source edge that ends at the call's start, not the call itself,
  so a blocking copy call can wait for the copy it launched without a cycle.
- ``sync``: device work -> the last segment of a call that blocks on it (synchronize calls,
  blocking copies, see ``attribution.BLOCKING_RUNTIME``): the copy the call launched itself;
  else, per stream of the rank, the last work launched before the call (every stream for a
  device/context synchronize; the latest-finishing one that ends before the call returns for a
  stream/event synchronize, whose stream the trace does not name).
- ``stream_wait``: Kineto's ``Stream Wait Event`` records: the last work launched on the
  waited stream before the ``cudaEventRecord`` -> the first work launched on the waiting
  stream after the ``cudaStreamWaitEvent``.
- ``thread_handoff``: a long host segment of one thread waits for work it handed to another
  thread of its rank (``loss.backward()`` and the autograd engine's thread).
- ``collective``: across ranks, a matched collective instance (``analyzers/ranks/__init__.py``) cannot
  transfer before its last rank arrives (``graph/collectives.py`` adds these).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import blocking_calls
from neuron_explorer.analyzers.core.columns import lookup, name_mask, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.metrics.launches import grace_of
from neuron_explorer.trace.schema import Kind

#: A device event starting up to this long after its launch call began is launch latency
#: (modelled); a longer wait that no stream predecessor explains is unexplained.
LAUNCH_LATENCY_MAX_NS = 20_000
EDGE_KINDS = ("launch", "sync", "stream_wait", "thread_handoff", "collective")
LAUNCH, SYNC, STREAM_WAIT, HANDOFF, COLLECTIVE = 0, 1, 2, 3, 4
#: a host segment at least this long, ending at most ``HANDOFF_LAG_NS`` after another thread of
#: its rank finished its work and went idle, waited for that thread (``loss.backward()`` on the
#: main thread while the autograd engine's thread runs the backward ops)
HANDOFF_MIN_NS = 100_000
HANDOFF_LAG_NS = 500_000
#: synchronize calls that wait for every stream of the device
DEVICE_WIDE_SYNC = re.compile(r"(?:Device|Ctx|Thread|Context)Synchroni[sz]e", re.I)
_NEG = np.iinfo(np.int64).min // 4
Part = tuple[np.ndarray, np.ndarray, int, np.ndarray]


def edge_table(parts: list[Part], n: int) -> pd.DataFrame:
    """The edges of ``parts`` (src, dst, kind, delay), sorted by ``dst``, without self loops
    or duplicates."""
    if not parts:
        parts = [(np.zeros(0, np.int64), np.zeros(0, np.int64), LAUNCH, np.zeros(0, np.int64))]
    src = np.concatenate([p[0] for p in parts]).astype(np.int64)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int64)
    kind = np.concatenate([np.full(len(p[0]), p[2], np.int8) for p in parts])
    delay = np.concatenate([p[3] for p in parts]).astype(np.int64)
    keep = (src >= 0) & (dst >= 0) & (src != dst) & (src < n) & (dst < n)
    src, dst, kind, delay = src[keep], dst[keep], kind[keep], delay[keep]
    order = np.lexsort((src, dst))
    src, dst, kind, delay = src[order], dst[order], kind[order], delay[order]
    first = np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])] if len(src) else np.zeros(0, bool)
    return pd.DataFrame(
        {
            "src": src[first],
            "dst": dst[first],
            "kind": kind[first],
            "delay_ns": delay[first],
            "unexplained_ns": np.zeros(int(first.sum()), np.int64),
        }
    )


def cross_edges(
    frames: TraceFrames, nodes: pd.DataFrame, host: pd.DataFrame, device: pd.DataFrame, t0: int
) -> pd.DataFrame:
    """Launch, sync, stream-wait and hand-off edges of ``nodes`` (sorted by chain, start)."""
    n = len(nodes)
    host_row = nodes["host_row"].to_numpy()
    dev_row = nodes["device_row"].to_numpy()
    dev_node = np.full(len(device), -1, np.int64)
    dev_node[dev_row[dev_row >= 0]] = np.flatnonzero(dev_row >= 0)
    start = nodes["start_ns"].to_numpy()
    end = start + nodes["dur_ns"].to_numpy()
    chain = nodes["chain"].to_numpy()
    head = nodes["head"].to_numpy()
    parts: list[Part] = []

    # the first segment of each host event: the node whose start is the event's start on its thread
    hkey = ukey(host["rank"].to_numpy(), host["event_id"].to_numpy())
    seg_nodes = np.flatnonzero(host_row >= 0)
    seg_key = chain[seg_nodes] * (1 << 42) + start[seg_nodes]  # nodes are sorted by (chain, start)
    thread_chain = np.full(len(host), -1, np.int64)
    thread_chain[host_row[seg_nodes]] = chain[seg_nodes]

    def first_segment(rows: np.ndarray) -> np.ndarray:
        """Node of the segment where host event ``rows`` begins (-1 when none)."""
        if not len(seg_nodes) or not len(rows):
            return np.full(len(rows), -1, np.int64)
        key = thread_chain[rows] * (1 << 42) + (host["start_ns"].to_numpy()[rows] - t0)
        pos = np.searchsorted(seg_key, key)
        ok = (thread_chain[rows] >= 0) & (pos < len(seg_key))
        found = seg_nodes[np.minimum(pos, len(seg_key) - 1)]
        return np.where(ok & (seg_key[np.minimum(pos, len(seg_key) - 1)] == key), found, -1)

    # launch edges
    launch_row = lookup(hkey, ukey(device["rank"].to_numpy(), device["launch_id"].to_numpy()))
    # work after the first of one launch on a stream (a CUDA/HIP graph replay) waits on the
    # graph's internal order, not on the launch: only the first one gets the launch edge
    node_launch = np.full(n, -2, np.int64)
    node_launch[dev_node] = launch_row
    repeat = np.zeros(n, bool)
    repeat[1:] = ~head[1:] & (node_launch[1:] >= 0) & (node_launch[1:] == node_launch[:-1])
    has = np.flatnonzero((launch_row >= 0) & ~repeat[dev_node])
    launch_seg = first_segment(launch_row[has])
    ok = launch_seg >= 0
    ok[ok] &= ~head[launch_seg[ok]]
    src = launch_seg[ok] - 1  # the segment ending where the launch call starts
    dst = dev_node[has[ok]]
    # (at most the rank's measured idle-device launch latency where it is longer: HIP on MI300X)
    cap = np.maximum(LAUNCH_LATENCY_MAX_NS, grace_of(frames, nodes["rank"].to_numpy()[dst]))
    latency = np.clip(start[dst] - end[src], 0, cap)
    parts.append((src, dst, LAUNCH, latency))
    # launch start of every device node (its own start when the launch is not in the trace)
    launched_at = start.copy()
    all_launched = np.flatnonzero(launch_row >= 0)
    seg_all = first_segment(launch_row[all_launched])
    found = seg_all >= 0
    launched_at[dev_node[all_launched[found]]] = start[seg_all[found]]

    # sync edges: device work -> the last segment of a blocking call
    calls = blocking_calls(frames)
    call_rows = lookup(hkey, ukey(calls["rank"].to_numpy(), calls["event_id"].to_numpy()))
    call_rows = call_rows[call_rows >= 0]
    blocking = np.zeros(len(host), bool)
    blocking[call_rows] = True
    wait_nodes = np.flatnonzero((host_row >= 0) & nodes["blocking_end"].to_numpy())
    wait_nodes = wait_nodes[blocking[host_row[wait_nodes]]]
    if len(wait_nodes) and len(device):
        parts.extend(
            _sync_edges(nodes, host, device, wait_nodes, first_segment, launched_at, launch_row, dev_node, end)
        )
    parts.extend(_stream_wait_edges(frames, nodes, host, launched_at, first_segment))
    parts.extend(_handoff_edges(nodes, end))
    return edge_table(parts, n)


def _sync_edges(nodes, host, device, wait_nodes, first_segment, launched_at, launch_row, dev_node, end):  # type: ignore[no-untyped-def]
    """Edges into the last segment of each blocking call (see the module docstring)."""
    host_row = nodes["host_row"].to_numpy()
    call = host_row[wait_nodes]
    call_start = nodes["start_ns"].to_numpy()[first_segment(call)]
    call_end = end[wait_nodes]
    rank = nodes["rank"].to_numpy()[wait_nodes]
    names = host["name"].iloc[call].reset_index(drop=True)
    device_wide = name_mask(names, DEVICE_WIDE_SYNC)
    out = []
    # a call that launched device work itself (a blocking copy) waits for the last of it
    own = np.full(len(host), -1, np.int64)
    has = np.flatnonzero(launch_row >= 0)
    if len(has):
        own[launch_row[has]] = dev_node[has]  # (several: the last row wins, device rows are in time order)
    mine = own[call]
    out.append((mine[mine >= 0], wait_nodes[mine >= 0], SYNC, np.zeros(int((mine >= 0).sum()), np.int64)))
    rest = mine < 0
    best = np.full(len(wait_nodes), -1, np.int64)
    best_end = np.full(len(wait_nodes), _NEG, np.int64)
    is_dev = nodes["is_device"].to_numpy()
    chain = nodes["chain"].to_numpy()
    node_rank = nodes["rank"].to_numpy()
    for c in np.unique(chain[is_dev]):  # one pass per stream: a handful
        members = np.flatnonzero(chain == c)
        r = node_rank[members[0]]
        lt = np.maximum.accumulate(launched_at[members])
        pos = np.searchsorted(lt, call_start, side="left") - 1
        cand = np.where((pos >= 0) & (rank == r) & rest, members[np.maximum(pos, 0)], -1)
        ok = cand >= 0
        wide = ok & device_wide
        out.append((cand[wide], wait_nodes[wide], SYNC, np.zeros(int(wide.sum()), np.int64)))
        # a stream/event sync: the stream whose work ends last before the call returns
        ce = np.where(ok, end[np.maximum(cand, 0)], _NEG)
        better = ok & ~device_wide & (ce <= call_end) & (ce > best_end)
        best[better], best_end[better] = cand[better], ce[better]
    chosen = best >= 0
    out.append((best[chosen], wait_nodes[chosen], SYNC, np.zeros(int(chosen.sum()), np.int64)))
    return out


def _stream_wait_edges(frames: TraceFrames, nodes, host, launched_at, first_segment):  # type: ignore[no-untyped-def]
    """``Stream Wait Event`` records: last work on the waited stream before the event record ->
    first work on the waiting stream after the wait call."""
    events = frames.trace.events
    if not {"correlation_id", "args"} <= set(events.column_names):  # (analyze reads without args)
        return []
    sync = frames.trace.select([Kind.SYNC], ["rank", "name", "correlation_id", "args"]).to_pandas()
    waits = sync[sync["name"].astype(str) == "Stream Wait Event"]
    if not len(waits):
        return []
    parsed = []
    for args in waits["args"]:  # one per recorded wait: few, and only their own args are read
        try:
            a = json.loads(args) if isinstance(args, str) else {}
        except ValueError:
            a = {}
        a = a if isinstance(a, dict) else {}
        parsed.append([_int(a.get(k)) for k in ("wait_on_cuda_event_record_corr_id", "wait_on_stream", "stream")])
    info = np.array(parsed, np.int64).reshape(-1, 3)
    wrank = waits["rank"].to_numpy().astype(np.int64)
    rt = frames.trace.select([Kind.RUNTIME], ["rank", "event_id", "correlation_id"]).to_pandas()
    rt = rt[rt["correlation_id"].notna()].drop_duplicates(["rank", "correlation_id"])  # (one call per id)
    rt_rank = rt["rank"].to_numpy().astype(np.int64)
    rt_key = ukey(rt_rank, rt["correlation_id"].fillna(-1).to_numpy().astype(np.int64))
    rt_event = rt["event_id"].to_numpy().astype(np.int64)
    hkey = ukey(host["rank"].to_numpy(), host["event_id"].to_numpy())

    def host_row_of_corr(corr: np.ndarray) -> np.ndarray:
        pos = lookup(rt_key, ukey(wrank, corr))
        ev = np.where(pos >= 0, rt_event[np.maximum(pos, 0)], -1)
        return lookup(hkey, ukey(wrank, ev))

    rec_seg = first_segment(host_row_of_corr(info[:, 0]))
    call_seg = first_segment(host_row_of_corr(waits["correlation_id"].fillna(-1).to_numpy().astype(np.int64)))
    is_dev = nodes["is_device"].to_numpy()
    src, dst = [], []
    streams = {}
    dev_nodes = np.flatnonzero(is_dev)
    for c in np.unique(nodes["chain"].to_numpy()[dev_nodes]):
        members = np.flatnonzero(nodes["chain"].to_numpy() == c)
        streams[c] = (members, np.maximum.accumulate(launched_at[members]))
    device = frames.device
    dn = nodes[is_dev]
    rows = dn["device_row"].to_numpy()
    pairs = pd.DataFrame(
        {"rank": device["rank"].to_numpy()[rows], "stream": device["stream"].to_numpy()[rows], "chain": dn["chain"]}
    ).drop_duplicates(["rank", "stream"])
    chain_of_stream = {(int(r), int(s)): int(c) for r, s, c in zip(pairs["rank"], pairs["stream"], pairs["chain"])}
    start = nodes["start_ns"].to_numpy()
    for k in range(len(waits)):  # one per recorded wait: few
        waited = chain_of_stream.get((int(wrank[k]), int(info[k, 1])))
        waiting = chain_of_stream.get((int(wrank[k]), int(info[k, 2])))
        if waited is None or waiting is None or rec_seg[k] < 0 or call_seg[k] < 0:
            continue
        m, lt = streams[waited]
        i = np.searchsorted(lt, start[rec_seg[k]], side="left") - 1
        m2, lt2 = streams[waiting]
        j = np.searchsorted(lt2, start[call_seg[k]], side="left")
        if i >= 0 and j < len(m2):
            src.append(m[i])
            dst.append(m2[j])
    if not src:
        return []
    return [(np.array(src), np.array(dst), STREAM_WAIT, np.zeros(len(src), np.int64))]


def _handoff_edges(nodes: pd.DataFrame, end: np.ndarray) -> list[Part]:
    """Another thread's last work before it goes idle -> a long segment of this thread that
    ends just after it (see ``HANDOFF_MIN_NS``): the one thread handed work to the other and
    waited for it. The segment's time before that end becomes the wait, carried by the edge."""
    hr = nodes["host_row"].to_numpy()
    host_nodes = np.flatnonzero(~nodes["is_device"].to_numpy().astype(bool))
    if not len(host_nodes):
        return []
    chain = nodes["chain"].to_numpy()
    rank = nodes["rank"].to_numpy()
    dur = nodes["dur_ns"].to_numpy()
    start = nodes["start_ns"].to_numpy()
    # a thread's work that is followed by idleness: the next segment is untraced (a gap) or none
    nxt_gap = np.ones(len(nodes), bool)
    nxt_gap[:-1] = (chain[1:] != chain[:-1]) | (hr[1:] < 0)
    finishing = host_nodes[(hr[host_nodes] >= 0) & nxt_gap[host_nodes] & (dur[host_nodes] > 0)]
    waiting = host_nodes[(hr[host_nodes] >= 0) & (dur[host_nodes] >= HANDOFF_MIN_NS)]
    if not len(finishing) or not len(waiting):
        return []
    # the hand-off's start: the other thread's first work after idleness begins at most
    # HANDOFF_LAG_NS after the waiting segment began; its idle gap stretches (length 0 in the
    # model: the wait is the edge's), so the work moves when the thread that hands it over does
    src, dst = [], []
    gap_before = np.zeros(len(nodes), bool)
    gap_before[1:] = (chain[1:] == chain[:-1]) & (hr[:-1] < 0) & (dur[:-1] > 0)
    resuming = host_nodes[(hr[host_nodes] >= 0) & gap_before[host_nodes]]
    idle = np.zeros(len(nodes), bool)
    helper = np.full(len(nodes), -1, np.int64)  # per waiting segment: the thread it handed work to
    head = nodes["head"].to_numpy()
    for c in np.unique(chain[waiting]):  # one pass per thread: a handful
        w = waiting[(chain[waiting] == c) & ~head[waiting]]
        r = resuming[(chain[resuming] != c) & (rank[resuming] == rank[w[0]])] if len(w) else resuming[:0]
        if not len(r):
            continue
        w = w[np.argsort(start[w], kind="stable")]
        pos = np.searchsorted(start[w], start[r], side="right") - 1
        cand = w[np.maximum(pos, 0)]
        ok = (pos >= 0) & (start[r] - start[cand] <= HANDOFF_LAG_NS) & (start[r] < end[cand])
        src.append(cand[ok] - 1)  # the segment that ends where the waiting one begins
        dst.append(r[ok])
        idle[r[ok] - 1] = True
        helper[cand[ok]] = chain[r[ok]]
    # the hand-off's end: the waiting segment ends at most HANDOFF_LAG_NS after that thread's
    # last work before it goes idle again
    for c in np.unique(helper[helper >= 0]):
        w = np.flatnonzero(helper == c)
        f = finishing[chain[finishing] == c]
        if not len(f):
            continue
        pos = np.searchsorted(end[f], end[w], side="right") - 1  # (f: one chain, ends ascend)
        cand = f[np.maximum(pos, 0)]
        ok = (pos >= 0) & (end[cand] > start[w]) & (end[w] - end[cand] <= HANDOFF_LAG_NS)
        src.append(cand[ok])
        dst.append(w[ok])
    if not src:
        return []
    nodes.loc[idle, "dur_ns"] = 0  # (the idle gaps before handed-over work)
    s_, d_ = np.concatenate(src), np.concatenate(dst)
    return [(s_, d_, HANDOFF, np.zeros(len(s_), np.int64))]


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and -(1 << 62) < value < 1 << 62 else -1
