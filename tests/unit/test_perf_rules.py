"""The perf rules: op groups far below their roofline (with a cause), and eager attention."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

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


H100_BF16, H100_BW, H100_SMS = 989.4e12, 3.35e12, 132  # the table's H100-SXM (docs/perf.md)


def gemm_ns(m: int, n: int, k: int, tflops: float) -> int:
    """Kernel time of an M x N x K GEMM running at ``tflops``."""
    return int(2 * m * n * k / tflops * 1e9)


def test_fp32_gemm_far_below_roof_names_its_line_and_the_dtype_fix_the_device_supports():
    ops = [Op("aten::mm", [[4096, 4096], [4096, 4096]], [F32, F32], kernel_ns=8_000_000, line=77)]
    found, _ = findings(trace_of(ops, device="NVIDIA A100-SXM4-80GB"), "op_below_roofline")
    assert len(found) == 1
    f = found[0]
    assert "fp32" in f.message and "model.py:77" in f.message
    assert "bf16" in f.recommendation and "allow_tf32" in f.recommendation
    # by hand: 2*4096^3 FLOPs in 8 ms = 17.2 TFLOP/s: 88% of the A100's 19.5 fp32 roof, 5.5% of its
    # 312 bf16 matrix roof; the same shape keeps its 88% on the bf16 roof: 8 ms x 5.5/88 remain
    achieved = 2 * 4096**3 / 8e-3
    own_fp32, own_bf16 = 100 * achieved / 19.5e12, 100 * achieved / 312e12
    assert f.metrics["pct_of_peak"]["value"] == pytest.approx(own_bf16, rel=1e-3)
    assert f.metrics["target_pct_of_peak"]["value"] == pytest.approx(own_fp32, rel=1e-3)
    assert f.cost_ns == pytest.approx(8e6 * (1 - own_bf16 / own_fp32), rel=1e-3)
    # on a V100 there is no bf16: the advice is fp16; this trace has no backward pass or optimizer
    # step (inference), so no GradScaler, which scales gradients (a training trace gets one:
    # tests/unit/test_advice.py). 16 ms: 8.6 TFLOP/s, under the V100's 15.7 fp32 roof
    slow = [Op("aten::mm", [[4096, 4096], [4096, 4096]], [F32, F32], kernel_ns=16_000_000, line=77)]
    found, _ = findings(trace_of(slow, device="Tesla V100-SXM2-32GB"), "op_below_roofline")
    assert "bf16" not in found[0].recommendation and "fp16" in found[0].recommendation
    assert "GradScaler" not in found[0].recommendation


def test_a_gemm_too_small_to_fill_the_gpu_is_not_sent_to_tunableop():
    # 1280 x 1280 output: 10 x 10 = 100 tiles of 128 x 128 for the H100's 132 SMs; at 20% of the
    # bf16 roof, while a filled 8192^3 GEMM of the same trace reaches 70%
    ops = [
        Op("aten::mm", [[1280, 8192], [8192, 1280]], [BF16, BF16], kernel_ns=gemm_ns(1280, 1280, 8192, 0.2 * H100_BF16), line=5),
        Op("aten::mm", [[8192, 8192], [8192, 8192]], [BF16, BF16], kernel_ns=gemm_ns(8192, 8192, 8192, 0.7 * H100_BF16), line=6),
    ]  # fmt: skip
    found, _ = findings(trace_of(ops), "op_below_roofline", thresholds={"op_below_roofline.min_share_pct": 0.1})
    (f,) = found
    assert "100 output tiles of 128x128" in f.message and "132 SMs/CUs" in f.message
    assert "TunableOp / max-autotune cannot fill" in f.recommendation and "PYTORCH_TUNABLEOP" not in f.recommendation
    assert f.metrics["target_pct_of_peak"]["value"] == pytest.approx(70.0, abs=0.1)
    assert f.cost_ns == pytest.approx(gemm_ns(1280, 1280, 8192, 0.2 * H100_BF16) * (1 - 20 / 70), rel=1e-3)


def test_k64_makes_a_gemm_memory_bound_however_large_m_and_n():
    # 8192 x 8192 x 64 bf16: 2*M*N*K FLOPs over (M*K + K*N + M*N) * 2 bytes = 63 FLOP/byte, under
    # the H100's ridge of 989.4 / 3.35 = 295: memory-bound; a copy in the trace reaches 80% of
    # the bandwidth, this GEMM 20%
    m = n = 8192
    k = 64
    nbytes = (m * k + k * n + m * n) * 2
    assert 2 * m * n * k / nbytes < H100_BF16 / H100_BW
    copy_bytes = 3 * 8 * 1024 * 1024 * 2  # add of two bf16 [8,1024,1024] tensors: two reads, one write
    ops = [
        Op("aten::mm", [[m, k], [k, n]], [BF16, BF16], kernel_ns=int(nbytes / (0.2 * H100_BW) * 1e9), line=5),
        Op("aten::add", [[8, 1024, 1024], [8, 1024, 1024], []], [BF16, BF16, "Scalar"],
           kernel_ns=int(copy_bytes / (0.8 * H100_BW) * 1e9), line=7),
    ]  # fmt: skip
    found, _ = findings(trace_of(ops), "op_below_roofline")
    (f,) = [x for x in found if x.title.startswith("aten::mm")]
    assert "memory-bound GEMM" in f.message and "K=64" in f.message and "ridge of 295 FLOP/byte" in f.message
    assert "TunableOp cannot help" in f.recommendation
    assert f.metrics["pct_of_peak"]["value"] == pytest.approx(20.0, abs=0.1)
    assert f.metrics["target_pct_of_peak"]["value"] == pytest.approx(80.0, abs=0.1)


def test_unfused_chain_needs_two_different_ops_and_a_softmax_is_never_one():
    big = [8, 1024, 1024]
    elem = 8 * 1024 * 1024 * 2
    ops = [
        Op("aten::mul", [big, big], [BF16, BF16], kernel_ns=int(3 * elem / (0.25 * H100_BW) * 1e9), line=9),
        Op("aten::add", [big, big, []], [BF16, BF16, "Scalar"], kernel_ns=int(3 * elem / (0.25 * H100_BW) * 1e9), line=9),
        # one softmax op in two shapes on one line: one op, not a chain
        Op("aten::_softmax", [[8, 1024, 1024], [], []], [BF16, "Scalar", "Scalar"],
           kernel_ns=int(2 * elem / (0.25 * H100_BW) * 1e9), line=12),
        Op("aten::_softmax", [[4, 1024, 1024], [], []], [BF16, "Scalar", "Scalar"],
           kernel_ns=int(elem / (0.25 * H100_BW) * 1e9), line=12),
        Op("aten::copy_", [big, big, []], [BF16, BF16, "Scalar"], kernel_ns=int(2 * elem / (0.8 * H100_BW) * 1e9), line=20),
    ]  # fmt: skip
    found, _ = findings(trace_of(ops), "op_below_roofline")
    by_line = {f.source_lines[0]["line"]: f for f in found}
    assert "unfused chain of 2 different elementwise ops" in by_line[9].message
    assert "torch.compile" in by_line[9].recommendation
    assert "chain" not in by_line[12].message


def test_transposed_strides_are_named_as_the_cause():
    shape = [16, 16, 559, 64]
    nbytes = 2 * 16 * 16 * 559 * 64 * 2
    ops = [
        Op(
            "aten::copy_",
            [shape, shape, []],
            [BF16, BF16, "Scalar"],
            strides=[[572416, 35776, 64, 1], [572416, 64, 1024, 1], []],
            kernel_ns=int(nbytes / (0.3 * H100_BW) * 1e9),
        ),
        # a contiguous copy of another shape (groups are name + shapes + dtypes) at 85% of the bandwidth
        Op("aten::copy_", [[16, 16, 560, 64]] * 2 + [[]], [BF16, BF16, "Scalar"],
           kernel_ns=int(nbytes * 560 / 559 / (0.85 * H100_BW) * 1e9)),
    ]  # fmt: skip
    found, _ = findings(trace_of(ops), "op_below_roofline")
    (f,) = found
    assert "strided" in f.message and f.metrics["target_pct_of_peak"]["value"] == pytest.approx(85.0, abs=0.2)


def test_a_gemm_alone_in_its_class_claims_no_saving():
    # nothing in the trace shows a better efficiency for it: no reachable target, no finding
    M = 8192
    slow_ns = gemm_ns(M, M, M, 0.3 * H100_BF16)
    ops = [Op("aten::mm", [[M, M], [M, M]], [BF16, BF16], kernel_ns=slow_ns)]
    found, _ = findings(trace_of(ops), "op_below_roofline")
    assert found == []


def test_op_near_its_roof_or_a_small_share_is_not_flagged():
    M = 8192
    fast_ns = int(2 * M**3 / 800e12 * 1e9)  # 800 of 989 TFLOP/s
    ops = [Op("aten::mm", [[M, M], [M, M]], [BF16, BF16], kernel_ns=fast_ns)]
    found, _ = findings(trace_of(ops), "op_below_roofline")
    assert found == []


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


def test_attention_written_out_is_sent_to_sdpa_even_below_eager_attentions_threshold():
    ops = eager_attention_ops()
    big = [8, 1024, 1024]
    ops.append(
        Op(
            "aten::copy_",
            [big, big, []],
            [BF16, BF16, "Scalar"],
            kernel_ns=int(4 * 8 * 1024 * 1024 / (0.8 * H100_BW) * 1e9),
        )
    )
    # eager_attention would own these kernels; with its threshold out of reach op_below_roofline
    # names them, and the cause is the score matrix, never "batch small GEMMs"
    found, _ = findings(trace_of(ops), "op_below_roofline", thresholds={"eager_attention.min_share_pct": 100.0})
    attention = [f for f in found if f.source_lines and f.source_lines[0]["line"] in (40, 41, 42)]
    assert attention
    for f in attention:
        assert "attention written out" in f.message and "scaled_dot_product_attention" in f.recommendation
        assert "Batch" not in f.recommendation
    # and with eager_attention firing, op_below_roofline leaves those kernels to it
    found, _ = findings(trace_of(ops), "op_below_roofline")
    assert not [f for f in found if f.source_lines and f.source_lines[0]["line"] in (40, 41, 42)]


def test_the_a100_variant_comes_from_the_trace_memory_size():
    from neuron_explorer.analyzers.perf import devices

    a100 = devices.detect(["NVIDIA A100-PG509-200"])
    # a PG509-200 board reporting 39.4 GiB (hta/alexnet_a100's deviceProperties) is the 40 GB part
    spec, why = devices.detect_variant([{"numSms": 108, "totalGlobalMem": 42297524224}], a100)
    assert spec.name == "A100-40GB" and spec.mem_bw == 1.555e12 and "108 SMs/CUs, 39 GiB" in why
    spec, why = devices.detect_variant([{"numSms": 108, "totalGlobalMem": 85e9}], a100)
    assert spec.name == "A100" and why == ""
    # an H100 name with 114 SMs is the PCIe card
    spec, _ = devices.detect_variant([{"numSms": 114, "totalGlobalMem": 85e9}], devices.detect(["NVIDIA H100"]))
    assert spec.name == "H100-PCIe"
    # no usable name: the properties alone (the vLLM trace's empty name, 304 CUs, 192 GiB)
    spec, why = devices.detect_variant(
        [{"name": "", "numSms": 304, "totalGlobalMem": 206141652992, "computeMajor": 9}], None
    )
    assert spec.name == "MI300X" and "304 SMs/CUs" in why


def test_figures_over_the_roof_flag_the_device_entry_and_are_not_judged():
    # the H100 SXM trace read as an H100 PCIe (2.0 TB/s): its fast elementwise ops exceed the roof
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ne.load(DATA / "qwen_h100.json.gz")
    a = analyze(t, rules=["op_below_roofline"], device_spec="H100-PCIe")
    over = a.op_perf[a.op_perf["pct_of_peak"] > 100]
    assert len(over) and a.perf_summary["over_roof"]["groups"] == len(over)
    assert "H100-PCIe" in a.perf_summary["over_roof"]["note"] and "--device-spec" in a.perf_summary["over_roof"]["note"]
    from neuron_explorer.analyzers.perf.shapes import short_shapes

    judged = {f.title.split(" at ")[0] for f in a.findings}
    assert not judged & {f"{r.name} {short_shapes(r.shapes)}" for r in over.itertuples()}
    # the right entry (detected from the trace) has none
    assert "over_roof" not in analyze(t, rules=["op_below_roofline"]).perf_summary
