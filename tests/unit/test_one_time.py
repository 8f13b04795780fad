"""One-time work (analyzers/attribution/one_time.py): told apart from the steady state by name and position,
its own attribution category, its own verdict, and no steady-state warnings for it.

Every figure is recomputed from the raw events (the JSON, or the hand-laid rows) by a sweep
written here, not by the analyzer's code.
"""

from __future__ import annotations

import re
import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.analyzers.attribution import one_time_by_kind
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.finding import SEVERITY_RANK
from tests._kineto_reference import read_json
from tests.unit.graph_layout import Layout
from tests.unit.test_attribution_truth import COMPILING, _ns, reference

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto"
CUDA_GRAPH = DATA / "h200/cuda_graph.json.gz"
COMPILE_CPU = DATA / "local/compile_warmup_cpu.json.gz"
ALEXNET = DATA / "hta/alexnet_a100.json.gz"
STEADY_RULES = {"host_bound", "launch_bound", "tiny_ops", "python_overhead", "device_idle", "host_hotspot"}


@cache
def analysis(path: Path) -> Analysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(ne.load(path))


def raw_spans(path: Path) -> list[dict]:
    return [e for e in read_json(path)["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]


def union_ns(iv: list[tuple[int, int]], lo: int | None = None, hi: int | None = None) -> int:
    """Length of the union of intervals, clipped to [lo, hi) when given (a plain sort and sweep)."""
    total, end = 0, None
    for s, e in sorted(iv):
        if lo is not None:
            s, e = max(s, lo), min(e, hi)
        if e <= s:
            continue
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


# ------------------------------------------------------------------ CUDA-graph capture (H200)


def test_cuda_graph_capture_and_instantiation_are_one_time_on_the_h200_trace() -> None:
    spans = raw_spans(CUDA_GRAPH)
    by_name = {}
    for e in spans:
        by_name.setdefault(e["name"], []).append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    (begin,) = by_name["cudaStreamBeginCapture"]
    (end,) = by_name["cudaStreamEndCapture"]
    (inst,) = by_name["cudaGraphInstantiateWithFlags"]
    # torch.cuda.graph's own Python: its __enter__ (sync, empty_cache, capture_begin) and __exit__
    frames = [
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in spans
        if e.get("cat") == "python_function"
        and re.search(r"torch/cuda/graphs\.py\(\d+\): (__enter__|__exit__|capture_begin|capture_end)$", e["name"])
    ]
    capture = [(begin[0], end[1]), inst, *by_name.get("cudaGraphDestroy", []), *frames]
    expected = union_ns(capture)
    kinds = one_time_by_kind(TraceFrames(ne.load(CUDA_GRAPH)))
    assert kinds["graph_capture"] == pytest.approx(expected, abs=1_000)  # ns; the JSON has us with 3 decimals
    # the capture and the instantiation each lie inside it, and the replays do not
    a = analysis(CUDA_GRAPH)
    assert expected > 0.8 * a.summary["one_time"]["wall_ns"]  # 35 ms of a 42 ms trace
    assert a.summary["verdict"].startswith("Mostly one-time work: ")
    assert "graph capture" in a.summary["verdict"] and "the steady state (" in a.summary["verdict"]
    launches = by_name["cudaGraphLaunch"]
    assert all(s > end[1] for s, _ in launches)  # the replays come after the capture: not one-time


def test_the_h200_capture_trace_is_no_longer_launch_bound_for_its_capture() -> None:
    # before: "Launch-bound" error costing 33 ms, the capture's host time; now its cost is at most
    # the steady part's host_launch, recomputed here from the reference sweep
    a = analysis(CUDA_GRAPH)
    expected, _wall = reference(CUDA_GRAPH)
    for f in a.findings:
        if f.rule_id == "launch_bound":
            assert f.cost_ns <= expected["host_launch"] + 1_000
            assert f.cost_ns < 0.1 * expected["one_time"]


# ------------------------------------------------------------------ torch.compile on the CPU


def test_a_compiling_first_step_is_one_time_work_by_name_and_position() -> None:
    spans = raw_spans(COMPILE_CPU)
    steps = sorted(
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in spans if re.match(r"ProfilerStep#\d+$", e["name"])
    )
    compiling = [
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in spans
        if e.get("cat") in ("cpu_op", "user_annotation", "python_function") and COMPILING.search(e["name"])
    ]
    first, later = steps[0], steps[1:]
    assert first[1] - first[0] > 1.5 * np.median([e - s for s, e in later[1:]])  # a warm-up step by the rule
    compile_ns = sum(union_ns(compiling, s, e) for s, e in steps)
    kinds = one_time_by_kind(TraceFrames(ne.load(COMPILE_CPU)))
    assert kinds["compile"] == pytest.approx(compile_ns, abs=1_000)
    # the rest of the compiling step is the warm-up step's; no later step holds one-time work
    assert kinds["warmup_step"] == pytest.approx((first[1] - first[0]) - union_ns(compiling, *first), abs=1_000)
    a = analysis(COMPILE_CPU)
    at = a.attribution.set_index("step")
    assert (at.loc[at.index > at.index.min(), "one_time_ns"] == 0).all()
    steady_ns = sum(e - s for s, e in later)
    assert a.summary["one_time"]["steady_ns"] == pytest.approx(steady_ns, abs=1_000)
    verdict = a.summary["verdict"]
    assert verdict.startswith("Mostly one-time work: ") and "compilation" in verdict
    assert "the steady state (5 steps, " in verdict


def test_a_compile_warm_up_gets_no_host_bound_error_and_no_compile_advice() -> None:
    a = analysis(COMPILE_CPU)
    loud = [f for f in a.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["warning"]]
    assert not [f for f in loud if f.rule_id in STEADY_RULES], [(f.rule_id, f.title) for f in loud]
    for f in loud:
        assert "torch.compile(" not in f.recommendation  # the model already is compiled
    (once,) = [f for f in a.findings if f.rule_id == "warmup_cost"]
    assert once.category == "one_time" and "compilation" in once.title


# ------------------------------------------------------------------ initialization alone (A100)


def test_a_trace_of_initialization_alone_is_called_that() -> None:
    # alexnet: model.to('cuda') creating the context (a 29.9 s cudaDeviceGetStreamPriorityRange) and
    # one warm-up forward (cudnn handle creation: a 6 s cudaFree, a 3 s first launch)
    spans = raw_spans(ALEXNET)
    slow = [e for e in spans if e.get("cat") == "cuda_runtime" and _ns(e["dur"]) >= 1_000_000_000]
    assert {e["name"] for e in slow} >= {"cudaDeviceGetStreamPriorityRange", "cudaFree"}
    a = analysis(ALEXNET)
    expected, wall = reference(ALEXNET)
    assert a.summary["one_time_pct"] == pytest.approx(100.0 * expected["one_time"] / wall, abs=0.5)
    assert a.summary["verdict"].startswith("Only one-time work: ")
    assert "initialization" in a.summary["verdict"]
    assert not [f for f in a.findings if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["warning"]]


# ------------------------------------------------------------------ hand-laid layouts


def _compile_only_layout() -> Layout:
    lay = Layout()
    c = lay.host("cpu_op", "_compile.compile_inner (dynamo_timed)", 0, 900_000, parent=None)
    lay.host("cpu_op", "aten::addmm", 10, 20, parent=c)  # fake-tensor tracing inside the compile
    lay.host("cpu_op", "aten::addmm", 900_010, 900_040, parent=None)  # the first real call
    return lay


def test_a_trace_of_one_compile_alone_says_only_one_time_work() -> None:
    a = analyze(_compile_only_layout().trace())
    # by hand: a 900 ms compile, then 30 us of the compiled call in a 900.04 ms trace
    assert a.summary["one_time"]["kinds"] == {"compile": 900_000_000}
    assert a.summary["verdict"].startswith("Only one-time work: 900 ms of 900 ms (compilation 900 ms)")


def test_capture_without_python_frames_is_found_by_its_runtime_calls() -> None:
    lay = Layout()
    lay.host("runtime", "cudaStreamBeginCapture", 100, 101, parent=None)
    for i in range(5):  # captured launches run nothing
        lay.host("runtime", "cudaLaunchKernel", 110 + 10 * i, 115 + 10 * i, parent=None)
    lay.host("runtime", "cudaStreamEndCapture", 200, 202, parent=None)
    lay.host("runtime", "cudaGraphInstantiateWithFlags", 210, 400, parent=None)
    launch = lay.host("runtime", "cudaGraphLaunch", 500, 510, parent=None)
    lay.device("replayed_kernel", 7, 520, 1000, launch)
    frames = TraceFrames(lay.trace())
    kinds = one_time_by_kind(frames)
    # by hand: [100, 202) + [210, 400) = 292 us; the replay at 500-1000 us is the steady state
    assert kinds["graph_capture"] == 292_000
    a = analyze(lay.trace())
    assert int(a.attribution["one_time_ns"].sum()) == 292_000
    assert int(a.attribution["compute_ns"].sum()) == 480_000


def test_allocator_calls_in_steady_steps_are_not_one_time() -> None:
    # with steps, a cudaMalloc in every step recurs (memory_fragmentation's evidence): not one-time
    lay = Layout()
    for i in range(4):
        t = 1000.0 * i
        step = lay.host("step", f"ProfilerStep#{i}", t, t + 1000, step=i)
        lay.host("runtime", "cudaMalloc", t + 10, t + 400, parent=step, step=i)
        k = lay.host("runtime", "cudaLaunchKernel", t + 500, t + 505, parent=step, step=i)
        lay.device("gemm", 7, t + 510, t + 990, k, step=i)
    a = analyze(lay.trace())
    assert int(a.attribution["one_time_ns"].sum()) == 0
    # without steps, the same calls are allocator growth: one-time (390 us each, device idle)
    lay2 = Layout()
    for i in range(4):
        t = 1000.0 * i
        lay2.host("runtime", "cudaMalloc", t + 10, t + 400, parent=None)
        k = lay2.host("runtime", "cudaLaunchKernel", t + 500, t + 505, parent=None)
        lay2.device("gemm", 7, t + 510, t + 990, k)
    assert int(analyze(lay2.trace()).attribution["one_time_ns"].sum()) == 4 * 390_000


def test_a_slow_first_launch_is_module_loading_and_a_slow_later_one_is_not() -> None:
    lay = Layout()
    k1 = lay.host("runtime", "cudaLaunchKernel", 0, 3000, parent=None)  # 3 ms: lazy module loading
    lay.device("kernel_a", 7, 3010, 3100, k1)
    k2 = lay.host("runtime", "cudaLaunchKernel", 3200, 6200, parent=None)  # 3 ms, but not the first
    lay.device("kernel_a", 7, 6210, 6300, k2)
    kinds = one_time_by_kind(TraceFrames(lay.trace()))
    assert kinds["init"] == 3_000_000


# ------------------------------------------------------------------ compile, then steady steps (H200)

COMPILE_H200 = DATA / "h200/compile_warmup.json.gz"


def test_steady_state_rules_leave_a_compiles_copies_gaps_and_ops_out() -> None:
    # torch.compile'd MLP trained 5 steps on an H200, compiled cold inside step 0 (its
    # autotuning issues pageable and device-to-device copies, and the device idles 1 s while
    # Inductor compiles). Recomputed here from the raw JSON: the warm-up steps by the 1.5x rule,
    # and the largest gap between device events inside the steady steps.
    spans = raw_spans(COMPILE_H200)
    steps = sorted(
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in spans
        if e.get("cat") == "user_annotation" and re.match(r"ProfilerStep#\d+$", e["name"])
    )
    durs = [e - s for s, e in steps]
    warm = 0
    while warm < 2 and durs[warm] > 1.5 * np.median(durs[warm + 1 :]):
        warm += 1
    assert warm == 2
    lo = steps[warm][0]
    dev = sorted(
        (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
        for e in spans
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and _ns(e["ts"]) >= lo
    )
    end, gaps = dev[0][1], []
    for s, e in dev[1:]:
        gaps.append(s - end)
        end = max(end, e)
    a = analysis(COMPILE_H200)
    rules = {f.rule_id: f for f in a.findings}
    # the compile's copies are one-time work: no blocking-copy or device-to-device finding
    assert "sync_memcpy" not in rules and "exposed_dtod" not in rules, sorted(rules)
    idle = rules["device_idle"]
    assert idle.metrics["largest_gap_ns"]["value"] == pytest.approx(max(gaps), abs=1_000)
    host = rules["host_bound"]
    assert "dynamo_timed" not in host.message and "CompiledFunctionBackward" in host.message
    # the model is compiled already: the advice is graph capture's mode, not torch.compile(model)
    assert 'mode="reduce-overhead") in place of the default mode' in host.recommendation
