"""The device idle with launched work queued, and what that work waits on (issue 31).

The first layout is the issue's example: each step replays a CUDA graph whose kernels wait on
the graph's internal dependencies (2 ms gaps between 100 us kernels), and the host then reads
small results back with pageable device-to-host copies. The first copy blocks the host until
the replay has drained (its stream's queue); the copies' own transfers take microseconds. The
test computes every figure from the layout's constants below.
"""

from __future__ import annotations

import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.attribution.queued import queue_waits
from neuron_explorer.analyzers.core.context import TraceFrames
from tests.unit.graph_layout import Layout

STEP_US = 100_000
STEPS = 3
KERNELS = 40
K_DUR, K_GAP = 100, 2_000  # graph kernels and the gaps inside the replay
LAUNCH = (100, 110)  # cudaGraphLaunch, per step
K0 = 115  # first kernel: 5 us after the launch returned (inside the queue grace)
COPIES = 10
COPY0_AT = 1_000  # the first copy call starts while the replay is still running
COPY_LAG, COPY_DUR, COPY_TAIL = 5, 2, 3  # memcpy 5 us after it may start, 2 us long, call returns 3 us after
COPY_EACH = 20  # later copies: one every 20 us, each call 15 us


def kernel_start(i: int) -> int:
    return K0 + i * (K_DUR + K_GAP)


REPLAY_END = kernel_start(KERNELS - 1) + K_DUR


