"""Build the dependency graph of a trace: nodes, chains, cross edges, delays calibrated on the run.

Nodes are host *segments* and device events. A host thread's events nest; cutting its timeline
at every start and end gives segments, each owned by the innermost event open in it (or by
none: an untraced gap), so a thread is one chain of back-to-back segments and scaling an op
scales exactly the segments inside it. A device stream is a chain of its work in start order.

Cross edges (``EDGE_KINDS``):
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

Calibration: each node's start in the run is compared with the latest of its predecessors'
ends plus modelled delays. A later start leaves a measured gap no recorded dependency
explains: it is added to the binding edge as ``unexplained_ns``. An earlier start (clock skew,
a dependency the model over-states) clamps the offending edges' delays to the measured slack.
Replaying the calibrated graph therefore reproduces the run; the unexplained share says how
much of that reproduction is carried by gaps rather than by the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import blocking_calls
from neuron_explorer.analyzers.context import TraceFrames, lookup, name_mask, ukey
from neuron_explorer.trace.errors import AnalysisError
from neuron_explorer.trace.schema import Kind

#: A device event starting up to this long after its launch call began is launch latency
#: (modelled); a longer wait that no stream predecessor explains is unexplained.
LAUNCH_LATENCY_MAX_NS = 20_000
EDGE_KINDS = ("launch", "sync", "stream_wait", "thread_handoff")
LAUNCH, SYNC, STREAM_WAIT, HANDOFF = 0, 1, 2, 3
#: a host segment at least this long, ending at most ``HANDOFF_LAG_NS`` after another thread of
#: its rank finished its work and went idle, waited for that thread (``loss.backward()`` on the
#: main thread while the autograd engine's thread runs the backward ops)
HANDOFF_MIN_NS = 100_000
HANDOFF_LAG_NS = 500_000
#: synchronize calls that wait for every stream of the device
DEVICE_WIDE_SYNC = re.compile(r"(?:Device|Ctx|Thread|Context)Synchroni[sz]e", re.I)
_NEG = np.iinfo(np.int64).min // 4

#: node category by kind (host segments take their innermost event's kind)
_DEVICE_CATEGORY = {Kind.KERNEL: "compute", Kind.COLLECTIVE: "communication", Kind.MEMCPY: "copy", Kind.MEMSET: "copy"}
_HOST_CATEGORY = {
    Kind.CPU_OP: "host_launch",
    Kind.RUNTIME: "host_launch",
    Kind.PYTHON: "host_python",
    Kind.ANNOTATION: "host_launch",
    Kind.STEP: "untraced",
}


@dataclass
class Graph:
    """The calibrated graph of one trace (every rank; ranks share no edge yet).

    ``nodes`` (one row per node, sorted by chain then start): ``rank``, ``chain``, ``head``
    (first of its chain), ``start_ns`` / ``dur_ns`` (measured, relative to ``t0_ns``),
    ``is_device``, ``category``, ``name`` (the event, '' for a gap), ``op``, ``kernel``,
    ``src_file``, ``src_line``, ``host_row`` / ``device_row`` (row in ``host`` / ``device``,
    -1 when not that kind), ``chain_delay_ns`` and ``chain_unexplained_ns`` (the edge from
    the previous node of the chain). ``edges``: ``src``, ``dst``, ``kind``, ``delay_ns``,
    ``unexplained_ns``, sorted by ``dst``. ``host`` / ``device``: the events the nodes refer to.
    """

    nodes: pd.DataFrame
    edges: pd.DataFrame
    host: pd.DataFrame
    device: pd.DataFrame
    t0_ns: int
    step_windows: pd.DataFrame
    host_only_ranks: set[int] = field(default_factory=set)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)


def build_graph(frames: TraceFrames) -> Graph:
    """The calibrated dependency graph of ``frames``' trace (memoized per trace)."""
    return frames.memo("dependency_graph", lambda: _build(frames))


