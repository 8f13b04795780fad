"""FLOP and byte models against hand-written formulas, the device table, and the roofline."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.perf import devices
from neuron_explorer.analyzers.perf.models import category_of, model
from neuron_explorer.analyzers.perf.shapes import OpArgs
from neuron_explorer.trace.errors import AnalysisError
from tests.unit.perf_trace import Op, trace_of

BF16, F32, F8, I64 = "c10::BFloat16", "float", "c10::Float8_e4m3fn", "long int"


def m(name, shapes, types, concrete=None, strides=None):
    return model(name, OpArgs(shapes, types, strides or [], concrete or []))


# ------------------------------------------------------------------------------ GEMM family
@pytest.mark.parametrize(("M", "N", "K"), [(4096, 4096, 4096), (8944, 2816, 1024), (1, 559, 32)])
def test_mm_is_2mnk_and_reads_a_b_writes_c(M, N, K):
    r = m("aten::mm", [[M, K], [K, N]], [BF16, BF16])
    assert r.flops == 2 * M * N * K
    assert r.bytes == 2 * (M * K + K * N + M * N)
    assert (r.category, r.dtype, r.matrix) == ("gemm", "bf16", True)


def test_addmm_adds_the_bias_flops_and_reads_a_bias_row():
    M, N, K = 8944, 1024, 1024
    r = m("aten::addmm", [[N], [M, K], [K, N], [], []], [BF16, BF16, BF16, "Scalar", "Scalar"])
    assert r.flops == 2 * M * N * K + M * N
    assert r.bytes == 2 * (M * K + K * N + M * N + N)


def test_bmm_baddbmm_linear_and_batched_matmul():
    B, M, N, K = 32, 128, 64, 256
    assert m("aten::bmm", [[B, M, K], [B, K, N]], [F32, F32]).flops == B * 2 * M * N * K
    assert m("aten::bmm", [[B, M, K], [B, K, N]], [F32, F32]).bytes == 4 * B * (M * K + K * N + M * N)
    bad = m("aten::baddbmm", [[B, M, N], [B, M, K], [B, K, N], [], []], [F32, F32, F32, "Scalar", "Scalar"])
    assert bad.flops == B * (2 * M * N * K + M * N)
    assert bad.bytes == 4 * B * (M * K + K * N + M * N + N)  # a bias row per batch, as TraceLens
    # linear(x[16, 559, 1024], W[2816, 1024], b[2816]) is one GEMM over the folded batch
    lin = m("aten::linear", [[16, 559, 1024], [2816, 1024], [2816]], [BF16, BF16, BF16])
    assert lin.flops == 2 * (16 * 559) * 2816 * 1024 + 16 * 559 * 2816
    mat = m("aten::matmul", [[2, 16, 128, 64], [2, 16, 64, 128]], [BF16, BF16])
    assert mat.flops == 2 * 16 * 2 * 128 * 128 * 64


def test_scaled_mm_prices_fp8_operands_at_one_byte_and_the_output_at_two():
    M, N, K = 4096, 8192, 4096
    r = m("aten::_scaled_mm", [[M, K], [K, N], [], []], [F8, F8, F32, F32])
    assert r.flops == 2 * M * N * K
    assert r.bytes == (M * K + K * N) * 1 + M * N * 2
    assert r.dtype == "fp8"


# ------------------------------------------------------------------------------- attention
def sdpa_flops(B, H, Nq, Nkv, d, causal):
    f = 4 * B * H * Nq * Nkv * d  # QK^T and PV, 2 FLOPs per MAC
    return f / 2 if causal else f


@pytest.mark.parametrize("causal", [True, False])
def test_flash_sdpa_forward(causal):
    B, H, N, d = 16, 16, 559, 64
    q = [B, H, N, d]
    r = m(
        "aten::_scaled_dot_product_flash_attention",
        [q, q, q, [], [], [], []],
        [BF16, BF16, BF16, "Scalar", "Scalar", "Scalar", "Scalar"],
        concrete=["", "", "", "0.", str(causal), "False", "0.125"],
    )
    assert r.flops == sdpa_flops(B, H, N, N, d, causal)
    assert r.bytes == 4 * B * H * N * d * 2  # Q, K, V read, O written
    assert r.params["causal"] is causal


def test_flash_kernel_layout_and_backward_with_gqa():
    B, N, Hq, Hkv, d = 2, 1024, 32, 8, 128
    fwd = m(
        "aten::_flash_attention_forward",
        [[B, N, Hq, d], [B, N, Hkv, d], [B, N, Hkv, d]] + [[]] * 8,
        [BF16] * 3 + ["Scalar"] * 8,
        concrete=["", "", "", "", "", "1024", "1024", "0.", "True", "False", "0.08"],
    )
    assert fwd.flops == sdpa_flops(B, Hq, N, N, d, True)
    bwd = m(
        "aten::_scaled_dot_product_flash_attention_backward",
        [[B, Hq, N, d], [B, Hq, N, d], [B, Hkv, N, d], [B, Hkv, N, d]] + [[]] * 11,
        [BF16] * 4 + ["Scalar"] * 11,
        concrete=[""] * 11 + ["False"],
    )
    mm = 2 * B * Hq * N * N * d
    gqa = 2 * B * N * d * (Hq // Hkv - 1)  # summing dK and dV over the query heads of a group
    assert bwd.flops == 5 * mm + gqa
    elems = B * N * (Hq * d + 2 * Hkv * d + Hq * d) + B * N * (Hq * d + 2 * Hkv * d)
    assert bwd.bytes == 2 * elems


# ----------------------------------------------------------------------------- convolution
def test_conv2d_with_stride_padding_and_bias():
    N, C, H, W, Co, k = 8, 64, 56, 56, 128, 3
    r = m(
        "aten::convolution",
        [[N, C, H, W], [Co, C, k, k], [Co], [], [], [], [], [], []],
        [F32, F32, F32] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
        concrete=["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1"],
    )
    Ho = Wo = (56 + 2 - 2 - 1) // 2 + 1  # 28
    assert r.params["out"] == [Ho, Wo]
    assert r.flops == 2 * N * Co * Ho * Wo * C * k * k + N * Co * Ho * Wo
    assert r.bytes == 4 * (N * C * H * W + Co * C * k * k + N * Co * Ho * Wo + Co)


def test_depthwise_conv_and_conv_backward():
    N, C, H, k = 4, 32, 16, 3
    dw = m(
        "aten::convolution",
        [[N, C, H, H], [C, 1, k, k], [], [], [], [], [], [], []],
        [BF16, BF16, ""] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
        concrete=["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", str(C)],
    )
    assert dw.flops == 2 * N * C * H * H * 1 * k * k
    bwd = m(
        "aten::convolution_backward",
        [[N, C, H, H], [N, C, H, H], [C, C, k, k]] + [[]] * 8,
        [BF16] * 3 + ["ScalarList"] * 8,
        concrete=["", "", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", ""],
    )
    assert bwd.flops == 2 * (2 * N * C * H * H * C * k * k)


# -------------------------------------------------------------------- vector-unit ops
def test_binary_elementwise_reads_inputs_at_their_size_and_writes_the_broadcast_shape():
    r = m("aten::mul", [[16, 559, 1024], [16, 559, 1]], [F32, F32])
    assert r.flops == 16 * 559 * 1024
    assert r.bytes == 4 * (16 * 559 * 1024 + 16 * 559 + 16 * 559 * 1024)
    cmp = m("aten::lt", [[1000], [1000]], [F32, F32])
    assert cmp.bytes == 4 * 2000 + 1000  # a bool result


def test_copy_reads_the_source_dtype_and_writes_the_destination_dtype():
    r = m("aten::copy_", [[16, 559, 1024], [16, 559, 1024], []], [F32, BF16, "Scalar"])
    assert r.bytes == 16 * 559 * 1024 * (4 + 2)
    # _to_copy(x: int64, dtype=6 (float)): 8 bytes read, 4 written per element
    t = m("aten::_to_copy", [[1, 1, 559], [], [], [], [], [], []], [I64, "Scalar"] + [""] * 5, ["", "6"])
    assert t.bytes == 559 * (8 + 4)


def test_reduction_softmax_norm_embedding():
    n = 16 * 559 * 1024
    mean = m("aten::mean", [[16, 559, 1024], [], [], []], [F32, "ScalarList", "Scalar", ""], ["", "[-1]", "True", ""])
    assert (mean.flops, mean.bytes) == (n, 4 * (n + 16 * 559))
    sm = m("aten::_softmax", [[8, 16, 512, 512], [], []], [BF16, "Scalar", "Scalar"])
    assert (sm.flops, sm.bytes) == (3 * 8 * 16 * 512 * 512, 2 * 2 * 8 * 16 * 512 * 512)
    ln = m(
        "aten::native_layer_norm",
        [[8, 512, 1024], [], [1024], [1024], []],
        [BF16, "ScalarList", BF16, BF16, "Scalar"],
        ["", "[1024]", "", "", "1e-05"],
    )
    n, c = 8 * 512 * 1024, 1024
    assert ln.category == "norm"
    assert ln.flops == 5 * n + 6 * c  # mean/var (3 per element), scale-shift (2), per-channel terms
    assert ln.bytes == 2 * (2 * n + 6 * c)  # x, y; mean, var, weight, bias, running stats
    emb = m("aten::embedding", [[151936, 1024], [16, 559], [], [], []], [BF16, I64, "Scalar", "Scalar", "Scalar"])
    assert emb.bytes == 2 * 2 * 16 * 559 * 1024 + 8 * 16 * 559


def test_unknown_ops_and_missing_shapes_get_no_model():
    assert m("aten::nonzero", [[4]], [F32]) is None  # an op we have no formula for is not guessed
    assert m("myns::fancy", [[4], [4]], [F32, F32]) is None
    assert model("aten::mm", None) is None
    assert m("aten::mm", [[4, 4]], [F32]) is None  # malformed: one operand
    assert category_of("c10d::allreduce_") == "communication"
    assert category_of("_C::fused_add_rms_norm") == "norm"


# ---------------------------------------------------------------------------- devices
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("AMD Instinct MI300X VF", "MI300X"),
        ("AMD Instinct MI250X", "MI250X"),
        ("trn1.32xlarge", "Trainium1"),
        ("trn2.48xlarge", "Trainium2"),
        ("inf2.xlarge", "Inferentia2"),
        ("NVIDIA B200", "B200"),
    ],
)
def test_device_detection_from_trace_names(name, expected):
    assert devices.detect([name]).name == expected


def test_unknown_device_is_not_guessed_and_v100_has_no_bf16():
    assert devices.detect(["AMD Radeon Graphics", ""]) is None
    v100 = devices.DEVICES["V100"]
    assert not v100.supports("bf16") and v100.supports("fp16")
    assert v100.peak_flops("fp16", matrix=True) == 125e12
    assert v100.peak_flops("bf16", matrix=True) is None


def test_device_spec_from_a_toml_file_and_clear_errors(tmp_path):
    f = tmp_path / "mygpu.toml"
    f.write_text('name = "MyGPU"\nmem_bw_tb_per_s = 2.0\n[matrix_tflops]\nbf16 = 400\n[vector_tflops]\nfp32 = 50\n')
    spec = devices.load_spec(f)
    assert (spec.name, spec.mem_bw, spec.peak_flops("bf16", True)) == ("MyGPU", 2e12, 400e12)
    assert devices.load_spec("h100-sxm").name == "H100-SXM"
    with pytest.raises(AnalysisError, match="unknown device"):
        devices.load_spec("H900")
    bad = tmp_path / "bad.toml"
    bad.write_text("mem_bw_tb_per_s = 'fast'\n")
    with pytest.raises(AnalysisError, match=r"bad\.toml"):
        devices.load_spec(bad)
    with pytest.raises(AnalysisError, match="not found"):
        devices.load_spec(tmp_path / "missing.toml")


# ---------------------------------------------------------------------------- roofline
def test_roofline_of_a_compute_bound_gemm_and_a_memory_bound_add():
    M = N = K = 4096
    gemm_ns, add_ns = 400_000, 100_000
    t = trace_of(
        [
            Op("aten::mm", [[M, K], [K, N]], [BF16, BF16], kernel_ns=gemm_ns, calls=3),
            Op("aten::add", [[M, N], [M, N], []], [BF16, BF16, "Scalar"], kernel_ns=add_ns, calls=3, line=11),
        ]
    )
    a = analyze(t)
    row = a.op_perf.set_index("name").loc["aten::mm"]
    flops = 2 * M * N * K
    assert row["count"] == 3
    assert row["kernel_time_us"] == pytest.approx(3 * gemm_ns / 1e3)
    assert row["tflops_per_s"] == pytest.approx(flops / (gemm_ns / 1e9) / 1e12)
    assert row["bound"] == "compute"
    assert row["pct_of_peak"] == pytest.approx(100 * flops / (gemm_ns / 1e9) / 989.4e12)
    add = a.op_perf.set_index("name").loc["aten::add"]
    assert add["bound"] == "memory"
    assert add["pct_of_peak"] == pytest.approx(100 * (3 * M * N * 2) / (add_ns / 1e9) / 3.35e12)
    assert (add["src_file"], add["src_line"]) == ("model.py", 11)
    cats = a.op_categories.set_index("category")
    assert cats.loc["gemm", "device_time_pct"] == pytest.approx(80.0)
    assert cats.loc["elementwise", "modelled_pct"] == pytest.approx(100.0)


def test_composite_attention_owns_the_kernels_of_its_inner_op():
    q = [2, 8, 256, 64]
    sdpa = Op(
        "aten::_scaled_dot_product_flash_attention",
        [q, q, q, [], [], [], []],
        [BF16] * 3 + ["Scalar"] * 4,
        kernel_ns=0,
        concrete=["", "", "", "0.", "True", "False", "0.125"],
    )
    inner = Op(
        "aten::_flash_attention_forward",
        [[2, 256, 8, 64]] * 3 + [[]] * 8,
        [BF16] * 3 + ["Scalar"] * 8,
        kernel_ns=50_000,
        parent=sdpa,
    )
    t = analyze(trace_of([sdpa, inner])).op_perf
    assert list(t["name"]) == ["aten::_scaled_dot_product_flash_attention"]
    assert t["gflops"].iloc[0] == pytest.approx(sdpa_flops(2, 8, 256, 256, 64, True) / 1e9)


def test_device_spec_override_and_undetected_device():
    ops = [Op("aten::mm", [[1024, 1024], [1024, 1024]], [BF16, BF16], kernel_ns=20_000)]
    unknown = analyze(trace_of(ops, device="Mystery Accelerator"))
    assert unknown.perf_summary["device"] is None
    assert unknown.op_perf["bound"].isna().all() and unknown.op_perf["gflops"].notna().all()
    given = analyze(trace_of(ops, device="Mystery Accelerator"), device_spec="MI300X")
    assert given.perf_summary["device"]["name"] == "MI300X"
    assert given.op_perf["peak_tflops_per_s"].iloc[0] == pytest.approx(1307.4)


def test_json_document_has_the_op_perf_table_with_its_documented_keys():
    ops = [Op("aten::mm", [[512, 512], [512, 512]], [BF16, BF16])]
    doc = json.loads(json.dumps(analyze(trace_of(ops)).to_dict()))
    row = doc["tables"]["op_perf"][0]
    for key in [
        "name",
        "category",
        "shapes",
        "dtypes",
        "count",
        "kernel_time_us",
        "gflops",
        "data_moved_mb",
        "tflops_per_s",
        "tb_per_s",
        "bound",
        "pct_of_peak",
        "src_file",
        "src_line",
    ]:
        assert key in row
    assert row["shapes"] == "[[512,512],[512,512]]"
    assert doc["perf_summary"]["device"]["name"] == "H100-SXM"
    assert doc["tables"]["op_categories"][0]["category"] == "gemm"


def test_trainium_mfu_hfu_from_the_summary_and_mbu_from_hbm_bytes(tmp_path):
    import warnings

    from neuron_explorer.collectors.neuron import import_neuron_profile, synth

    synth.write_parquet_export(tmp_path / "p", synth.SynthSpec(bottleneck="dma"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_neuron_profile(tmp_path / "p")
    s = analyze(trace, rules=["perf"]).perf_summary
    assert s["device"]["name"] == "Trainium1"  # from the instance type trn1.32xlarge
    m = trace.metadata["neuron"]["devices"][0]["metrics"]
    bw = trace.metadata["device_properties"][0]["hbm_ddr_bandwidth_bytes_per_s"]
    (core,) = s["neuron"]
    assert core["mfu_pct"] == m["mfu_estimated_pct"] and core["hfu_pct"] == m["hfu_estimated_pct"]
    expected = 100 * (m["hbm_read_bytes"] + m["hbm_write_bytes"]) / (m["total_time_ns"] / 1e9) / bw
    assert core["mbu_pct"] == pytest.approx(expected)


def test_efficient_attention_backward_counts_no_recompute_as_tracelens():
    B, H, N, d = 2, 8, 512, 64
    q = [B, H, N, d]
    bwd = m(
        "aten::_scaled_dot_product_efficient_attention_backward",
        [q, q, q, q, [], q, [B, H, N]] + [[]] * 6,
        [BF16] * 4 + [""] + [BF16, F32] + ["Scalar"] * 6,
        concrete=[""] * 11 + ["True"],
    )
    assert bwd.flops == 4 * 2 * B * H * N * N * d / 2  # four gradient GEMMs, causal


def test_concrete_inputs_are_read_from_the_file_when_analyze_loaded_only_its_columns(tmp_path):
    from neuron_explorer.analyzers.core.context import ANALYSIS_COLUMNS
    from neuron_explorer.trace.model import Trace

    q = [2, 8, 256, 64]
    ops = [
        Op(
            "aten::_scaled_dot_product_flash_attention",
            [q, q, q, [], [], [], []],
            [BF16] * 3 + ["Scalar"] * 4,
            concrete=["", "", "", "0.", "True", "False", "0.125"],
            kernel_ns=30_000,
        ),
        Op("aten::mm", [[512, 512], [512, 512]], [BF16, BF16]),
    ]
    path = trace_of(ops).write(tmp_path / "t.parquet")
    slim = Trace.read(path, columns=ANALYSIS_COLUMNS)
    assert "args" not in slim.events.column_names
    t = analyze(slim).op_perf.set_index("name")
    assert json.loads(t.loc["aten::_scaled_dot_product_flash_attention", "params"])["causal"] is True
    assert t.loc["aten::_scaled_dot_product_flash_attention", "gflops"] == pytest.approx(
        sdpa_flops(2, 8, 256, 256, 64, True) / 1e9
    )


def test_a_run_directory_reads_the_concrete_inputs_of_every_rank(tmp_path):
    from neuron_explorer.analyzers.core.context import ANALYSIS_COLUMNS
    from neuron_explorer.trace.model import Trace

    q = [1, 4, 128, 64]
    sdpa = Op(
        "aten::_scaled_dot_product_flash_attention",
        [q, q, q, [], [], [], []],
        [BF16] * 3 + ["Scalar"] * 4,
        concrete=["", "", "", "0.", "True", "False", "0.125"],
    )
    for rank in (0, 1):
        t = trace_of([sdpa])
        t.metadata["rank"] = rank
        t.events = t.events.set_column(1, "rank", pa.array([rank] * t.events.num_rows, pa.int32()))
        (tmp_path / f"rank={rank}").mkdir()
        t.write(tmp_path / f"rank={rank}" / "trace.parquet")
    run = Trace.read(tmp_path, columns=ANALYSIS_COLUMNS)
    row = analyze(run).op_perf.iloc[0]
    assert row["count"] == 2
    assert json.loads(row["params"])["causal"] is True


# Rows of TraceLens perf reports of other real traces (AMD-AGI/TraceLens tests/traces/h100/
# <model>_perf_report_csvs/<sheet>.csv, MIT): the op's recorded arguments and TraceLens's
# GFLOPS_first and "Data Moved (MB)_first" (MiB). Our model must agree within 1%.
TRACELENS_ROWS = [
    (  # gaunernst_bert-small-uncased GEMM.csv: the vocabulary projection
        "aten::addmm",
        [[30522], [141, 512], [512, 30522], [], []],
        [BF16, BF16, BF16, "Scalar", "Scalar"],
        ["", "", "", "1", "1"],
        4.41119205,
        38.211021423339844,
    ),
    (  # gaunernst_bert-small-uncased SDPA_fwd.csv
        "aten::_scaled_dot_product_flash_attention",
        [[1, 8, 141, 64], [1, 8, 141, 64], [1, 8, 141, 64], [], [], [], []],
        [BF16, BF16, BF16, "Scalar", "Scalar", "Scalar", "Scalar"],
        ["", "", "", "0.", "False", "False", "0.125"],
        0.040716288,
        0.55078125,
    ),
    (  # the same call's inner op, in the flash kernel's (B, N, H, d) layout
        "aten::_flash_attention_forward",
        [[1, 141, 8, 64], [1, 141, 8, 64], [1, 141, 8, 64]] + [[]] * 12,
        [BF16, BF16, BF16, "", "", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar", "", "", "", ""],
        ["", "", "", "", "", "141", "141", "0.", "False", "False", "0.125", "", "", "", ""],
        0.040716288,
        0.55078125,
    ),
    (  # Wan-AI_Wan2.1-T2V-1.3B SDPA_fwd.csv: cross-attention, 32256 queries over 512 keys
        "aten::_scaled_dot_product_flash_attention",
        [[1, 12, 32256, 128], [1, 12, 512, 128], [1, 12, 512, 128], [], [], [], []],
        [BF16, BF16, BF16, "Scalar", "Scalar", "Scalar", "Scalar"],
        ["", "", "", "0.", "False", "False", "0.088388347648318433"],
        101.468602368,
        192.0,
    ),
    (  # Wan-AI_Wan2.1-T2V-1.3B SDPA_fwd.csv: memory-efficient attention, head dim 384
        "aten::_scaled_dot_product_efficient_attention",
        [[1, 1, 1024, 384], [1, 1, 1024, 384], [1, 1, 1024, 384], [], [], [], [], []],
        [BF16, BF16, BF16, "", "Scalar", "Scalar", "Scalar", ""],
        ["", "", "", "", "False", "0.", "False", ""],
        1.610612736,
        3.0,
    ),
    (  # Falconsai_nsfw_image_detection CONV_fwd.csv: ViT patch embedding, stride 16, with bias
        "aten::convolution",
        [[4, 3, 224, 224], [768, 3, 16, 16], [768], [], [], [], [], [], []],
        [BF16, BF16, BF16, "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList", "Scalar"],
        ["", "", "", "[16, 16]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"],
        0.924844032,
        3.421875,
    ),
    (  # Falconsai_nsfw_image_detection Normalization.csv
        "aten::layer_norm",
        [[4, 197, 768], [], [768], [768], [], []],
        [BF16, "ScalarList", BF16, BF16, "Scalar", "Scalar"],
        ["", "[768]", "", "", "9.9999999999999998e-13", "True"],
        0.003030528,
        2.3173828125,
    ),
]


@pytest.mark.parametrize(("name", "shapes", "types", "concrete", "gflops", "mib"), TRACELENS_ROWS)
def test_models_agree_with_tracelens_rows_of_other_real_traces(name, shapes, types, concrete, gflops, mib):
    r = m(name, shapes, types, concrete)
    assert r.flops / 1e9 == pytest.approx(gflops, rel=0.01)
    assert r.bytes / 2**20 == pytest.approx(mib, rel=0.01)


def test_rms_norm_and_batch_norm_in_inference():
    n, c = 4 * 1024 * 4096, 4096
    rms = m(
        "aten::_fused_rms_norm",
        [[4, 1024, 4096], [], [4096], []],
        [BF16, "ScalarList", BF16, "Scalar"],
        ["", "[4096]", "", "1e-06"],
    )
    assert rms.flops == (n / c) * (2 * c + 2) + 2 * n
    assert rms.bytes == 2 * (2 * n + c)
    x = [8, 64, 56, 56]
    bn = m(
        "aten::cudnn_batch_norm",
        [x, [64], [64], [64], [64], [], [], []],
        [BF16, F32, F32, F32, F32, "Scalar", "Scalar", "Scalar"],
        ["", "", "", "", "", "False", "0.1", "1e-05"],
    )
    nb = 8 * 64 * 56 * 56
    assert bn.params["training"] is False
    assert bn.flops == 6 * 64 + 2 * nb  # running statistics: no mean/var pass
    assert bn.bytes == 2 * (2 * nb + 4 * 64)  # x, y; mean, var, weight, bias


def test_flash_attn_package_ops_use_the_batch_seq_heads_layout():
    B, N, H, d = 2, 2048, 16, 128
    q = [B, N, H, d]
    fwd = m(
        "flash_attn::_flash_attn_forward",
        [q, q, q, [], [], [], [], [], [], [], []],
        [BF16] * 3 + ["Scalar"] * 8,
        ["", "", "", "0.0", "0.088", "True", "-1", "-1", "0.0", "", "False"],
    )
    assert fwd.flops == sdpa_flops(B, H, N, N, d, True)
    assert fwd.params["H_Q"] == H and fwd.params["N_Q"] == N
