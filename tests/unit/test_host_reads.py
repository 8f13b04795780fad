"""Issue 40 item 3: a blocking device-to-host copy whose bytes the host reads at once is not
fixed by ``non_blocking=True`` (the wait moves to the read). ``sync_memcpy`` tells such copies
by the trace's own evidence, names the remedy that removes the wait, and leaves the advice for
copies read later as it was.

No real trace among the fixtures shows it (the H200 ``whatif_copies`` copy is read by nobody:
its host work after the copy is independent, and stays priced as a non-blocking fix), so the
three layouts are built here, each the A100 shape of tests/unit/test_blocking_copies.py: a step
of queued kernels, then a 4 MiB pageable DtoH copy that blocks the host ~50 ms.
"""

from __future__ import annotations

import json

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze

STEP_US = 100_000.0
STEPS = 3


def _trace(variant: str) -> dict:
    ev: list[dict] = []
    corr = 0

    def x(cat: str, name: str, ts: float, dur: float, pid: int = 100, tid: int = 1, **args: object) -> None:
        ev.append({"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})

    base = 1_700_000_000_000.0
    logits = {"Input Dims": [[1, 400], [1, 400], []], "Input type": ["float", "float", "Scalar"]}
    for k in range(STEPS):
        o = base + k * STEP_US
        x("user_annotation", f"ProfilerStep#{k}", o, STEP_US)
        x("python_function", "train.py(20): train_step", o + 500, STEP_US - 1_000)
        x("cpu_op", "aten::linear", o + 1_000, 9_000, **{"External id": 10 * k + 1})
        for i in range(16):
            corr += 1
            x("cuda_runtime", "cudaLaunchKernel", o + 1_000 + i * 500, 20, correlation=corr)
            x("kernel", f"gemm_kernel_{i}", o + 5_000 + i * 2_000, 2_000, pid=0, tid=7,
              device=0, stream=7, correlation=corr)  # fmt: skip
        x("python_function", "train.py(30): read_result", o + 39_000, 54_000)
        if variant == "item":  # loss.item(): the value goes straight to Python
            x("cpu_op", "aten::item", o + 39_900, 52_300)
            x("cpu_op", "aten::_local_scalar_dense", o + 39_950, 52_200)
        x("cpu_op", "aten::to", o + 40_000, 52_000)
        x("cpu_op", "aten::copy_", o + 40_100, 51_800, **(logits if variant != "item" else {}))
        corr += 1
        x("cuda_runtime", "cudaMemcpyAsync", o + 40_200, 51_600, correlation=corr)
        x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", o + 90_000, 1_500, pid=0, tid=7, device=0, stream=7,
          correlation=corr, bytes=4 << 20)  # fmt: skip
        # the host's next op: CPU softmax on the logits just copied ("next_op"), or on another tensor
        shape = [[1, 400], []] if variant == "next_op" else [[64, 64], []]
        x("cpu_op", "aten::softmax", o + 92_500, 800, **{"Input Dims": shape, "Input type": ["float", "Scalar"]})
    props = [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85_000_000_000, "computeMajor": 8,
              "computeMinor": 0, "numSms": 108}]  # fmt: skip
    return {"schemaVersion": 1, "deviceProperties": props, "distributedInfo": {"rank": 0}, "traceEvents": ev}


def _finding(tmp_path, variant: str):
    path = tmp_path / f"{variant}.json"
    path.write_text(json.dumps(_trace(variant)))
    a = analyze(ne.load(path), rules=["sync_memcpy"])
    (f,) = [f for f in a.findings if f.rule_id == "sync_memcpy"]
    return f


@pytest.mark.parametrize("variant", ["item", "next_op"])
def test_a_copy_the_host_reads_at_once_gets_the_remedy_that_removes_the_wait(tmp_path, variant: str) -> None:
    f = _finding(tmp_path, variant)
    assert f.metrics["read_at_once"]["value"] == STEPS
    assert "reads their bytes at once" in f.title
    assert "non_blocking=True alone saves nothing" in f.recommendation
    assert "keep the value on the device" in f.recommendation
    # no pinned-memory advice: every copy is read at once
    assert "pin_memory" not in f.recommendation
    words = "under .item()" if variant == "item" else "the next op on the host takes"
    assert words in f.message


def test_a_copy_read_by_nobody_keeps_the_non_blocking_fix(tmp_path) -> None:
    f = _finding(tmp_path, "unread")
    assert f.metrics["read_at_once"]["value"] == 0
    assert "non_blocking=True" in f.recommendation and "pin_memory" in f.recommendation
    assert "at once" not in f.title
