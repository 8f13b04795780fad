"""The dependency graph, its replay and the critical path on layouts whose dependencies are
known: each expected figure is the layout's own arithmetic, written out in the test."""

from __future__ import annotations

import pytest

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph import Edits, critical_path_table, replay_summary
from tests.unit.graph_layout import US, Layout


def two_streams() -> Layout:
    """mm launches a 100 us gemm on stream 7, add a 30 us kernel on stream 8; the host then
    synchronizes the device (returning 5 us after the gemm ends), runs relu, and the step ends
    after 10 us of untraced time."""
    t = Layout()
    t.host("step", "ProfilerStep#0", 0, 130)
    mm = t.host("cpu_op", "aten::mm", 0, 10, line=3)
    l1 = t.host("runtime", "cudaLaunchKernel", 2, 4, parent=mm, op=mm)
    t.device("gemm", 7, 5, 105, launch=l1, op=mm)
    add = t.host("cpu_op", "aten::add", 10, 20, line=4)
    l2 = t.host("runtime", "cudaLaunchKernel", 12, 14, parent=add, op=add)
    t.device("add_kernel", 8, 15, 45, launch=l2, op=add)
    t.host("runtime", "cudaDeviceSynchronize", 20, 110)
    t.host("cpu_op", "aten::relu", 110, 120, line=5)
    return t


def summary(layout: Layout, edits: Edits | None = None) -> dict:
    return replay_summary(TraceFrames(layout.trace()), edits)


def test_baseline_replay_reproduces_the_step_and_nothing_is_unexplained():
    s = summary(two_streams())
    assert s["measured_ns"] == 130 * US
    assert s["replayed_ns"] == 130 * US
    assert s["baseline_error_pct"] == 0.0
    assert s["unexplained_pct"] == 0.0


def test_critical_path_runs_through_the_gemm_and_the_sync_and_sums_to_the_step():
    cp = critical_path_table(TraceFrames(two_streams().trace()))
    by = cp.groupby("category")["ns"].sum().to_dict()
    # mm's 2 us before its launch, 3 us launch latency, the 100 us gemm, the sync's 5 us tail,
    # relu's 10 us, 10 us untraced at the end of the step
    assert by == {
        "host_launch": 12 * US,
        "launch_latency": 3 * US,
        "compute": 100 * US,
        "host_blocked": 5 * US,
        "untraced": 10 * US,
    }
    assert cp["ns"].sum() == 130 * US
    gemm = cp[(cp["kernel"] == "gemm") & (cp["category"] == "compute")]
    assert gemm["op"].tolist() == ["aten::mm"] and gemm["ns"].tolist() == [100 * US]
    assert cp.loc[cp["op"] == "aten::relu", "src_line"].tolist() == [5]
    assert "add_kernel" not in set(cp["kernel"])  # off the critical path: it ends 60 us earlier


def test_halving_the_critical_gemm_saves_half_of_it():
    s = summary(two_streams(), Edits(scale=(("gemm", 0.5),)))
    # gemm 5..55; the sync returns 5 us later (60), relu 60..70, 10 us untraced: 80
    assert s["projected_ns"] == 80 * US
    assert s["saving_ns"] == 50 * US


def test_shrinking_the_op_below_the_other_stream_moves_everything_after_it():
    s = summary(two_streams(), Edits(scale=(("aten::mm", 0.3),)))
    # the op and its kernel scale: mm's host part takes 3 us (its launch starts at 0.6), the gemm
    # runs 3.6..33.6; add moves up 7 us (3..13, its kernel 8..38) and is now the later stream:
    # the sync returns at 43, relu 43..53, 10 us untraced: 63
    assert s["projected_ns"] == 63 * US
    assert s["saving_ns"] == 67 * US


def test_removing_the_synchronize_drops_its_wait():
    s = summary(two_streams(), Edits(remove=("cudaDeviceSynchronize",)))
    # relu right after add (20..30), then the 10 us untraced tail
    assert s["projected_ns"] == 40 * US


def cross_stream() -> Layout:
    """Kernel A (stream 7, 100 us) is recorded as an event; stream 8 waits for it, then runs B
    (20 us); the host synchronizes and the step ends 10 us after the sync returns."""
    t = Layout()
    t.host("step", "ProfilerStep#0", 0, 140)
    la = t.host("runtime", "cudaLaunchKernel", 2, 4)
    t.device("A", 7, 5, 105, launch=la)
    t.host("runtime", "cudaEventRecord", 20, 21, correlation_id=100)
    t.host("runtime", "cudaStreamWaitEvent", 22, 23, correlation_id=101)
    t.stream_wait(22, waited=7, waiting=8, record_corr=100, corr=101)
    lb = t.host("runtime", "cudaLaunchKernel", 24, 26)
    t.device("B", 8, 105, 125, launch=lb)
    t.host("runtime", "cudaDeviceSynchronize", 30, 130)
    return t


