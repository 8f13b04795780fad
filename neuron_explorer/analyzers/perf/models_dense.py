"""FLOP and byte models of the matrix-unit ops: GEMMs, attention and convolution.

Formulas follow TraceLens (AMD-AGI/TraceLens ``PerfModel/perf_model.py``) so the numbers can be
compared with its perf reports; docs/rules.md ("op_perf") lists them and every deliberate
difference. A GEMM is ``2*M*N*K`` FLOPs (+ ``M*N`` for a bias) and reads A, B (and the bias),
writes C once; attention is two GEMMs per head (``Q K^T`` and ``P V``), halved when causal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from neuron_explorer.analyzers.perf.shapes import SCALAR_TYPE_CODES, OpArgs, bytes_per_element, is_transposed, numel


@dataclass
class OpModel:
    """The model of one op call: FLOPs, bytes moved, the compute dtype and whether the math
    runs on the matrix units (tensor cores / MFMA / Tensor engine)."""

    category: str
    flops: float
    bytes: float
    dtype: str | None
    matrix: bool = False
    params: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------------- GEMM
def _gemm(
    a: OpArgs, ia: int, ib: int, b: int, m: int, n: int, k: int, bias: float = 0.0, out_bpe: float | None = None
) -> OpModel | None:
    bpe = a.bpe(ia)
    if bpe is None:
        return None
    flops = b * (2.0 * m * n * k + (m * n if bias else 0))
    # TraceLens prices every operand (and the output) at A's element size
    data = b * (m * k + k * n) * bpe + b * m * n * (out_bpe or bpe) + bias * bpe
    transposed = [is_transposed(a.stride(ia), a.shape(ia)), is_transposed(a.stride(ib), a.shape(ib))]
    params = {"B": b, "M": m, "N": n, "K": k, "bias": bool(bias), "transposed": transposed}
    return OpModel("gemm", flops, data, a.dtype(ia), True, params)


def gemm_model(op: str, a: OpArgs) -> OpModel | None:
    """mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm (and their out= variants)."""
    if op in ("mm", "_scaled_mm", "_scaled_grouped_mm"):
        sa, sb = a.shape(0), a.shape(1)
        if not sa or not sb or len(sa) != 2 or len(sb) != 2:
            return None
        out_bpe = None
        if op == "_scaled_mm":
            out_bpe = 2.0  # the scaled GEMMs write bf16/fp16 unless out_dtype (argument 6) says otherwise
            code = a.value(6)
            if code and code.isdigit():
                out_bpe = bytes_per_element(SCALAR_TYPE_CODES.get(code)) or out_bpe
        return _gemm(a, 0, 1, 1, sa[0], sb[1], sa[1], out_bpe=out_bpe)
    if op == "addmm":
        sa, sb = a.shape(1), a.shape(2)
        if not sa or not sb or len(sa) != 2 or len(sb) != 2:
            return None
        return _gemm(a, 1, 2, 1, sa[0], sb[1], sa[1], bias=sb[1])
    if op in ("bmm", "baddbmm"):
        off = 1 if op == "baddbmm" else 0
        sa, sb = a.shape(off), a.shape(off + 1)
        if not sa or not sb or len(sa) != 3 or len(sb) != 3:
            return None
        # baddbmm adds C: M*N FLOPs a batch; its bytes count a bias row of N per batch, as
        # TraceLens does (C is often a full (B, M, N) tensor: docs/perf.md)
        bias = float(sa[0] * sb[2]) if op == "baddbmm" else 0.0
        return _gemm(a, off, off + 1, sa[0], sa[1], sb[2], sa[2], bias=bias)
    if op == "linear":
        sx, sw = a.shape(0), a.shape(1)
        if not sx or not sw or len(sw) != 2:
            return None
        bias = sw[0] if a.shape(2) else 0
        return _gemm(a, 0, 1, 1, numel(sx[:-1]), sw[0], sx[-1], bias=bias)
    if op == "matmul":
        sa, sb = a.shape(0), a.shape(1)
        if not sa or not sb:
            return None
        if len(sb) == 1:
            sb = [*sb, 1]
        if len(sa) == 1:
            sa = [1, *sa]
        if len(sb) == 2:  # (..., M, K) @ (K, N): one GEMM over the folded batch
            return _gemm(a, 0, 1, 1, numel(sa[:-1]), sb[-1], sa[-1])
        batch = max(numel(sa[:-2]), numel(sb[:-2]))
        return _gemm(a, 0, 1, batch, sa[-2], sb[-1], sa[-1])
    return None


# ------------------------------------------------------------------------------ attention
#: op -> (layout, position of is_causal in the arguments, backward?) ; layout "bhnd" is
#: (batch, heads, seq, head_dim) as SDPA takes it, "bnhd" the flash/xformers kernels' order.
_ATTENTION: dict[str, tuple[str, int, bool]] = {
    "scaled_dot_product_attention": ("bhnd", 5, False),
    "_scaled_dot_product_flash_attention": ("bhnd", 4, False),
    "_scaled_dot_product_flash_attention_for_cpu": ("bhnd", 4, False),
    "_scaled_dot_product_efficient_attention": ("bhnd", 6, False),
    "_scaled_dot_product_cudnn_attention": ("bhnd", 6, False),
    "_scaled_dot_product_fused_attention_overrideable": ("bhnd", 5, False),
    "_flash_attention_forward": ("bnhd", 8, False),
    "_efficient_attention_forward": ("bnhd", 9, False),
    "_scaled_dot_product_flash_attention_backward": ("bhnd", 11, True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": ("bhnd", 7, True),
    "_scaled_dot_product_efficient_attention_backward": ("bhnd", 11, True),
    "_scaled_dot_product_cudnn_attention_backward": ("bhnd", 14, True),
    "_flash_attention_backward": ("bnhd", 11, True),
    "_efficient_attention_backward": ("bnhd", 14, True),
    # the flash-attn package's ops (FlashAttention-2): q, k, v as (batch, seq, heads, head_dim)
    "flash_attn::_flash_attn_forward": ("bnhd", 5, False),
    "flash_attn::_flash_attn_backward": ("bnhd", 11, True),
}
ATTENTION_OPS = frozenset(_ATTENTION)


def attention_dims(layout: str, q: list[int], k: list[int], v: list[int]) -> dict[str, int] | None:
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    if layout == "bhnd":
        return {"B": q[0], "H_Q": q[1], "N_Q": q[2], "d_h_qk": q[3], "H_KV": k[1], "N_KV": k[2], "d_h_v": v[3]}
    return {"B": q[0], "N_Q": q[1], "H_Q": q[2], "d_h_qk": q[3], "N_KV": k[1], "H_KV": k[2], "d_h_v": v[3]}


def attention_flops(d: dict[str, int], causal: bool, backward: bool, recompute: bool = True) -> float:
    """Forward: ``Q K^T`` and ``P V`` (softmax left out, as flash-attention's benchmark does);
    backward: the four gradient GEMMs (dV, dP, dQ, dK), the GQA head reductions and, for the
    flash kernels (``recompute``), the recomputed ``Q K^T``. Causal halves it when the query
    and key lengths are equal."""
    b, hq, nq, nkv, dqk, dv, hkv = d["B"], d["H_Q"], d["N_Q"], d["N_KV"], d["d_h_qk"], d["d_h_v"], d["H_KV"]
    qk = b * hq * 2.0 * nq * nkv * dqk
    pv = b * hq * 2.0 * nq * nkv * dv
    if backward:
        gqa = (hq // max(hkv, 1) - 1) * b * nkv * (dv + dqk)
        total = pv + pv + qk + qk + gqa + (qk if recompute else 0.0)
    else:
        total = qk + pv
    if causal and nq == nkv:
        total /= 2
    return total


def attention_model(op: str, a: OpArgs) -> OpModel | None:
    layout, causal_at, backward = _ATTENTION[op]
    first = 1 if backward else 0  # backward ops take grad_out first
    q, k, v = a.shape(first), a.shape(first + 1), a.shape(first + 2)
    if q is None or k is None or v is None:
        return None
    d = attention_dims(layout, q, k, v)
    bpe = a.bpe(first)
    if d is None or bpe is None:
        return None
    if op == "_efficient_attention_forward" or op == "_efficient_attention_backward":
        mask = a.number(causal_at)
        causal = bool(mask) if mask is not None else False
    else:
        causal = a.flag(causal_at)
    b, hq, nq, nkv, dqk, dv, hkv = d["B"], d["H_Q"], d["N_Q"], d["N_KV"], d["d_h_qk"], d["d_h_v"], d["H_KV"]
    elems = b * nq * hq * dqk + b * nkv * hkv * dqk + b * nkv * hkv * dv + b * nq * hq * dv  # Q, K, V, O
    if backward:  # Q K V dO read (dO is O's size), dQ dK dV written; TraceLens leaves O and LSE out
        elems += b * nq * hq * dqk + b * nkv * hkv * (dqk + dv)
    # TraceLens counts the recomputed Q K^T for the flash kernels only (its flash_impl flag)
    recompute = "flash" in op
    params = {**d, "causal": causal, "backward": backward}
    flops = attention_flops(d, causal, backward, recompute)
    return OpModel("attention", flops, elems * bpe, a.dtype(first), True, params)


# ---------------------------------------------------------------------------- convolution
#: op -> positions of (stride, padding, dilation, transposed, output_padding, groups); -1: absent.
_CONV: dict[str, tuple[int, int, int, int, int, int]] = {
    "convolution": (3, 4, 5, 6, 7, 8),
    "_convolution": (3, 4, 5, 6, 7, 8),
    "conv1d": (3, 4, 5, -1, -1, 6),
    "conv2d": (3, 4, 5, -1, -1, 6),
    "conv3d": (3, 4, 5, -1, -1, 6),
    "conv_transpose1d": (3, 4, 6, -2, 5, 7),
    "conv_transpose2d": (3, 4, 7, -2, 5, 6),
    "conv_transpose3d": (3, 4, 7, -2, 5, 6),
    "cudnn_convolution": (3, 2, 4, -1, -1, 5),
    "miopen_convolution": (4, 3, 5, -1, -1, 6),
    "mkldnn_convolution": (4, 3, 5, -1, -1, 6),
    "convolution_backward": (4, 5, 6, 7, 8, 9),
}
CONV_OPS = frozenset(_CONV)


def _expand(values: list[int] | None, n: int, default: int) -> list[int]:
    if not values:
        return [default] * n
    return values * n if len(values) == 1 else values[:n]


def conv_model(op: str, a: OpArgs) -> OpModel | None:
    """Direct convolution FLOPs ``2 * N * Cout * prod(out) * Cin/groups * prod(kernel)`` (+ a
    bias add per output); bytes: input, weight, bias read and output written once.
    ``convolution_backward``: the data and weight gradients, twice the forward GEMM work."""
    pos = _CONV[op]
    backward = op == "convolution_backward"
    ix, iw = (1, 2) if backward else (0, 1)
    x, w = a.shape(ix), a.shape(iw)
    bpe = a.bpe(ix)
    if not x or not w or len(x) < 3 or len(x) != len(w) or bpe is None:
        return None
    nsp = len(x) - 2
    stride = _expand(a.ints(pos[0]), nsp, 1)
    padding = _expand(a.ints(pos[1]), nsp, 0)
    dilation = _expand(a.ints(pos[2]), nsp, 1)
    transposed = pos[3] == -2 or (pos[3] >= 0 and a.flag(pos[3]))
    out_pad = _expand(a.ints(pos[4]) if pos[4] >= 0 else None, nsp, 0)
    groups_v = a.ints(pos[5]) if pos[5] >= 0 else None
    groups = groups_v[0] if groups_v else 1
    kernel = w[2:]
    if backward:
        go = a.shape(0)
        if not go or len(go) != len(x):
            return None
        out = go[2:]
    elif transposed:
        out = [
            (x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + out_pad[i] + 1
            for i in range(nsp)
        ]
    else:
        out = [(x[2 + i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nsp)]
    if any(o <= 0 for o in out):
        return None
    n, cin = x[0], x[1]
    cout = w[1] * groups if transposed else w[0]
    if transposed:
        macs = n * math.prod(x[2:]) * cin * (cout // max(groups, 1)) * math.prod(kernel)
    else:
        macs = n * math.prod(out) * cout * (cin // max(groups, 1)) * math.prod(kernel)
    out_elems = n * cout * math.prod(out)
    has_bias = (not backward) and a.shape(2) is not None
    flops = 2.0 * macs + (out_elems if has_bias else 0)
    data = (numel(x) + numel(w) + out_elems + (cout if has_bias else 0)) * bpe
    if backward:  # dX = conv_T(dY, W), dW = conv(X, dY): two GEMM-sized passes
        flops = 4.0 * macs
        data = (2 * out_elems + 2 * numel(x) + 2 * numel(w)) * bpe
    params = {"N": n, "C_in": cin, "C_out": cout, "in": x[2:], "out": out, "kernel": kernel, "groups": groups}
    params.update(stride=stride, padding=padding, transposed=transposed, backward=backward)
    return OpModel("conv", flops, data, a.dtype(ix), True, params)
