"""The warm-up rule, in one place and without pandas (the TUI's first screen uses it before any
analysis): a rank's leading steps, at most ``WARMUP_MAX_STEPS``, each over ``WARMUP_FACTOR``
times the median of the steps after them, are warm-up. ``analyzers.metrics.steps.step_table`` applies
the same rule to whole columns."""

from __future__ import annotations

from collections.abc import Iterable
from statistics import median

WARMUP_FACTOR = 1.5
WARMUP_MAX_STEPS = 2


def warmup_count(durations: list[int]) -> int:
    """How many of one rank's leading steps (``durations`` in step order) are warm-up."""
    later = durations[WARMUP_MAX_STEPS:]
    if not later:
        return 0
    limit = WARMUP_FACTOR * median(later)
    n = 0
    while n < min(WARMUP_MAX_STEPS, len(durations)) and durations[n] > limit:
        n += 1
    return n


def steady_durations(steps: Iterable[tuple[int, int]]) -> tuple[list[int], int]:
    """``(rank, duration)`` pairs in step order -> the steady durations and the warm-up count."""
    by_rank: dict[int, list[int]] = {}
    for rank, dur in steps:
        by_rank.setdefault(rank, []).append(dur)
    steady: list[int] = []
    warm = 0
    for durs in by_rank.values():
        n = warmup_count(durs)
        warm += n
        steady += durs[n:]
    return steady, warm
