"""Build the dependency graph of a trace: nodes, chains, cross edges, delays calibrated on the run.

Nodes are host *segments* and device events. A host thread's events nest; cutting its timeline
at every start and end gives segments, each owned by the innermost event open in it (or by
none: an untraced gap), so a thread is one chain of back-to-back segments and scaling an op
scales exactly the segments inside it. A device stream is a chain of its work in start order.
The cross edges between chains are ``edges.py``'s; across ranks, ``collectives.py`` adds the
collectives that wait for their last rank.

Calibration: each node's start in the run is compared with the latest of its predecessors'
ends plus modelled delays. A later start leaves a measured gap no recorded dependency
explains: it is added to the binding edge as ``unexplained_ns``. An earlier start (clock skew,
a dependency the model over-states) clamps the offending edges' delays to the measured slack.
Replaying the calibrated graph therefore reproduces the run; the unexplained share says how
much of that reproduction is carried by gaps rather than by the model.

Only integer columns are built for every node (the category as a code into ``CATEGORIES``);
the names, ops, kernels and source lines of nodes are decoded on demand for the few nodes a
critical path holds (``describe``), which keeps the graph of a 200k-event trace well under a
second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import DATALOADER, blocking_calls
from neuron_explorer.analyzers.core.columns import group_codes, lookup, name_mask, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph.edges import _NEG, COLLECTIVE, HANDOFF, SYNC, cross_edges
from neuron_explorer.analyzers.graph.nodes import (
    ARRIVAL,
    COMMUNICATION,
    COMPUTE,
    COPY,
    DATA_LOADING,
    DEVICE,
    HOST_BLOCKED,
    HOST_LAUNCH,
    HOST_PYTHON,
    JOIN,
    SEGMENT,
    UNTRACED,
)
from neuron_explorer.trace.errors import AnalysisError
from neuron_explorer.trace.schema import Kind

_DEVICE_CATEGORY = {Kind.KERNEL: COMPUTE, Kind.COLLECTIVE: COMMUNICATION, Kind.MEMCPY: COPY, Kind.MEMSET: COPY}
_HOST_CATEGORY = {
    Kind.CPU_OP: HOST_LAUNCH,
    Kind.RUNTIME: HOST_LAUNCH,
    Kind.PYTHON: HOST_PYTHON,
    Kind.ANNOTATION: HOST_LAUNCH,
    Kind.STEP: UNTRACED,
}


@dataclass
class Graph:
    """The calibrated graph of one trace (every rank; ranks joined at matched collectives).

    ``nodes`` (one row per node, sorted by chain then start): ``rank``, ``chain``, ``head``
    (first of its chain), ``node_kind``, ``start_ns`` / ``dur_ns`` (measured, relative to
    ``t0_ns``), ``is_device``, ``cat`` (code into ``CATEGORIES``), ``host_row`` / ``device_row``
    (row in ``host`` / ``device``, -1 when not that kind; an arrival or join names its kernel
    in ``device_row``), ``wait_ns`` (a blocking call's or a collective's wait before its
    modelled start), ``chain_delay_ns`` and ``chain_unexplained_ns`` (the edge from the previous
    node of the chain). ``edges``: ``src``, ``dst``, ``kind``, ``delay_ns``, ``unexplained_ns``,
    sorted by ``dst``. ``host`` / ``device``: the events the nodes refer to.
    """

    nodes: pd.DataFrame
    edges: pd.DataFrame
    host: pd.DataFrame
    device: pd.DataFrame
    t0_ns: int
    step_windows: pd.DataFrame
    host_only_ranks: set[int] = field(default_factory=set)
    #: per row of ``host``: blocking calls (``attribution.blocking_calls``) and which are copies
    blocking: np.ndarray = field(default_factory=lambda: np.zeros(0, bool), repr=False)
    blocking_copy: np.ndarray = field(default_factory=lambda: np.zeros(0, bool), repr=False)
    #: per row of ``host``: the row of the blocking copy whose op also issued this blocking call
    #: (torch's pageable device-to-host copy is ``cudaMemcpyAsync`` then ``cudaStreamSynchronize``
    #: in one ``aten::copy_``), else -1: a copy made asynchronous no longer waits through either
    copy_companion: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @cached_property
    def host_keys(self) -> pd.Index:
        """(rank, event id) key of every host row, for lookups by id."""
        return pd.Index(ukey(self.host["rank"].to_numpy(), self.host["event_id"].to_numpy()))

    @cached_property
    def device_keys(self) -> pd.Index:
        return pd.Index(ukey(self.device["rank"].to_numpy(), self.device["event_id"].to_numpy()))

    @cached_property
    def host_parent(self) -> np.ndarray:
        """Row of each host row's parent (-1: none)."""
        return lookup(self.host_keys.to_numpy(), ukey(self.host["rank"].to_numpy(), self.host["parent_id"].to_numpy()))

    @cached_property
    def host_thread_key(self) -> np.ndarray:
        """Per host row: its thread (the chain of its segments) x 2^42 + its start (from ``t0_ns``):
        the rows of one thread sort by start, and an event's nested rows start inside it."""
        if not len(self.host):
            return np.zeros(0, np.int64)
        thread = group_codes(self.host["rank"].to_numpy(), self.host["tid"].to_numpy())
        return thread * (1 << 42) + (self.host["start_ns"].to_numpy() - self.t0_ns)

    @cached_property
    def host_op_row(self) -> np.ndarray:
        """Row of each host row's framework op (-1: none)."""
        return lookup(self.host_keys.to_numpy(), ukey(self.host["rank"].to_numpy(), self.host["op_id"].to_numpy()))

    @cached_property
    def device_op_row(self) -> np.ndarray:
        """Host row of each device row's framework op (-1: none)."""
        if not len(self.host):
            return np.full(len(self.device), -1, np.int64)
        return lookup(self.host_keys.to_numpy(), ukey(self.device["rank"].to_numpy(), self.device["op_id"].to_numpy()))


