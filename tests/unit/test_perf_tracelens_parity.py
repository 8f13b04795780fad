"""The op_perf table against TraceLens's perf-model reports of the same real traces.

TraceLens (AMD-AGI/TraceLens) wrote GEMM.csv, SDPA_fwd.csv, ... for the Qwen1.5-0.5B traces
recorded on an H100 and an MI300X; the CSVs are independent ground truth. Rows are matched by
op name and input shapes (and dtypes); GFLOPs and data moved must agree within 1%, TFLOP/s
within 5% (TraceLens averages per-call rates, we divide summed FLOPs by summed kernel time).
"""

from __future__ import annotations

import ast
import json
import warnings
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto" / "tracelens"
TRACES = {"h100": ("qwen_h100.json.gz", "H100-SXM"), "mi300": ("qwen_mi300.json.gz", "MI300X")}


@cache
def analysis(device: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(ne.load(DATA / TRACES[device][0]))


def reference(device: str, report: str) -> pd.DataFrame:
    return pd.read_csv(DATA / f"perf_report_{device}" / f"{report}.csv")


def _compact(text: str) -> str:
    """TraceLens writes Python reprs (``[[8944, 1024], ...]``); op_perf compact JSON."""
    return json.dumps(ast.literal_eval(text), separators=(",", ":"))


def matched(device: str, report: str) -> pd.DataFrame:
    """TraceLens's rows joined to ours on (name, shapes, dtypes)."""
    ref = reference(device, report)
    ref = ref.assign(shapes=ref["Input Dims_first"].map(_compact), dtypes=ref["Input type_first"].map(_compact))
    ours = analysis(device).op_perf
    joined = ref.merge(ours, on=["name", "shapes", "dtypes"], how="left", suffixes=("_ref", ""))
    missing = joined[joined["gflops"].isna()]
    assert missing.empty, f"{device} {report}: no modelled op group for {missing[['name', 'shapes']].values.tolist()}"
    return joined


def rel(ours: pd.Series, theirs: pd.Series) -> pd.Series:
    return ((ours - theirs).abs() / theirs.abs()).fillna(0.0)


@pytest.mark.parametrize("device", TRACES)
@pytest.mark.parametrize("report", ["GEMM", "SDPA_fwd"])
def test_gflops_and_bytes_match_tracelens_within_1pct(device, report):
    j = matched(device, report)
    assert len(j) == len(reference(device, report))
    assert (rel(j["gflops"], j["GFLOPS_first"]) <= 0.01).all(), j[["name", "gflops", "GFLOPS_first"]]
    assert (rel(j["data_moved_mb"], j["Data Moved (MB)_first"]) <= 0.01).all(), j[
        ["name", "data_moved_mb", "Data Moved (MB)_first"]
    ]


@pytest.mark.parametrize("device", TRACES)
@pytest.mark.parametrize("report", ["GEMM", "SDPA_fwd"])
def test_achieved_tflops_and_kernel_time_match_tracelens_within_5pct(device, report):
    j = matched(device, report)
    assert (j["count"] == j["name_count"]).all()
    assert (rel(j["kernel_time_us"], j["Kernel Time (µs)_sum"]) <= 0.01).all()
    assert (rel(j["tflops_per_s"], j["TFLOPS/s_mean"]) <= 0.05).all(), j[["name", "tflops_per_s", "TFLOPS/s_mean"]]
    assert (rel(j["tb_per_s"], j["TB/s_mean"]) <= 0.05).all()


@pytest.mark.parametrize("device", TRACES)
@pytest.mark.parametrize("report", ["UnaryElementwise", "BinaryElementwise", "Reduce_fwd"])
def test_vector_op_bytes_match_tracelens(device, report):
    """Elementwise and reduction bytes agree within 1% (aten::mean: we count its real output,
    TraceLens one element; docs/rules.md)."""
    ref = reference(device, report)
    ref = ref.assign(shapes=ref["Input Dims_first"].map(_compact), dtypes=ref["Input type_first"].map(_compact))
    ours = analysis(device).op_perf
    j = ref.merge(ours, on=["name", "shapes", "dtypes"], how="inner", suffixes=("_ref", ""))
    # TraceLens keeps rows per stride too; several of its rows can share our (name, shape, dtype)
    assert set(map(tuple, j[["name", "shapes"]].values)) == set(map(tuple, ref[["name", "shapes"]].values))
    assert (rel(j["data_moved_mb"], j["Data Moved (MB)_first"]) <= 0.01).all()
    assert (rel(j["gflops"], j["GFLOPS_first"]) <= 0.01).all()


@pytest.mark.parametrize("device", TRACES)
def test_device_detected_and_90pct_of_device_time_categorized(device):
    a = analysis(device)
    assert a.perf_summary["device"]["name"] == TRACES[device][1]
    assert a.perf_summary["categorized_pct"] >= 90.0
    cats = a.op_categories.set_index("category")
    assert cats["device_time_pct"].sum() == pytest.approx(100.0)
    # the GEMMs and attention linked to their ops are all modelled; the rest ran outside the
    # host profiling window (no launching op) and is categorized by kernel name only
    assert cats.loc["gemm", "modelled_pct"] > 60
    assert cats.loc["gemm", "tflops_per_s"] > 100


def test_roofline_places_big_gemms_compute_bound_and_copies_memory_bound():
    t = analysis("h100").op_perf
    big = t[(t["name"] == "aten::mm") & (t["gflops"] > 50)]
    assert len(big) and (big["bound"] == "compute").all()
    # 610 TFLOP/s of the H100 SXM's 989.4 dense bf16 TFLOP/s
    assert big["pct_of_peak"].between(55, 75).all()
    copies = t[t["name"] == "aten::copy_"]
    assert len(copies) and (copies["bound"] == "memory").all()
    assert (copies["pct_of_peak"] < 100).all()
