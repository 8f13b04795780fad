"""The vectorized interval arithmetic under the breakdowns, checked against plain Python."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from neuron_explorer.analyzers.core.intervals import clip_to_windows, merge_windows, union_length

intervals = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 1000), st.integers(0, 200)), max_size=60)


def _arrays(items: list[tuple[int, int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, start, duration) triples as group, start and end arrays."""
    g, s, d = (np.array([t[k] for t in items], dtype=np.int64) for k in range(3))
    return g, s, s + d


def brute_union(pairs: list[tuple[int, int]]) -> int:
    covered: set[int] = set()
    for s, e in pairs:
        covered.update(range(s, e))
    return len(covered)


@settings(max_examples=200, deadline=None)
@given(intervals)
def test_union_length_per_group_matches_counting_covered_instants(items):
    groups, start, end = _arrays(items)
    got = union_length(groups, start, end, 4)
    for g in range(4):
        assert got[g] == brute_union([(s, e) for gg, s, e in zip(groups, start, end) if gg == g])


@settings(max_examples=200, deadline=None)
@given(intervals, st.lists(st.tuples(st.integers(0, 1), st.integers(0, 100)), min_size=1, max_size=8))
def test_clip_to_windows_keeps_exactly_the_parts_inside_windows(items, raw_windows):
    # windows: disjoint per rank, built from sorted boundaries
    ranks = np.array([r for r, _ in raw_windows], dtype=np.int64)
    ws, we, wr = [], [], []
    for r in (0, 1):
        cuts = sorted({c * 10 for rr, c in raw_windows if rr == r})
        for a, b in zip(cuts[::2], cuts[1::2]):
            ws.append(a)
            we.append(b)
            wr.append(r)
    if not ws:
        return
    ws_a, we_a, wr_a = np.array(ws), np.array(we), np.array(wr)
    groups, start, end = _arrays(items)
    rank = groups % 2
    rows, wins, ps, pe = clip_to_windows(rank, start, end, wr_a, ws_a, we_a)
    for i in range(len(start)):
        # contract: the piece in the last window starting at or before the start, and the piece in
        # the last window starting before the end (so a window inside the interval is kept)
        mine = [w for w in range(len(ws)) if wr[w] == rank[i]]
        firsts = [w for w in mine if ws[w] <= start[i]]
        lasts = [w for w in mine if ws[w] < max(end[i], start[i] + 1)]
        chosen = {max(firsts, key=lambda w: ws[w])} if firsts else set()
        chosen |= {max(lasts, key=lambda w: ws[w])} if lasts else set()
        expected = set()
        for w in chosen:
            a, b = max(start[i], ws[w]), min(end[i], we[w])
            if b > a:
                expected.add((w, a, b))
        got = {(int(w), int(a), int(b)) for r, w, a, b in zip(rows, wins, ps, pe) if r == i}
        assert got == expected
    del ranks


def test_merge_windows_unions_overlaps_per_rank():
    r, s, e = merge_windows(np.array([0, 0, 0, 1]), np.array([0, 5, 20, 3]), np.array([10, 12, 25, 4]))
    assert list(zip(r.tolist(), s.tolist(), e.tolist())) == [(0, 0, 12), (0, 20, 25), (1, 3, 4)]


# Times across the trace's whole +-4e18 ns range: groups x span no longer fits one int64 axis, so
# the functions work group by group (a fuzzed trace once recursed without end here). An affine
# map with a positive scale keeps unions, windows and pieces, scaled: the results on the small
# coordinates (checked by brute force above) predict the results on the huge ones.
K, OFFSET = 6_600_000_000_000_000, -4 * 10**18


def _huge(v: np.ndarray) -> np.ndarray:
    return v * K + OFFSET


@settings(max_examples=100, deadline=None)
@given(intervals)
def test_union_length_across_the_whole_time_range(items):
    groups, start, end = _arrays(items)
    small = union_length(groups, start, end, 4)
    for n_groups in (4, 1):
        g = groups if n_groups == 4 else np.zeros_like(groups)
        expect = small if n_groups == 4 else union_length(g, start, end, 1)
        assert union_length(g, _huge(start), _huge(end), n_groups).tolist() == (expect * K).tolist()


