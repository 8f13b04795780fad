"""Issue 40's done-when, as properties over every bundled real trace: the costs of the loud
findings never sum past the wall, one-time work is billed once (by the one-time finding), a
steady-state finding never costs more than the steady time, and a message states its severity
once. The walls are recomputed from the raw step windows of the trace, not taken from the
analysis."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.collectors.load import load
from tests.conftest import BUNDLED_TRACES


def _profiled_ns(trace) -> int:
    """The wall the attribution splits, from the events: every ProfilerStep window once per
    device of its rank, or the whole span of each rank when the trace has no steps."""
    ev = trace.events.to_pandas()
    steps = ev[ev["kind"].astype(str) == "step"]
    dev = ev[ev["kind"].astype(str).isin(["kernel", "memcpy", "memset", "collective"])]
    per_rank = dev.groupby("rank")["device"].nunique()
    if len(steps):
        n = steps["rank"].map(per_rank).fillna(1).clip(lower=1)
        return int((steps["dur_ns"] * n).sum())
    span = ev.groupby("rank").apply(lambda g: (g["start_ns"] + g["dur_ns"]).max() - g["start_ns"].min())
    return int((span * per_rank.reindex(span.index).fillna(1).clip(lower=1)).sum())


@pytest.mark.slow
@pytest.mark.parametrize("path", BUNDLED_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_costs_never_sum_past_the_wall_and_one_time_work_is_billed_once(path: Path) -> None:
    trace = load(path)
    a = analyze(trace)
    wall = _profiled_ns(trace)
    loud = [f for f in a.findings if f.severity in ("warning", "error")]
    assert sum(f.cost_ns for f in loud) <= wall * 1.01 + 1_000, [(f.rule_id, f.cost_ns) for f in loud]
    one_time = [f for f in a.findings if f.category == "one_time"]
    assert len({f.rank for f in one_time}) == len(one_time), [f.rule_id for f in one_time]
    steady = wall - int(a.attribution["one_time_ns"].sum()) if len(a.attribution) else wall
    for f in a.findings:
        if f.category != "one_time":
            assert f.cost_ns <= max(steady, 0) * 1.01 + 1_000, (f.rule_id, f.cost_ns, steady)
        assert len(re.findall(r"\(Shown as ", f.message)) <= 1, f.message
