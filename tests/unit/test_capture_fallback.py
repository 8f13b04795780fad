"""A capture on a torch without ``trace_activities()`` (torch 2.11) keeps exact lines: torch's
JSON export with the event tree's sources put back (``collectors.capture.capture_fallback``).

One real CPU capture is converted both ways, the normal path and the forced fallback (the same
torch results, their ``trace_activities`` hidden as torch 2.11 lacks it), and compared. The
capture runs in a fresh interpreter (``CAPTURE``), the comparisons here."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import neuron_explorer as ne
from neuron_explorer.trace.model import Trace

pytest.importorskip("torch")

USER_CODE = textwrap.dedent(
    """
    import torch


    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(16)
            self.fc = torch.nn.Linear(16, 16)

        def forward(self, x):
            h = self.fc(self.ln(x))
            att = (h @ h.transpose(-2, -1)) * 0.25
            return x + torch.softmax(att, dim=-1) @ h


    def step(model, opt, x):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss
    """
)


#: Runs in a fresh interpreter: torch's Python tracer keeps borrowed pointers to code objects'
#: names across sessions, so in a process where earlier tests' user modules were freed, a new
#: module's frames can read as garbage (docs/capture.md, "It never breaks your program").
CAPTURE = textwrap.dedent(
    """
    import importlib.util, json, shutil, sys
    from pathlib import Path

    import torch

    from neuron_explorer.collectors.capture.capture_convert import convert_results, saved_export

    out = Path(sys.argv[1])


    class ResultsWithoutActivities:
        # torch's real results as torch 2.11 shows them: no trace_activities()
        def __init__(self, results, tree=True):
            self._results, self._tree = results, tree

        def trace_activities(self):
            raise AttributeError("'_ProfilerResult' object has no attribute 'trace_activities'")

        def experimental_event_tree(self):
            if not self._tree:
                raise AttributeError("'_ProfilerResult' object has no attribute 'experimental_event_tree'")
            return self._results.experimental_event_tree()

        def __getattr__(self, name):
            return getattr(self._results, name)


    spec = importlib.util.spec_from_file_location("user_block", out / "user_block.py")
    user = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(user)


    def capture():
        torch.manual_seed(0)
        model = user.Block()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(4, 8, 16)
        with torch.profiler.profile(with_stack=True, record_shapes=True, profile_memory=True) as prof:
            for _ in range(3):
                user.step(model, opt, x)
        return prof.profiler.kineto_results


    meta = {"collector": "torch_profiler"}
    results = capture()
    convert_results(results, meta).write(out / "normal.parquet")
    hidden = ResultsWithoutActivities(results)
    convert_results(hidden, meta).write(out / "fallback.parquet")
    shutil.copy(saved_export(hidden), out / "export.json")
    acts = results.trace_activities()
    record = type(acts[0])
    ops = {
        record.correlation_id(a): [record.name(a), record.timestamp(a)]
        for a in acts
        if record.type(a) in ("cpu_op", "user_annotation")
    }
    (out / "records.json").write_text(json.dumps(ops))
    convert_results(ResultsWithoutActivities(capture(), tree=False), meta, cycle=2).write(out / "no_tree.parquet")

    # steps inferred from a function's returns (the loop never calls prof.step())
    stepped = capture()
    convert_results(stepped, meta, step_on="step").write(out / "steps_normal.parquet")
    convert_results(ResultsWithoutActivities(stepped), meta, step_on="step").write(out / "steps_fallback.parquet")

    # the exact-lines mode's markers, read by the walk in both paths
    from neuron_explorer.collectors.lines.exact_lines import ExactLinesMode

    with ExactLinesMode():
        marked = capture()
    exact_meta = {"collector": "torch_profiler", "profiler_options": {"exact_lines": True}}
    convert_results(marked, exact_meta).write(out / "exact_normal.parquet")
    convert_results(ResultsWithoutActivities(marked), exact_meta).write(out / "exact_fallback.parquet")
    """
)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One capture of 3 training steps of a small block (user code in a file of its own),
    converted the normal way and through the fallback; a second one with no event tree."""
    out = tmp_path_factory.mktemp("fallback")
    (out / "user_block.py").write_text(USER_CODE)
    (out / "capture.py").write_text(CAPTURE)
    r = subprocess.run([sys.executable, str(out / "capture.py"), str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def both(captured: Path) -> tuple[Trace, Trace]:
    return ne.load(captured / "normal.parquet"), ne.load(captured / "fallback.parquet")


_SRC = ["src_file", "src_line", "src_func", "src_precision", "src_module"]


def _rows(trace: Any, kind: str) -> pd.DataFrame:
    df = trace.to_pandas(columns=["kind", "name", "start_ns", "dur_ns", *_SRC])
    df = df[df["kind"].astype(str) == kind].drop(columns="kind")
    df["name"] = df["name"].astype(str)
    for c in _SRC:
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df.sort_values(["start_ns", "name", "dur_ns"]).reset_index(drop=True)


def test_the_fallback_gives_every_op_the_line_the_normal_capture_gives(both: tuple[Any, Any]) -> None:
    normal, fallback = both
    assert "capture_fallback" not in normal.metadata
    assert "trace_activities" in fallback.metadata["capture_fallback"]
    a, b = _rows(normal, "cpu_op"), _rows(fallback, "cpu_op")
    assert len(a) == len(b) > 100
    pd.testing.assert_frame_equal(a, b)
    # exact lines indeed (the JSON alone has def lines only): calls, and backward ops by forward
    prec = a["src_precision"].value_counts()
    assert prec.get("line", 0) > 0 and prec.get("forward", 0) > 0
    in_user = a[a["src_file"].fillna("").str.endswith("user_block.py")]
    assert {12, 18, 19, 20} <= set(in_user["src_line"])  # self.fc(...), model(x), backward(), opt.step()


def test_the_fallback_gives_allocations_the_lines_the_normal_capture_gives(both: tuple[Any, Any]) -> None:
    # (an allocation is an instant: the JSON gives it no duration, torch's in-memory record one)
    a, b = (_rows(t, "memory").drop(columns="dur_ns") for t in both)
    assert len(a) == len(b) > 0
    pd.testing.assert_frame_equal(a, b)
    assert (b["src_precision"] == "line").any()


def test_the_fallback_prunes_one_time_python_as_the_normal_capture_does(both: tuple[Any, Any], captured: Path) -> None:
    normal, fallback = both
    assert fallback.metadata["pruned"] == normal.metadata["pruned"]
    assert normal.metadata["pruned"]["builtin_calls"] > 0
    a, b = _rows(normal, "python"), _rows(fallback, "python")
    pd.testing.assert_frame_equal(a, b)
    # torch's JSON held every Python call; the trace keeps the pruned set
    saved = json.loads((captured / "export.json").read_text())
    in_json = sum(1 for e in saved["traceEvents"] if e.get("cat") == "python_function")
    assert len(b) < in_json
    assert in_json - len(b) >= normal.metadata["pruned"]["builtin_calls"]


def test_an_ops_external_id_in_the_json_is_its_in_memory_correlation_id(captured: Path) -> None:
    """What the fallback relies on, checked on this torch: the JSON torch saves names each op
    by the correlation id of its in-memory record, at the same start and with the same name."""
    by_corr = {int(k): tuple(v) for k, v in json.loads((captured / "records.json").read_text()).items()}
    doc = json.loads((captured / "export.json").read_text())
    base = doc["baseTimeNanoseconds"]
    ops = [e for e in doc["traceEvents"] if e.get("cat") in ("cpu_op", "user_annotation")]
    assert len(ops) == len(by_corr) > 100
    for e in ops:
        name, start = by_corr[e["args"]["External id"]]
        assert (name, start) == (e["name"], base + round(float(e["ts"]) * 1000))


def test_without_the_event_tree_the_fallback_says_why_and_keeps_function_lines(captured: Path) -> None:
    trace = ne.load(captured / "no_tree.parquet")
    why = trace.metadata["capture_fallback"]
    assert "trace_activities" in why and "event tree unreadable" in why
    ops = _rows(trace, "cpu_op")
    in_user = ops[ops["src_file"].fillna("").str.endswith("user_block.py")]
    assert len(in_user) and set(in_user["src_precision"]) <= {"function", "forward"}
    assert "pruned" not in trace.metadata
    assert set(trace.events["cycle"].to_pylist()) == {2}


def test_the_exact_lines_modes_markers_give_the_same_lines_through_the_fallback(captured: Path) -> None:
    """torch 2.11 with ``record --exact-lines``: the markers are read by the walk and dropped as
    rows in the fallback as in the normal path (on the H200 they were kept as ops, and the
    marked lines lost)."""
    from neuron_explorer.collectors.build.source_map import MARKER_PREFIX

    normal, fallback = (ne.load(captured / f"exact_{k}.parquet") for k in ("normal", "fallback"))
    assert "capture_fallback" in fallback.metadata
    for trace in (normal, fallback):
        names = trace.to_pandas(columns=["name"])["name"].astype(str)
        assert not names.str.startswith(MARKER_PREFIX).any()
    a, b = _rows(normal, "cpu_op"), _rows(fallback, "cpu_op")
    assert len(a) == len(b) > 100
    pd.testing.assert_frame_equal(a, b)
    in_user = a[a["src_file"].fillna("").str.endswith("user_block.py")]
    assert {12, 13, 14} <= set(in_user["src_line"])  # the marked operator lines of forward()


def test_steps_inferred_from_a_function_come_through_the_fallback(captured: Path) -> None:
    """torch 2.11 with ``record --step-on step``: the fallback finds the same three steps from
    the tree's Python calls as the normal path (on the H200 it found none)."""
    normal, fallback = (ne.load(captured / f"steps_{k}.parquet") for k in ("normal", "fallback"))
    assert "capture_fallback" in fallback.metadata and "capture_fallback" not in normal.metadata
    assert normal.metadata["steps_from"] == fallback.metadata["steps_from"]
    assert fallback.metadata["steps_from"]["steps"] == 3
    cols = ["name", "start_ns", "dur_ns"]
    a, b = (
        t.to_pandas(columns=["kind", *cols])
        .query("kind == 'step'")[cols]
        .sort_values("start_ns")
        .reset_index(drop=True)
        for t in (normal, fallback)
    )
    a["name"], b["name"] = a["name"].astype(str), b["name"].astype(str)
    assert list(a["name"]) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
