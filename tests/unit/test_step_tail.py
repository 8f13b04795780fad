"""A trailing partial step (the ProfilerStep span after the last step boundary) is not a step."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.collectors.build.step_tail import trailing_partial_step

DATA = Path(__file__).resolve().parent.parent / "data" / "kineto"


def _kineto(tmp_path: Path, steps: list[tuple[float, float, bool]]) -> Path:
    """A CPU Kineto trace: one ProfilerStep#i per (start us, dur us, holds an optimizer step)."""
    events = []
    for i, (ts, dur, opt) in enumerate(steps):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
                       "ts": ts, "dur": dur})  # fmt: skip
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts + 1,
                       "dur": dur / 4})  # fmt: skip
        if opt:
            events.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1,
                           "tid": 1, "ts": ts + dur / 2, "dur": dur / 4})  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 0}))
    return path


def test_a_tail_without_the_step_marker_is_dropped_and_reported(tmp_path: Path) -> None:
    # 6 iterations with an optimizer step each, then the span until the profiler stopped
    spans = [(i * 1000.0, 1000.0, True) for i in range(6)] + [(6000.0, 300.0, False)]
    t = ne.load(_kineto(tmp_path, spans))
    assert t.metadata["dropped_steps"] == [{"rank": 0, "step": 6, "dur_ns": 300_000, "reason": "trailing partial step"}]
    a = analyze(t)
    assert a.steps["step"].tolist() == [0, 1, 2, 3, 4, 5]
    assert not [f for f in a.findings if f.rule_id == "step_variance"]
    ev = t.events.to_pandas()
    assert (ev.loc[ev["name"] == "ProfilerStep#6", "kind"] == "annotation").all()
    assert ev.loc[ev["start_ns"] >= 6_000_000, "step"].isna().all()


def test_a_short_last_step_that_holds_its_marker_is_a_step(tmp_path: Path) -> None:
    spans = [(i * 1000.0, 1000.0, True) for i in range(4)] + [(4000.0, 300.0, True)]
    t = ne.load(_kineto(tmp_path, spans))
    assert "dropped_steps" not in t.metadata
    assert len(analyze(t).steps) == 5


def test_without_markers_only_a_tail_under_half_the_shortest_step_is_dropped() -> None:
    numbers, none = np.arange(4), np.zeros(0, np.int64)
    start = np.array([0, 1000, 2000, 3000])
    assert trailing_partial_step(numbers, start, np.array([1000, 900, 1000, 400]), none) == 3
    assert trailing_partial_step(numbers, start, np.array([1000, 900, 1000, 600]), none) is None
    assert trailing_partial_step(numbers, start, np.array([1000, 900, 1000, 1000]), none) is None
    # one or two full steps say too little: a scheduled cycle's last step may just be its fastest
    assert trailing_partial_step(numbers[:3], start[:3], np.array([1000, 900, 300]), none) is None


def test_a_step_recorded_on_two_threads_is_one_step() -> None:
    numbers = np.array([0, 0, 1, 1, 2])
    start = np.array([0, 5, 1000, 1003, 2000])
    dur = np.array([1000, 200, 1000, 100, 100])
    assert trailing_partial_step(numbers, start, dur, np.array([400, 1400])) == 2


def test_the_mi250_trace_loses_its_49us_tail(tmp_path: Path) -> None:
    with gzip.open(DATA / "hta" / "amd_mi250.json.gz") as fh:
        raw = json.load(fh)["traceEvents"]
    host_steps = [
        e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#") and e["cat"] == "user_annotation"
    ]
    last = max(host_steps, key=lambda e: e["ts"])
    opt = [e["ts"] for e in raw if str(e.get("name", "")).startswith("Optimizer.step#")]
    assert not any(last["ts"] <= ts < last["ts"] + last["dur"] for ts in opt)  # the tail holds no optimizer step
    t = ne.load(DATA / "hta" / "amd_mi250.json.gz")
    (dropped,) = t.metadata["dropped_steps"]
    assert dropped["step"] == int(last["name"].split("#")[1])
    assert abs(dropped["dur_ns"] - last["dur"] * 1000) <= 1
    assert len(analyze(t).steps) == len(host_steps) - 1


def test_a_stalled_tail_without_the_step_marker_is_still_dropped(tmp_path: Path) -> None:
    # the process was descheduled after the last optimizer step: the tail outlasts a short step
    spans = [(0.0, 1000.0, True), (1000.0, 400.0, True), (1400.0, 1000.0, True), (2400.0, 700.0, False)]
    t = ne.load(_kineto(tmp_path, spans))
    assert [d["step"] for d in t.metadata["dropped_steps"]] == [3]
    assert len(analyze(t).steps) == 3


def test_info_says_how_many_steps_were_dropped(tmp_path: Path) -> None:
    from neuron_explorer.trace.summary import describe
    from tests.conftest import run_cli

    spans = [(i * 1000.0, 1000.0, True) for i in range(3)] + [(3000.0, 200.0, False)]
    path = _kineto(tmp_path, spans)
    assert describe(ne.load(path))["dropped_steps"] == [
        {"rank": 0, "step": 3, "dur_ns": 200_000, "reason": "trailing partial step"}
    ]
    proc = run_cli("info", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "Dropped 1 trailing partial step(s)" in proc.stdout and "#3" in proc.stdout
