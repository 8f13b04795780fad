"""A real torch.profiler capture on the CPU: ``whatif --scale`` on the heaviest op predicts the
saving that a run with that op doing half the work actually measures.

The heavy op is ``torch.mm``: a full step calls it 4 times, a cheaper step twice on the same
operands, each call right after the same small ops in both (half the matmul work at the same
cost per call: a smaller matrix, or calls back to back, would change the cache behaviour and
with it the cost per flop, which is not what the replay is asked). On a
shared 2-core machine, separate recordings seconds apart differ by more than 15% from load
alone (measured: the same script's step time moved 2.5x between runs), so the cheaper run is
recorded interleaved with the full one, step by step, in one capture: even steps full, odd
steps cheaper, and every figure is a median over its steps. The prediction is made on the full
steps only (what ``whatif --scale`` says each of them would save)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph import Edits, replay_summary

torch = pytest.importorskip("torch")

STEPS = 60  # 30 full, 30 cheaper
MM_CALLS = {0: 4, 1: 2}  # by step parity


def record(out: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule

    g = torch.Generator().manual_seed(0)
    a = torch.randn(128, 1024, generator=g)  # b (4 MiB) exceeds the caches in both runs alike
    b = torch.randn(1024, 1024, generator=g)
    c = torch.randn(128, 128, generator=g)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=STEPS),
        on_trace_ready=lambda p: p.export_chrome_trace(str(out)),
    ) as prof:
        for i in range(STEPS + 2):
            every = 4 // MM_CALLS[i % 2]  # ProfilerStep#i is step i
            for k in range(4):
                if k % every == 0:  # the heavy op, each call right after the same small ops
                    torch.mm(a, b)
                z = torch.relu(torch.addmm(c, c, c))  # the rest of the step: the same in both
            float(z.sum())
            prof.step()


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("recorded") / "interleaved.json"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        record(path)
    finally:
        torch.set_num_threads(threads)
    return path


def _steps(path: Path, edits: Edits | None = None) -> list[dict]:
    import neuron_explorer as ne

    return replay_summary(TraceFrames(ne.load(path)), edits)["steps"]


def _mm_calls_per_step(path: Path) -> dict[int, int]:
    import neuron_explorer as ne

    ops = ne.load(path).ops(["name", "step"])
    mm = ops[ops["name"].astype(str) == "aten::mm"]
    return {int(k): int(v) for k, v in mm.groupby("step").size().items()}


def test_scaling_the_heaviest_op_predicts_the_measured_saving(recording):
    calls = _mm_calls_per_step(recording)
    full_steps = {s for s, n in calls.items() if n == MM_CALLS[0]}
    half_steps = {s for s, n in calls.items() if n == MM_CALLS[1]}
    assert len(full_steps) >= 25 and len(half_steps) >= 25  # the capture holds what the script did
    baseline = _steps(recording)
    assert all(abs(s["baseline_error_pct"]) <= 2.0 for s in baseline)
    edited = _steps(recording, Edits(scale=(("^aten::mm$", 0.5),)))
    predicted = statistics.median(s["saving_ns"] for s in edited if s["step"] in full_steps)
    measured_full = statistics.median(s["measured_ns"] for s in baseline if s["step"] in full_steps)
    measured_half = statistics.median(s["measured_ns"] for s in baseline if s["step"] in half_steps)
    measured = measured_full - measured_half
    assert measured > 0.2 * measured_full  # the op is heavy: the test measures something
    assert predicted == pytest.approx(measured, rel=0.15), json.dumps(
        {"predicted_ms": predicted / 1e6, "measured_ms": measured / 1e6, "full_ms": measured_full / 1e6}
    )


def test_the_scaled_op_is_the_heaviest(recording):
    import neuron_explorer as ne

    ops = ne.load(recording).ops(["name", "dur_ns"])
    total = ops.groupby(ops["name"].astype(str))["dur_ns"].sum()
    assert total.idxmax() == "aten::mm"
