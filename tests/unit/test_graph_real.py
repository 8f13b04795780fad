"""The graph on real traces: a what-if prediction checked against a recorded measurement (H200),
two real ranks joined at their collectives, and findings priced by replay without billing the
same kernels twice."""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
import subprocess
import sys

import numpy as np
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph import build_graph, critical_path_table, replay_summary
from neuron_explorer.analyzers.graph.edges import COLLECTIVE
from neuron_explorer.analyzers.graph.pricing import device_work
from tests.conftest import KINETO

WHATIF_MM = KINETO / "h200/whatif_mm.json.gz"


def _whatif(path, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "whatif", str(path), *args, "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def test_halving_the_matmuls_predicts_the_steps_that_ran_half_of_them():
    # The H200 recording alternates steps of four 4096^3 fp32 torch.mm calls with steps of two
    # (same operands, same other work): the measured saving of half the matmul time is a
    # four-mm step minus a two-mm step, read here from the raw JSON's ProfilerStep spans.
    with gzip.open(WHATIF_MM) as fh:
        raw = json.load(fh)["traceEvents"]
    spans = [e for e in raw if e.get("ph") == "X"]
    steps = [e for e in spans if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    mm = np.array(sorted(e["ts"] for e in spans if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"))
    count = {
        int(s["name"].split("#")[1]): int(
            np.searchsorted(mm, s["ts"] + s["dur"], "left") - np.searchsorted(mm, s["ts"], "left")
        )
        for s in steps
    }
    dur = {int(s["name"].split("#")[1]): s["dur"] * 1000.0 for s in steps}
    full = [dur[k] for k in dur if count[k] == 4]
    half = [dur[k] for k in dur if count[k] == 2]
    assert len(full) >= 10 and len(half) >= 10 and len(full) + len(half) == len(dur)
    measured = statistics.median(full) - statistics.median(half)
    r = _whatif(WHATIF_MM, "--scale", "^aten::mm$=0.5")
    assert abs(r["baseline_error_pct"]) <= 2.0
    predicted = statistics.median(s["saving_ns"] for s in r["steps"] if count[s["step"]] == 4)
    assert predicted == pytest.approx(measured, rel=0.05)
    assert statistics.median(s["unexplained_pct"] for s in r["steps"]) < 2.0


WHATIF_COPIES = KINETO / "h200/whatif_copies.json.gz"


def test_nonblocking_copies_predict_the_steps_whose_copy_did_not_block():
    # The H200 recording (tests/gpu/whatif_check.py) alternates steps whose small device-to-host
    # copy goes to pageable memory (torch issues cudaMemcpyAsync, which blocks, then
    # cudaStreamSynchronize, in one aten::copy_) with steps copying into pinned memory with
    # non_blocking=True; the host work after the copy then overlaps the queued matmuls. The
    # measured saving, read here from the raw JSON (a step holding a Pageable memcpy blocks),
    # is what --nonblocking-copies must predict: both of the op's waits go.
    with gzip.open(WHATIF_COPIES) as fh:
        spans = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in spans if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    pageable = [e["ts"] for e in spans if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]]
    blocking = {int(s["name"].split("#")[1]) for s in steps for t in pageable if s["ts"] <= t < s["ts"] + s["dur"]}
    dur = {int(s["name"].split("#")[1]): s["dur"] * 1000.0 for s in steps}
    assert len(blocking) >= 10 and len(dur) - len(blocking) >= 10
    measured = statistics.median(dur[k] for k in blocking) - statistics.median(dur[k] for k in dur if k not in blocking)
    assert measured > 0.05 * statistics.median(dur.values())  # the recording measures something
    r = _whatif(WHATIF_COPIES, "--nonblocking-copies")
    assert r["max_step_baseline_error_pct"] <= 2.0
    predicted = statistics.median(s["saving_ns"] for s in r["steps"] if s["step"] in blocking)
    assert predicted == pytest.approx(measured, rel=0.15)
    # steps whose copy never blocked have nothing to save
    assert max(s["saving_ns"] for s in r["steps"] if s["step"] not in blocking) == 0


def test_sync_memcpy_prices_copies_that_hold_back_host_work_by_replay():
    # The same H200 recording: the pageable copies' wait overlaps busy device time (nothing to
    # bill as host_blocked with an idle device), yet the steps that blocked took longer. The
    # finding's cost is the replayed saving; measured: each blocking step's duration less the
    # median of the steps whose copy did not block, summed (read from the raw JSON).
    with gzip.open(WHATIF_COPIES) as fh:
        spans = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in spans if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    pageable = [e["ts"] for e in spans if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]]
    blocking = {int(s["name"].split("#")[1]) for s in steps for t in pageable if s["ts"] <= t < s["ts"] + s["dur"]}
    dur = {int(s["name"].split("#")[1]): s["dur"] * 1000.0 for s in steps}
    free = statistics.median(dur[k] for k in dur if k not in blocking)
    measured = sum(dur[k] - free for k in blocking)
    a = analyze(ne.load(WHATIF_COPIES))
    f = next(f for f in a.findings if f.rule_id == "sync_memcpy")
    assert f.cost_method == "replay" and f.severity in ("warning", "error")
    assert f.metrics["copies"]["value"] == len(blocking)
    assert f.cost_ns == pytest.approx(measured, rel=0.15)
    assert "non_blocking=True" in f.recommendation


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    src = tmp_path_factory.mktemp("ranks")
    for k in (0, 1):
        shutil.copy(KINETO / f"hta/sampled_rank-{k}.json.gz", src / f"sampled_rank-{k}.json.gz")
    out = tmp_path_factory.mktemp("run") / "run"
    subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "convert", str(src), "-o", str(out), "-q"], check=True, timeout=600
    )
    return out