def _build(frames: TraceFrames) -> Graph:
    host = frames.host
    host = host[(host["kind"] != Kind.SYNC).to_numpy() & (host["dur_ns"].to_numpy() >= 0)].reset_index(drop=True)
    device = frames.device.reset_index(drop=True)
    starts = [a for a in (host["start_ns"].to_numpy(), device["start_ns"].to_numpy()) if len(a)]
    if not starts:
        raise AnalysisError("the trace has no host or device spans to build a dependency graph from")
    t0 = int(min(int(a.min()) for a in starts))
    seg = _host_segments(host, t0)
    dev = _device_nodes(device, t0, n_chains=int(seg["chain"].max()) + 1 if len(seg) else 0)
    nodes = pd.concat([seg, dev], ignore_index=True)
    nodes = nodes.sort_values(["chain", "start_ns", "dur_ns"], kind="stable").reset_index(drop=True)
    chain = nodes["chain"].to_numpy()
    head = np.ones(len(nodes), bool)
    head[1:] = chain[1:] != chain[:-1]
    nodes["head"] = head
    edges = _cross_edges(frames, nodes, host, device, t0)
    _adjust_blocking_starts(nodes, edges)
    _calibrate(nodes, edges)
    host_only = set(frames.ranks) - {int(r) for r in device["rank"].unique()}
    _describe(nodes, host, device, host_only, frames)
    return Graph(nodes, edges, host, device, t0, frames.step_windows, host_only)


