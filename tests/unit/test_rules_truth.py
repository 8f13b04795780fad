"""Rules truth suite: each claim of a rule, on a real trace, recomputed from the raw Kineto JSON.

Every expected number here is computed with plain json + numpy over the file's own events,
without the importer, the analyzers or the rule's code; the rule's headline must agree within
5%. Cases cover where a rule fires and where it must stay quiet (FusedAdam, eager scripts with
TorchDynamo frames, memory well under capacity). See docs/rules.md, "Where the rules fire".
"""

from __future__ import annotations

import gzip
import json
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.analyzers.finding import SEVERITY_RANK
from tests.conftest import BUNDLED_TRACES, KINETO, shared_fixture

V100 = "kineto/hta/df_index_resolver/df_index_resolver.json.gz"
V100_NS = "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
B200 = "kineto/tracelens/b200/eager_trace.json.gz"


def _path(rel: str) -> Path:
    local = KINETO / rel
    return local if local.exists() else shared_fixture(rel)


@cache
def raw(rel: str) -> dict[str, Any]:
    path = _path(rel)
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


@cache
def analysis(rel: str) -> Analysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(ne.load(_path(rel)))


def finding(a: Analysis, rule_id: str) -> Any:
    found = [f for f in a.findings if f.rule_id == rule_id]
    assert len(found) == 1, [f.rule_id for f in a.findings]
    return found[0]


def spans(rel: str, pred: Any) -> np.ndarray:
    """[start_ns, end_ns] of the complete events matching ``pred`` (times as the JSON has them, us)."""
    rows = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in raw(rel)["traceEvents"] if e.get("ph") == "X" and pred(e)]
    return (np.array(rows, dtype=np.float64) * 1000.0).reshape(-1, 2)


def union(iv: np.ndarray) -> np.ndarray:
    """Disjoint, sorted union of intervals."""
    if not len(iv):
        return iv
    iv = iv[np.argsort(iv[:, 0])]
    out = [list(iv[0])]
    for s, e in iv[1:]:
        if s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.array(out)


def length(iv: np.ndarray) -> float:
    return float((iv[:, 1] - iv[:, 0]).sum()) if len(iv) else 0.0


def intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = []
    for s, e in a:
        for t, u in b:
            lo, hi = max(s, t), min(e, u)
            if lo < hi:
                out.append([lo, hi])
    return np.array(out).reshape(-1, 2)


def host_steps(rel: str) -> np.ndarray:
    return spans(
        rel, lambda e: str(e.get("name", "")).startswith("ProfilerStep#") and e.get("cat") == "user_annotation"
    )


def close(value: float, expected: float, rel: float = 0.05) -> bool:
    return abs(value - expected) <= rel * abs(expected) + 1e-9


# ---------------------------------------------------------------- unfused_optimizer