@settings(max_examples=100, deadline=None)
@given(intervals, st.lists(st.tuples(st.integers(0, 1), st.integers(0, 100)), min_size=1, max_size=8))
def test_clip_and_merge_across_the_whole_time_range(items, raw_windows):
    wr = np.array([r for r, _ in raw_windows], dtype=np.int64)
    ws = np.array([c * 10 for _, c in raw_windows], dtype=np.int64)
    mr, ms, me = merge_windows(wr, ws, ws + 5)
    hr, hs, he = merge_windows(wr, _huge(ws), _huge(ws + 5))
    assert hr.tolist() == mr.tolist() and hs.tolist() == _huge(ms).tolist() and he.tolist() == _huge(me).tolist()
    groups, start, end = _arrays(items)
    rank = groups % 2
    small = clip_to_windows(rank, start, end, mr, ms, me)
    huge = clip_to_windows(rank, _huge(start), _huge(end), mr, _huge(ms), _huge(me))
    expect = {(int(i), int(w), int(a) * K + OFFSET, int(b) * K + OFFSET) for i, w, a, b in zip(*small)}
    assert {tuple(int(x) for x in t) for t in zip(*huge)} == expect


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 100), st.integers(0, 50), st.integers(0, 50)), min_size=1))
@example([(0, 0, 0, 0), (0, 0, 0, 5)])  # a zero-length kernel at its launch instant: the other is in flight
def test_queue_depth_per_stream_counts_in_flight_work_at_any_time_scale(items):
    """Per event: the events of its stream launched at or before its launch and not finished by
    then (itself aside), counted by brute force; the same at times spread over the whole range."""
    import pandas as pd

    from neuron_explorer.analyzers.core.context import _queue_depth

    stream = [s for s, _, _, _ in items]
    launch = [lt for _, lt, _, _ in items]
    start = [lt + gap for _, lt, gap, _ in items]
    end = [st_ + d for st_, (_, _, _, d) in zip(start, items)]
    expect = [
        sum(1 for j in range(len(items)) if j != i and stream[j] == stream[i] and launch[j] <= launch[i] < end[j])
        for i in range(len(items))
    ]
    for scale, off in ((1, 0), (K // 2, OFFSET)):
        ev = pd.DataFrame(
            {
                "rank": 0,
                "device": 0,
                "stream": stream,
                "launch_start_ns": np.array(launch, np.int64) * scale + off,
                "start_ns": np.array(start, np.int64) * scale + off,
                "dur_ns": np.array([e - s for s, e in zip(start, end)], np.int64) * scale,
            }
        )
        assert _queue_depth(ev).tolist() == expect


def test_union_of_one_group_spanning_more_than_int64() -> None:
    # -4e18 .. 8e18 (a start at the range's low end, another at 4e18 with a 4e18 duration): the
    # group's span, 1.2e19 ns, is past int64, so it is measured on its own times
    start = np.array([-4 * 10**18, 4 * 10**18 - 10, 4 * 10**18], dtype=np.int64)
    end = np.array([-4 * 10**18 + 10, 4 * 10**18 + 5, 8 * 10**18], dtype=np.int64)
    assert union_length(np.zeros(3, np.int64), start, end, 1).tolist() == [10 + 4 * 10**18 + 10]
    assert union_length(np.array([0, 1, 1]), start, end, 2).tolist() == [10, 4 * 10**18 + 10]


def test_clip_of_one_rank_spanning_more_than_int64() -> None:
    # one rank's interval and window from -4e18 to 8e18: 1.2e19 ns, past int64 (this recursed
    # without end when one rank still went through the shared axis)
    lo, hi = -4 * 10**18, 8 * 10**18
    rank = np.zeros(2, np.int64)
    rows, wins, a, b = clip_to_windows(
        rank, np.array([lo, 0]), np.array([hi, 10]), rank[:1], np.array([lo], np.int64), np.array([hi], np.int64)
    )
    assert sorted(zip(rows.tolist(), wins.tolist(), a.tolist(), b.tolist())) == [(0, 0, lo, hi), (1, 0, 0, 10)]


def test_queue_depth_of_one_stream_at_negative_times() -> None:
    import pandas as pd

    from neuron_explorer.analyzers.core.context import _queue_depth

    # relative times: one kernel launched at -10 runs from -9 to 5; the next, launched at 2, finds it in flight
    ev = pd.DataFrame(
        {"rank": 0, "device": 0, "stream": [0, 0], "launch_start_ns": [-10, 2], "start_ns": [-9, 3], "dur_ns": [14, 1]}
    )
    assert _queue_depth(ev).tolist() == [0, 1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-2, 6), max_size=30), st.lists(st.integers(-2, 8), max_size=30))
def test_lookup_finds_the_first_row_of_each_key_and_never_a_null(keys, targets):
    """``columns.lookup`` (the id joins under the graph and the attribution), duplicates and null
    (negative) keys included, against a dictionary of first positions."""
    from neuron_explorer.analyzers.core.columns import lookup

    first: dict[int, int] = {}
    for pos, k in enumerate(keys):
        first.setdefault(k, pos)
    want = [first.get(t, -1) if t >= 0 else -1 for t in targets]
    got = lookup(np.array(keys, dtype=np.int64), np.array(targets, dtype=np.int64))
    assert list(got) == want


def test_group_codes_match_a_multiindex_factorize_nan_included() -> None:
    import pandas as pd

    from neuron_explorer.analyzers.core.columns import group_codes

    rng = np.random.default_rng(0)
    rank, device = rng.integers(0, 3, 5000), rng.integers(-1, 4, 5000)
    stream = rng.integers(0, 50, 5000).astype(float)
    stream[::97] = np.nan  # a missing stream is a group of its own, as in the MultiIndex
    expected = pd.factorize(pd.MultiIndex.from_arrays([rank, device, stream]))[0]
    assert (group_codes(rank, device, stream) == expected).all()
    assert len(group_codes()) == 0
