"""A host that runs ahead and then blocks in a pageable device-to-host copy.

The shape of the A100 run in issue 12: each step launches its kernels early (the queue holds
many kernels the device has not started), then ``aten::to`` copies a result to pageable host
memory, which the driver turns into a blocking ``cudaMemcpyAsync``: the host waits tens of ms
while the device has nothing to run. The run is not host-bound; the copy is the bottleneck,
and its cost is known by construction here (the test computes it from the layout it wrote).
"""

from __future__ import annotations

import json

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze

US = 1.0  # Kineto timestamps are microseconds
STEP_US = 100_000.0
STEPS = 3
KERNELS = 16
COPY_CALL = (40_200.0, 91_800.0)  # the blocking cudaMemcpyAsync, per step
COPY_ON_DEVICE = (90_000.0, 91_500.0)
LAST_KERNEL_END = 5_000.0 + KERNELS * 2_000.0  # kernels run back to back from 5 ms
#: per step, the time inside the copy call while the device runs nothing: before the copy
#: reaches the device, and after it finished there until the call returns
BLOCKED_US = (COPY_ON_DEVICE[0] - max(COPY_CALL[0], LAST_KERNEL_END)) + (COPY_CALL[1] - COPY_ON_DEVICE[1])
#: per step, what a non-blocking copy saves (the finding's fix, replayed): the call no longer
#: waits for its copy to finish on the device; its own time after that (0.3 ms) stays, and
#: everything after it on the thread moves up
WAIT_US = COPY_ON_DEVICE[1] - COPY_CALL[0]


def _trace() -> dict:
    ev: list[dict] = []
    corr = 0

    def x(cat: str, name: str, ts: float, dur: float, pid: int = 100, tid: int = 1, **args: object) -> None:
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})

    base = 1_700_000_000_000.0
    for k in range(STEPS):
        o = base + k * STEP_US
        x("user_annotation", f"ProfilerStep#{k}", o, STEP_US)
        x("python_function", "train.py(20): train_step", o + 500, STEP_US - 1_000)
        x("cpu_op", "aten::linear", o + 1_000, 9_000, **{"External id": 10 * k + 1})
        for i in range(KERNELS):
            corr += 1
            launch = o + 1_000 + i * 500
            x("cuda_runtime", "cudaLaunchKernel", launch, 20, correlation=corr, **{"External id": 10 * k + 1})
            x("kernel", f"gemm_kernel_{i}", o + 5_000 + i * 2_000, 2_000, pid=0, tid=7,
              device=0, stream=7, correlation=corr, **{"External id": 10 * k + 1})  # fmt: skip
        x("python_function", "train.py(30): read_loss", o + 39_000, 54_000)
        x("cpu_op", "aten::to", o + 40_000, 52_000, **{"External id": 10 * k + 2})
        x("cpu_op", "aten::copy_", o + 40_100, 51_800, **{"External id": 10 * k + 3})
        corr += 1
        x("cuda_runtime", "cudaMemcpyAsync", o + COPY_CALL[0], COPY_CALL[1] - COPY_CALL[0],
          correlation=corr, **{"External id": 10 * k + 3})  # fmt: skip
        x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", o + COPY_ON_DEVICE[0], COPY_ON_DEVICE[1] - COPY_ON_DEVICE[0],
          pid=0, tid=7, device=0, stream=7, correlation=corr, bytes=4 << 20, **{"External id": 10 * k + 3})  # fmt: skip
    props = [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_000_000_000, "computeMajor": 8,
              "computeMinor": 0, "numSms": 108}]  # fmt: skip
    return {"schemaVersion": 1, "deviceProperties": props, "distributedInfo": {"rank": 0}, "traceEvents": ev}


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("blocking") / "run.json"
    path.write_text(json.dumps(_trace()))
    return analyze(ne.load(path))


def test_blocked_host_is_the_largest_category_and_the_verdict(result) -> None:
    wall = STEPS * STEP_US
    assert result.summary["host_blocked_pct"] == pytest.approx(100 * STEPS * BLOCKED_US / wall, abs=0.01)
    assert result.summary["verdict"].startswith("Mostly host blocked on the device")
    assert "host-bound" not in result.summary["verdict"]


def test_the_blocking_copy_is_the_top_finding_with_its_op_line_and_cost(result) -> None:
    top = result.findings[0]
    assert top.rule_id == "sync_memcpy" and top.category == "host_blocked"
    assert top.cost_method == "replay" and "asynchronous" in top.fix_edit
    assert top.cost_ns == pytest.approx(STEPS * WAIT_US * 1000, rel=1e-6)
    assert top.metrics["blocked_ns"]["value"] == pytest.approx(STEPS * BLOCKED_US * 1000, rel=1e-6)
    assert top.metrics["pageable"]["value"] == STEPS
    assert "aten::copy_" in top.message  # the op that issued the copy
    assert top.source_lines[0]["file"] == "train.py" and top.source_lines[0]["line"] == 30
    assert "pin_memory" in top.recommendation and "non_blocking=True" in top.recommendation


def test_a_host_running_ahead_of_a_full_queue_is_not_host_bound(result) -> None:
    # all 16 kernels of a step are launched by 9 ms and run until 37 ms: the host waits on nothing
    ids = {f.rule_id for f in result.findings}
    assert not ids & {"host_bound", "launch_bound", "tiny_ops"}
    assert result.summary["host_launch_pct"] < 10
    assert result.launch_summary["queue_depth_max"] >= KERNELS - 2