def test_unfused_optimizer_counts_kernel_launching_ops_and_unions_optimizer_spans() -> None:
    """V100, SGD without foreach: every aten::add_ in the optimizer step launches a kernel."""
    opt = union(spans(V100, lambda e: str(e.get("name", "")).startswith("Optimizer.step#")))
    events = raw(V100)["traceEvents"]
    # this trace links a launch to its op only by time (the launch's External id is its own
    # correlation): an op launches device work when a cudaLaunchKernel call runs inside it
    launches = np.sort([e["ts"] for e in events if e.get("cat") == "cuda_runtime" and "Launch" in e["name"]])
    ops = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    launching = [
        s * 1000.0 for s, e in ops if np.searchsorted(launches, s, "left") < np.searchsorted(launches, e, "left")
    ]
    inside = sum(int(((opt[:, 0] <= t) & (t < opt[:, 1])).any()) for t in launching)
    f = finding(analysis(V100), "unfused_optimizer")
    assert f.metrics["optimizer_steps"]["value"] == len(opt)
    assert close(f.metrics["optimizer_ns"]["value"], length(opt))
    assert close(f.metrics["ops_per_step"]["value"], inside / len(opt))
    assert "torch.optim.SGD(model.parameters(), lr=..., fused=True)" in f.recommendation
    assert ".step(" not in f.recommendation and "FusedAdam" not in f.recommendation
    # its cost: inside the steps, the optimizer's time with the device running nothing (its own
    # host time starving the device), which host_bound / launch_bound leave to it
    device = union(spans(V100, lambda e: e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")))
    in_steps = intersect(opt, union(host_steps(V100)))
    exposed = length(in_steps) - length(intersect(in_steps, device))
    assert close(f.metrics["exposed_ns"]["value"], exposed)
    assert close(f.cost_ns, exposed)


def test_unfused_optimizer_is_silent_on_a_fused_adam_run() -> None:
    rel = "hta/rank_not_found.json.gz"
    names = {e.get("name") for e in raw(rel)["traceEvents"]}
    assert "Optimizer.step#FusedAdam.step" in names
    assert "unfused_optimizer" not in {f.rule_id for f in analysis(rel).findings}


# ---------------------------------------------------------------- tensor_cores / fp32_amp


def test_tensor_cores_share_of_fp32_sgemm_on_v100() -> None:
    events = raw(V100)["traceEvents"]
    kernels = [(e["name"], e["dur"]) for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    gemm = sum(d for n, d in kernels if "gemm" in n.lower())
    sgemm = sum(d for n, d in kernels if "sgemm" in n.lower())
    f = finding(analysis(V100), "tensor_cores")
    assert close(f.metrics["non_tensor_core_pct"]["value"], 100.0 * sgemm / gemm)
    assert close(f.metrics["non_tensor_core_ns"]["value"], sgemm * 1000.0)
    assert "bfloat16" not in f.recommendation  # V100 (compute capability 7.0) has no bf16
    assert raw(V100)["deviceProperties"][0]["computeMajor"] == 7


# ---------------------------------------------------------------- exposed_comm


@pytest.mark.parametrize("rel", ["hta/sampled_rank-0.json.gz", V100])
def test_exposed_communication_is_nccl_time_with_no_other_device_work(rel: str) -> None:
    device = ("kernel", "gpu_memcpy", "gpu_memset")
    comm = union(spans(rel, lambda e: e.get("cat") == "kernel" and "nccl" in e["name"].lower()))
    other = union(spans(rel, lambda e: e.get("cat") in device and "nccl" not in e["name"].lower()))
    steps = union(host_steps(rel))
    comm_in_steps = intersect(comm, steps)
    exposed = length(comm_in_steps) - length(intersect(comm_in_steps, other))
    f = finding(analysis(rel), "exposed_comm")
    assert close(f.metrics["exposed_comm_ns"]["value"], exposed)
    assert close(f.metrics["exposed_comm_pct"]["value"], 100.0 * exposed / length(steps))


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize("rel", ["tracelens/qwen_h100.json.gz"])
def test_alloc_churn_counts_device_allocations_against_the_peak(rel: str) -> None:
    events = raw(rel)["traceEvents"]
    mem = [e["args"] for e in events if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    allocs = [m["Bytes"] for m in mem if m["Bytes"] > 0]
    peak = max(m["Total Allocated"] for m in mem)
    n_steps = len({e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})
    f = finding(analysis(rel), "alloc_churn")
    assert close(f.metrics["allocs_per_step"]["value"], len(allocs) / n_steps)
    assert close(f.metrics["alloc_bytes_per_step"]["value"], sum(allocs) / n_steps)
    assert close(f.metrics["churn_ratio"]["value"], sum(allocs) / n_steps / peak)


def test_memory_capacity_stays_quiet_far_from_capacity() -> None:
    rel = "tracelens/qwen_h100.json.gz"
    data = raw(rel)
    reserved = max(e["args"]["Total Reserved"] for e in data["traceEvents"] if e.get("name") == "[memory]")
    assert 100.0 * reserved / data["deviceProperties"][0]["totalGlobalMem"] < 90.0
    assert "memory_capacity" not in {f.rule_id for f in analysis(rel).findings}


def test_small_h2d_counts_small_host_to_device_copies_per_step() -> None:
    events = raw(B200)["traceEvents"]
    small = [
        e
        for e in events
        if e.get("cat") == "gpu_memcpy" and "HtoD" in e["name"] and 0 <= e["args"].get("bytes", -1) <= 65_536
    ]
    n_steps = max(1, len(host_steps(B200)))
    f = finding(analysis(B200), "small_h2d")
    assert close(f.metrics["copies_per_step"]["value"], len(small) / n_steps)
    assert close(f.metrics["device_ns"]["value"], sum(e["dur"] for e in small) * 1000.0)


# ---------------------------------------------------------------- steps and compile


def test_step_variance_median_is_the_median_ProfilerStep() -> None:
    durations = np.sort(host_steps(V100_NS)[:, 1] - host_steps(V100_NS)[:, 0])
    f = finding(analysis(V100_NS), "step_variance")
    steady = durations  # no leading step is 1.5x the later median in this trace
    assert close(f.metrics["p50_ns"]["value"], float(np.median(steady)))


def test_torch_dynamo_frames_in_an_eager_script_are_not_compile_events() -> None:
    rel = "local/cpu_mlp_step4.json"
    frames = [e["name"] for e in raw(rel)["traceEvents"] if "torch/_dynamo" in str(e.get("name", ""))]
    assert frames  # the eager script passes through Dynamo's disable wrappers
    a = analysis(rel)
    assert (
        "compile_graph_breaks",
        "skipped: needs torch.compile events (Torch-Compiled Region / CompiledFunction)",
    ) in [tuple(s) for s in a.skipped]
    for f in a.findings:
        assert "compilation events" not in f.message


# ---------------------------------------------------------------- severity follows cost


@pytest.mark.parametrize("path", BUNDLED_TRACES, ids=lambda p: p.name)
def test_no_warning_costs_under_two_percent_of_the_wall_time(path: Path) -> None:
    from tests.unit.test_attribution_truth import reference

    rel = str(path.relative_to(KINETO))
    a = analysis(rel)
    steps = host_steps(rel)
    expected, _wall = reference(path)
    for f in a.findings:
        if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["warning"] and f.rule_id != "memory_capacity" and len(steps):
            # the wall time recomputed from the raw ProfilerStep spans (the trailing partial one
            # excluded by the importer is at most a sliver; 5% slack covers it), less the one-time
            # work the independent sweep finds in them: a steady-state finding is held against the
            # steady state, one billing one-time work against the whole
            wall = length(union(steps)) - (0 if f.category == "one_time" else expected["one_time"])
            assert f.cost_ns >= 0.02 * wall * 0.95, (f.rule_id, f.cost_ns)


def test_fp32_amp_share_of_device_time_launched_by_float_matmuls() -> None:
    rel = "hta/backward_thread.json"
    events = raw(rel)["traceEvents"]
    matmuls = [
        (e["ts"], e["ts"] + e["dur"], e["tid"])
        for e in events
        if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm") and "float" in e["args"]["Input type"]
    ]
    launch_at = {
        e["args"]["correlation"]: (e["ts"], e["tid"]) for e in events if e.get("cat") == "cuda_runtime"
    }  # a kernel's launch, by correlation; the launching op encloses it on the same thread
    kernels = [e for e in events if e.get("cat") == "kernel"]
    fp32 = sum(
        k["dur"]
        for k in kernels
        if any(s <= launch_at[k["args"]["correlation"]][0] < e and t == launch_at[k["args"]["correlation"]][1]
               for s, e, t in matmuls)
    )  # fmt: skip
    f = finding(analysis(rel), "fp32_amp")
    assert close(f.metrics["fp32_matmul_pct"]["value"], 100.0 * fp32 / sum(k["dur"] for k in kernels))
    # no deviceProperties: the GPU model is unknown, so bf16 only on compute capability 8.0+
    assert "compute capability 8.0" in f.recommendation and "GradScaler" in f.recommendation
