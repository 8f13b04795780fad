"""The graph on real traces: the baseline replay reproduces every bundled trace's steps (or
wall time) within 2%, a step's critical-path rows sum to its wall time, and an edit never
makes a step slower than the baseline when it only shortens events."""

from __future__ import annotations

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph import Edits, critical_path_table, replay_summary
from tests.conftest import KINETO, NOT_TRACES

#: every trace in tests/data/kineto: Kineto JSON and our Parquet (the provenance map Inductor
#: kept beside the compiled H200 trace is not a trace)
TRACES = sorted(
    p for p in KINETO.rglob("*") if p.name.endswith((".json", ".json.gz", ".parquet")) and p not in NOT_TRACES
)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(KINETO)))
def test_baseline_replay_reproduces_the_trace(path):
    frames = TraceFrames(ne.load(path))
    s = replay_summary(frames)
    assert s["within_tolerance"], s.get("note")
    assert all(abs(st["baseline_error_pct"]) <= 2.0 for st in s["steps"])
    cp = critical_path_table(frames)
    walls = {(st["rank"], st["step"]): st["replayed_ns"] for st in s["steps"]}
    sums = cp.groupby(["rank", "step"])["ns"].sum().to_dict()
    assert sums == {k: v for k, v in walls.items() if v}
    assert (cp["ns"] > 0).all()


@pytest.mark.parametrize("name", ["hta/nccl_data.json.gz", "tracelens/qwen_h100.json.gz", "hta/sampled_rank-0.json.gz"])
def test_shortening_events_never_lengthens_a_step(name):
    frames = TraceFrames(ne.load(KINETO / name))
    s = replay_summary(frames, Edits(scale=((".", 0.5),)))
    assert all(st["projected_ns"] <= st["replayed_ns"] for st in s["steps"])
    assert s["saving_ns"] > 0
