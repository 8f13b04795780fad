"""Issue 40 item 7: each op group is held against the peak of the math its kernels ran, and
counts the bytes each operand really moves; no op_perf row of a real trace is over 105% of its
peak.

Every expected figure is recomputed here from the raw Kineto JSON (ops matched to their kernels
by ``External id``, FLOPs and bytes by hand), never read from the code under test.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.perf import models
from neuron_explorer.analyzers.perf.shapes import parse_args
from neuron_explorer.analyzers.perf.summary import perf_tables
from neuron_explorer.collectors.load import load
from tests.conftest import BUNDLED_TRACES, KINETO

SAMPLED = KINETO / "hta/sampled_rank-0.json.gz"
A100_TF32 = 156e12  # NVIDIA A100 datasheet: TF32 tensor core, dense
H200_HBM = 4.8e12  # NVIDIA H200 datasheet: HBM3e bandwidth


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _op_kernels(path: Path, name: str, dims: list) -> tuple[int, list[float], list[str]]:
    """(calls, kernel durations in us, kernel names) of the ``name`` ops with these Input Dims:
    the runtime calls inside each op's span on its thread, and the kernels with their
    ``correlation``."""
    ev = _events(path)
    ops = [
        e
        for e in ev
        if e.get("ph") == "X"
        and e.get("cat") == "cpu_op"
        and e.get("name") == name
        and (e.get("args") or {}).get("Input Dims") == dims
    ]
    spans = {(o["tid"], o["ts"], o["ts"] + o["dur"]) for o in ops}
    runtime = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"]
    corr = {
        r["args"]["correlation"] for r in runtime if any(tid == r["tid"] and a <= r["ts"] <= b for tid, a, b in spans)
    }
    kernels = [
        e
        for e in ev
        if e.get("ph") == "X"
        and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
        and (e.get("args") or {}).get("correlation") in corr
    ]
    return len(ops), [float(k["dur"]) for k in kernels], [k["name"] for k in kernels]


def _table(path: Path, spec: str | None = None):
    table, _, summary = perf_tables(TraceFrames(load(path)), spec)
    return table, summary


def test_fp32_matmul_on_tensor_core_kernels_is_held_against_the_tf32_peak():
    """HTA's sampled_rank-0 (an A100 recommendation model, fp32 ``aten::mm`` on
    ``cutlass_80_tensorop_s1688gemm``): against the fp32 vector peak the 8192x512 @ 512x8192
    group read 282% (impossible); against TF32 it is what the raw events give."""
    dims = [[8192, 512], [512, 8192]]
    calls, durs, names = _op_kernels(SAMPLED, "aten::mm", dims)
    assert calls == 2 and durs
    assert all("tensorop" in n or "xmma" in n for n in names), names
    expected = 100.0 * calls * 2 * 8192 * 512 * 8192 / (sum(durs) / 1e6) / A100_TF32
    table, _ = _table(SAMPLED, "A100")
    row = table[(table["name"] == "aten::mm") & (table["shapes"] == json.dumps(dims, separators=(",", ":")))]
    assert len(row) == 1
    assert row["compute_dtype"].iat[0] == "tf32"
    assert row["peak_tflops_per_s"].iat[0] == pytest.approx(156.0)
    assert row["pct_of_peak"].iat[0] == pytest.approx(expected, rel=1e-6)
    assert "tf32" in json.loads(row["params"].iat[0])["math"]
    # every fp32 matrix group on this trace now stays under its roof (a layer-norm backward's
    # byte model reads 100.4% of the 80 GB part's bandwidth: within the 5% the models allow)
    matrix = table["compute_dtype"].isin(["tf32", "fp32"]) & (table["bound"] == "compute")
    assert float(table.loc[matrix, "pct_of_peak"].max()) <= 100.0
    assert float(table["pct_of_peak"].max()) <= 105.0


def test_fp32_matmul_on_ffma_kernels_keeps_the_fp32_peak():
    """The H200 eager trace's fp32 GEMMs run ``..._ffma_...``/``simt`` kernels (CUDA cores):
    the fp32 vector peak stays theirs, and no group claims TF32."""
    table, _ = _table(KINETO / "h200/whatif_mm.json.gz")
    mm = table[table["name"] == "aten::mm"]
    assert len(mm) and set(mm["compute_dtype"]) == {"fp32"}
    assert set(mm["peak_tflops_per_s"]) == {67.0}


@pytest.mark.slow
@pytest.mark.parametrize("path", BUNDLED_TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_op_perf_row_is_over_its_peak(path: Path):
    """The done-when of issue 40: on every bundled real trace (its detected device), and on the
    sampled traces held against an A100, no op group runs above 105% of its peak."""
    table, _ = _table(path)
    assert not (table["pct_of_peak"] > 105.0).any(), table.loc[
        table["pct_of_peak"] > 105.0, ["name", "shapes", "compute_dtype", "pct_of_peak"]
    ].to_string()
    if path.name.startswith("sampled_rank"):
        table, _ = _table(path, "A100")
        assert not (table["pct_of_peak"] > 105.0).any()


def test_a_host_only_trace_of_a_gpu_gets_no_gpu_roofline():
    """HTA's distributed_info_not_found names eight A100s but holds no kernel: its ops' host
    time is their launch (an ``aten::addmm`` of 20 GFLOP in 41 us of host time read 2,552% of
    the fp32 peak). Without a device spec given, no roof is applied and the summary says why."""
    path = KINETO / "hta/distributed_info_not_found.json.gz"
    ev = _events(path)
    assert not any(e.get("cat") == "kernel" for e in ev)
    assert any("A100" in str(p.get("name")) for p in json.loads(json.dumps(_props(path))))
    table, summary = _table(path)
    assert summary["device"] is None
    assert "no device events" in summary["device_source"]
    assert table["pct_of_peak"].isna().all() and table["bound"].isna().all()
    # a spec the user gives is still used (host time held against the peaks they chose)
    table, summary = _table(path, "A100")
    assert summary["device"]["name"] == "A100"


def _props(path: Path) -> list:
    with gzip.open(path, "rt") as fh:
        return json.load(fh).get("deviceProperties") or []


def test_a_copy_from_the_cache_is_not_judged_against_hbm():
    """The H200 CUDA-graph trace's ``copy_`` of an [8,8,256,256] fp32 tensor (a DtoD memcpy:
    16 MiB read, 16 MiB written) runs faster than HBM allows: the 16 MiB it reads were just written and sit in the
    50 MiB L2. It is marked ``cache`` with no percentage, and the figure above the roof is kept
    in its params."""
    path = KINETO / "h200/cuda_graph.json.gz"
    dims = [[8, 8, 256, 256], [8, 8, 256, 256], []]
    calls, durs, names = _op_kernels(path, "aten::copy_", dims)
    assert calls and durs and all("Memcpy DtoD" in n for n in names), names
    nbytes = 2 * 4 * math.prod([8, 8, 256, 256])
    achieved = len(durs) * nbytes / (sum(durs) / 1e6)
    assert achieved > H200_HBM  # faster than the memory: the raw events say so
    table, _ = _table(path)
    row = table[(table["name"] == "aten::copy_") & (table["shapes"] == json.dumps(dims, separators=(",", ":")))]
    assert len(row) == 1
    assert row["bound"].iat[0] == "cache" and np.isnan(row["pct_of_peak"].iat[0])
    note = json.loads(row["params"].iat[0])["cache_resident"]
    assert "50 MiB cache" in note and f"{100 * achieved / H200_HBM:.0f}%" in note


def test_a_binary_op_out_tensor_is_written_not_read():
    """``torch.mul(a, b, out=c)`` records three tensors; ``c`` is written once, not read:
    3 tensor sizes move, not 4 (the audit's 127% of bandwidth). Ops with three real inputs
    (``addcmul``, ``where``) still read all three."""
    size = 4096 * 4096 * 4
    three = parse_args("[[4096,4096],[4096,4096],[4096,4096]]", '["float","float","float"]')
    assert models.model("aten::mul", three).bytes == 3 * size
    assert models.model("aten::addcmul", three).bytes == 4 * size
    two = parse_args("[[4096,4096],[4096,4096]]", '["float","float"]')
    assert models.model("aten::mul", two).bytes == 3 * size


def test_long_indices_are_int64_tensors():
    """Older Kineto spells int64 ``long`` (5,612 arguments in the bundled HTA traces): a gather's
    index is a tensor, so the gather is modelled by its output, not skipped."""
    a = parse_args("[[100000,64],[],[32,64],[]]", '["float","Scalar","long","Scalar"]')
    m = models.model("aten::gather", a)
    assert m is not None
    assert m.bytes == 2 * 32 * 64 * 4 + 32 * 64 * 8  # gathered values read and written, indices read
