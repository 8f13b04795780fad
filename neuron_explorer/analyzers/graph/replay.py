"""Replay a calibrated graph, optionally edited: node start = max(pred end + edge delay).

Most edges are chain edges (the previous segment of a host thread, the previous work of a
stream), so the replay solves each chain in closed form and iterates only over the cross edges:
along a chain ``s[i] = max(s[i-1] + dur[i-1] + delay[i], o[i])`` with ``o`` the latest cross
predecessor, which is ``s[i] = c[i] + cummax(o[k] - c[k] for k <= i)`` with ``c`` the chain's
running sum of durations and delays: one running maximum over every chain at once (each chain
lifted above the previous one, so a single ``np.maximum.accumulate`` serves them all).
Cross edges are then re-evaluated from the new times, until nothing moves. The rounds needed
are the number of times the longest path switches chains (host -> device -> host at each sync),
not the number of events. Chain heads without a cross predecessor keep their measured start.
What an edit changes is ``edits.py``'s (``Edits``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.graph.build import Graph, first_reaching
from neuron_explorer.analyzers.graph.edges import _NEG, STREAM_WAIT, SYNC
from neuron_explorer.analyzers.graph.edits import Edits, EventEdit
from neuron_explorer.analyzers.graph.nodes import COMMUNICATION, DEVICE
from neuron_explorer.trace.errors import AnalysisError

#: more rounds than this means the graph has a cycle (inconsistent clocks): refuse, do not guess
MAX_ROUNDS = 100_000


@dataclass
class Replay:
    """Replayed times (ns relative to the graph's ``t0_ns``) of every node and the predecessor
    that set each start: ``binding`` (node, -1 at a root) through ``binding_edge`` (row of
    ``graph.edges``, -1 for the chain edge)."""

    start: np.ndarray
    end: np.ndarray
    dur: np.ndarray
    binding: np.ndarray
    binding_edge: np.ndarray
    rounds: int
    edge_kept: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, bool))


def replay(graph: Graph, edits: Edits | None = None) -> Replay:
    """Replay ``graph`` with ``edits`` (none: the baseline, which reproduces the run)."""
    nodes, edges = graph.nodes, graph.edges
    dur = nodes["dur_ns"].to_numpy().astype(np.int64)
    keep = np.ones(len(edges), bool)
    if edits is not None and not edits.empty:
        factor, unblocked = node_edits(graph, edits)
        dur = np.rint(dur * factor).astype(np.int64)
        kind = edges["kind"].to_numpy()
        src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
        keep &= ~((kind == SYNC) & unblocked[dst])
        if edits.overlap_comm:
            comm = nodes["cat"].to_numpy() == COMMUNICATION
            keep &= ~(((kind == SYNC) | (kind == STREAM_WAIT)) & comm[src] & ~comm[dst])
    return _solve(graph, dur, keep)


def _solve(graph: Graph, dur: np.ndarray, keep: np.ndarray) -> Replay:
    nodes, edges = graph.nodes, graph.edges
    n = len(nodes)
    head = nodes["head"].to_numpy()
    measured = nodes["start_ns"].to_numpy().astype(np.int64)
    chain_delay = nodes["chain_delay_ns"].to_numpy()
    src = edges["src"].to_numpy()[keep]
    dst = edges["dst"].to_numpy()[keep]
    delay = edges["delay_ns"].to_numpy()[keep]
    edge_ids = np.flatnonzero(keep)
    # c: running sum of (previous duration + chain delay) within each chain, 0 at the head
    step = np.zeros(n, np.int64)
    step[1:] = dur[:-1] + chain_delay[1:]
    step[head] = 0
    cs = np.cumsum(step)
    head_idx = np.maximum.accumulate(np.where(head, np.arange(n), 0))
    c = cs - cs[head_idx]
    has_cross = np.zeros(n, bool)
    has_cross[dst] = True
    root = head & ~has_cross
    bounds = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]]) if len(dst) else np.zeros(0, np.int64)
    targets = dst[bounds] if len(dst) else np.zeros(0, np.int64)
    chain_no = np.cumsum(head) - 1  # dense, ascending along the (chain-sorted) nodes
    s = measured.copy()
    rounds = 0
    # Each round carries every start along its chain and across one more cross edge, so an
    # acyclic graph settles within (cross edges + 1) rounds; more means a cycle.
    max_rounds = min(MAX_ROUNDS, len(src) + 2)
    while True:
        rounds += 1
        o = np.full(n, _NEG, np.int64)
        if len(dst):
            o[targets] = np.maximum.reduceat(s[src] + dur[src] + delay, bounds)
        o[root] = measured[root]
        new = c + _chain_cummax(o - c, chain_no)
        if np.array_equal(new, s):
            break
        s = new
        if rounds > max_rounds:
            raise AnalysisError("the dependency graph does not settle (a cycle: host and device clocks disagree)")
    end = s + dur
    # binding predecessor: the chain predecessor unless a cross edge reaches the start later
    chain_ready = np.full(n, _NEG, np.int64)
    chain_ready[1:] = np.where(head[1:], _NEG, end[:-1] + chain_delay[1:])
    binding = np.where(chain_ready > _NEG, np.arange(n) - 1, -1)
    binding_edge = np.full(n, -1, np.int64)
    if len(dst):
        ready = s[src] + dur[src] + delay
        cross_max = np.full(n, _NEG, np.int64)
        cross_max[targets] = np.maximum.reduceat(ready, bounds)
        first = first_reaching(dst, ready, cross_max, n)
        wins = (first >= 0) & (cross_max > chain_ready)
        binding[wins] = src[first[wins]]
        binding_edge[wins] = edge_ids[first[wins]]
    return Replay(s, end, dur, binding, binding_edge, rounds, keep)


def _chain_cummax(x: np.ndarray, chain_no: np.ndarray) -> np.ndarray:
    """Running maximum of ``x`` restarting at each chain (chains contiguous, numbered upward)."""
    if not len(x):
        return x
    real = x > _NEG // 2
    lo = int(x[real].min()) if real.any() else 0
    x = np.maximum(x, lo)  # (before a chain's first real value nothing is read)
    k = int(x.max()) - lo + 1
    if k * (int(chain_no[-1]) + 1) < 1 << 62:
        lift = chain_no * k
        return np.maximum.accumulate(x - lo + lift) - lift + lo
    return pd.Series(x).groupby(chain_no, sort=False).cummax().to_numpy()


def node_edits(graph: Graph, edits: Edits) -> tuple[np.ndarray, np.ndarray]:
    """Per node: the duration factor of ``edits``, and whether its synchronizing wait is dropped."""
    nodes, host, device = graph.nodes, graph.host, graph.device
    nh, nd = len(host), len(device)
    hf, hub = (
        _pattern_host(graph, edits) if (edits.scale or edits.remove) else (np.full(nh, np.nan), np.zeros(nh, bool))
    )
    df = _pattern_device(graph, edits, hf) if (edits.scale or edits.remove) and nd else np.full(nd, np.nan)
    for e in edits.events:
        ef, eub, edf = _event_rows(graph, e)
        hf, df = np.fmin(hf, ef), np.fmin(df, edf)
        hub |= eub
    if edits.nonblocking_copies and nh:
        hub |= graph.blocking_copy
    if nh and len(graph.copy_companion):  # a copy made asynchronous: its op's own synchronize too
        comp = graph.copy_companion
        with_copy = comp >= 0
        hub[with_copy] |= hub[comp[with_copy]] & graph.blocking_copy[comp[with_copy]]
    factor = np.ones(len(nodes))
    unblocked = np.zeros(len(nodes), bool)
    hr = nodes["host_row"].to_numpy()
    m = hr >= 0
    if nh:
        f = hf[hr[m]]
        factor[m] = np.where(np.isnan(f), 1.0, f)
        unblocked[m] = hub[hr[m]]
    dr = nodes["device_row"].to_numpy()
    d = dr >= 0
    if nd:
        f = df[dr[d]]
        factor[d] = np.where(np.isnan(f), 1.0, f)
    return factor, unblocked


def _event_rows(graph: Graph, e: EventEdit) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Host factor, host unblock and device factor rows of one ``EventEdit`` (NaN: untouched)."""
    nh, nd = len(graph.host), len(graph.device)
    hf = np.full(nh, np.nan)
    hub = np.zeros(nh, bool)
    df = np.full(nd, np.nan)
    keys = e.keys
    hrow = graph.host_keys.get_indexer(keys) if nh else np.zeros(0, np.int64)
    hrow = hrow[hrow >= 0]
    drow = graph.device_keys.get_indexer(keys) if nd else np.zeros(0, np.int64)
    df[drow[drow >= 0]] = e.factor
    if len(hrow):
        covered = _covered(graph, hrow) if e.nested else _mask(nh, hrow)
        hf[covered] = e.factor
        if e.unblock:
            hub = covered
        if e.kernels and nd:
            op = graph.device_op_row
            kern = (op >= 0) & covered[np.maximum(op, 0)]
            df[kern] = np.fmin(df[kern], e.factor)
    if len(e.exempt) and nd:
        spared = graph.device_keys.get_indexer(e.exempt)
        df[spared[spared >= 0]] = np.nan
    return hf, hub, df


def edited_device_rows(graph: Graph, edits: Edits) -> np.ndarray:
    """Rows of ``graph.device`` whose duration ``edits`` change."""
    factor, _ = node_edits(graph, edits)
    dr = graph.nodes["device_row"].to_numpy()
    nk = graph.nodes["node_kind"].to_numpy()
    hit = (dr >= 0) & (factor != 1.0) & (nk == DEVICE)
    return np.unique(dr[hit])


def _mask(n: int, rows: np.ndarray) -> np.ndarray:
    m = np.zeros(n, bool)
    m[rows] = True
    return m


def _covered(graph: Graph, rows: np.ndarray) -> np.ndarray:
    """Host rows that start inside one of host events ``rows`` on its thread (nested in it)."""
    key = graph.host_thread_key
    lo = key[rows]
    hi = lo + graph.host["dur_ns"].to_numpy()[rows]
    ok = lo >= 0
    lo, hi = lo[ok], np.maximum(hi[ok], lo[ok] + 1)  # (a zero-length event covers itself)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    pos = np.searchsorted(lo, key, side="right") - 1
    return (key >= 0) & (pos >= 0) & (key < hi[np.maximum(pos, 0)])


def _pattern_host(graph: Graph, edits: Edits) -> tuple[np.ndarray, np.ndarray]:
    """Host factor and removal per row of the name patterns: an event nested in a matching op
    takes the innermost matching op's edit."""
    host = graph.host
    nh = len(host)
    hf = np.full(nh, np.nan)
    hrm = np.zeros(nh, bool)
    if not nh:
        return hf, hrm
    pats = edits.patterns()
    lut_f, lut_r = _luts(host["name"], pats)
    codes = _codes(host["name"])
    hf, hrm = lut_f[codes], lut_r[codes]
    parent = graph.host_parent.copy()
    while True:  # pointer doubling: one pass per level of nesting
        open_ = np.isnan(hf) & (parent >= 0)
        if not open_.any():
            break
        p = parent[open_]
        hf[open_] = hf[p]
        hrm[open_] = hrm[p]
        parent = np.where(open_, parent[np.maximum(parent, 0)], parent)
        parent[~open_] = -1
    return hf, hrm


def _pattern_device(graph: Graph, edits: Edits, hf: np.ndarray) -> np.ndarray:
    """Device factor per row: its own name's pattern, else its op's edit."""
    device = graph.device
    lut_f, _ = _luts(device["name"], edits.patterns())
    kf = lut_f[_codes(device["name"])]
    if len(graph.host):
        op = graph.device_op_row
        kf = np.where(np.isnan(kf), np.where(op >= 0, hf[np.maximum(op, 0)], np.nan), kf)
    return kf


def _luts(col: pd.Series, pats: list) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    """Factor and removal per distinct value of ``col`` (NaN, False: no pattern matches; the
    last entry is for null)."""
    cat = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    values = [str(v) for v in cat.cat.categories]
    lut_f = np.full(len(values) + 1, np.nan)
    lut_r = np.zeros(len(values) + 1, bool)
    for i, v in enumerate(values):  # one per distinct name
        for rx, f, rm in pats:
            if rx.search(v):
                lut_f[i], lut_r[i] = f, rm
                break
    return lut_f, lut_r


def _codes(col: pd.Series) -> np.ndarray:
    cat = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    codes = cat.cat.codes.to_numpy().astype(np.int64)
    return np.where(codes < 0, len(cat.cat.categories), codes)