def test_two_real_ranks_join_at_their_matched_collectives(two_rank_run):
    frames = TraceFrames(ne.load(two_rank_run))
    assert frames.ranks == [0, 1]
    graph = build_graph(frames)
    # every collective kernel both ranks hold in the same step, at the same place, is joined
    dev = frames.device
    coll = dev[dev["kind"] == "collective"]
    per_rank = coll.groupby(["rank", "step"]).size().unstack(0).dropna()
    matched = int(per_rank.min(axis=1).sum())
    assert matched > 0
    assert int((graph.edges["kind"] == COLLECTIVE).sum()) == 4 * matched  # 2 arrivals in, 2 transfers out
    r = _whatif(two_rank_run)
    assert {s["rank"] for s in r["steps"]} == {0, 1}
    assert r["max_step_baseline_error_pct"] <= 2.0
    cp = critical_path_table(frames)
    walls = {(s["rank"], s["step"]): s["replayed_ns"] for s in r["steps"]}
    assert cp.groupby(["rank", "step"])["ns"].sum().to_dict() == walls


def test_findings_on_the_same_kernels_are_owned_once_and_all_fixes_replay_together():
    # The eager H200 training trace: fp32 matmuls (fp32_amp) are also below their roofline
    # (op_below_roofline) and off the tensor cores (tensor_cores: ffma/sgemm kernels): the more
    # specific finding owns those kernels.
    path = KINETO / "h200/eager_train.json.gz"
    frames = TraceFrames(ne.load(path))
    a = analyze(frames.trace, frames=frames)
    priced = [f for f in a.findings if f.cost_method == "replay"]
    owner = next(f for f in priced if f.rule_id == "fp32_amp")
    referring = [f for f in priced if f.refers_to == "fp32_amp"]
    assert referring and all(f.rule_id in ("op_below_roofline", "tensor_cores") for f in referring)
    owned = set(device_work(frames, owner.edits).tolist())
    for f in referring:
        assert not owned & set(device_work(frames, f.edits).tolist())
        assert "fp32_amp" in f.message
    # all fixes together are one replay, no more than the run, and each alone no more than all
    fixes = a.fixes
    assert fixes["priced"] == len(priced)
    assert 0 <= fixes["all_fixes_ns"] <= fixes["replayed_ns"]
    assert fixes["sum_of_findings_ns"] == sum(f.cost_ns for f in priced)
    assert all(f.cost_ns <= fixes["all_fixes_ns"] for f in priced)
    base = replay_summary(frames)
    assert fixes["replayed_ns"] == base["replayed_ns"]


def test_one_time_work_on_the_critical_path_is_its_own_category():
    # A torch.compile warm-up run on the CPU (36 s compiling in step 0, then five steady steps):
    # step 0's whole path is one-time work, the steady steps have none, and the verdict says the
    # share once and describes the rest. Measured from the raw JSON: the ProfilerStep#0 span.
    path = KINETO / "local/compile_warmup_cpu.json.gz"
    with gzip.open(path) as fh:
        spans = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    step0 = next(e for e in spans if e.get("name") == "ProfilerStep#0")
    a = analyze(ne.load(path))
    by = a.critical_path.groupby(["step", "category"])["ns"].sum()
    assert by[(0, "one_time")] == pytest.approx(step0["dur"] * 1000.0, abs=1000)
    steady = a.critical_path[a.critical_path["step"] > 0]
    assert len(steady) and not (steady["category"] == "one_time").any()
    assert a.summary["critical_path"].startswith("the critical path is >99% one-time work; outside it, ")
    # a steady trace has no one-time work on its path
    steady_trace = analyze(ne.load(WHATIF_MM))
    assert not (steady_trace.critical_path["category"] == "one_time").any()
