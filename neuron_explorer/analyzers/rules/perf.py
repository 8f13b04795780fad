"""Performance-model rules: op groups far below their roofline, and eager attention.

Both read the op_perf table (``analyzers.perf``): one row per op group (name + shapes +
dtypes) with its FLOPs, bytes, achieved rates and the percent of its roofline bound reached.
Advice is limited to what the device supports (no bf16 on a V100, no FlashAttention before
sm80), read from the device spec the analysis used.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.hardware import Hardware
from neuron_explorer.analyzers.perf.devices import DeviceSpec, lookup, spec_from_dict
from neuron_explorer.analyzers.perf.shapes import short_dtypes, short_shapes
from neuron_explorer.analyzers.rules import _edits
from neuron_explorer.analyzers.rules._evidence import ms
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule

FAMILY = "perf"
_MATRIX = ("gemm", "attention", "conv")
#: A GEMM dimension below this leaves most of a tensor-core tile idle.
SMALL_DIM = 128


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


def likely_cause(
    row: pd.Series,
    spec: DeviceSpec | None,
    same_line_elementwise: int,
    hw: Hardware | None = None,
    training: bool = True,
) -> tuple[str, str]:
    """(cause, recommendation) for an op group far below its roof. With ``hw``, the advice
    names this device's autocast and graph capture (none on CPU, MTIA, Neuron); a run that does
    not train (``training`` False) gets no GradScaler."""
    device = hw.torch_device if hw is not None else "cuda"
    graphs = "HIP graph" if hw is not None and hw.device_type == "hip" else "CUDA graph"
    capture = (
        f"capture the step in a {graphs} / torch.compile"
        if hw is None or hw.device_type in ("cuda", "hip")
        else "torch.compile the step"
    )
    params: dict[str, Any] = json.loads(row["params"]) if isinstance(row["params"], str) else {}
    cat, dtype = row["category"], row["compute_dtype"]
    low = _low_precision(spec)
    if cat in _MATRIX and dtype == "fp32" and (spec is None or spec.supports(low)):
        tf32 = " or allow TF32 (torch.backends.cuda.matmul.allow_tf32 = True)" if spec and spec.supports("tf32") else ""
        scaler = " with a GradScaler" if low == "fp16" and training else ""
        return (
            "fp32 math on a device whose matrix units want lower precision",
            f"Run this op in {low} under torch.autocast('{device}', dtype=torch.{'bfloat16' if low == 'bf16' else 'float16'})"
            f"{scaler}{tf32}.",
        )
    if cat == "gemm":
        dims = [params.get(k) for k in ("M", "N", "K") if isinstance(params.get(k), int)]
        if dims and min(dims) < SMALL_DIM:
            return (
                f"small GEMM (M={params.get('M')}, N={params.get('N')}, K={params.get('K')}): tiles stay mostly empty",
                "Batch these matmuls (torch.bmm / a larger batch), fuse the projections that share an input "
                f"into one GEMM, or {capture} to cut per-kernel overhead.",
            )
        if params.get("non_contiguous"):
            return (
                "operands with strides the GEMM cannot take as a plain transpose",
                "Make the operand contiguous where it is produced (or keep the layout the consumer expects) "
                "instead of paying a strided read or an extra copy in every call.",
            )
    if cat == "attention":
        return (
            f"small attention problem (sequence {params.get('N_Q')}, head dim {params.get('d_h_qk')})",
            "Larger batches or sequence packing give the attention kernel more work per launch; check that "
            "the fused kernel matches the head dimension (64/128 run best).",
        )
    if cat in ("elementwise", "reduction", "norm") and params.get("non_contiguous"):
        return (
            "transposed / strided tensors: the kernel reads or writes memory out of order",
            "Keep tensors contiguous in the layout the next op reads (avoid .transpose()/.permute() followed by "
            "elementwise math), or let torch.compile fuse the permute into its consumer.",
        )
    if cat in ("elementwise", "reduction", "norm") and same_line_elementwise > 1:
        return (
            f"an unfused chain of {same_line_elementwise} elementwise ops on the same line",
            "Fuse the chain: torch.compile (or a fused kernel such as a fused RMSNorm / rotary embedding) "
            "reads and writes the tensor once instead of once per op.",
        )
    if cat in _MATRIX and row["bound"] == "compute":
        return (
            "the library kernel chosen for this shape (large enough, matrix dtype, plain layout)",
            "Let PyTorch tune the GEMM for this shape: PYTORCH_TUNABLEOP_ENABLED=1 (cuBLASLt / hipBLASLt "
            "TunableOp), or torch.compile(mode='max-autotune'); dimensions that are multiples of 128 tile best.",
        )
    if row["data_moved_mb"] < 1.0:
        return (
            "tensors too small to keep the device busy",
            f"Batch the work into fewer, larger ops, or {capture.replace('the step', 'it')}.",
        )
    return (
        "memory traffic below the bandwidth the device offers",
        "Fuse this op with its neighbours (torch.compile) so its data is read and written fewer times.",
    )


@rule(
    "op_below_roofline",
    family=FAMILY,
    title="Op far below its roofline",
    thresholds={
        "min_share_pct": (3.0, "% of device time"),
        "max_pct_of_peak": (40.0, "% of roof"),
        "max_findings": (5, ""),
    },
    needs="input shapes (record_shapes=True) and a known device (or --device-spec)",
)
def op_below_roofline(ctx: RuleContext) -> list[Finding]:
    """An op group (name + shapes + dtypes) holds at least ``min_share_pct`` of device time and
    reaches less than ``max_pct_of_peak`` of its roofline bound (compute or memory); the finding
    names its costliest source line and the likely cause."""
    t = _table(ctx)
    if t["pct_of_peak"].isna().all():
        raise RuleSkipped("needs a device spec: the trace's device is not in the table (use --device-spec)")
    spec = _spec(ctx)
    pct = t["pct_of_peak"].to_numpy(dtype=float).copy()
    # an fp32 GEMM/conv may sit at its fp32 roof while the matrix units the device has for
    # bf16/fp16 stay idle: judge it against the roof of the dtype it could run in
    low = _low_precision(spec)
    if spec is not None and spec.supports(low):
        fp32 = (t["compute_dtype"] == "fp32").to_numpy() & t["category"].isin(_MATRIX).to_numpy()
        lp_peak = spec.peak_flops(low, matrix=True) or float("nan")
        pct = np.where(fp32, 100.0 * t["tflops_per_s"].to_numpy(dtype=float) * 1e12 / lp_peak, pct)
    t = t.assign(pct_of_peak=pct)
    slow = t[
        (t["device_time_pct"] >= ctx.threshold("min_share_pct")) & (t["pct_of_peak"] < ctx.threshold("max_pct_of_peak"))
    ]
    vec = t[t["category"].isin(["elementwise", "reduction", "norm"]) & (t["src_line"] >= 0)]
    chain = vec.groupby(["src_file", "src_line"], dropna=False).size()
    out = []
    for _, row in slow.head(int(ctx.threshold("max_findings"))).iterrows():
        n_chain = int(chain.get((row["src_file"], row["src_line"]), 0)) if row["src_line"] >= 0 else 0
        cause, fix = likely_cause(row, spec, n_chain, ctx.frames.hardware, ctx.frames.run_kind.training)
        kernel_ns = row["kernel_time_us"] * 1e3
        where = f" at {row['src_file']}:{row['src_line']}" if row["src_line"] >= 0 else ""
        roof = row["bound"]
        if row["compute_dtype"] == "fp32" and row["category"] in _MATRIX and spec is not None and spec.supports(low):
            roof = f"{low} matrix"
        lines = (
            [{"file": row["src_file"], "line": int(row["src_line"]), "func": None, "ns": int(kernel_ns)}]
            if row["src_line"] >= 0
            else []
        )
        out.append(
            ctx.finding(
                title=f"{row['name']} {short_shapes(row['shapes'])} at {row['pct_of_peak']:.0f}% of its {roof} roof",
                message=(
                    f"{row['name']} {short_shapes(row['shapes'])} ({short_dtypes(row['dtypes'])}){where} ran {row['count']} times for {ms(kernel_ns)} "
                    f"({row['device_time_pct']:.1f}% of {_time_word(ctx)}) at {row['tflops_per_s']:.2f} TFLOP/s and "
                    f"{row['tb_per_s']:.2f} TB/s: {row['pct_of_peak']:.0f}% of its {roof} roof. "
                    f"Likely cause: {cause}."
                ),
                metrics={
                    "pct_of_peak": metric(float(row["pct_of_peak"]), "%"),
                    "device_time_pct": metric(float(row["device_time_pct"]), "%"),
                    "tflops_per_s": metric(float(row["tflops_per_s"]), "TFLOP/s"),
                    "tb_per_s": metric(float(row["tb_per_s"]), "TB/s"),
                    "flops_per_byte": metric(float(row["flops_per_byte"]), "FLOP/byte"),
                    "kernel_time_ns": metric(int(kernel_ns), "ns"),
                },
                cost_ns=int(kernel_ns * (1 - row["pct_of_peak"] / 100.0)),
                edits=_edits.op_group(
                    ctx.frames,
                    int(row.name),
                    kernel_ns * (1 - row["pct_of_peak"] / 100.0),
                    f"{row['name']} {short_shapes(row['shapes'])} at its roof",
                ),
                source_lines=lines,
                recommendation=fix,
            )
        )
    return out


def _dims(text: Any) -> list[list[int] | None]:
    try:
        shapes = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [s if isinstance(s, list) and all(isinstance(x, int) for x in s) else None for s in shapes]


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
    soft = t[t["name"].isin(["aten::_softmax", "aten::softmax", "aten::_safe_softmax"])]
    # modelled groups only: on a CPU trace matmul wraps the bmm that does the work
    gemm = t[t["name"].isin(["aten::bmm", "aten::matmul", "aten::baddbmm"]) & t["gflops"].notna()]
    scores = set()
    soft_rows = []
    for i, row in soft.iterrows():
        d = _dims(row["shapes"])
        s = d[0] if d else None
        if s and len(s) >= 3:  # (B, H, Nq, Nkv) or (B*H, Nq, Nkv)
            scores.add((s[-2], s[-1]))
            soft_rows.append(i)
    if not soft_rows:
        return []
    gemm_rows = []
    for i, row in gemm.iterrows():
        d = [x for x in _dims(row["shapes"]) if x is not None]
        if row["name"] == "aten::baddbmm":
            d = d[1:]
        if len(d) < 2 or len(d[0]) < 3 or len(d[1]) < 3:
            continue
        a, b = d[0], d[1]
        if (a[-2], b[-1]) in scores or (a[-2], a[-1]) in scores:  # Q K^T makes scores; P V reads them
            gemm_rows.append(i)
    if not gemm_rows:
        return []
    part = t.loc[soft_rows + gemm_rows]
    share = float(part["device_time_pct"].sum())
    if share < ctx.threshold("min_share_pct"):
        return []
    spec = _spec(ctx)
    ns = float(part["kernel_time_us"].sum() * 1e3)
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
                "written to and read back from memory."
            ),
            metrics={
                "share_pct": metric(share, f"% of {what}"),
                "softmax_ns": metric(int(t.loc[soft_rows, "kernel_time_us"].sum() * 1e3), "ns"),
                "bmm_ns": metric(int(t.loc[gemm_rows, "kernel_time_us"].sum() * 1e3), "ns"),
            },
            cost_ns=int(ns * 0.5),  # fused attention at least halves it; the score traffic disappears
            edits=_fused(ctx, part.index, "softmax and bmm fused (half their time)"),
            source_lines=lines,
            recommendation=(
                "Replace the matmul-softmax-matmul with torch.nn.functional.scaled_dot_product_attention(q, k, v, "
                f"attn_mask=..., is_causal=...): it dispatches to {kernel} and never materializes the scores."
            ),
        )
    ]


def _fused(ctx: RuleContext, groups: Any, label: str) -> Any:
    """The work of ``op_perf`` rows ``groups`` at half its time, as one edit."""
    parts = [
        _edits.op_group(ctx.frames, int(g), 0.5e3 * float(ctx.analysis.op_perf.loc[g, "kernel_time_us"]), label)
        for g in groups
    ]
    events = [e.events[0] for e in parts if e is not None]
    if not events:
        return None
    rank = np.concatenate([e.rank for e in events])
    ids = np.concatenate([e.event_id for e in events])
    return _edits.scaled(pd.DataFrame({"rank": rank, "event_id": ids}), 0.5, label)
