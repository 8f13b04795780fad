"""Replay a calibrated graph, optionally edited: node start = max(pred end + edge delay).

Most edges are chain edges (the previous segment of a host thread, the previous work of a
stream), so the replay solves each chain in closed form and iterates only over the cross edges:
along a chain ``s[i] = max(s[i-1] + dur[i-1] + delay[i], o[i])`` with ``o`` the latest cross
predecessor, which is ``s[i] = c[i] + cummax(o[k] - c[k] for k <= i)`` with ``c`` the chain's
running sum of durations and delays: one grouped running maximum over every chain at once.
Cross edges are then re-evaluated from the new times, until nothing moves. The rounds needed
are the number of times the longest path switches chains (host -> device -> host at each sync),
not the number of events. Chain heads without a cross predecessor keep their measured start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.context import lookup, ukey
from neuron_explorer.analyzers.graph.build import _NEG, SYNC, Graph
from neuron_explorer.trace.errors import AnalysisError

#: more rounds than this means the graph has a cycle (inconsistent clocks): refuse, do not guess
MAX_ROUNDS = 100_000


@dataclass(frozen=True)
class Edits:
    """What-if edits. ``scale``: (regex over op and kernel names, factor): matching ops (with
    everything nested in them) and kernels take factor x their duration; a kernel whose op
    matches is scaled with it. ``remove``: regexes whose matching events take no time and, for
    synchronizing calls, wait for nothing. The first matching pattern wins; an event nested in
    a matching op takes the innermost matching op's edit."""

    scale: tuple[tuple[str, float], ...] = ()
    remove: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.scale and not self.remove

    def patterns(self) -> list[tuple[re.Pattern[str], float, bool]]:
        out = []
        for pattern, factor in self.scale:
            if not (factor >= 0 and np.isfinite(factor)):
                raise AnalysisError(f"scale factor must be a finite number >= 0: {pattern}={factor}")
            out.append((_compile(pattern), float(factor), False))
        out.extend((_compile(p), 0.0, True) for p in self.remove)
        return out


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise AnalysisError(f"bad pattern {pattern!r}: {exc}") from None


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
    edge_delay: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, np.int64))
    edge_kept: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, bool))


def replay(graph: Graph, edits: Edits | None = None) -> Replay:
    """Replay ``graph`` with ``edits`` (none: the baseline, which reproduces the run)."""
    nodes, edges = graph.nodes, graph.edges
    dur = nodes["dur_ns"].to_numpy().astype(np.int64)
    keep = np.ones(len(edges), bool)
    if edits is not None and not edits.empty:
        factor, removed = _node_factors(graph, edits)
        dur = np.rint(dur * factor).astype(np.int64)
        keep &= ~((edges["kind"].to_numpy() == SYNC) & removed[edges["dst"].to_numpy()])
    return _solve(graph, dur, keep)


def _solve(graph: Graph, dur: np.ndarray, keep: np.ndarray) -> Replay:
    nodes, edges = graph.nodes, graph.edges
    n = len(nodes)
    head = nodes["head"].to_numpy()
    chain = nodes["chain"].to_numpy()
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
    chain_codes = pd.factorize(chain)[0]
    s = measured.copy()
    rounds = 0
    while True:
        rounds += 1
        o = np.full(n, _NEG, np.int64)
        if len(dst):
            o[targets] = np.maximum.reduceat(s[src] + dur[src] + delay, bounds)
        o[root] = measured[root]
        x = pd.Series(o - c).groupby(chain_codes, sort=False).cummax().to_numpy()
        new = c + x
        if np.array_equal(new, s):
            break
        s = new
        if rounds > MAX_ROUNDS:
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
        first = np.flatnonzero(ready == cross_max[dst])
        uniq, idx = np.unique(dst[first], return_index=True)
        wins = cross_max[uniq] > chain_ready[uniq]
        binding[uniq[wins]] = src[first[idx]][wins]
        binding_edge[uniq[wins]] = edge_ids[first[idx]][wins]
    return Replay(s, end, dur, binding, binding_edge, rounds, edges["delay_ns"].to_numpy(), keep)


def _node_factors(graph: Graph, edits: Edits) -> tuple[np.ndarray, np.ndarray]:
    """Per node: the duration factor of its edit, and whether a ``remove`` edit matched it."""
    nodes, host, device = graph.nodes, graph.host, graph.device
    pats = edits.patterns()
    nh = len(host)
    hf = np.full(nh, np.nan)
    hrm = np.zeros(nh, bool)
    if nh:
        names = host["name"].astype("category")
        values = [str(v) for v in names.cat.categories]
        codes = names.cat.codes.to_numpy()
        lut_f = np.full(len(values) + 1, np.nan)
        lut_r = np.zeros(len(values) + 1, bool)
        for i, v in enumerate(values):
            for rx, f, rm in pats:
                if rx.search(v):
                    lut_f[i], lut_r[i] = f, rm
                    break
        hf = lut_f[np.where(codes < 0, len(values), codes)]
        hrm = lut_r[np.where(codes < 0, len(values), codes)]
        # nested events take their innermost matching ancestor's edit (pointer doubling)
        parent = lookup(
            ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
            ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy()),
        )
        while True:
            open_ = np.isnan(hf) & (parent >= 0)
            if not open_.any():
                break
            p = parent[open_]
            hf[open_] = hf[p]
            hrm[open_] = hrm[p]
            parent = np.where(open_, parent[np.maximum(parent, 0)], parent)
            parent[~open_] = -1
    factor = np.ones(len(nodes))
    removed = np.zeros(len(nodes), bool)
    hr = nodes["host_row"].to_numpy()
    m = hr >= 0
    if nh:
        f = hf[hr[m]]
        factor[m] = np.where(np.isnan(f), 1.0, f)
        removed[m] = hrm[hr[m]]
    dr = nodes["device_row"].to_numpy()
    d = dr >= 0
    if len(device):
        names = device["name"].astype("category")
        values = [str(v) for v in names.cat.categories]
        lut_f = np.full(len(values) + 1, np.nan)
        for i, v in enumerate(values):
            for rx, f_, _rm in pats:
                if rx.search(v):
                    lut_f[i] = f_
                    break
        codes = names.cat.codes.to_numpy()
        kf = lut_f[np.where(codes < 0, len(values), codes)]
        if nh:  # a kernel of an edited op takes the op's edit
            opos = lookup(
                ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
                ukey(device["rank"].to_numpy(), device["op_id"].to_numpy()),
            )
            of = np.where(opos >= 0, hf[np.maximum(opos, 0)], np.nan)
            kf = np.where(np.isnan(kf), of, kf)
        factor[d] = np.where(np.isnan(kf[dr[d]]), 1.0, kf[dr[d]])
    return factor, removed