def test_a_cross_stream_wait_explains_the_second_streams_delay():
    s = summary(cross_stream())
    assert s["replayed_ns"] == 140 * US
    assert s["unexplained_pct"] == 0.0  # B's 81 us wait after its launch is A, not a gap


def test_an_edit_moves_the_work_that_waits_on_another_stream():
    s = summary(cross_stream(), Edits(scale=(("^A$", 0.5),)))
    # A 5..55, B 55..75, the sync returns 5 us later (80), then 10 us: 90
    assert s["projected_ns"] == 90 * US


def graph_launch() -> Layout:
    """One cudaGraphLaunch replays three 10 us kernels with 5 us gaps between them (the graph's
    own order, which the trace does not record), then the host synchronizes the stream."""
    t = Layout()
    t.host("step", "ProfilerStep#0", 0, 60)
    op = t.host("cpu_op", "replay", 0, 7)
    g = t.host("runtime", "cudaGraphLaunch", 2, 6, parent=op, op=op)
    for name, a in (("k1", 10), ("k2", 25), ("k3", 40)):
        t.device(name, 7, a, a + 10, launch=g, op=op)
    t.host("runtime", "cudaStreamSynchronize", 7, 55)
    return t


def test_graph_internal_gaps_are_unexplained_and_reported():
    s = summary(graph_launch())
    cp = critical_path_table(TraceFrames(graph_launch().trace()))
    by = cp.groupby("category")["ns"].sum().to_dict()
    # 2 us of replay before the launch, 8 us latency, 3 x 10 us kernels, 2 x 5 us gaps, the
    # sync's 5 us tail, 5 us untraced at the end
    assert by == {
        "host_launch": 2 * US,
        "launch_latency": 8 * US,
        "compute": 30 * US,
        "unexplained": 10 * US,
        "host_blocked": 5 * US,
        "untraced": 5 * US,
    }
    assert s["unexplained_pct"] == pytest.approx(100 * 10 / 60)


def test_removing_a_graph_kernel_moves_the_rest_of_the_graph():
    s = summary(graph_launch(), Edits(remove=("^k2$",)))
    assert s["saving_ns"] == 10 * US


def test_a_trace_without_steps_replays_its_wall_time():
    t = Layout()
    la = t.host("runtime", "cudaLaunchKernel", 0, 2)
    t.device("k", 7, 4, 54, launch=la)
    t.host("runtime", "cudaDeviceSynchronize", 2, 56)
    s = summary(t)
    assert s["has_steps"] is False
    assert s["measured_ns"] == s["replayed_ns"] == 56 * US
    assert summary(t, Edits(scale=(("^k$", 0.2),)))["saving_ns"] == 40 * US


def test_a_bad_pattern_or_factor_is_a_typed_error():
    from neuron_explorer.trace.errors import AnalysisError

    with pytest.raises(AnalysisError):
        summary(two_streams(), Edits(scale=(("(", 0.5),)))
    with pytest.raises(AnalysisError):
        summary(two_streams(), Edits(scale=(("gemm", -1.0),)))


def backward_thread() -> Layout:
    """The main thread runs forward (100 us), then waits inside backward while the autograd
    thread (idle until then) runs the backward op (170 us, starting 10 us after the hand-off);
    the main thread returns 10 us after it, and the step ends 10 us later."""
    t = Layout()
    t.host("step", "ProfilerStep#0", 0, 300)
    t.host("cpu_op", "forward", 0, 100)
    t.host("annotation", "backward", 100, 290)
    t.host("cpu_op", "autograd_thread_start", 0, 1, tid=2)
    t.host("cpu_op", "bwd", 110, 280, tid=2)
    return t


def test_a_thread_hand_off_carries_edits_both_ways():
    assert summary(backward_thread())["replayed_ns"] == 300 * US
    # forward 0..50: the autograd thread resumes at 60, bwd 60..230, main returns at 240, end 250
    assert summary(backward_thread(), Edits(scale=(("^forward$", 0.5),)))["saving_ns"] == 50 * US
    # bwd 110..195: main returns at 205, the step ends at 215
    assert summary(backward_thread(), Edits(scale=(("^bwd$", 0.5),)))["saving_ns"] == 85 * US
