"""Roofline causes from the shape and the device, on a real H200 trace (tests/gpu/causes_check.py:
per step 20 bf16 GEMMs of 788x4096 @ 4096x768, 5 of 8192x64 @ 64x8192 and one 8192^3, then a
synchronize). Every figure is recomputed here from the raw JSON: the output tiles against the
device's SM count (deviceProperties), the K=64 GEMM's arithmetic intensity against the ridge
point, and why making the small GEMM faster saves no step time (each of its kernels ends before
the host has launched the next)."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import re
import warnings
from functools import cache

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from tests.conftest import KINETO

TRACE = KINETO / "h200/gemm_shapes.json.gz"


@cache
def raw() -> dict:
    with gzip.open(TRACE, "rt") as fh:
        return json.load(fh)


@cache
def analysis() -> Analysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(ne.load(TRACE))


def _mm(dims: list) -> tuple[int, int, int]:
    (m, k), (_, n) = dims[0], dims[1]
    return m, n, k


def test_the_small_gemm_is_named_too_small_to_fill_the_device_by_its_tiles() -> None:
    doc = raw()
    sms = doc["deviceProperties"][0]["numSms"]
    mms = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("name") == "aten::mm"]
    small = {_mm(e["args"]["Input Dims"]) for e in mms if e["args"]["Input Dims"][0] == [788, 4096]}
    ((m, n, _k),) = small
    tiles = math.ceil(m / 128) * math.ceil(n / 128)
    assert tiles < sms  # 42 tiles for 132 SMs: two thirds of the device cannot get a tile
    (f,) = [f for f in analysis().findings if f.rule_id == "op_below_roofline"]
    assert "[788,4096] x [4096,768]" in f.title
    assert f"too small to fill the device: {tiles} output tiles" in f.message and f"{sms} SMs" in f.message
    assert "TunableOp / max-autotune cannot fill idle SMs" in f.recommendation


def test_the_k64_gemm_is_memory_bound_and_gets_no_finding() -> None:
    # 2*M*N*K flops over the bytes of A, B and C in bf16: below the H200's ridge point
    # (989 TFLOP/s dense bf16 over 4.8 TB/s, about 206 flop/byte), so it sits under its memory
    # roof, not its compute roof, and "below the compute roof" would be the wrong cause
    m, n, k = 8192, 8192, 64
    intensity = 2 * m * n * k / (2 * (m * k + k * n + m * n))
    assert intensity < 989e12 / 4.8e12
    for f in analysis().findings:
        assert "[8192,64]" not in f.title, f.title


def test_the_small_gemms_fix_is_priced_at_what_the_step_would_save() -> None:
    # In the steady steps each small GEMM's kernel ends before the host has launched the next
    # kernel (the launches set the pace), so a faster kernel moves nothing after it: the replayed
    # saving is zero, and the finding says so instead of claiming its kernel time.
    doc = raw()
    spans = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in spans
        if e.get("cat") == "user_annotation" and re.match(r"ProfilerStep#\d+$", e["name"])
    )
    steady = steps[1:]  # step 0 is the warm-up (twice the others)
    launch = {
        e["args"]["correlation"]: e
        for e in spans
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kernels = sorted((e for e in spans if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    small = [k for k in kernels if "64x72" in k["name"] and any(s <= k["ts"] < t for s, t in steady)]
    assert len(small) == 20 * len(steady)
    checked = 0
    for a, b in itertools.pairwise(kernels):
        if a in small and any(s <= a["ts"] < t for s, t in steady):
            nxt = launch[b["args"]["correlation"]]
            assert a["ts"] + a["dur"] <= nxt["ts"] + nxt["dur"]  # done before the next launch returned
            checked += 1
    assert checked == len(small)
    (f,) = [f for f in analysis().findings if f.rule_id == "op_below_roofline"]
    assert f.cost_method == "replay" and f.cost_ns == pytest.approx(0, abs=20_000)
    assert f.severity == "info"
