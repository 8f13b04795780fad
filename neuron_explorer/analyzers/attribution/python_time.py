"""Which Python frames hold the ``host_python`` time: each frame's own time at the instants the
attribution gives to ``host_python``.

The attribution (``attribution/__init__.py``) says *how much* of a step the host spent in
Python with nothing else going on; a finding about it must also say *where*: the frames whose
own code ran then. A frame's own time is its span minus its children's spans (ops, runtime
calls, nested frames); of it, this module keeps the part inside step windows at which no
higher class holds on its rank: no one-time work (compile, capture, warm-up step,
initialization), no device work on any of the rank's devices, no blocking call, no queued
launch, no data loading, no framework op or runtime call on any thread. Summed over the frames
this is the attribution's ``host_python`` time (exactly, on a rank with one device; with
several devices the attribution counts the instants per device, this module once per rank,
when every device is idle).

Whole columns: one sort of each rank's boundaries, no per-event Python.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import name_mask, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.trace.schema import Kind

#: Frames in which a thread only waits (a lock, a condition, a queue, a sleep): while another
#: thread runs Python, the instant is that thread's.
WAITING = (
    r"^threading\.py\(\d+\): (?:wait|join|_wait_for_tstate_lock)$|(?:^|/)queue\.py\(\d+\): get$"
    r"|(?:^|/)selectors\.py\(|^<built-in method (?:acquire|sleep|select|poll|wait|join)\b"
    r"|^<built-in function (?:sleep|select)>|^time\.sleep"
)


def python_exposed_ns(frames: TraceFrames) -> np.ndarray:
    """Per row of ``frames.host``: the ns of its own time that is ``host_python`` (0 for
    anything but a Python frame)."""
    return frames.memo("python_exposed_ns", lambda: _python_exposed(frames))


def _python_exposed(frames: TraceFrames) -> np.ndarray:
    host = frames.host
    out = np.zeros(len(host), np.int64)
    w = frames.step_windows
    is_py = (host["kind"] == Kind.PYTHON).to_numpy()
    if not is_py.any() or not len(w):
        return out
    rank_of = host["rank"].to_numpy(np.int64)
    start = host["start_ns"].to_numpy(np.int64)
    end = start + host["dur_ns"].to_numpy(np.int64)
    # own pieces of each Python frame: the gaps between the frames nested in it on its thread
    # (by time: the event tree hangs step annotations and ops elsewhere)
    parent = _time_parents(rank_of, host["tid"].to_numpy(np.int64), start, end, is_py)
    kid = np.flatnonzero(parent >= 0)
    kid = kid[np.lexsort((start[kid], parent[kid]))]
    par = parent[kid]
    # the children of a frame sorted by start; the running max of their ends (children can
    # overlap where a trace is not well nested): a gap before each child, a tail after the last
    run_end = pd.Series(end[kid]).groupby(par).cummax().to_numpy() if len(par) else np.zeros(0, np.int64)
    first = np.r_[True, par[1:] != par[:-1]] if len(par) else np.zeros(0, bool)
    prev_end = np.where(first, start[par], np.r_[0, run_end[:-1]]) if len(par) else np.zeros(0, np.int64)
    pieces_owner = [par]
    pieces_s = [prev_end]
    pieces_e = [np.maximum(start[kid], prev_end)]
    last = np.r_[par[1:] != par[:-1], True] if len(par) else np.zeros(0, bool)
    pieces_owner.append(par[last])
    pieces_s.append(run_end[last])
    pieces_e.append(end[par[last]])
    # frames with no children: their whole span
    lonely = np.flatnonzero(is_py)
    lonely = lonely[~np.isin(lonely, par)]
    pieces_owner.append(lonely)
    pieces_s.append(start[lonely])
    pieces_e.append(end[lonely])
    owner = np.concatenate(pieces_owner)
    ps = np.concatenate(pieces_s)
    pe = np.concatenate(pieces_e)
    keep = pe > ps
    owner, ps, pe = owner[keep], ps[keep], pe[keep]
    if not len(owner):
        return out
    busy_r, busy_s, busy_e = _higher_classes(frames)
    win_r = w["rank"].to_numpy(np.int64)
    win_s = w["start_ns"].to_numpy(np.int64)
    win_e = w["end_ns"].to_numpy(np.int64)
    piece_rank = rank_of[owner]
    waiting = name_mask(host["name"], WAITING)[owner]
    got = np.zeros(len(owner), np.float64)
    for r in np.unique(piece_rank):  # one pass per rank
        m = np.flatnonzero(piece_rank == r)
        got[m] = _credit(
            ps[m], pe[m], waiting[m], win_s[win_r == r], win_e[win_r == r], busy_s[busy_r == r], busy_e[busy_r == r]
        )
    np.add.at(out, owner, np.rint(got).astype(np.int64))
    return out


def _time_parents(
    rank: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray, mask: np.ndarray
) -> np.ndarray:
    """Per row: the innermost ``mask`` row of the same thread whose span holds it (-1: none;
    only for ``mask`` rows). Python frames of one thread nest (they are a call stack): sorted by
    start (the longer first), a frame's depth is the frames before it minus those ended by its
    start, and its parent the last frame one level up that started at or before it."""
    out = np.full(len(rank), -1, np.int64)
    rows = np.flatnonzero(mask)
    key = ukey(rank[rows], tid[rows])
    for k in np.unique(key):  # one pass per thread
        idx = rows[key == k]
        idx = idx[np.lexsort((-end[idx], start[idx]))]
        s, e = start[idx], end[idx]
        depth = np.arange(len(idx)) - np.searchsorted(np.sort(e), s, side="right")
        depth = np.maximum(depth, 0)
        for d in range(1, int(depth.max(initial=0)) + 1):  # one pass per stack level
            up = np.flatnonzero(depth == d - 1)
            here = np.flatnonzero(depth == d)
            j = np.searchsorted(s[up], s[here], side="right") - 1
            ok = j >= 0
            out[idx[here[ok]]] = idx[up[j[ok]]]
    return out


def _higher_classes(frames: TraceFrames) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rank, start, end) of every interval some class above ``host_python`` holds."""
    from neuron_explorer.analyzers.attribution import (
        DATALOADER,
        HOST_OP_KINDS,
        blocking_calls,
        queued_intervals,
    )
    from neuron_explorer.analyzers.attribution.one_time import one_time_spans, warmup_windows

    host, dev = frames.host, frames.device
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(rank, s, e) -> None:
        parts.append((np.asarray(rank, np.int64), np.asarray(s, np.int64), np.asarray(e, np.int64)))

    def add_spans(df: pd.DataFrame) -> None:
        s = df["start_ns"].to_numpy(np.int64)
        add(df["rank"].to_numpy(), s, s + df["dur_ns"].to_numpy(np.int64))

    once = one_time_spans(frames)
    add_spans(once)
    warm = warmup_windows(frames)
    add(warm["rank"].to_numpy(), warm["start_ns"].to_numpy(), warm["end_ns"].to_numpy())
    add_spans(dev)
    add_spans(blocking_calls(frames))
    q = queued_intervals(frames)
    add(q["rank"].to_numpy(), q["start_ns"].to_numpy(), q["end_ns"].to_numpy())
    loading = host[host["kind"].isin([Kind.ANNOTATION, Kind.CPU_OP]).to_numpy() & name_mask(host["name"], DATALOADER)]
    add_spans(loading)
    add_spans(host[host["kind"].isin(HOST_OP_KINDS)])
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]


