"""enclosing_spans (whole-column pointer jumping) equals the profiler's stack walk, event by event."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_explorer.collectors.build.nesting import enclosing_spans


def stack_walk(start: list[int], end: list[int], is_span: list[bool], new_group: list[bool]) -> list[int]:
    """The reference: a stack per thread, popped when a span ended at or before a row's start."""
    out: list[int] = []
    stack: list[int] = []
    for i, (s, new) in enumerate(zip(start, new_group)):
        if new:
            stack = []
        while stack and end[stack[-1]] <= s:
            stack.pop()
        out.append(stack[-1] if stack else -1)
        if is_span[i]:
            stack.append(i)
    return out


def rows_in_order(events: list[tuple[int, int, int, bool]]) -> tuple[np.ndarray, ...]:
    """(thread, start, dur, span) events -> arrays sorted by thread, start, longer first."""
    events = sorted(events, key=lambda e: (e[0], e[1], -e[2]))
    thread = np.array([e[0] for e in events], np.int64)
    start = np.array([e[1] for e in events], np.int64)
    end = start + np.array([e[2] for e in events], np.int64)
    is_span = np.array([e[3] and e[2] > 0 for e in events], bool)
    new_group = np.ones(len(events), bool)
    new_group[1:] = thread[1:] != thread[:-1]
    return start, end, is_span, new_group


events_strategy = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(0, 40), st.booleans()), max_size=120
)


@given(events_strategy)
@settings(max_examples=400, deadline=None)
def test_equals_the_stack_walk_on_any_overlap(events):
    # Given events on a few threads, nested, overlapping without nesting, tied and instant
    start, end, is_span, new_group = rows_in_order(events)
    # When parents are found by pointer jumping, then they equal the stack walk's
    expected = stack_walk(start.tolist(), end.tolist(), is_span.tolist(), new_group.tolist())
    assert enclosing_spans(start, end, is_span, new_group).tolist() == expected


def test_long_runs_of_siblings_and_deep_nesting():
    # Given a deep chain of spans, each with a long run of leaf children
    rng = np.random.default_rng(7)
    events = []
    for depth in range(200):
        events.append((0, depth * 10, 100_000 - depth * 20, True))
    for k in range(5000):
        events.append((0, 2000 + int(rng.integers(0, 90_000)), int(rng.integers(0, 3)), bool(k % 3)))
    start, end, is_span, new_group = rows_in_order(events)
    expected = stack_walk(start.tolist(), end.tolist(), is_span.tolist(), new_group.tolist())
    assert enclosing_spans(start, end, is_span, new_group).tolist() == expected


def test_no_rows():
    empty = np.zeros(0, np.int64)
    assert enclosing_spans(empty, empty, np.zeros(0, bool), np.zeros(0, bool)).size == 0