def build_graph(frames: TraceFrames) -> Graph:
    """The calibrated dependency graph of ``frames``' trace (memoized per trace)."""
    return frames.memo("dependency_graph", lambda: _build(frames))


def _build(frames: TraceFrames) -> Graph:
    from neuron_explorer.analyzers.graph.collectives import add_collectives

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
    order = np.lexsort((nodes["dur_ns"].to_numpy(), nodes["start_ns"].to_numpy(), nodes["chain"].to_numpy()))
    nodes = nodes.iloc[order].reset_index(drop=True)
    nodes["head"] = _heads(nodes["chain"].to_numpy())
    edges = cross_edges(frames, nodes, host, device, t0)
    nodes, edges = add_collectives(frames, nodes, edges, device, t0)
    nodes["head"] = _heads(nodes["chain"].to_numpy())
    edges = _drop_contradicted(nodes, edges)
    _adjust_waiting_starts(nodes, edges)
    _calibrate(nodes, edges)
    host_only = set(frames.ranks) - {int(r) for r in device["rank"].unique()}
    blocking, blocking_copy = _blocking_rows(frames, host)
    nodes["cat"] = _categories(nodes, host, device, host_only, blocking)
    companion = _copy_companions(host, blocking, blocking_copy)
    return Graph(nodes, edges, host, device, t0, frames.step_windows, host_only, blocking, blocking_copy, companion)


def _heads(chain: np.ndarray) -> np.ndarray:
    head = np.ones(len(chain), bool)
    head[1:] = chain[1:] != chain[:-1]
    return head


def distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (by sorting: numpy's hash-based ``unique`` is slower on int64)."""
    v = np.sort(np.asarray(values))
    return v[np.r_[True, v[1:] != v[:-1]]] if len(v) else v


def _host_segments(host: pd.DataFrame, t0: int) -> pd.DataFrame:
    """Cut every host thread at each start and end; each piece takes the innermost open event."""
    cols = ["rank", "chain", "start_ns", "dur_ns", "node_kind", "is_device", "host_row", "device_row", "blocking_end"]
    if not len(host):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    thread = group_codes(host["rank"].to_numpy(), host["tid"].to_numpy())
    s = host["start_ns"].to_numpy() - t0
    e = s + host["dur_ns"].to_numpy()
    span = int(e.max()) + 1
    if (int(thread.max()) + 1) * span >= 1 << 62:
        raise AnalysisError("the trace spans too long a time for the dependency graph (over 2^62 ns x threads)")
    th = thread.astype(np.int64)
    sk, ek = th * span + s, th * span + e
    order = np.lexsort((-host["dur_ns"].to_numpy(), sk))  # by start, enclosing first
    sk_sorted = sk[order]
    parent_pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
        ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy()),
    )
    bounds = distinct(np.concatenate([sk, ek]))
    same = (bounds[1:] // span) == (bounds[:-1] // span)
    a, b = bounds[:-1][same], bounds[1:][same]
    # a zero-length segment opens every thread, so the first call on it has a predecessor too
    first = bounds[np.r_[True, ~same]]
    a, b = np.concatenate([first, a]), np.concatenate([first, b])
    o = np.lexsort((b > a, a))
    a, b = a[o], b[o]
    # innermost event open at each segment start: the last one started, or its open ancestor
    at = np.searchsorted(sk_sorted, a, side="right")
    cand = np.where(at > 0, order[np.maximum(at - 1, 0)], -1)
    todo = np.flatnonzero((cand >= 0) & (ek[np.maximum(cand, 0)] <= a))
    while len(todo):
        cand[todo] = parent_pos[cand[todo]]
        todo = todo[(cand[todo] >= 0) & (ek[np.maximum(cand[todo], 0)] <= a[todo])]
    cand = np.where((cand >= 0) & (th[np.maximum(cand, 0)] == a // span) & (b > a), cand, -1)
    seg_thread = a // span
    return pd.DataFrame(
        {
            "rank": host["rank"].to_numpy()[_first_of(thread, seg_thread)],
            "chain": seg_thread,
            "start_ns": a - seg_thread * span,
            "dur_ns": b - a,
            "node_kind": np.int8(SEGMENT),
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
    if len(device):
        stream = group_codes(device["rank"].to_numpy(), device["device"].to_numpy(), device["stream"].to_numpy())
    else:
        stream = np.zeros(0, np.int64)
    return pd.DataFrame(
        {
            "rank": device["rank"].to_numpy(),
            "chain": stream + n_chains,
            "start_ns": device["start_ns"].to_numpy() - t0,
            "dur_ns": device["dur_ns"].to_numpy(),
            "node_kind": np.int8(DEVICE),
            "is_device": True,
            "host_row": -1,
            "device_row": np.arange(len(device)),
            "blocking_end": False,
        }
    )


def _blocking_rows(frames: TraceFrames, host: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per host row: a blocking call, and a blocking copy (``attribution.blocking_calls``)."""
    calls = blocking_calls(frames)
    pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
        ukey(calls["rank"].to_numpy(), calls["event_id"].to_numpy()),
    )
    blocking = np.zeros(len(host), bool)
    copy = np.zeros(len(host), bool)
    ok = pos >= 0
    blocking[pos[ok]] = True
    copy[pos[ok & (calls["reason"].to_numpy() == "copy")]] = True
    return blocking, copy


def _copy_companions(host: pd.DataFrame, blocking: np.ndarray, copy: np.ndarray) -> np.ndarray:
    """Per host row: the blocking copy (row) that a blocking call's op issued before it, else -1.
    Whole columns: each (rank, enclosing op) keeps its first blocking copy; a blocking call that
    is no copy, under the same op and after it, is that copy's companion."""
    out = np.full(len(host), -1, np.int64)
    if not copy.any():
        return out
    parent = host["parent_id"].fillna(-1).to_numpy().astype(np.int64)
    key = ukey(host["rank"].to_numpy(), parent)
    rows = np.flatnonzero(copy & (parent >= 0))
    first = pd.Series(rows, index=key[rows]).groupby(level=0).min()
    other = np.flatnonzero(blocking & ~copy & (parent >= 0))
    hit = first.reindex(key[other]).to_numpy()
    ok = ~np.isnan(hit)
    cand, src = other[ok], hit[ok].astype(np.int64)
    start = host["start_ns"].to_numpy()
    after = start[cand] >= start[src]
    out[cand[after]] = src[after]
    return out


def _adjust_waiting_starts(nodes: pd.DataFrame, edges: pd.DataFrame) -> None:
    """A blocking call's last segment (or a collective's transfer) starts, in the model, when
    the work it waits for ends: the time before that is the wait itself, carried by the edge."""
    nodes["wait_ns"] = np.zeros(len(nodes), np.int64)
    sync = edges[edges["kind"].isin([SYNC, HANDOFF, COLLECTIVE])]
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
    nodes["wait_ns"] = new_start - start  # the time spent waiting (before the modelled start)


#: How far a dependency's target may end before its source in the measured run and still be kept:
#: host and device clocks disagree by microseconds (largest seen on the bundled traces: 90 us,
#: HTA's alexnet_a100), not milliseconds.
CLOCK_TOLERANCE_NS = 1_000_000


def _drop_contradicted(nodes: pd.DataFrame, edges: pd.DataFrame) -> pd.DataFrame:
    """Edges whose target ended more than ``CLOCK_TOLERANCE_NS`` before their source: the run
    did not obey them (an event stamped ``ts`` 0 among epoch times; a sync matched to work it
    did not wait for). Kept, such an edge gets a delay of minus the gap, lets binding chains close
    on themselves, and an edited replay then never settles."""
    if not len(edges):
        return edges
    end = nodes["start_ns"].to_numpy() + nodes["dur_ns"].to_numpy()
    src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
    rank = nodes["rank"].to_numpy()
    # (one rank's clock only: collectives join ranks whose clocks differ, and are aligned apart)
    judged = (rank[src] == rank[dst]) & (edges["kind"].to_numpy() != COLLECTIVE)
    ok = ~judged | (end[dst] + CLOCK_TOLERANCE_NS >= end[src])
    return edges if ok.all() else edges[ok].reset_index(drop=True)


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
        cross_max[dst[bounds]] = np.maximum.reduceat(ready, bounds)
        best_edge = first_reaching(dst, ready, cross_max, n)
    chain_delay = np.zeros(n, np.int64)
    chain_over = ~head & (chain_ready > start)
    chain_delay[chain_over] = (start - chain_ready)[chain_over]
    chain_ready = np.where(head, _NEG, np.minimum(chain_ready, start))
    modelled = np.maximum(chain_ready, cross_max)
    has_pred = modelled > _NEG
    residual = np.maximum(np.where(has_pred, start - modelled, 0), 0)
    via_chain = has_pred & (chain_ready >= cross_max)
    chain_unexplained = np.where(via_chain, residual, 0)
    unexplained = np.zeros(len(edges), np.int64)
    via_edge = np.flatnonzero(has_pred & ~via_chain & (residual > 0))
    unexplained[best_edge[via_edge]] = residual[via_edge]
    edges["delay_ns"] = delay + unexplained
    edges["unexplained_ns"] = unexplained
    nodes["chain_delay_ns"] = chain_delay + chain_unexplained
    nodes["chain_unexplained_ns"] = chain_unexplained


def first_reaching(dst: np.ndarray, ready: np.ndarray, cross_max: np.ndarray, n: int) -> np.ndarray:
    """Per node: its first edge (``dst`` sorted) whose ready time reaches ``cross_max`` (-1: none)."""
    best = np.full(n, -1, np.int64)
    hit = np.flatnonzero(ready == cross_max[dst])
    if len(hit):
        d = dst[hit]
        first = np.r_[True, d[1:] != d[:-1]]  # (dst sorted: the first hit per node)
        best[d[first]] = hit[first]
    return best


def _categories(
    nodes: pd.DataFrame, host: pd.DataFrame, device: pd.DataFrame, host_only: set[int], blocking: np.ndarray
) -> np.ndarray:
    """Category code of every node, from kind codes and masks (no text per node)."""
    n = len(nodes)
    cat = np.full(n, UNTRACED, np.int8)
    hr = nodes["host_row"].to_numpy()
    dr = nodes["device_row"].to_numpy()
    nk = nodes["node_kind"].to_numpy()
    is_h = hr >= 0
    if len(host):
        kinds = host["kind"].astype("category")
        lut = np.array([_HOST_CATEGORY.get(str(k), HOST_LAUNCH) for k in kinds.cat.categories] + [HOST_LAUNCH], np.int8)
        codes = kinds.cat.codes.to_numpy()
        row_cat = lut[np.where(codes < 0, len(lut) - 1, codes)]
        row_cat[name_mask(host["name"], DATALOADER)] = DATA_LOADING
        row_cat[blocking] = HOST_BLOCKED
        if host_only:  # a host-only rank's ops are its compute
            cpu = np.isin(host["rank"].to_numpy(), list(host_only)) & (host["kind"].to_numpy() == Kind.CPU_OP)
            row_cat[cpu] = COMPUTE
        cat[is_h] = row_cat[hr[is_h]]
    if len(device):
        kinds = device["kind"].astype("category")
        lut = np.array([_DEVICE_CATEGORY.get(str(k), COMPUTE) for k in kinds.cat.categories] + [COMPUTE], np.int8)
        codes = kinds.cat.codes.to_numpy()
        row_cat = lut[np.where(codes < 0, len(lut) - 1, codes)]
        on = dr >= 0
        cat[on] = row_cat[dr[on]]
    cat[(nk == ARRIVAL) | (nk == JOIN)] = COMMUNICATION
    return cat
