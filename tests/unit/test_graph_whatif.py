"""What-if edits beyond scaling, and the graph across ranks, on layouts whose dependencies are
known: non-blocking copies, overlapped communication, a late rank that every other rank waits
for at a collective, and a finding priced by replaying its fix. Each expected figure is the
layout's own arithmetic, written out in the test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph import Edits, critical_path_table, replay_summary
from neuron_explorer.analyzers.graph.edges import COLLECTIVE, LAUNCH_LATENCY_MAX_NS
from tests.unit.graph_layout import US, Layout

ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def summary(layout: Layout, edits: Edits | None = None) -> dict:
    return replay_summary(TraceFrames(layout.trace()), edits)


def blocking_copy() -> Layout:
    """mm launches a 35 us kernel; aten::to's pageable copy call (4..50 us) waits for its 8 us
    copy, which runs after the kernel (40..48) and returns 2 us later; relu 10 us; the step
    ends after 10 us more."""
    t = Layout()
    t.host("step", "ProfilerStep#0", 0, 70)
    mm = t.host("cpu_op", "aten::mm", 0, 3, line=3)
    lk = t.host("runtime", "cudaLaunchKernel", 1, 2, parent=mm, op=mm)
    t.device("gemm", 7, 5, 40, launch=lk, op=mm)
    to = t.host("cpu_op", "aten::to", 3, 50, line=4)
    call = t.host("runtime", "cudaMemcpyAsync", 4, 50, parent=to, op=to)
    t.device("Memcpy DtoH (Device -> Pageable)", 7, 40, 48, launch=call, kind="memcpy", op=to,
             memcpy_kind="DtoH (Device -> Pageable)", bytes=4 << 20)  # fmt: skip
    t.host("cpu_op", "aten::relu", 50, 60, line=5)
    return t


def test_non_blocking_copies_stop_the_host_waiting_and_keep_the_transfer():
    s = summary(blocking_copy(), Edits(nonblocking_copies=True))
    # the call keeps its 2 us after the copy: 4..6; relu 6..16; 10 us to the step's end: 26
    assert s["replayed_ns"] == 70 * US
    assert s["projected_ns"] == 26 * US
    assert s["saving_ns"] == (48 - 4) * US  # the call's wait: copy end minus call start


def test_the_copy_finding_is_priced_by_replaying_its_fix():
    a = analyze(blocking_copy().trace())
    f = next(f for f in a.findings if f.rule_id == "sync_memcpy")
    assert f.cost_method == "replay"
    assert f.cost_ns == (48 - 4) * US
    assert "asynchronous" in f.fix_edit
    assert a.fixes["priced"] >= 1
    assert a.fixes["all_fixes_ns"] >= f.cost_ns
    assert a.fixes["replayed_ns"] == 70 * US
    out = f.to_dict()
    assert out["cost_method"] == "replay" and "edits" not in out


def overlapped() -> Layout:
    """Kernel A (stream 7, 5..25); an all-reduce on stream 20 (8..60); stream 7 waits on an event
    recorded after it, then runs B (60..80); the host synchronizes the device (11..82), runs
    relu 82..90, and the step ends at 100."""
    t = Layout()
    t.host("step", "ProfilerStep#0", 0, 100)
    o1 = t.host("cpu_op", "op1", 0, 3)
    la = t.host("runtime", "cudaLaunchKernel", 1, 2, parent=o1, op=o1)
    t.device("A", 7, 5, 25, launch=la, op=o1)
    o2 = t.host("cpu_op", "c10d::allreduce_", 3, 6)
    lc = t.host("runtime", "ncclLaunch", 4, 5, parent=o2, op=o2)
    t.device(ALLREDUCE, 20, 8, 60, launch=lc, kind="collective", op=o2)
    t.host("runtime", "cudaEventRecord", 6, 7, correlation_id=100)
    t.host("runtime", "cudaStreamWaitEvent", 7, 8, correlation_id=101)
    t.stream_wait(7, waited=20, waiting=7, record_corr=100, corr=101)
    o3 = t.host("cpu_op", "op3", 8, 11)
    lb = t.host("runtime", "cudaLaunchKernel", 9, 10, parent=o3, op=o3)
    t.device("B", 7, 60, 80, launch=lb, op=o3)
    t.host("runtime", "cudaDeviceSynchronize", 11, 82)
    t.host("cpu_op", "aten::relu", 82, 90)
    return t


def test_overlapped_communication_no_longer_delays_compute_or_the_host():
    s = summary(overlapped(), Edits(overlap_comm=True))
    assert s["replayed_ns"] == 100 * US
    # B no longer waits for the all-reduce: its launch (op3's call at 9 us, after op3's 1 us)
    # plus the modelled launch latency (the most it models); it runs 20 us; the synchronize
    # waits for B only and keeps its 2 us tail; relu 8 us; 10 us to the step's end
    b_start = 9 * US + LAUNCH_LATENCY_MAX_NS
    assert s["projected_ns"] == b_start + 20 * US + 2 * US + 8 * US + 10 * US


def test_the_collective_itself_still_runs_in_its_stream_order():
    # communication made faster (not overlapped) moves B and everything after it
    s = summary(overlapped(), Edits(scale=((ALLREDUCE, 0.5),)))
    # all-reduce 8..34, B 34..54, sync returns 56, relu 56..64, end 74
    assert s["projected_ns"] == 74 * US


def two_ranks() -> Layout:
    """Two ranks run the same step: a kernel, then an all-reduce on the same stream, a device
    synchronize (returning 2 us after it), relu 10 us, the step ends at 100 us. Rank 1's kernel
    takes 60 us, rank 0's 20 us: rank 0's all-reduce starts at 25 and spins until rank 1 arrives
    at 65; both transfer for 10 us (65..75)."""
    t = Layout()
    for rank, work_us in ((0, 20), (1, 60)):
        t.host("step", "ProfilerStep#0", 0, 100, rank=rank)
        f = t.host("cpu_op", "fwd", 0, 3, rank=rank, line=10 + rank)
        lk = t.host("runtime", "cudaLaunchKernel", 1, 2, parent=f, op=f, rank=rank)
        t.device(f"work_{rank}", 7, 5, 5 + work_us, launch=lk, op=f, rank=rank)
        c = t.host("cpu_op", "c10d::allreduce_", 3, 6, rank=rank, line=20)
        lc = t.host("runtime", "ncclLaunch", 4, 5, parent=c, op=c, rank=rank)
        t.device(ALLREDUCE, 7, 5 + work_us, 75, launch=lc, kind="collective", op=c, rank=rank)
        t.host("runtime", "cudaDeviceSynchronize", 6, 77, rank=rank)
        t.host("cpu_op", "aten::relu", 77, 87, rank=rank)
    return t


def _step_of(s: dict, rank: int) -> dict:
    return next(st for st in s["steps"] if st["rank"] == rank)


def test_the_ranks_join_at_the_collective_and_the_baseline_reproduces_both():
    frames = TraceFrames(two_ranks().trace())
    s = replay_summary(frames)
    assert [(st["rank"], st["measured_ns"], st["replayed_ns"]) for st in s["steps"]] == [
        (0, 100 * US, 100 * US),
        (1, 100 * US, 100 * US),
    ]
    from neuron_explorer.analyzers.graph import build_graph

    edges = build_graph(frames).edges
    assert (edges["kind"] == COLLECTIVE).sum() == 4  # two arrivals into the join, the join into two transfers


def test_the_early_ranks_critical_path_runs_through_the_late_ranks_work():
    cp = critical_path_table(TraceFrames(two_ranks().trace()))
    rank0 = cp[cp["rank"] == 0]
    assert rank0["ns"].sum() == 100 * US
    late = rank0[rank0["on_rank"] == 1]
    work = late[(late["kernel"] == "work_1") & (late["category"] == "compute")]
    assert work["ns"].sum() == 60 * US and work["op"].tolist() == ["fwd"]
    # the line on the late rank that launched it: rank 1's fwd (line 11), 1 us before its launch
    fwd = late[late["category"] == "host_launch"]
    assert fwd["op"].tolist() == ["fwd"] and fwd["src_line"].tolist() == [11] and fwd["ns"].sum() == 1 * US
    # and the 4 us between its launch call's start (1 us) and its start (5 us), on rank 1 too
    latency = late[late["category"] == "launch_latency"]
    assert latency["ns"].sum() == 4 * US and set(latency["kernel"]) == {"work_1"}
    assert "work_0" not in set(rank0["kernel"])  # rank 0's own kernel ends 40 us before rank 1 arrives


def test_speeding_up_the_late_ranks_work_moves_the_other_ranks_step():
    s = summary(two_ranks(), Edits(scale=(("^work_1$", 0.5),)))
    # rank 1 arrives at 35: both transfer 35..45, the syncs return at 47, relu, 13 us: 70
    assert _step_of(s, 0)["projected_ns"] == 70 * US
    assert _step_of(s, 1)["projected_ns"] == 70 * US
    s = summary(two_ranks(), Edits(scale=(("^work_0$", 0.5),)))
    assert s["saving_ns"] == 0  # the early rank's work is off every critical path


def test_whatif_cli_takes_the_new_edits_and_reports_per_step(tmp_path):
    path = tmp_path / "copy.parquet"
    blocking_copy().trace().write(path)
    out = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "whatif", str(path), "--nonblocking-copies", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    r = json.loads(out.stdout)
    assert r["edits"]["nonblocking_copies"] is True and r["edits"]["overlap_comm"] is False
    assert r["saving_ns"] == 44 * US
    assert r["steps"][0]["projected_ns"] == 26 * US
    for key in ("measured_ns", "replayed_ns", "baseline_error_pct", "unexplained_pct", "projected_ns", "saving_ns"):
        assert key in r and key in r["steps"][0]
    text = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "whatif", str(path), "--overlap-comm"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "with overlapped communication: projected" in text


@pytest.mark.parametrize("factor", ["-1", "x"])
def test_whatif_cli_refuses_a_bad_factor_in_one_line(tmp_path, factor):
    path = tmp_path / "copy.parquet"
    blocking_copy().trace().write(path)
    out = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "whatif", str(path), "--scale", f"gemm={factor}"],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr and "--scale" in out.stderr
