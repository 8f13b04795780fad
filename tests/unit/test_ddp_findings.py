"""Issue 40 item 6 on HTA's nccl_data (a real two-rank DDP ResNet on A100s, rank 0's trace):
``slow_collective`` is priced by what the steps would save, never past the time the device
runs nothing but communication, and says one rank cannot tell a slow link from a slow peer;
``exposed_dtod`` names DistributedDataParallel's own copies and the DDP options that remove them.

Every expected figure is recomputed here from the raw Kineto JSON with plain Python.
"""

from __future__ import annotations

import gzip
import json

import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.collectors.load import load
from tests.conftest import shared_fixture

TRACE = shared_fixture("kineto/hta/nccl_parser_config/nccl_data.json.gz")


@pytest.fixture(scope="module")
def raw() -> list[dict]:
    with gzip.open(TRACE, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def _union(iv: list[tuple[float, float]]) -> float:
    total, cur = 0.0, None
    for a, b in sorted(iv):
        if cur is None or a > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (cur[1] - cur[0] if cur else 0.0)


def _clip(iv, windows):
    return [(max(a, s), min(b, e)) for a, b in iv for s, e in windows if b > s and a < e]


def test_slow_collective_costs_no_more_than_the_exposed_communication(raw):
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")]
    device = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in device if e["name"].startswith("nccl")]
    other = [(e["ts"], e["ts"] + e["dur"]) for e in device if not e["name"].startswith("nccl")]
    # the time in steps the device runs a collective and nothing else: all a faster link can save
    exposed_us = _union(_clip(comm + other, steps)) - _union(_clip(other, steps))
    comm_us = sum(b - a for a, b in comm)
    assert 0 < exposed_us < comm_us

    a = analyze(load(TRACE), rules=["slow_collective"])
    (f,) = [f for f in a.findings if f.rule_id == "slow_collective"]
    lost_us = f.metrics["lost_ns"]["value"] / 1e3
    assert lost_us > exposed_us  # the transfer time at peak, which the audit billed: more than can be saved
    assert f.cost_method == "replay"
    assert f.cost_ns / 1e3 <= exposed_us * 1.01
    assert "cannot tell a slow link from a slow peer" in f.message


def test_exposed_dtod_names_ddp_copies_and_the_options_that_remove_them(raw):
    by_tid: dict = {}
    for e in raw:
        by_tid.setdefault(e["tid"], []).append(e)
    memcpy = {
        e["args"]["correlation"]: e for e in raw if e.get("cat") == "gpu_memcpy" and e["name"].startswith("Memcpy DtoD")
    }

    def inside(span, call):
        return span["tid"] == call["tid"] and span["ts"] <= call["ts"] <= span["ts"] + span["dur"]

    steps = [e for e in raw if str(e.get("name", "")).startswith("ProfilerStep#")]
    calls = [
        e
        for e in raw
        if e.get("cat") == "cuda_runtime"
        and e["args"].get("correlation") in memcpy
        and any(s["ts"] <= memcpy[e["args"]["correlation"]]["ts"] <= s["ts"] + s["dur"] for s in steps)
    ]
    reducer = [e for e in raw if e["name"] == "torch.distributed.ddp.reducer::copy_bucket_to_grad"]
    forwards = [e for e in raw if e["name"] == "DistributedDataParallel.forward"]
    bcast = [e for e in raw if e["name"] == "c10d::broadcast_"]
    bucket = sum(any(inside(r, c) for r in reducer) for c in calls)
    buffers = 0
    for c in calls:
        fwd = [f for f in forwards if inside(f, c)]
        if fwd and any(inside(fwd[0], b) and b["ts"] <= c["ts"] for b in bcast):
            buffers += 1
    assert bucket > 0 and buffers > 0

    a = analyze(load(TRACE), rules=["exposed_dtod"], thresholds={"exposed_dtod.min_pct": 0.01})
    (f,) = [f for f in a.findings if f.rule_id == "exposed_dtod"]
    assert f.metrics["ddp_bucket_copies"]["value"] == bucket
    assert f.metrics["ddp_buffer_copies"]["value"] == buffers
    assert "gradient_as_bucket_view=True" in f.recommendation
    assert "broadcast_buffers=False" in f.recommendation
    # every copy is DDP's: the generic advice (clone, cat) does not fit them
    assert bucket + buffers == f.metrics["dtod_copies"]["value"]
    assert ".clone()" not in f.recommendation
    assert "DistributedDataParallel's" in f.title