def _graph_and_copies() -> Layout:
    lay = Layout()
    for k in range(STEPS):
        o = k * STEP_US
        step = lay.host("step", f"ProfilerStep#{k}", o, o + STEP_US, step=k)
        lay.rows[step]["step"] = k
        g = lay.host("runtime", "cudaGraphLaunch", o + LAUNCH[0], o + LAUNCH[1], step=k)
        for i in range(KERNELS):
            lay.device(f"graph_kernel_{i}", 7, o + kernel_start(i), o + kernel_start(i) + K_DUR, g)
        t = o + COPY0_AT
        for j in range(COPIES):
            m0 = (o + REPLAY_END + COPY_LAG) if j == 0 else t + COPY_LAG
            end = m0 + COPY_DUR + COPY_TAIL
            op = lay.host("cpu_op", "aten::_local_scalar_dense", t, end, line=42, step=k)
            c = lay.host("runtime", "cudaMemcpyAsync", t, end, parent=op, op=op, step=k)
            lay.device("Memcpy DtoH (Device -> Pageable)", 7, m0, m0 + COPY_DUR, c, kind="memcpy",
                       memcpy_kind="DtoH (Device -> Pageable)", bytes=704, op=op)  # fmt: skip
            t = end + (COPY_EACH - (end - t)) if j else end + 5
    for r in lay.rows:
        r["step"] = int((r["start_ns"] - lay.rows[0]["start_ns"]) // (STEP_US * 1000))
    return lay


# per step, from the layout: the device idles in every gap of the replay with the rest queued
QUEUED_US = (KERNELS - 1) * K_GAP
# the copies' time after their queue drained, with the device running nothing: the first copy
# from the replay's end to its return less its memcpy; each later copy its call less its memcpy
FIRST_OWN_US = COPY_LAG + COPY_TAIL
LATER_OWN_US = COPY_LAG + COPY_TAIL  # call [t, t+10): memcpy [t+5, t+7)
OWN_US = FIRST_OWN_US + (COPIES - 1) * LATER_OWN_US
# the first copy waits from its call to the replay's end, minus the kernels that run meanwhile
FIRST_KERNEL_AFTER = next(i for i in range(KERNELS) if kernel_start(i) >= COPY0_AT)
QUEUE_US = (
    (REPLAY_END - COPY0_AT)
    - (KERNELS - FIRST_KERNEL_AFTER) * K_DUR
    - max(0, kernel_start(FIRST_KERNEL_AFTER - 1) + K_DUR - COPY0_AT)
)


@pytest.fixture(scope="module")
def graph_result():
    return analyze(_graph_and_copies().trace())


def test_the_replay_gaps_are_queued_device_idle_waiting_on_the_graph(graph_result) -> None:
    f = next(f for f in graph_result.findings if f.rule_id == "device_queue_wait")
    assert f.metrics["queued_idle_ns"]["value"] == STEPS * QUEUED_US * 1000
    assert f.metrics["graph_ns"]["value"] == STEPS * QUEUED_US * 1000
    assert "graph's internal dependency" in f.title
    # most of it with the host blocked in the first copy: billed as host_blocked, the
    # attribution's category there, and only that part (one category per finding)
    assert f.metrics["under_blocking_ns"]["value"] == STEPS * QUEUE_US * 1000
    assert f.category == "host_blocked"
    assert f.cost_ns == STEPS * QUEUE_US * 1000
    assert "debug_dump" in f.recommendation


def test_the_copies_are_priced_at_their_own_transfer_and_not_advised_pinned_memory(graph_result) -> None:
    f = next(f for f in graph_result.findings if f.rule_id == "sync_memcpy")
    assert f.metrics["queue_wait_ns"]["value"] == STEPS * QUEUE_US * 1000
    # priced by replay: the copies' own transfers taking no time (the calls still wait for the
    # replay's queue) take COPY_DUR off each copy call, and the step end moves by that much
    assert f.cost_method == "replay"
    assert f.cost_ns == STEPS * COPIES * COPY_DUR * 1000
    assert f.metrics["own_transfer_ns"]["value"] == STEPS * OWN_US * 1000  # the attribution's share
    assert f.cost_ns < 0.01 * STEPS * STEP_US * 1000  # near zero
    assert "device_queue_wait" in f.message
    for g in graph_result.findings:
        if g.rule_id in ("sync_memcpy", "device_queue_wait"):
            assert "pin_memory" not in g.recommendation


def test_the_verdict_names_the_device_waiting_on_its_dependency(graph_result) -> None:
    v = graph_result.summary["verdict"]
    assert "graph's internal dependency" in v and "queued" in v


def test_the_waiting_work_is_the_next_kernel_of_the_replay(graph_result) -> None:
    frames = TraceFrames(_graph_and_copies().trace())
    pieces = queue_waits(frames)
    names = set(pieces["name"])
    assert names == {f"graph_kernel_{i}" for i in range(1, KERNELS)}
    assert ((pieces["end_ns"] - pieces["start_ns"]) == K_GAP * 1000).all()


def _findings(lay: Layout):
    a = analyze(lay.trace())
    return a, [f for f in a.findings if f.rule_id == "device_queue_wait"]


def _step(lay: Layout, end_us: int) -> None:
    lay.host("step", "ProfilerStep#0", 0, end_us)


def test_work_waiting_on_another_devices_stream_event_is_a_cross_stream_wait() -> None:
    # device 1 runs X for 5 ms; device 0's kernel B waits on an event recorded after X
    lay = Layout()
    _step(lay, 6_000)
    x_call = lay.host("runtime", "cudaLaunchKernel", 100, 105)
    x = lay.device("producer", 20, 110, 5_110, x_call)
    lay.rows[x]["device"] = 1
    lay.host("runtime", "cudaEventRecord", 120, 125, correlation_id=501)
    lay.host("runtime", "cudaStreamWaitEvent", 130, 135, correlation_id=502)
    lay.stream_wait(130, waited=20, waiting=7, record_corr=501, corr=502)
    b_call = lay.host("runtime", "cudaLaunchKernel", 140, 145)
    lay.device("consumer", 7, 5_120, 5_220, b_call)
    _a, found = _findings(lay)
    (f,) = found
    queued_from = 145 + 10  # launch end + the queue grace (attribution.QUEUE_GRACE_NS)
    assert f.metrics["cross_stream_ns"]["value"] == (5_120 - queued_from) * 1000
    assert f.metrics["queued_idle_ns"]["value"] == (5_120 - queued_from) * 1000
    assert "another stream's event" in f.title and "wait_stream" in f.recommendation


def test_work_launched_before_the_trace_began_is_queued_from_the_window_start() -> None:
    lay = Layout()
    _step(lay, 10_000)
    lay.device("left_over_gemm", 7, 2_000, 4_000, None)  # its launch is before the window
    k = lay.host("runtime", "cudaLaunchKernel", 3_000, 3_010)
    lay.device("next_kernel", 7, 4_000, 4_100, k)
    _a, found = _findings(lay)
    (f,) = found
    assert f.metrics["before_trace_ns"]["value"] == 2_000 * 1000  # from the step's start to the work
    assert f.metrics["queued_idle_ns"]["value"] == 2_000 * 1000
    assert "before the trace began" in f.title and "torch.profiler.schedule" in f.recommendation


def test_a_queued_collective_waits_for_its_peers() -> None:
    lay = Layout()
    _step(lay, 5_000)
    k = lay.host("runtime", "cudaLaunchKernel", 100, 105)
    lay.device("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 7, 3_000, 4_000, k, kind="collective")
    _a, found = _findings(lay)
    (f,) = found
    assert f.metrics["collective_ns"]["value"] == (3_000 - 115) * 1000
    assert "collective's peers" in f.title


def test_every_kernel_starting_long_after_its_launch_is_a_clock_note_not_a_bottleneck() -> None:
    lay = Layout()
    _step(lay, 20_000)
    for i in range(10):  # each kernel 3 ms after its launch; the first onto an idle device
        t = 100 + i * 1_000
        call = lay.host("runtime", "cudaLaunchKernel", t, t + 5)
        lay.device(f"k{i}", 7, t + 3_000, t + 3_100, call)
    a, found = _findings(lay)
    (note,) = found  # no bottleneck finding beside it
    assert note.severity == "info" and note.cost_ns == 0
    assert note.metrics["min_launch_delay_ns"]["value"] == 3_000 * 1000
    assert "clocks disagree" in note.title
    assert "graph" not in a.summary["verdict"]


def test_a_host_running_ahead_of_a_busy_device_is_a_queue_not_clock_skew() -> None:
    # every launch waits over 1 ms, but each behind a busy stream (the first behind work
    # launched before the window): the queue explains it
    lay = Layout()
    _step(lay, 20_000)
    lay.device("long_kernel", 7, 0, 5_000, None)
    for i in range(10):
        t = 200 + i * 100
        call = lay.host("runtime", "cudaLaunchKernel", t, t + 5)
        lay.device(f"k{i}", 7, 5_000 + i * 100, 5_100 + i * 100, call)
    _a, found = _findings(lay)
    assert found == []  # no clock note, and the device never idles with work queued


def test_no_clock_note_on_the_graph_layout(graph_result) -> None:
    assert not [f for f in graph_result.findings if f.rule_id == "device_queue_wait" and f.severity == "info"]