def _credit(
    ps: np.ndarray,
    pe: np.ndarray,
    waiting: np.ndarray,
    ws: np.ndarray,
    we: np.ndarray,
    bs: np.ndarray,
    be: np.ndarray,
) -> np.ndarray:
    """Per own piece [ps, pe) of one rank: its eligible ns (inside a window, outside every busy
    interval). An instant two threads spend in Python is shared between them; a thread that
    only waits (``WAITING``) gets none of it while another thread works."""
    ok = be > bs
    bs, be = bs[ok], be[ok]
    points = np.unique(np.concatenate([ws, we, bs, be, ps, pe]))
    if len(points) < 2:
        return np.zeros(len(ps))
    mid = (points[:-1] + points[1:]) / 2.0
    eligible = _covered(mid, ws, we) & ~_covered(mid, bs, be)
    seg = np.diff(points).astype(np.float64) * eligible
    i_s = np.searchsorted(points, ps)
    i_e = np.searchsorted(points, pe)

    def count(sel: np.ndarray) -> np.ndarray:
        delta = np.zeros(len(points), np.int64)
        np.add.at(delta, i_s[sel], 1)
        np.add.at(delta, i_e[sel], -1)
        return np.cumsum(delta)[:-1]

    n_work, n_wait = count(~waiting), count(waiting)
    work = np.divide(seg, n_work, out=np.zeros(len(seg)), where=n_work > 0)
    wait = np.divide(seg, n_wait, out=np.zeros(len(seg)), where=(n_work == 0) & (n_wait > 0))
    cum_work, cum_wait = np.r_[0.0, np.cumsum(work)], np.r_[0.0, np.cumsum(wait)]
    return np.where(waiting, cum_wait[i_e] - cum_wait[i_s], cum_work[i_e] - cum_work[i_s])


def _covered(t: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Per instant of ``t``: inside the union of the intervals [s, e)."""
    if not len(s):
        return np.zeros(len(t), bool)
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    i = np.searchsorted(s, t, side="right") - 1
    return (i >= 0) & (e[np.maximum(i, 0)] > t)
