"""Issue 40 item 5 on the bundled H200 compile warm-up (a torch.compile'd MLP compiled cold in
step 0, 3.5 s of compilation) and the other compiled traces: one-time work is billed once, by
``warmup_cost``; no steady-state finding prices a frame that ran inside the compile; and no
finding on a compiled run advises plain ``torch.compile(model)``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.attribution.python_time import python_exposed_ns
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.collectors.load import load
from tests.conftest import KINETO

COMPILED = [
    KINETO / "h200/compile_warmup.json.gz",
    KINETO / "h200/compiled_train.json.gz",
    KINETO / "cpu_compiled/trace.json.gz",
]


def test_frames_inside_the_compile_hold_no_steady_python(tmp_path) -> None:
    """No bundled compile trace records Python stacks, so this one is built: step 0 holds a
    300 ms compile (a ``dynamo_timed`` span with Inductor's Python inside), steps 1-3 a 1 ms
    Python loop each between two ops. The compile's frames get none of the Python time, and
    the finding, if any, names none of them."""
    ev = []

    def x(cat, name, ts, dur):
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur})

    t = 0.0
    for k in range(4):
        length = 302_000.0 if k == 0 else 3_000.0
        x("user_annotation", f"ProfilerStep#{k}", t, length)
        x("python_function", "train.py(10): step", t + 1, length - 2)
        if k == 0:
            x("cpu_op", "OutputGraph.call_user_compiler (dynamo_timed)", t + 10, 300_000)
            x("python_function", "torch/_inductor/compile_fx.py(700): compile_fx", t + 20, 299_000)
            x("python_function", "torch/_inductor/cudagraph_trees.py(900): record", t + 30, 200_000)
        x("cpu_op", "aten::mm", t + length - 2_500, 500)
        x("python_function", "train.py(12): postprocess", t + length - 1_900, 1_000)
        x("cpu_op", "aten::add", t + length - 800, 500)
        t += length
    path = tmp_path / "compile.json"
    path.write_text(json.dumps({"traceEvents": ev, "baseTimeNanoseconds": 0}))
    frames = TraceFrames(load(path))
    host = frames.host
    own = python_exposed_ns(frames)
    names = host["name"].astype(str).to_numpy()
    inductor = np.char.find(names.astype(str), "torch/_inductor/") >= 0
    assert inductor.sum() == 2 and int(own[inductor].sum()) == 0
    post = names == "train.py(12): postprocess"
    assert int(own[post].sum()) == pytest.approx(3 * 1_000_000, rel=0.01)
    a = analyze(load(path), rules=["python_overhead"])
    for f in a.findings:
        assert "_inductor" not in f.message and "cudagraph_trees" not in f.message


@pytest.mark.parametrize("path", COMPILED, ids=lambda p: p.parent.name + "/" + p.name)
def test_one_time_is_billed_once_and_no_plain_compile_advice(path) -> None:
    a = analyze(load(path))
    one_time = [f for f in a.findings if f.category == "one_time"]
    assert [f.rule_id for f in one_time] in ([], ["warmup_cost"])
    for f in a.findings:
        text = f.recommendation or ""
        assert "torch.compile(model) (fuses" not in text, (f.rule_id, text)
    steady = [f for f in a.findings if f.category != "one_time" and f.severity != "info"]
    wall = float(a.attribution["wall_ns"].sum() - a.attribution["one_time_ns"].sum())
    assert sum(f.cost_ns for f in steady) <= wall * 1.01 + 1000
    assert np.isfinite(wall)
