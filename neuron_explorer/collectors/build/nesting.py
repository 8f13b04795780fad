"""Which span encloses each event: the call tree of host events, by whole-column pointer jumping.

Events of one thread, sorted by start, are nested the way a profiler's stack nests them: walk the
rows in order, pop the spans that ended at or before the row's start, the row's parent is the
span left on top, and a span is pushed. That loop is exact even where spans overlap without
nesting (a child that outlives its parent), but it is a Python loop over every event.

The same answer in a few array passes. For rows in order with starts ``s`` (non-decreasing) and
ends ``e``, the parent of row ``i`` is the *latest* span ``j < i`` with ``e[j] > s[i]``: every span
pushed earlier that ends after ``s[i]`` is still on the stack (popping it would have needed a
row starting at or after its end), and those above the parent all ended. Candidates are checked
from ``i - 1`` backwards; when candidate ``c`` fails for ``i``, every row between ``c`` and
``c``'s own current candidate failed for ``c`` and so fails for ``i`` (``s`` only grows), so ``i``
jumps to ``c``'s candidate. All rows advance together and the jumps compound (pointer jumping):
a run of ``k`` siblings resolves in ~log2(k) passes.
"""

from __future__ import annotations

import numpy as np


def enclosing_spans(start: np.ndarray, end: np.ndarray, is_span: np.ndarray, new_group: np.ndarray) -> np.ndarray:
    """The position of each row's innermost enclosing span, else -1.

    Rows are given in processing order: grouped by thread (``new_group`` is True at the first
    row of each group, and at row 0), and within a group by start (ties: the enclosing event
    first). Only rows with ``is_span`` can be parents; a span contains a row when it started
    earlier in the order and ends after the row starts.
    """
    n = len(start)
    parent = np.full(n, -1, np.int64)
    if n == 0:
        return parent
    cand = np.arange(-1, n - 1, dtype=np.int64)
    cand[np.asarray(new_group, bool)] = -1
    cand[0] = -1
    active = np.nonzero(cand >= 0)[0]
    while active.size:
        c = cand[active]
        ok = is_span[c] & (end[c] > start[active])
        parent[active[ok]] = c[ok]
        rest = active[~ok]
        nxt = cand[c[~ok]]
        cand[rest] = nxt
        active = rest[nxt >= 0]
    return parent


def nearest_marked_ancestor(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """For each row, the nearest row among itself and its ancestors with ``marked >= 0``
    (the value of ``marked`` there), else -1. ``parent`` is -1 at roots. Pointer jumping."""
    val = marked.copy()
    jump = parent.copy()
    while True:
        need = (val < 0) & (jump >= 0)
        if not need.any():
            return val
        idx = np.nonzero(need)[0]
        val[idx] = val[jump[idx]]
        active = jump >= 0
        jump[active] = jump[jump[active]]
