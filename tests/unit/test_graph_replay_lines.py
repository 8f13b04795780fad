"""Work replayed from a CUDA/HIP graph takes the lines recorded when the graph was captured
(``collectors.build.graph_replay``): on the real H200 trace, on the vLLM (MI300) trace whose capture
predates it, and on hand-laid layouts (two graphs interleaved, a graph captured before the
trace, a count or kind mismatch, ambiguous captures, ``graph id``), in both builds."""

from __future__ import annotations

import gzip
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import neuron_explorer as ne
from neuron_explorer.collectors.kineto import kineto_json
from neuron_explorer.trace.model import Trace
from tests.conftest import KINETO, run_cli

H200_GRAPH = KINETO / "h200" / "cuda_graph.json.gz"
VLLM_GRAPH = KINETO / "tracelens" / "vllm_cuda_graph_execution.json.gz"
SPOOL_ENV = "NEURON_EXPLORER_SPOOL_EVENTS"
_DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
_LAUNCH_LIKE = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync")


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def _both_builds(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Trace]:
    out = []
    for spool in (False, True):
        if spool:
            monkeypatch.setenv(SPOOL_ENV, "0")
        else:
            monkeypatch.delenv(SPOOL_ENV, raising=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(kineto_json.import_kineto_json(path))
    monkeypatch.delenv(SPOOL_ENV, raising=False)
    return out


# ----------------------------------------------------------------------------- the real H200 trace
def test_h200_replayed_work_takes_the_lines_of_the_ops_that_captured_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Recomputed from the raw JSON: capture calls are the launch-like runtime calls between
    the begin and end capture events; each graph launch's device events (by correlation) in
    start order are those calls in order; the op is the cpu_op with the call's External id."""
    ev = sorted(_events(H200_GRAPH), key=lambda e: float(e["ts"]))
    begin = next(e for e in ev if e["name"] == "cudaStreamBeginCapture")
    end = next(e for e in ev if e["name"] == "cudaStreamEndCapture")
    captured = [
        e
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and e["name"] in _LAUNCH_LIKE
        and float(begin["ts"]) < float(e["ts"]) < float(end["ts"])
    ]
    assert len(captured) == 20
    launches = [e for e in ev if e["name"] == "cudaGraphLaunch"]
    assert len(launches) == 3
    replays = [
        sorted(
            (
                d
                for d in ev
                if d.get("cat") in _DEVICE_CATS and d["args"].get("correlation") == g["args"]["correlation"]
            ),
            key=lambda d: float(d["ts"]),
        )
        for g in launches
    ]
    assert [len(r) for r in replays] == [20, 20, 20]
    assert not any("External id" in d["args"] or "graph id" in d["args"] for r in replays for d in r)
    with gzip.open(H200_GRAPH, "rt") as f:
        base_ns = json.load(f)["baseTimeNanoseconds"]
    # each capture call's op, and that op's line from the raw JSON: its innermost enclosing
    # user frame (the two user files of the recording; python_function names carry def lines)
    op_of = {e["args"]["External id"]: e for e in ev if e.get("cat") == "cpu_op"}
    frames = [
        (e, m)
        for e in ev
        if e.get("cat") == "python_function"
        and (m := re.match(r"^(gpt_block|capture_fixtures)\.py\((\d+)\): (.*)$", e["name"]))
    ]

    def raw_line(op: dict[str, Any]) -> tuple[str, int, str]:
        t0, t1 = float(op["ts"]), float(op["ts"]) + float(op["dur"])
        around = [
            (e, m)
            for e, m in frames
            if e["tid"] == op["tid"] and float(e["ts"]) <= t0 and float(e["ts"]) + float(e["dur"]) >= t1
        ]
        _, m = max(around, key=lambda em: (float(em[0]["ts"]), -float(em[0]["dur"])))
        return f"{m.group(1)}.py", int(m.group(2)), m.group(3)

    expected_lines = [raw_line(op_of[c["args"]["External id"]]) for c in captured]
    assert {f for f, _, _ in expected_lines} == {"gpt_block.py"}

    for trace in _both_builds(H200_GRAPH, monkeypatch):
        cols = ["event_id", "kind", "name", "start_ns", "external_id", "capture_op_id", "src_file", "src_line"]
        df = trace.to_pandas(columns=[*cols, "src_func", "src_precision"]).set_index("event_id")
        ops = df[df["kind"] == "cpu_op"]
        op_row = {int(x): int(i) for i, x in ops["external_id"].dropna().astype(int).items()}
        row_at = {(str(r["name"]), int(r["start_ns"])): i for i, r in df.iterrows()}
        for replay in replays:
            for event, call, line in zip(replay, captured, expected_lines):
                # the raw event's row, by name and start (ts in us, 3 decimals: exact ns)
                row = df.loc[row_at[(event["name"], base_ns + round(float(event["ts"]) * 1000))]]
                op = op_row[call["args"]["External id"]]
                assert row["capture_op_id"] == op
                assert (row["src_file"], row["src_line"], row["src_func"]) == line
                assert row["src_precision"] == "graph_capture"
        assert trace.metadata["graph_replay"] == {
            "graph_launches": 3,
            "captures": 1,
            "replayed_events": 60,
            "matched_events": 60,
            "unmatched_events": {},
        }
        # before: every replayed kernel named the replay loop's frame; now the block's own lines
        replayed = df[df["capture_op_id"].notna()]
        assert set(replayed["src_file"].astype(str)) == {"gpt_block.py"}
        assert set(replayed["src_func"].astype(str)) == {"forward", "attention"}


def test_h200_replayed_kernels_match_the_eager_forward_kernel_by_kernel() -> None:
    """The trace ends with one eager forward of the same block: its kernels, launched one by
    one, name their ops directly. The replayed kernel at each position has the eager kernel's
    name, and its capture-time op has the eager kernel's op name."""
    trace = ne.load(H200_GRAPH)
    df = trace.to_pandas(
        columns=["event_id", "kind", "name", "start_ns", "op_id", "launch_id", "capture_op_id"]
    ).set_index("event_id")
    work = df[df["kind"].isin(["kernel", "memcpy"])].sort_values(["start_ns"])
    last_replay = work[work["capture_op_id"].notna()].tail(20)
    after = work[work["start_ns"] > last_replay["start_ns"].max()]
    eager = after[after["op_id"].notna()]
    eager = eager[~eager["name"].astype(str).str.startswith("Memcpy DtoH")].head(20)
    assert list(eager["name"]) == list(last_replay["name"])
    assert list(df.loc[eager["op_id"].astype(int), "name"]) == list(
        df.loc[last_replay["capture_op_id"].astype(int), "name"]
    )


def test_vllm_replay_captured_before_the_trace_keeps_its_launch_line() -> None:
    """The MI300 vLLM trace holds one hipGraphLaunch of 421 kernels and no capture: the capture
    happened before profiling began, so the kernels keep the launch call's line and say why."""
    trace = ne.load(VLLM_GRAPH)
    meta = trace.metadata["graph_replay"]
    raw = _events(VLLM_GRAPH)
    launch = next(e for e in raw if e["name"] == "hipGraphLaunch")
    replayed = [
        e for e in raw if e.get("cat") in _DEVICE_CATS and e["args"].get("correlation") == launch["args"]["correlation"]
    ]
    assert not any(e["name"].startswith("hipStreamBeginCapture") for e in raw)
    assert meta == {
        "graph_launches": 1,
        "captures": 0,
        "replayed_events": len(replayed),
        "matched_events": 0,
        "unmatched_events": {"capture_not_in_trace": len(replayed)},
    }
    df = trace.to_pandas(columns=["capture_op_id", "src_precision", "correlation_id", "kind"])
    dev = df[df["correlation_id"] == launch["args"]["correlation"]]
    dev = dev[dev["kind"] != "runtime"]
    assert len(dev) == 421 and dev["capture_op_id"].isna().all()
    assert "graph_capture" not in set(df["src_precision"].dropna().astype(str))


# ----------------------------------------------------------------------------- hand-laid layouts
class Kineto:
    """A Kineto JSON trace laid out by hand (microseconds): python frames, ops in them, their
    runtime calls, capture regions and graph launches on thread 1; device work on stream 7."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.ext = 0
        self.corr = 1000

    def _x(self, cat: str, name: str, ts: float, dur: float, tid: int = 1, pid: int = 1, **args: Any) -> dict[str, Any]:
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
        self.events.append(e)
        return e

    def call(self, name: str, ts: float, ext: int | None = None, cat: str = "cuda_runtime") -> int:
        self.corr += 1
        args: dict[str, Any] = {"correlation": self.corr}
        if ext is not None:
            args["External id"] = ext
        self._x(cat, name, ts, 1, **args)
        return self.corr

    def op(self, line: int, name: str, ts: float, calls: list[str]) -> list[int]:
        """An op under the user frame ``model.py(line)`` issuing ``calls``; their correlations."""
        self.ext += 1
        self._x("python_function", f"model.py({line}): f{line}", ts, 10 + 2 * len(calls))
        self._x("cpu_op", name, ts + 1, 8 + 2 * len(calls), **{"External id": self.ext})
        return [self.call(c, ts + 2 + 2 * i, self.ext) for i, c in enumerate(calls)]

    def device(self, name: str, cat: str, ts: float, corr: int, **args: Any) -> None:
        self._x(cat, name, ts, 1, pid=0, tid=7, device=0, stream=7, correlation=corr, **args)

    def capture(self, ts: float, ops: list[tuple[int, str, list[str]]]) -> float:
        """Begin capture, the ops (line, op name, calls), end capture; returns the end time."""
        self.call("cudaStreamBeginCapture", ts)
        t = ts + 2
        for line, name, calls in ops:
            self.op(line, name, t, calls)
            t += 20
        self.call("cudaStreamEndCapture", t)
        return t + 2

    def replay(self, ts: float, work: list[tuple[str, str]], **args: Any) -> int:
        """A cudaGraphLaunch (under the user frame ``run.py(90)``) and its device work
        (name, category) one after another on the device; its correlation."""
        self._x("python_function", "run.py(90): replay", ts, 4)
        corr = self.call("cudaGraphLaunch", ts + 1)
        for i, (name, cat) in enumerate(work):
            self.device(name, cat, ts + 50 + 3 * i, corr, **args)
        return corr

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps({"traceEvents": self.events, "displayTimeUnit": "ms"}))
        return path


GRAPH_A = [(10, "aten::layer_norm", ["cudaLaunchKernel"]), (20, "aten::addmm", ["cudaLaunchKernelExC"]),
           (30, "aten::copy_", ["cudaMemcpyAsync"])]  # fmt: skip
WORK_A = [("layer_norm_kernel", "kernel"), ("gemm", "kernel"), ("Memcpy DtoD (Device -> Device)", "gpu_memcpy")]
GRAPH_B = [(40, "aten::gelu", ["cuLaunchKernel"]), (50, "aten::add", ["cudaLaunchKernel"])]
WORK_B = [("gelu_kernel", "kernel"), ("add_kernel", "kernel")]


def _replayed(trace: Trace) -> Any:
    df = trace.to_pandas(
        columns=["event_id", "kind", "name", "start_ns", "correlation_id", "capture_op_id", "src_line", "src_precision"]
    )
    ops = df[df["kind"] == "cpu_op"].set_index("event_id")["name"].astype(str)
    dev = df[df["kind"].isin(["kernel", "memcpy", "memset"])].sort_values("start_ns").copy()
    dev["capture_op"] = [None if pd.isna(i) else ops[int(i)] for i in dev["capture_op_id"]]
    return dev


def _built(layout: Kineto, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Trace:
    path = layout.write(tmp_path / "layout.json")
    memory, spooled = _both_builds(path, monkeypatch)
    from tests.integration.test_spooled_build import _assert_same

    _assert_same(memory, spooled)
    spooled.close()
    return memory


def test_two_graphs_replayed_interleaved_each_take_their_own_capture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = Kineto()
    t = k.capture(100, GRAPH_A)
    t = k.capture(t + 10, GRAPH_B)
    for i, work in enumerate([WORK_A, WORK_B, WORK_A, WORK_B]):
        k.replay(t + 100 + 100 * i, work)
    dev = _replayed(_built(k, tmp_path, monkeypatch))
    expect_a = [(10, "aten::layer_norm"), (20, "aten::addmm"), (30, "aten::copy_")]
    expect_b = [(40, "aten::gelu"), (50, "aten::add")]
    got = list(zip(dev["src_line"], dev["capture_op"]))
    assert got == expect_a + expect_b + expect_a + expect_b
    assert set(dev["src_precision"]) == {"graph_capture"}
    trace = _built(k, tmp_path, monkeypatch)
    assert trace.metadata["graph_replay"] == {
        "graph_launches": 4,
        "captures": 2,
        "replayed_events": 10,
        "matched_events": 10,
        "unmatched_events": {},
    }


def test_a_graph_captured_before_the_trace_keeps_the_replay_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = Kineto()
    k.replay(100, WORK_A)  # replayed before any capture in the trace
    k.capture(300, GRAPH_A)
    trace = _built(k, tmp_path, monkeypatch)
    dev = _replayed(trace)
    assert list(dev["src_line"]) == [90, 90, 90]  # the frame around cudaGraphLaunch
    assert set(dev["src_precision"]) == {"launch"}
    assert dev["capture_op_id"].isna().all()
    assert trace.metadata["graph_replay"]["unmatched_events"] == {"capture_not_in_trace": 3}


@pytest.mark.parametrize(
    "work",
    [WORK_A[:2], [*WORK_A, ("extra", "kernel")], [WORK_A[2], WORK_A[1], WORK_A[0]]],
    ids=["fewer events", "more events", "kinds in another order"],
)
def test_a_replay_that_matches_no_capture_keeps_the_replay_line(
    work: list[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = Kineto()
    t = k.capture(100, GRAPH_A)
    k.replay(t + 100, work)
    trace = _built(k, tmp_path, monkeypatch)
    dev = _replayed(trace)
    assert set(dev["src_line"]) == {90} and dev["capture_op_id"].isna().all()
    assert trace.metadata["graph_replay"]["unmatched_events"] == {"no_matching_capture": len(work)}


def test_captures_alike_in_shape_but_not_in_lines_are_ambiguous(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    k = Kineto()
    t = k.capture(100, GRAPH_B)
    t = k.capture(t + 10, [(60, "aten::relu", ["cudaLaunchKernel"]), (70, "aten::mul", ["cudaLaunchKernel"])])
    k.replay(t + 100, WORK_B)
    trace = _built(k, tmp_path, monkeypatch)
    dev = _replayed(trace)
    assert set(dev["src_line"]) == {90} and set(dev["src_precision"]) == {"launch"}
    assert trace.metadata["graph_replay"]["unmatched_events"] == {"ambiguous": 2}


def test_captures_with_the_same_lines_resolve_to_the_most_recent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a server captures one graph per batch size: the same ops, the same lines."""
    k = Kineto()
    t = k.capture(100, GRAPH_B)
    t = k.capture(t + 10, GRAPH_B)
    k.replay(t + 100, WORK_B)
    trace = _built(k, tmp_path, monkeypatch)
    df = trace.to_pandas(columns=["event_id", "kind", "name", "start_ns"])
    gelu_ops = df[(df["kind"] == "cpu_op") & (df["name"] == "aten::gelu")].sort_values("start_ns")["event_id"]
    dev = _replayed(trace)
    assert list(dev["src_line"]) == [40, 50]
    assert int(dev["capture_op_id"].iloc[0]) == int(gelu_ops.iloc[-1])  # the second capture's op


def test_a_graph_id_binds_every_launch_of_a_graph_to_one_capture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Graph 5 is launched after capture X and again after capture Y (same shape, other lines).
    Alone the second launch is ambiguous; with one graph id both launches replay X, the only
    capture that precedes them all."""
    x = [(40, "aten::gelu", ["cudaLaunchKernel"]), (50, "aten::add", ["cudaLaunchKernel"])]
    y = [(60, "aten::relu", ["cudaLaunchKernel"]), (70, "aten::mul", ["cudaLaunchKernel"])]
    for graph_id, expect in ((None, {"ambiguous": 2}), (5, {})):
        k = Kineto()
        t = k.capture(100, x)
        args = {} if graph_id is None else {"graph id": graph_id}
        k.replay(t + 100, WORK_B, **args)
        t = k.capture(t + 300, y)
        k.replay(t + 100, WORK_B, **args)
        trace = _built(k, tmp_path, monkeypatch)
        dev = _replayed(trace)
        assert trace.metadata["graph_replay"]["unmatched_events"] == expect
        if graph_id is None:
            assert list(dev["src_line"]) == [40, 50, 90, 90]
        else:
            assert list(dev["src_line"]) == [40, 50, 40, 50]


def test_calls_that_ran_during_a_capture_are_not_part_of_the_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel launched (on another, uncaptured stream) while the capture is open runs at once:
    it has its own device event, so it is no node of the graph."""
    k = Kineto()
    k.call("cudaStreamBeginCapture", 100)
    k.op(10, "aten::layer_norm", 102, ["cudaLaunchKernel"])
    ran = k.op(15, "aten::fill_", 122, ["cudaLaunchKernel"])
    k.device("fill_kernel", "kernel", 130, ran[0])
    k.op(20, "aten::addmm", 142, ["cudaLaunchKernel"])
    k.call("cudaStreamEndCapture", 170)
    k.replay(300, [("layer_norm_kernel", "kernel"), ("gemm", "kernel")])
    dev = _replayed(_built(k, tmp_path, monkeypatch))
    assert list(zip(dev["name"], dev["src_line"], dev["src_precision"])) == [
        ("fill_kernel", 15, "launch"),
        ("layer_norm_kernel", 10, "graph_capture"),
        ("gemm", 20, "graph_capture"),
    ]


def test_a_trace_without_graphs_has_no_graph_metadata() -> None:
    trace = ne.load(KINETO / "local" / "example_cpu_small.json")
    assert "graph_replay" not in trace.metadata
    assert trace.events["capture_op_id"].null_count == trace.num_events


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (H200_GRAPH, "graph replays: 60 of 60 replayed device events carry the line of their capture"),
        (VLLM_GRAPH, "0 of 421 replayed device events carry the line of their capture"),
    ],
    ids=["h200", "vllm"],
)
def test_info_says_how_much_replayed_work_carries_its_capture_line(path: Path, expected: str) -> None:
    r = run_cli("info", str(path), env={"COLUMNS": "250"})
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "graph replays:" in ln)
    assert expected in line
    if path == VLLM_GRAPH:
        assert line.endswith("; 421 captured before the trace began")
