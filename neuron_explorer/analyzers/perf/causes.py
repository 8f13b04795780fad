"""Why an op group runs below its roof, from its own numbers and the device: the cause, the fix
that follows from it, and the efficiency the fix can reach (its target), for ``op_below_roofline``.

The cause is read off the group's numbers, first match wins:

1. ``attention``: a batched matmul or softmax of attention written out (``Q K^T -> softmax -> P V``
   on a (queries x keys) score matrix, ``attention_parts``): memory-bound on the score matrix,
   which is written and read back; the fix is ``scaled_dot_product_attention``.
2. ``fp32``: fp32 matrix math (GEMM, conv, attention) on a device whose matrix units take
   bf16/fp16: autocast.
3. ``memory_bound_gemm``: a GEMM whose arithmetic intensity (FLOPs per byte from M, N, K and the
   dtype) is below the device's ridge point: no kernel choice makes it compute-bound (K=64 does
   that however large M and N are); the fix moves fewer bytes (fuse it with its neighbours, or
   make K larger by concatenating GEMMs that share an operand).
4. ``too_small``: a GEMM whose output tiles (``B x ceil(M/128) x ceil(N/128)``, 128 x 128 being the
   typical tile of cuBLAS and hipBLASLt; NVIDIA's Matrix Multiplication Background guide, "tile
   and wave quantization") are fewer than the device's SMs/CUs: most of the GPU idles, and no
   kernel choice (TunableOp, max-autotune) fills it; the fix gives it more tiles (batch it with
   other GEMMs, a larger batch) or runs other work beside it.
5. ``strided``: operands with strides the kernel cannot take as a plain transpose.
6. ``unfused_chain``: two or more different elementwise ops on the same source line (one op,
   softmax included, is never a chain: a softmax is one fused kernel already).
7. ``small_tensors``: under 1 MiB moved per call: launch latency, not bandwidth, sets the time.
8. ``kernel_choice``: a matrix op large enough to fill the device, in a matrix dtype, with plain
   layouts, compute-bound: the library's kernel for this shape; TunableOp / max-autotune.
9. ``memory``: any other op: memory traffic below the bandwidth the device offers (a fused
   attention or convolution kernel is held only against others of its kind).

The target is a reachable efficiency, never the datasheet roof: the best efficiency the same
kind of op reaches *in this trace* (groups of at least ``MIN_PEER_SHARE_PCT`` of device time,
none above 100% of their roof): for memory-bound work the best memory-bound group moving at
least 1 MiB a call; for a GEMM the best compute-bound GEMM of its dtype that fills the device;
for fp32 math the group's own efficiency on its fp32 roof, carried to the low-precision roof
(the same shape fills the same tiles) and at most the best any matrix group of the trace
reaches on its roof. Without a better group in the trace there is no reachable target: nothing
is claimed. ``scale`` is the group's kernel time after the fix over its time now (what a replay
of the fix scales its kernels by).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from neuron_explorer.analyzers.perf.devices import DeviceSpec

MATRIX = ("gemm", "attention", "conv")
VECTOR = ("elementwise", "reduction", "norm")
SOFTMAX = ("aten::_softmax", "aten::softmax", "aten::_safe_softmax")
BATCHED = ("aten::bmm", "aten::matmul", "aten::baddbmm")
#: The GEMM output tile the fill check assumes (cuBLAS's and hipBLASLt's common 128 x 128).
TILE = 128
#: A group counts as a peer (evidence of what the device reaches) from this share of device time.
MIN_PEER_SHARE_PCT = 0.5
#: Under this many bytes a call, launch latency sets an op's time, not bandwidth.
SMALL_BYTES_MB = 1.0
ROOF_MAX_PCT = 100.0


@dataclass(frozen=True)
class Cause:
    """What holds one op group below its roof and what the fix can reach."""

    kind: str  # attention, fp32, memory_bound_gemm, too_small, strided, unfused_chain, ...
    cause: str
    fix: str
    own_pct: float  # the group's efficiency on ``roof`` now
    roof: str  # the roof both percentages are of: "memory", "compute", "bf16 matrix", ...
    target_pct: float | None  # the reachable efficiency on that roof, None when none is known
    target_source: str

    @property
    def scale(self) -> float | None:
        """Kernel time after the fix over kernel time now (1.0: no gain)."""
        if self.target_pct is None or self.target_pct <= 0 or not math.isfinite(self.own_pct):
            return None
        return min(self.own_pct / self.target_pct, 1.0)


def params_of(row: pd.Series) -> dict[str, Any]:
    try:
        p = json.loads(row["params"]) if isinstance(row["params"], str) else {}
    except ValueError:
        return {}
    return p if isinstance(p, dict) else {}


def gemm_tiles(params: dict[str, Any]) -> int | None:
    """Output tiles of a GEMM: B x ceil(M / 128) x ceil(N / 128)."""
    m, n, b = params.get("M"), params.get("N"), params.get("B", 1)
    if not isinstance(m, int) or not isinstance(n, int):
        return None
    return int(b if isinstance(b, int) else 1) * math.ceil(m / TILE) * math.ceil(n / TILE)


def _dims(text: Any) -> list[list[int] | None]:
    try:
        shapes = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [s if isinstance(s, list) and all(isinstance(x, int) for x in s) else None for s in shapes]


def attention_parts(t: pd.DataFrame) -> tuple[list[Any], list[Any]]:
    """Row labels of ``t`` (op_perf) that are attention written out: softmaxes over a (..., queries,
    keys) score tensor, and the modelled batched matmuls that make those scores (Q K^T: output
    queries x keys) or read them (P V: input queries x keys)."""
    soft = t[t["name"].isin(SOFTMAX)]
    scores = set()
    soft_rows = []
    for i, row in soft.iterrows():  # one per op group: a handful
        d = _dims(row["shapes"])
        s = d[0] if d else None
        if s and len(s) >= 3:  # (B, H, Nq, Nkv) or (B*H, Nq, Nkv)
            scores.add((s[-2], s[-1]))
            soft_rows.append(i)
    if not soft_rows:
        return [], []
    gemm = t[t["name"].isin(BATCHED) & t["gflops"].notna()]  # on a CPU trace matmul wraps the bmm
    gemm_rows = []
    for i, row in gemm.iterrows():
        d = [x for x in _dims(row["shapes"]) if x is not None]
        if row["name"] == "aten::baddbmm":
            d = d[1:]
        if len(d) < 2 or len(d[0]) < 3 or len(d[1]) < 3:
            continue
        a, b = d[0], d[1]
        if (a[-2], b[-1]) in scores or (a[-2], a[-1]) in scores:
            gemm_rows.append(i)
    return soft_rows, gemm_rows if gemm_rows else []


def _peers(t: pd.DataFrame) -> pd.DataFrame:
    ok = t["pct_of_peak"].notna() & (t["pct_of_peak"] <= ROOF_MAX_PCT)
    return t[ok & (t["device_time_pct"] >= MIN_PEER_SHARE_PCT)]


def memory_target(t: pd.DataFrame) -> tuple[float | None, str]:
    """The best memory-roof efficiency of a memory-bound group moving at least 1 MiB a call."""
    p = _peers(t)
    p = p[(p["bound"] == "memory") & (p["data_moved_mb"] >= SMALL_BYTES_MB)]
    if not len(p):
        return None, ""
    best = p.loc[p["pct_of_peak"].idxmax()]
    return float(best["pct_of_peak"]), f"{best['name']} reaches it in this trace"


def gemm_target(t: pd.DataFrame, dtype: Any, sms: int | None) -> tuple[float | None, str]:
    """The best compute-roof efficiency of a compute-bound GEMM of ``dtype`` filling the device."""
    p = _peers(t)
    p = p[(p["category"] == "gemm") & (p["bound"] == "compute") & (p["compute_dtype"] == dtype)]
    if sms:
        tiles = p.apply(lambda r: gemm_tiles(params_of(r)) or 0, axis=1) if len(p) else pd.Series(dtype="int64")
        p = p[tiles.to_numpy() >= sms] if len(p) else p
    if not len(p):
        return None, ""
    best = p.loc[p["pct_of_peak"].idxmax()]
    return float(best["pct_of_peak"]), f"{best['name']} {_short(best['shapes'])} reaches it in this trace"


def _short(shapes: Any) -> str:
    from neuron_explorer.analyzers.perf.shapes import short_shapes

    return short_shapes(shapes)


def explain(
    row: pd.Series,
    t: pd.DataFrame,
    spec: DeviceSpec | None,
    sms: int | None,
    low: str,
    attention_rows: set[Any],
    chain_ops: int,
    advice: dict[str, str],
) -> Cause:
    """The cause of one op group (a row of op_perf ``t``) being below its roof; ``advice`` holds the
    device-specific phrases (``autocast``, ``capture``, ``tf32``, ``scaler``)."""
    p = params_of(row)
    cat, dtype, bound = row["category"], row["compute_dtype"], row["bound"]
    pct = float(row["pct_of_peak"])
    if row.name in attention_rows:
        target, src = memory_target(t)
        soft = row["name"] in SOFTMAX
        return Cause(
            "attention",
            "attention written out as bmm -> softmax -> bmm: the "
            + ("softmax reads and writes" if soft else "batched matmul writes or reads")
            + " the full (queries x keys) score matrix, memory-bound on it",
            "Replace the matmul-softmax-matmul with torch.nn.functional.scaled_dot_product_attention(q, k, v, "
            "attn_mask=..., is_causal=...): the fused kernel never writes the score matrix (eager_attention names "
            "the lines).",
            pct,
            str(bound),
            target,
            src,
        )
    if cat in MATRIX and dtype == "fp32" and spec is not None and spec.supports(low):
        lp_peak = spec.peak_flops(low, matrix=True) or float("nan")
        own_lp = 100.0 * float(row["tflops_per_s"]) * 1e12 / lp_peak
        p_all = _peers(t)
        best = p_all[p_all["category"].isin(MATRIX) & (p_all["bound"] == "compute")]["pct_of_peak"]
        ceiling = float(best.max()) if len(best) else pct
        target = min(pct, ceiling) if bound == "compute" else None
        return Cause(
            "fp32",
            "fp32 math on a device whose matrix units want lower precision",
            f"Run this op in {low} under {advice['autocast']}{advice['scaler']}{advice['tf32']}.",
            own_lp,
            f"{low} matrix",
            target,
            "its own efficiency on the fp32 roof, carried to the lower-precision roof (the same shape fills the "
            "same tiles)",
        )
    if cat == "gemm":
        tiles = gemm_tiles(p)
        ai = float(row["flops_per_byte"]) if pd.notna(row["flops_per_byte"]) else float("nan")
        if bound == "memory":
            target, src = memory_target(t)
            peak = spec.peak_flops(dtype, matrix=True) if spec is not None and dtype else None
            ridge = f" below the device's ridge of {peak / spec.mem_bw:.0f} FLOP/byte" if peak and spec else ""
            return Cause(
                "memory_bound_gemm",
                f"memory-bound GEMM (M={p.get('M')}, N={p.get('N')}, K={p.get('K')}, {dtype}): {ai:.0f} FLOP/byte{ridge}, "
                "so no kernel choice makes it compute-bound",
                "Move fewer bytes: fuse it with the op that produces or consumes its output (torch.compile), or "
                "concatenate the GEMMs that share an input into one with a larger K/N; TunableOp cannot help.",
                pct,
                "memory",
                target,
                src,
            )
        if tiles is not None and sms and tiles < sms:
            target, src = gemm_target(t, dtype, sms)
            return Cause(
                "too_small",
                f"too small to fill the device: {tiles} output tiles of {TILE}x{TILE} (M={p.get('M')}, "
                f"N={p.get('N')}{', B=' + str(p.get('B')) if p.get('B', 1) != 1 else ''}) for {sms} SMs/CUs",
                "Give it more tiles: batch it with the other GEMMs of the step (torch.bmm over stacked weights, one "
                "GEMM for the projections that share an input), a larger batch, or run other work beside it on "
                f"another stream ({advice['capture']}); TunableOp / max-autotune cannot fill idle SMs.",
                pct,
                str(bound),
                target,
                src,
            )
        if p.get("non_contiguous"):
            target, src = gemm_target(t, dtype, sms)
            return Cause(
                "strided",
                "operands with strides the GEMM cannot take as a plain transpose",
                "Make the operand contiguous where it is produced (or keep the layout the consumer expects) "
                "instead of paying a strided read or an extra copy in every call.",
                pct,
                str(bound),
                target,
                src,
            )
    if cat in VECTOR and p.get("non_contiguous"):
        target, src = memory_target(t)
        return Cause(
            "strided",
            "transposed / strided tensors: the kernel reads or writes memory out of order",
            "Keep tensors contiguous in the layout the next op reads (avoid .transpose()/.permute() followed by "
            "elementwise math), or let torch.compile fuse the permute into its consumer.",
            pct,
            str(bound),
            target,
            src,
        )
    if cat in VECTOR and chain_ops > 1 and row["name"] not in SOFTMAX:
        target, src = memory_target(t)
        return Cause(
            "unfused_chain",
            f"an unfused chain of {chain_ops} different elementwise ops on the same line",
            "Fuse the chain: torch.compile (or a fused kernel such as a fused RMSNorm / rotary embedding) "
            "reads and writes the tensor once instead of once per op.",
            pct,
            str(bound),
            target,
            src,
        )
    if pd.notna(row["data_moved_mb"]) and row["data_moved_mb"] < SMALL_BYTES_MB:
        target, src = memory_target(t)
        return Cause(
            "small_tensors",
            "tensors too small to keep the device busy (under 1 MiB a call)",
            f"Batch the work into fewer, larger ops, or {advice['capture'].replace('the step', 'it')}.",
            pct,
            str(bound),
            target,
            src,
        )
    if cat in MATRIX and bound == "compute":
        target, src = gemm_target(t, dtype, sms) if cat == "gemm" else _same_category_target(t, row)
        return Cause(
            "kernel_choice",
            "the library kernel chosen for this shape (it fills the device, in a matrix dtype, plain layout)",
            "Let PyTorch tune the kernel for this shape: PYTORCH_TUNABLEOP_ENABLED=1 (cuBLASLt / hipBLASLt "
            "TunableOp), or torch.compile(mode='max-autotune'); dimensions that are multiples of 128 tile best.",
            pct,
            "compute",
            target,
            src,
        )
    if cat in MATRIX:  # a fused attention or conv kernel: only its own kind says what it can reach
        target, src = _same_category_target(t, row)
    else:
        target, src = memory_target(t) if bound == "memory" else _same_category_target(t, row)
    return Cause(
        "memory",
        "memory traffic below the bandwidth the device offers",
        "Fuse this op with its neighbours (torch.compile) so its data is read and written fewer times.",
        pct,
        str(bound),
        target,
        src,
    )


def _same_category_target(t: pd.DataFrame, row: pd.Series) -> tuple[float | None, str]:
    p = _peers(t)
    p = p[
        (p["category"] == row["category"]) & (p["bound"] == row["bound"]) & (p["compute_dtype"] == row["compute_dtype"])
    ]
    if not len(p):
        return None, ""
    best = p.loc[p["pct_of_peak"].idxmax()]
    return float(best["pct_of_peak"]), f"{best['name']} {_short(best['shapes'])} reaches it in this trace"
