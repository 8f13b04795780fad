"""Vectorized interval arithmetic: union length per group and clipping intervals to windows.

Both run as a handful of numpy passes over whole columns (sort, running maximum, bincount), so
a temporal breakdown of millions of events costs a few sorts, not a Python loop per event.
The trick used twice: shift each group onto its own disjoint stretch of the time axis
(``t - t0 + group * span``), so one global running maximum or ``searchsorted`` acts per group.
"""

from __future__ import annotations

import numpy as np

#: The spread axis must stay within int64: ``groups x span`` below this (Python ints, exact).
_AXIS = 1 << 63


def _spread(groups: np.ndarray, t: np.ndarray, t0: int, span: int) -> np.ndarray:
    return (t - t0) + groups.astype(np.int64) * span


def union_length(groups: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int) -> np.ndarray:
    """Length of the union of the intervals ``[start, end)`` in each group ``0..n_groups-1``."""
    out = np.zeros(n_groups, dtype=np.float64)
    if not len(start):
        return out.astype(np.int64)
    start = start.astype(np.int64, copy=False)
    end = np.maximum(end.astype(np.int64, copy=False), start)
    t0 = int(start.min())
    span = int(end.max()) - t0 + 1
    if n_groups * span < _AXIS:
        order, covered = _newly_covered(_spread(groups, start, t0, span), _spread(groups, end, t0, span))
        sums = np.bincount(groups[order], weights=covered, minlength=n_groups)
        return np.rint(sums).astype(np.int64)
    # Too many groups for one axis: group by group, each on its own times (rare: more than 2^63
    # ns of spread time).
    exact = np.zeros(n_groups, dtype=np.int64)
    for gi in np.unique(groups):
        m = groups == gi
        exact[gi] = min(int(_newly_covered(start[m], end[m])[1].sum()), _INT64_MAX)
    return exact


_INT64_MAX = (1 << 63) - 1


def _newly_covered(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The order that sorts the intervals by start, and in that order the length of each that the
    ones before it do not cover (their union is the sum), as uint64: exact for any int64 times."""
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    prev = np.empty_like(e)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = np.maximum.accumulate(e)[:-1]
    lo = np.maximum(s, prev)
    return order, np.where(e > lo, e.astype(np.uint64) - lo.astype(np.uint64), np.uint64(0))


def clip_to_windows(
    rank: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    win_rank: np.ndarray,
    win_start: np.ndarray,
    win_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pieces of each interval inside the windows of its rank.

    Windows of one rank must not overlap (profiler steps do not; see ``merge_windows``). An
    interval yields its piece in the last window starting at or before its start and, if
    different, in the last window starting before its end (a window inside the interval is thus
    kept whole); windows strictly between those two are skipped: intervals spanning three or
    more steps do not occur for device and op events. Returns (row index, window index, piece
    start, piece end).
    """
    empty = np.zeros(0, np.int64)
    if not len(start) or not len(win_start):
        return empty, empty, empty, empty
    t0 = int(min(start.min(), win_start.min()))
    span = int(max(end.max(), win_end.max())) - t0 + 1
    _rank_codes, rank_index = np.unique(np.concatenate([win_rank, rank]), return_inverse=True)
    wr, r = rank_index[: len(win_rank)], rank_index[len(win_rank) :]
    if len(_rank_codes) == 1:  # one rank: its own times, no shared axis (nothing to overflow)
        t0, span = 0, 0
    elif len(_rank_codes) * span >= _AXIS:  # times too far apart for one axis: rank by rank
        parts = []
        for code in range(len(_rank_codes)):
            rows_of, wins_of = np.flatnonzero(r == code), np.flatnonzero(wr == code)
            i, w, a, b = clip_to_windows(
                rank[rows_of], start[rows_of], end[rows_of], win_rank[wins_of], win_start[wins_of], win_end[wins_of]
            )
            parts.append((rows_of[i], wins_of[w], a, b))
        return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))  # type: ignore[return-value]
    ws = _spread(wr, win_start, t0, span)
    order = np.argsort(ws, kind="stable")
    ws_sorted = ws[order]
    s = _spread(r, start, t0, span)
    e = _spread(r, end, t0, span)
    rows, wins, ps, pe = [], [], [], []
    idx = np.arange(len(start))
    first = np.searchsorted(ws_sorted, s, side="right") - 1
    last = np.searchsorted(ws_sorted, np.maximum(e - 1, s), side="right") - 1
    for which, cond in ((first, np.ones(len(s), bool)), (last, last != first)):
        ok = cond & (which >= 0)
        w = order[np.clip(which, 0, None)]
        ok &= wr[w] == r
        a = np.maximum(start, win_start[w])
        b = np.minimum(end, win_end[w])
        ok &= b > a
        rows.append(idx[ok])
        wins.append(w[ok])
        ps.append(a[ok])
        pe.append(b[ok])
    return np.concatenate(rows), np.concatenate(wins), np.concatenate(ps), np.concatenate(pe)


def merge_windows(rank: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge overlapping intervals per rank into disjoint windows (what ``clip_to_windows`` needs)."""
    if not len(start):
        return rank, start, end
    order = np.lexsort((start, rank))
    r, s, e = rank[order], start[order], end[order]
    run_max = np.empty_like(e)
    # running max of end within each rank: reset at rank changes via the spread trick
    t0 = int(s.min())
    span = int(e.max()) - t0 + 1
    codes = np.unique(r, return_inverse=True)[1].astype(np.int64)
    if (int(codes[-1]) + 1) * span < _AXIS:
        run_max = np.maximum.accumulate((e - t0) + codes * span) - codes * span + t0
    else:  # times too far apart for one axis: rank by rank (each rank's rows are contiguous)
        bounds = np.flatnonzero(np.diff(codes)) + 1
        run_max = np.concatenate([np.maximum.accumulate(part) for part in np.split(e, bounds)])
    new = np.ones(len(s), bool)
    new[1:] = (r[1:] != r[:-1]) | (s[1:] > run_max[:-1])
    group = np.cumsum(new) - 1
    n = int(group[-1]) + 1
    out_s = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out_s, group, s)
    out_e = np.full(n, np.iinfo(np.int64).min, np.int64)  # (times may be negative: relative traces)
    np.maximum.at(out_e, group, e)
    out_r = r[new]
    return out_r, out_s, out_e
