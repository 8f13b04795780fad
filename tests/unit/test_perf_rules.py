"""The perf rules: op groups far below their roofline (with a cause), and eager attention."""

from __future__ import annotations

import warnings
from pathlib import Path

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from tests.unit.perf_trace import Op, trace_of

BF16, F32 = "c10::BFloat16", "float"
DATA = Path(__file__).resolve().parents[1] / "data" / "kineto" / "tracelens"


def eager_attention_ops(dtype: str = BF16, kernel_ns: int = 200_000) -> list[Op]:
    B, H, N, d = 4, 16, 1024, 64
    return [
        Op("aten::bmm", [[B * H, N, d], [B * H, d, N]], [dtype, dtype], kernel_ns=kernel_ns, line=40),
        Op("aten::_softmax", [[B, H, N, N], [], []], [dtype, "Scalar", "Scalar"], kernel_ns=2 * kernel_ns, line=41),
        Op("aten::bmm", [[B * H, N, N], [B * H, N, d]], [dtype, dtype], kernel_ns=kernel_ns, line=42),
        Op("aten::mm", [[4096, 4096], [4096, 4096]], [dtype, dtype], kernel_ns=kernel_ns, line=50),
    ]


def findings(trace, rule: str, **kw):
    a = analyze(trace, rules=[rule], **kw)
    return [f for f in a.findings if f.rule_id == rule], a


def test_eager_attention_points_at_the_softmax_line_and_recommends_sdpa():
    found, _ = findings(trace_of(eager_attention_ops()), "eager_attention")
    assert len(found) == 1
    f = found[0]
    assert "scaled_dot_product_attention" in f.recommendation
    assert "FlashAttention" in f.recommendation and "not" not in f.recommendation.split("FlashAttention")[1][:20]
    assert f.source_lines[0]["line"] == 41
    assert f.metrics["share_pct"]["value"] == 80.0  # 4 of the 5 kernel-time units


def test_eager_attention_on_a_v100_does_not_promise_flash_attention():
    found, _ = findings(trace_of(eager_attention_ops(F32), device="Tesla V100-SXM2-32GB"), "eager_attention")
    assert "memory-efficient kernel (FlashAttention needs sm80" in found[0].recommendation


def test_softmax_without_matching_matmuls_is_not_attention():
    ops = [
        Op("aten::_softmax", [[64, 50000], [], []], [F32, "Scalar", "Scalar"], kernel_ns=300_000),
        Op("aten::mm", [[64, 1024], [1024, 50000]], [F32, F32], kernel_ns=300_000),
    ]
    found, a = findings(trace_of(ops), "eager_attention")
    assert found == [] and not a.skipped


def test_real_trace_with_sdpa_has_no_eager_attention_finding():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ne.load(DATA / "qwen_h100.json.gz")
    found, a = findings(t, "eager_attention")
    assert found == [] and not a.skipped


def test_fp32_gemm_far_below_roof_names_its_line_and_the_dtype_fix_the_device_supports():
    ops = [Op("aten::mm", [[4096, 4096], [4096, 4096]], [F32, F32], kernel_ns=8_000_000, line=77)]
    found, _ = findings(trace_of(ops, device="NVIDIA A100-SXM4-80GB"), "op_below_roofline")
    assert len(found) == 1
    f = found[0]
    assert "fp32" in f.message and "model.py:77" in f.message
    assert "bf16" in f.recommendation and "allow_tf32" in f.recommendation
    # on a V100 there is no bf16: the advice is fp16; this trace has no backward pass or optimizer
    # step (inference), so no GradScaler, which scales gradients (a training trace gets one:
    # tests/unit/test_advice.py)
    found, _ = findings(trace_of(ops, device="Tesla V100-SXM2-32GB"), "op_below_roofline")
    assert "bf16" not in found[0].recommendation and "fp16" in found[0].recommendation
    assert "GradScaler" not in found[0].recommendation


def test_small_gemm_and_unfused_chain_causes():
    ops = [
        Op("aten::mm", [[64, 64], [64, 64]], [BF16, BF16], kernel_ns=100_000, line=5),
        Op("aten::mul", [[8, 1024, 1024], [8, 1024, 1024]], [BF16, BF16], kernel_ns=900_000, line=9),
        Op("aten::add", [[8, 1024, 1024], [8, 1024, 1024], []], [BF16, BF16, "Scalar"], kernel_ns=900_000, line=9),
    ]
    found, _ = findings(trace_of(ops), "op_below_roofline")
    by_name = {f.title.split()[0]: f for f in found}
    assert "small GEMM" in by_name["aten::mm"].message
    assert "unfused chain of 2" in by_name["aten::mul"].message
    assert "torch.compile" in by_name["aten::mul"].recommendation


def test_transposed_strides_are_named_as_the_cause():
    shape = [16, 16, 559, 64]
    ops = [
        Op(
            "aten::copy_",
            [shape, shape, []],
            [BF16, BF16, "Scalar"],
            strides=[[572416, 35776, 64, 1], [572416, 64, 1024, 1], []],
            kernel_ns=500_000,
        )
    ]
    found, _ = findings(trace_of(ops), "op_below_roofline")
    assert "strided" in found[0].message


def test_op_near_its_roof_or_a_small_share_is_not_flagged():
    M = 8192
    fast_ns = int(2 * M**3 / 800e12 * 1e9)  # 800 of 989 TFLOP/s
    ops = [Op("aten::mm", [[M, M], [M, M]], [BF16, BF16], kernel_ns=fast_ns)]
    found, _ = findings(trace_of(ops), "op_below_roofline")
    assert found == []
    found, _ = findings(trace_of(ops), "op_below_roofline", thresholds={"op_below_roofline.max_pct_of_peak": 90.0})
    assert len(found) == 1


def test_rules_skip_with_a_reason_without_shapes_or_device():
    ops = [Op("aten::mm", [[512, 512], [512, 512]], [BF16, BF16])]
    _, a = findings(trace_of(ops, device="Mystery"), "op_below_roofline")
    assert a.skipped and "--device-spec" in a.skipped[0][1]


def test_eager_attention_on_a_real_cpu_trace_recorded_with_shapes():
    # attention written by hand in tests/data/kineto/local/record_eager_attention.py
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ne.load(DATA.parent / "local" / "eager_attention_cpu.json.gz")
    found, a = findings(t, "eager_attention")
    assert len(found) == 1
    f = found[0]
    assert "op time" in f.title  # a CPU trace: the ops' own time stands in for kernel time
    assert "scaled_dot_product_attention" in f.recommendation and "CPU kernel" in f.recommendation
    assert f.source_lines and all(line["file"] for line in f.source_lines)
    # the table behind it: both batched matmuls of the scores, each with its model
    t_perf = a.op_perf
    bmm = t_perf[t_perf["name"] == "aten::bmm"]
    assert len(bmm) == 2 and bmm["gflops"].notna().all()
    assert set(bmm["shapes"]) == {"[[16,256,64],[16,64,256]]", "[[16,256,256],[16,256,64]]"}
    # linear wraps addmm on the CPU: the FLOPs are counted once, on addmm
    assert t_perf.loc[t_perf["name"] == "aten::linear", "gflops"].isna().all()
    assert t_perf.loc[t_perf["name"] == "aten::addmm", "gflops"].notna().all()
    assert a.perf_summary["time_source"] == "host op self time"
