"""Performance-model rules: op groups far below their roofline, and eager attention.

Both read the op_perf table (``analyzers.perf``): one row per op group (name + shapes +
dtypes) with its FLOPs, bytes, achieved rates and the percent of its roofline bound reached.
Advice is limited to what the device supports (no bf16 on a V100, no FlashAttention before
sm80), read from the device spec the analysis used.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.hardware import Hardware
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.perf.causes import attention_parts, explain
from neuron_explorer.analyzers.perf.devices import DeviceSpec, lookup, spec_from_dict
from neuron_explorer.analyzers.perf.shapes import short_dtypes, short_shapes
from neuron_explorer.analyzers.perf.summary import OVER_ROOF_PCT
from neuron_explorer.analyzers.rules import _edits
from neuron_explorer.analyzers.rules._evidence import ms, threshold_of
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule

FAMILY = "perf"
_MATRIX = ("gemm", "attention", "conv")


def _table(ctx: RuleContext) -> pd.DataFrame:
    t = ctx.analysis.op_perf
    if not len(t):
        raise RuleSkipped("needs device kernels linked to ops")
    if not t["gflops"].notna().any():
        raise RuleSkipped("needs recorded input shapes (record_shapes=True) for the performance models")
    return t


def _spec(ctx: RuleContext) -> DeviceSpec | None:
    dev = (ctx.analysis.perf_summary or {}).get("device") or {}
    spec = lookup(str(dev.get("name") or ""))
    if spec is None and dev:  # a spec from a TOML file: rebuild it from the summary
        spec = spec_from_dict(
            {
                "name": dev["name"],
                "mem_bw_tb_per_s": dev["mem_bw_tb_per_s"],
                "matrix_tflops": dev.get("matrix_tflops") or {},
                "vector_tflops": dev.get("vector_tflops") or {},
            }
        )
    return spec


def _time_word(ctx: RuleContext) -> str:
    """What the shares are of: device time, or op time on a host-only (CPU) trace."""
    host = (ctx.analysis.perf_summary or {}).get("time_source") == "host op self time"
    return "op time" if host else "device time"


def _low_precision(spec: DeviceSpec | None) -> str:
    """The matrix dtype to recommend on this device: bf16 where supported, else fp16."""
    if spec is None or spec.supports("bf16"):
        return "bf16"
    return "fp16" if spec.supports("fp16") else "bf16"


def _advice(spec: DeviceSpec | None, hw: Hardware | None, training: bool) -> dict[str, str]:
    """The device-specific phrases of the fixes: this device's autocast, TF32 where the matrix
    units take it, a GradScaler only with fp16 on a training run, graph capture only on CUDA/ROCm."""
    device = hw.torch_device if hw is not None else "cuda"
    graphs = "HIP graph" if hw is not None and hw.device_type == "hip" else "CUDA graph"
    low = _low_precision(spec)
    return {
        "autocast": f"torch.autocast('{device}', dtype=torch.{'bfloat16' if low == 'bf16' else 'float16'})",
        "scaler": " with a GradScaler" if low == "fp16" and training else "",
        "tf32": " or allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True)"
        if spec and spec.supports("tf32")
        else "",
        "capture": (
            f"capture the step in a {graphs} / torch.compile"
            if hw is None or hw.device_type in ("cuda", "hip")
            else "torch.compile the step"
        ),
    }


def _sms(hw: Hardware | None, spec: DeviceSpec | None) -> int | None:
    """SMs (NVIDIA) / CUs (AMD) of the device: the trace's deviceProperties, else the table's."""
    if hw is not None and hw.sms:
        return hw.sms
    return spec.sms if spec is not None else None


def likely_cause(
    row: pd.Series,
    spec: DeviceSpec | None,
    same_line_elementwise: int,
    hw: Hardware | None = None,
    training: bool = True,
    table: pd.DataFrame | None = None,
) -> tuple[str, str]:
    """(cause, recommendation) for an op group far below its roof (``analyzers.perf.causes``),
    judged against the rest of ``table`` (the op_perf table; the row alone when not given)."""
    defaults = {"name": "", "shapes": None, "pct_of_peak": float("nan"), "flops_per_byte": float("nan"),
                "tflops_per_s": 0.0, "device_time_pct": 0.0, "data_moved_mb": float("nan"), "params": None}  # fmt: skip
    row = pd.Series({**defaults, **row.to_dict()}, name=row.name)
    t = table if table is not None else pd.DataFrame(columns=[*list(defaults), "category", "bound", "compute_dtype"])
    c = explain(
        row, t, spec, _sms(hw, spec), _low_precision(spec), set(), same_line_elementwise, _advice(spec, hw, training)
    )
    return c.cause, c.fix


@rule(
    "op_below_roofline",
    family=FAMILY,
    title="Op far below its roofline",
    thresholds={
        "min_share_pct": (3.0, "% of device time"),
        "max_pct_of_peak": (40.0, "% of roof"),
        "min_saving_pct": (20.0, "% of the op's time"),
        "max_findings": (5, ""),
    },
    needs="input shapes (record_shapes=True) and a known device (or --device-spec)",
)
def op_below_roofline(ctx: RuleContext) -> list[Finding]:
    """An op group (name + shapes + dtypes) holds at least ``min_share_pct`` of device time, reaches
    less than ``max_pct_of_peak`` of its roofline bound (compute or memory; fp32 matrix math is
    judged on the bf16/fp16 matrix roof the device offers), and a reachable efficiency would save
    at least ``min_saving_pct`` of its time. The cause follows from its numbers
    (``analyzers.perf.causes``: attention written out, fp32, memory-bound or too-small GEMMs,
    strides, unfused chains, small tensors, kernel choice); the target is the best efficiency
    the same kind of op reaches in this trace, and without one nothing is claimed. Groups over
    100% of their roof are not judged (the device entry is wrong: ``perf_summary.over_roof``);
    attention written out is ``eager_attention``'s when that fires."""
    t = _table(ctx)
    if t["pct_of_peak"].isna().all():
        raise RuleSkipped("needs a device spec: the trace's device is not in the table (use --device-spec)")
    spec = _spec(ctx)
    hw = ctx.frames.hardware
    low = _low_precision(spec)
    advice = _advice(spec, hw, ctx.frames.run_kind.training)
    sms = _sms(hw, spec)
    pct = t["pct_of_peak"].to_numpy(dtype=float).copy()
    # an fp32 GEMM/conv may sit at its fp32 roof while the matrix units the device has for
    # bf16/fp16 stay idle: judge it against the roof of the dtype it could run in
    if spec is not None and spec.supports(low):
        fp32 = (t["compute_dtype"] == "fp32").to_numpy() & t["category"].isin(_MATRIX).to_numpy()
        lp_peak = spec.peak_flops(low, matrix=True) or float("nan")
        pct = np.where(fp32, 100.0 * t["tflops_per_s"].to_numpy(dtype=float) * 1e12 / lp_peak, pct)
    sound = t["pct_of_peak"].to_numpy(dtype=float) <= OVER_ROOF_PCT  # over the roof: the entry is wrong
    slow = t[
        (t["device_time_pct"] >= ctx.threshold("min_share_pct")).to_numpy()
        & (pct < ctx.threshold("max_pct_of_peak"))
        & sound
    ]
    soft_rows, gemm_rows = attention_parts(t)
    attention = set(soft_rows) | set(gemm_rows) if soft_rows and gemm_rows else set()
    if attention and float(t.loc[list(attention), "device_time_pct"].sum()) >= threshold_of(
        ctx, "eager_attention", "min_share_pct"
    ):
        slow = slow.drop(index=[i for i in attention if i in slow.index])  # eager_attention owns them
    chains = _chains(t)
    out = []
    for _, row in slow.iterrows():  # a handful of op groups
        if len(out) >= int(ctx.threshold("max_findings")):
            break
        n_chain = int(chains.get((row["src_file"], row["src_line"]), 0)) if row["src_line"] >= 0 else 0
        c = explain(row, t, spec, sms, low, attention, n_chain, advice)
        scale = c.scale
        if scale is None or 100.0 * (1.0 - scale) < ctx.threshold("min_saving_pct"):
            continue  # no efficiency this trace reaches says a fix would pay
        kernel_ns = row["kernel_time_us"] * 1e3
        saving = int(kernel_ns * (1.0 - scale))
        where = f" at {row['src_file']}:{row['src_line']}" if row["src_line"] >= 0 else ""
        lines = (
            [{"file": row["src_file"], "line": int(row["src_line"]), "func": None, "ns": int(kernel_ns)}]
            if row["src_line"] >= 0
            else []
        )
        out.append(
            ctx.finding(
                title=f"{row['name']} {short_shapes(row['shapes'])} at {c.own_pct:.0f}% of its {c.roof} roof",
                message=(
                    f"{row['name']} {short_shapes(row['shapes'])} ({short_dtypes(row['dtypes'])}){where} ran "
                    f"{row['count']} times for {ms(kernel_ns)} ({row['device_time_pct']:.1f}% of {_time_word(ctx)}) "
                    f"at {row['tflops_per_s']:.2f} TFLOP/s and {row['tb_per_s']:.2f} TB/s: {c.own_pct:.0f}% of its "
                    f"{c.roof} roof. Cause: {c.cause}. At {c.target_pct:.0f}% of that roof ({c.target_source}) it "
                    f"would take {ms(kernel_ns * scale)}, {ms(saving)} less."
                ),
                metrics={
                    "pct_of_peak": metric(float(c.own_pct), "%"),
                    "target_pct_of_peak": metric(float(c.target_pct or 0.0), "%"),
                    "kernel_time_scale": metric(float(scale), "x"),
                    "device_time_pct": metric(float(row["device_time_pct"]), "%"),
                    "tflops_per_s": metric(float(row["tflops_per_s"]), "TFLOP/s"),
                    "tb_per_s": metric(float(row["tb_per_s"]), "TB/s"),
                    "flops_per_byte": metric(float(row["flops_per_byte"]), "FLOP/byte"),
                    "kernel_time_ns": metric(int(kernel_ns), "ns"),
                },
                cost_ns=saving,
                edits=_edits.op_group(
                    ctx.frames,
                    int(row.name),
                    saving,
                    f"{row['name']} {short_shapes(row['shapes'])} at {c.target_pct:.0f}% of its {c.roof} roof",
                ),
                source_lines=lines,
                recommendation=c.fix,
            )
        )
    return out