def _host_segments(host: pd.DataFrame, t0: int) -> pd.DataFrame:
    """Cut every host thread at each start and end; each piece takes the innermost open event."""
    cols = ["rank", "chain", "start_ns", "dur_ns", "is_device", "host_row", "device_row", "blocking_end"]
    if not len(host):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    thread = pd.factorize(pd.MultiIndex.from_arrays([host["rank"].to_numpy(), host["tid"].to_numpy()]))[0]
    s = host["start_ns"].to_numpy() - t0
    e = s + host["dur_ns"].to_numpy()
    span = int(e.max()) + 1
    if (int(thread.max()) + 1) * span >= 1 << 62:
        raise AnalysisError("the trace spans too long a time for the dependency graph (over 2^62 ns x threads)")
    th = thread.astype(np.int64)
    sk, ek = th * span + s, th * span + e
    order = np.lexsort((-host["dur_ns"].to_numpy(), sk))  # by start, enclosing first
    rank_of = np.empty(len(host), np.int64)
    rank_of[order] = np.arange(len(host))
    sk_sorted = sk[order]
    parent_pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
        ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy()),
    )
    bounds = np.unique(np.concatenate([sk, ek]))
    same = (bounds[1:] // span) == (bounds[:-1] // span)
    a, b = bounds[:-1][same], bounds[1:][same]
    # a zero-length segment opens every thread, so the first call on it has a predecessor too
    first = bounds[np.r_[True, ~same]]
    a, b = np.concatenate([first, a]), np.concatenate([first, b])
    o = np.lexsort((b > a, a))
    a, b = a[o], b[o]
    # innermost event open at each segment start: the last one started, or its open ancestor
    cand = order[np.maximum(np.searchsorted(sk_sorted, a, side="right") - 1, 0)]
    cand = np.where(np.searchsorted(sk_sorted, a, side="right") > 0, cand, -1)
    todo = np.flatnonzero((cand >= 0) & (ek[np.maximum(cand, 0)] <= a))
    while len(todo):
        cand[todo] = parent_pos[cand[todo]]
        todo = todo[(cand[todo] >= 0) & (ek[np.maximum(cand[todo], 0)] <= a[todo])]
    cand = np.where((cand >= 0) & (th[np.maximum(cand, 0)] == a // span) & (b > a), cand, -1)
    del rank_of
    seg_thread = a // span
    return pd.DataFrame(
        {
            "rank": host["rank"].to_numpy()[_first_of(thread, seg_thread)],
            "chain": seg_thread,
            "start_ns": a - seg_thread * span,
            "dur_ns": b - a,
            "is_device": False,
            "host_row": cand,
            "device_row": -1,
            # the segment closes a host event (a blocking call waits at its end)
            "blocking_end": (cand >= 0) & (ek[np.maximum(cand, 0)] == b),
        }
    )


def _first_of(codes: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """A row of ``codes`` holding each wanted code."""
    first = np.zeros(int(codes.max()) + 1, np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    return first[wanted]


def _device_nodes(device: pd.DataFrame, t0: int, n_chains: int) -> pd.DataFrame:
    key = pd.MultiIndex.from_arrays(
        [device["rank"].to_numpy(), device["device"].to_numpy(), device["stream"].to_numpy()]
    )
    stream = pd.factorize(key)[0].astype(np.int64) if len(device) else np.zeros(0, np.int64)
    return pd.DataFrame(
        {
            "rank": device["rank"].to_numpy(),
            "chain": stream + n_chains,
            "start_ns": device["start_ns"].to_numpy() - t0,
            "dur_ns": device["dur_ns"].to_numpy(),
            "is_device": True,
            "host_row": -1,
            "device_row": np.arange(len(device)),
            "blocking_end": False,
        }
    )


def _cross_edges(
    frames: TraceFrames, nodes: pd.DataFrame, host: pd.DataFrame, device: pd.DataFrame, t0: int
) -> pd.DataFrame:
    n = len(nodes)
    host_row = nodes["host_row"].to_numpy()
    dev_row = nodes["device_row"].to_numpy()
    dev_node = np.full(len(device), -1, np.int64)
    dev_node[dev_row[dev_row >= 0]] = np.flatnonzero(dev_row >= 0)
    start = nodes["start_ns"].to_numpy()
    end = start + nodes["dur_ns"].to_numpy()
    chain = nodes["chain"].to_numpy()
    head = nodes["head"].to_numpy()
    parts: list[tuple[np.ndarray, np.ndarray, int, np.ndarray]] = []

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
    latency = np.clip(start[dst] - end[src], 0, LAUNCH_LATENCY_MAX_NS)
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
    if not parts:
        parts.append((np.zeros(0, np.int64),) * 2 + (LAUNCH, np.zeros(0, np.int64)))  # type: ignore[arg-type]
    src = np.concatenate([p[0] for p in parts]).astype(np.int64)
    dst = np.concatenate([p[1] for p in parts]).astype(np.int64)
    kind = np.concatenate([np.full(len(p[0]), p[2], np.int8) for p in parts])
    delay = np.concatenate([p[3] for p in parts]).astype(np.int64)
    keep = (src >= 0) & (dst >= 0) & (src != dst) & (src < n) & (dst < n)
    edges = pd.DataFrame({"src": src[keep], "dst": dst[keep], "kind": kind[keep], "delay_ns": delay[keep]})
    edges = edges.drop_duplicates(["src", "dst"]).sort_values("dst", kind="stable").reset_index(drop=True)
    edges["unexplained_ns"] = np.zeros(len(edges), np.int64)
    return edges


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


def _handoff_edges(nodes: pd.DataFrame, end: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int, np.ndarray]]:
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


def _adjust_blocking_starts(nodes: pd.DataFrame, edges: pd.DataFrame) -> None:
    """A blocking call's last segment starts, in the model, when the work it waits for ends:
    the segment before that is the wait itself, carried by the sync edge."""
    sync = edges[edges["kind"].isin([SYNC, HANDOFF])]
    if not len(sync):
        return
    start = nodes["start_ns"].to_numpy().copy()
    dur = nodes["dur_ns"].to_numpy().copy()
    end = start + dur
    src_end = end[sync["src"].to_numpy()]
    dst = sync["dst"].to_numpy()
    latest = np.full(len(nodes), _NEG, np.int64)
    np.maximum.at(latest, dst, src_end)
    m = latest > _NEG
    new_start = np.where(m, np.clip(latest, start, end), start)
    nodes["start_ns"] = new_start
    nodes["dur_ns"] = end - new_start
    nodes["wait_ns"] = new_start - start  # the host time spent waiting (before the modelled start)


def _calibrate(nodes: pd.DataFrame, edges: pd.DataFrame) -> None:
    """Add to each node's binding edge the gap nothing explains; clamp edges its start violates."""
    n = len(nodes)
    start = nodes["start_ns"].to_numpy()
    end = start + nodes["dur_ns"].to_numpy()
    head = nodes["head"].to_numpy()
    # chain ready: the previous node's end (a blocking call's wait is carried by its sync edge)
    chain_ready = np.full(n, _NEG, np.int64)
    chain_ready[1:] = np.where(head[1:], _NEG, end[:-1])
    src = edges["src"].to_numpy()
    dst = edges["dst"].to_numpy()
    delay = edges["delay_ns"].to_numpy().copy()
    ready = end[src] + delay
    # clamp: no edge may say a node was ready after it started
    over = ready > start[dst]
    delay[over] = start[dst][over] - end[src][over]
    ready = end[src] + delay
    cross_max = np.full(n, _NEG, np.int64)
    best_edge = np.full(n, -1, np.int64)
    if len(dst):
        bounds = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]])
        seg_max = np.maximum.reduceat(ready, bounds)
        cross_max[dst[bounds]] = seg_max
        # the binding edge of each node: its first edge reaching the maximum
        is_max = ready == cross_max[dst]
        first = np.flatnonzero(is_max)
        uniq, idx = np.unique(dst[first], return_index=True)
        best_edge[uniq] = first[idx]
    chain_delay = np.zeros(n, np.int64)
    chain_over = ~head & (chain_ready > start)
    chain_delay[chain_over] = (start - chain_ready)[chain_over]
    chain_ready = np.where(head, _NEG, np.minimum(chain_ready, start))
    modelled = np.maximum(chain_ready, cross_max)
    has_pred = modelled > _NEG
    residual = np.where(has_pred, start - modelled, 0)
    residual = np.maximum(residual, 0)
    via_chain = has_pred & (chain_ready >= cross_max)
    chain_unexplained = np.where(via_chain, residual, 0)
    chain_delay = chain_delay + chain_unexplained
    unexplained = np.zeros(len(edges), np.int64)
    via_edge = np.flatnonzero(has_pred & ~via_chain & (residual > 0))
    unexplained[best_edge[via_edge]] = residual[via_edge]
    edges["delay_ns"] = delay + unexplained
    edges["unexplained_ns"] = unexplained
    nodes["chain_delay_ns"] = chain_delay
    nodes["chain_unexplained_ns"] = chain_unexplained


def _describe(
    nodes: pd.DataFrame, host: pd.DataFrame, device: pd.DataFrame, host_only: set[int], frames: TraceFrames
) -> None:
    """Category, event name, op, kernel and source line of every node."""
    from neuron_explorer.analyzers.attribution import DATALOADER

    n = len(nodes)
    hr = nodes["host_row"].to_numpy()
    dr = nodes["device_row"].to_numpy()
    is_h, is_d = hr >= 0, dr >= 0
    category = np.full(n, "untraced", dtype=object)
    name = np.full(n, "", dtype=object)
    op = np.full(n, "", dtype=object)
    kernel = np.full(n, "", dtype=object)
    src_file = np.full(n, "", dtype=object)
    src_line = np.full(n, -1, np.int64)
    hkey = ukey(host["rank"].to_numpy(), host["event_id"].to_numpy())
    hname = _strings(host["name"])
    hkind = _strings(host["kind"])
    hfile = _strings(host["src_file"]) if "src_file" in host else np.full(len(host), "", dtype=object)
    hline = host["src_line"].to_numpy() if "src_line" in host else np.full(len(host), -1)
    if len(host):
        rows = hr[is_h]
        kinds = hkind[rows]
        category[is_h] = _lut(kinds, _HOST_CATEGORY, "host_launch")
        blocking = np.zeros(len(host), bool)
        calls = blocking_calls(frames)
        pos = lookup(hkey, ukey(calls["rank"].to_numpy(), calls["event_id"].to_numpy()))
        blocking[pos[pos >= 0]] = True
        loading = name_mask(host["name"], DATALOADER)
        cat = category[is_h]
        cat[loading[rows]] = "data_loading"
        cat[blocking[rows]] = "host_blocked"
        cpu = np.isin(nodes["rank"].to_numpy()[is_h], list(host_only)) & (kinds == Kind.CPU_OP)
        cat[cpu] = "compute"
        category[is_h] = cat
        name[is_h] = hname[rows]
        own_op = np.where(
            hkind == Kind.CPU_OP,
            np.arange(len(host)),
            lookup(hkey, ukey(host["rank"].to_numpy(), host["op_id"].to_numpy())),
        )
        op_of_row = np.where(own_op >= 0, hname[np.maximum(own_op, 0)], "")
        op[is_h] = op_of_row[rows]
        src_file[is_h] = hfile[rows]
        src_line[is_h] = hline[rows]
    if len(device):
        rows = dr[is_d]
        dkind = _strings(device["kind"])[rows]
        category[is_d] = _lut(dkind, _DEVICE_CATEGORY, "compute")
        dname = _strings(device["name"])[rows]
        name[is_d] = dname
        kernel[is_d] = dname
        opos = (
            lookup(hkey, ukey(device["rank"].to_numpy()[rows], device["op_id"].to_numpy()[rows]))
            if len(host)
            else np.full(len(rows), -1)
        )
        op[is_d] = np.where(opos >= 0, hname[np.maximum(opos, 0)] if len(host) else "", "")
        src_file[is_d] = _strings(device["src_file"])[rows]
        src_line[is_d] = device["src_line"].to_numpy()[rows]
    nodes["category"] = category
    nodes["name"] = name
    nodes["op"] = op
    nodes["kernel"] = kernel
    nodes["src_file"] = src_file
    nodes["src_line"] = src_line


def _strings(col: pd.Series) -> np.ndarray:
    """A (categorical) text column as an object array, '' for null, decoded once per value."""
    cat = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    values = np.array([str(v) for v in cat.cat.categories] + [""], dtype=object)
    codes = cat.cat.codes.to_numpy()
    return values[np.where(codes < 0, len(values) - 1, codes)]


def _lut(values: np.ndarray, table: dict[str, str], default: str) -> np.ndarray:
    uniq, inv = np.unique(values.astype(str), return_inverse=True)
    return np.array([table.get(u, default) for u in uniq], dtype=object)[inv]
