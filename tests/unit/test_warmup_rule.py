"""One warm-up rule for every view: the TUI's first screen (before any analysis) leaves out the
same steps as ``analyze``, so both show the same mean step time (issue 28, item 3)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from neuron_explorer.analyzers.metrics.steps import step_summary, step_table
from neuron_explorer.trace.warmup import steady_durations, warmup_count


def _frames(durs_by_rank: dict[int, list[int]]) -> SimpleNamespace:
    rows = []
    for rank, durs in durs_by_rank.items():
        t = 0
        for i, d in enumerate(durs):
            rows.append({"rank": rank, "step": i, "start_ns": t, "end_ns": t + d, "dur_ns": d, "event_id": i})
            t += d
    return SimpleNamespace(step_windows=pd.DataFrame(rows))


def test_leading_slow_steps_are_warm_up_and_only_leading_ones() -> None:
    assert warmup_count([50, 40, 10, 11, 10, 12]) == 2
    assert warmup_count([10, 40, 10, 11, 10]) == 0  # a slow second step after a normal first is not warm-up
    assert warmup_count([50, 10]) == 0  # nothing after the warm-up window to compare with
    assert warmup_count([50, 45, 44, 10, 10, 10, 10]) == 2  # at most two


def test_the_tui_mean_equals_analyze_mean() -> None:
    cases = {0: [183, 90, 8, 8, 9, 8, 8, 9], 1: [40, 9, 8, 9, 8, 8, 9, 8]}
    stats = step_summary(step_table(_frames(cases)))
    steady, warm = steady_durations((r, d) for r, durs in cases.items() for d in durs)
    assert warm == stats["num_warmup"] == 3
    assert sum(steady) / len(steady) == stats["mean_ns"]