def _chains(t: pd.DataFrame) -> pd.Series:
    """Per (file, line): how many *different* elementwise/reduction/norm ops run there (shape
    variants of one op are one op; a chain needs two)."""
    vec = t[t["category"].isin(["elementwise", "reduction", "norm"]) & (t["src_line"] >= 0)]
    return vec.groupby(["src_file", "src_line"], dropna=False)["name"].nunique()


@rule(
    "eager_attention",
    family=FAMILY,
    title="Attention written out by hand (softmax + batched matmuls)",
    thresholds={"min_share_pct": (5.0, "% of device time")},
    needs="input shapes (record_shapes=True)",
)
def eager_attention(ctx: RuleContext) -> list[Finding]:
    """A softmax over a (batch, heads, queries, keys) score tensor plus the batched matmuls that
    make the scores (Q K^T) and consume them (P V) hold at least ``min_share_pct`` of device
    time: attention computed eagerly, the score matrix written to and read from memory."""
    t = _table(ctx)
    soft_rows, gemm_rows = attention_parts(t)  # Q K^T makes the scores; P V reads them
    if not soft_rows or not gemm_rows:
        return []
    part = t.loc[soft_rows + gemm_rows]
    share = float(part["device_time_pct"].sum())
    if share < ctx.threshold("min_share_pct"):
        return []
    spec = _spec(ctx)
    ns = float(part["kernel_time_us"].sum() * 1e3)
    softmax_ns = int(t.loc[soft_rows, "kernel_time_us"].sum() * 1e3)
    sm = t.loc[soft_rows].iloc[0]
    where = f" at {sm['src_file']}:{sm['src_line']}" if sm["src_line"] >= 0 else ""
    what = _time_word(ctx)
    if what == "op time":
        kernel = "the fused flash-attention CPU kernel"
    elif spec is None or spec.supports("bf16"):
        kernel = "FlashAttention in fp16/bf16 (and the memory-efficient kernel otherwise)"
    else:
        kernel = "the memory-efficient kernel (FlashAttention needs sm80 or newer, which this device is not)"
    located = part[part["src_line"] >= 0]
    by_line = (
        located.groupby(["src_file", "src_line"])["kernel_time_us"].sum().sort_values(ascending=False).head(3)
        if len(located)
        else pd.Series(dtype="float64")
    )
    lines = [{"file": f, "line": int(n), "func": None, "ns": int(us * 1e3)} for (f, n), us in by_line.items()]
    return [
        ctx.finding(
            title=f"Eager attention: softmax + bmm take {share:.0f}% of {what}",
            message=(
                f"A softmax over attention scores {short_shapes(sm['shapes'])}{where} and {len(gemm_rows)} batched matmul group(s) "
                f"with matching shapes ran for {ms(ns)} ({share:.1f}% of {what}): the full score matrix is "
                f"written to and read back from memory. A fused kernel never writes it: the softmax's own "
                f"{ms(softmax_ns)} goes, the matmuls' math stays."
            ),
            metrics={
                "share_pct": metric(share, f"% of {what}"),
                "softmax_ns": metric(softmax_ns, "ns"),
                "bmm_ns": metric(int(t.loc[gemm_rows, "kernel_time_us"].sum() * 1e3), "ns"),
                # what a replay scales the pattern's kernels by: the matmuls' math stays
                "kernel_time_scale": metric(1.0 - softmax_ns / ns if ns else 1.0, "x"),
            },
            # the fused kernel never writes the scores: their softmax pass goes, the matmuls' math stays
            cost_ns=softmax_ns,
            edits=_fused(ctx, soft_rows, "the softmax over the scores fused away", factor=0.0),
            source_lines=lines,
            recommendation=(
                "Replace the matmul-softmax-matmul with torch.nn.functional.scaled_dot_product_attention(q, k, v, "
                f"attn_mask=..., is_causal=...): it dispatches to {kernel} and never materializes the scores."
            ),
        )
    ]


def _fused(ctx: RuleContext, groups: Any, label: str, factor: float = 0.5) -> Any:
    """The work of ``op_perf`` rows ``groups`` at ``factor`` of its time, as one edit."""
    parts = [
        _edits.op_group(
            ctx.frames, int(g), (1.0 - factor) * 1e3 * float(ctx.analysis.op_perf.loc[g, "kernel_time_us"]), label
        )
        for g in groups
    ]
    events = [e.events[0] for e in parts if e is not None]
    if not events:
        return None
    rank = np.concatenate([e.rank for e in events])
    ids = np.concatenate([e.event_id for e in events])
    return _edits.scaled(pd.DataFrame({"rank": rank, "event_id": ids}), factor, label)
