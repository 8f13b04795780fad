"""FLOP and byte models of the normalizations: layer, batch, group, instance and RMS norm.

The formulas are TraceLens's (``PerfModel/perf_model.py``, class ``Normalization`` and its
subclasses), written from its description: with N elements and C normalized channels,

- forward FLOPs ``6*C + 2*N`` (per-channel scale and shift terms, then a multiply-add per
  element) plus ``3*N`` when the statistics are computed from the batch (training, and always
  for layer and group norm); bytes: x read, y written, and C-sized tensors (mean and variance;
  weight and bias when present; the running statistics written back when training);
- backward: ``4*N`` for the dot products, plus ``5*N`` for the input gradient in training
  (``2*N`` without it), and the gradient tensors' bytes;
- RMS norm: ``(N/C) * (2*C + 2) + N * (2 if weighted else 1)`` FLOPs, x read and y written plus
  the weight; its backward as TraceLens counts it.
Where TraceLens reads a flag as ``bool('False') == True`` (batch norm's ``training``) we parse
the flag; docs/perf.md lists the differences.
"""

from __future__ import annotations

import math

from neuron_explorer.analyzers.perf.models_dense import OpModel
from neuron_explorer.analyzers.perf.shapes import OpArgs, numel

#: op -> (kind, position of x, position of the weight, position of the training flag or -1)
_NORMS: dict[str, tuple[str, int, int, int]] = {
    "layer_norm": ("layer", 0, 2, -1),
    "native_layer_norm": ("layer", 0, 2, -1),
    "native_layer_norm_backward": ("layer_bwd", 1, 5, -1),
    "batch_norm": ("batch", 0, 1, 5),
    "native_batch_norm": ("batch", 0, 1, 5),
    "_native_batch_norm_legit": ("batch", 0, 1, 5),
    "_native_batch_norm_legit_no_training": ("batch", 0, 1, -2),
    "_batch_norm_impl_index": ("batch", 0, 1, 5),
    "cudnn_batch_norm": ("batch", 0, 1, 5),
    "miopen_batch_norm": ("batch", 0, 1, 5),
    "native_batch_norm_backward": ("batch_bwd", 1, 2, 7),
    "cudnn_batch_norm_backward": ("batch_bwd", 0, 2, -1),
    "miopen_batch_norm_backward": ("batch_bwd", 0, 2, -1),
    "instance_norm": ("batch", 0, 1, 5),
    "group_norm": ("group", 0, 2, -1),
    "native_group_norm": ("group", 0, 1, -1),
    "native_group_norm_backward": ("group_bwd", 1, 4, -1),
    "rms_norm": ("rms", 0, 2, -1),
    "_fused_rms_norm": ("rms", 0, 2, -1),
    "_fused_rms_norm_backward": ("rms_bwd", 1, 4, -1),
}
NORM_OPS = frozenset(_NORMS)


def forward_flops(n: float, c: float, training: bool) -> float:
    return 6 * c + (3 * n if training else 0) + 2 * n


def forward_bytes(n: float, c: float, affine: bool, bias: bool, training: bool, bpe: float) -> float:
    tensors = 2 + (1 if affine else 0) + (1 if affine and bias else 0) + (2 if training else 0)
    return 2 * n * bpe + tensors * c * bpe


def backward_flops(n: float, c: float, training: bool, grad_input: bool) -> float:
    per_elem = 4 + ((5 if training else 0) if grad_input else 2)
    return c * (0 if training else 3) + per_elem * n


def backward_bytes(n: float, c: float, affine: bool, bias: bool, training: bool, grad_input: bool, bpe: float) -> float:
    data = n * bpe + n * bpe * (2 if grad_input and training else 1)
    data += c * bpe if training else 0
    if affine:
        data += c * bpe + (c * bpe * (2 if bias else 1) if training else 0)
    return data


def _mask(a: OpArgs, i: int, size: int) -> list[bool]:
    v = a.value(i)
    if not v:
        return [True] * size
    parts = [p.strip().lower() for p in v.strip("[]").split(",")]
    return [p in ("true", "1") for p in parts] + [True] * (size - len(parts))


def norm_model(op: str, a: OpArgs) -> OpModel | None:
    kind, ix, iw, itrain = _NORMS[op]
    x, bpe = a.shape(ix), a.bpe(ix)
    if not x or bpe is None:
        return None
    n = float(numel(x))
    affine = a.shape(iw) is not None
    if kind in ("layer", "rms"):
        shape = a.ints(1)
        c = float(math.prod(shape)) if shape else float(x[-1])
        if kind == "rms":
            flops = (n / c) * (2 * c + 2) + n * (2 if affine else 1)
            return OpModel("norm", flops, 2 * n * bpe + (c * bpe if affine else 0), a.dtype(ix), False, {"C": c})
        bias = a.shape(3) is not None
        return OpModel(
            "norm",
            forward_flops(n, c, True),
            forward_bytes(n, c, affine, bias, True, bpe),
            a.dtype(ix),
            False,
            {"C": c},
        )
    if kind in ("batch", "group"):
        c = float(x[1]) if len(x) > 1 else 1.0
        training = True if itrain == -1 else (False if itrain == -2 else a.flag(itrain, default=True))
        bias = a.shape(iw + 1) is not None
        params = {"C": c, "training": training}
        data = forward_bytes(n, c, affine, bias, training, bpe)
        return OpModel("norm", forward_flops(n, c, training), data, a.dtype(ix), False, params)
    if kind == "rms_bwd":
        shape = a.ints(2)
        c = float(math.prod(shape)) if shape else float(x[-1])
        mask = _mask(a, 5, 2)
        flops = (n if affine else 0) + n + (6 * n if mask[0] else 0)
        if mask[1] and affine:
            flops += n + (n if n / c > 1 else 0)
        data = 3 * n * bpe + (2 * c * bpe if affine else 0)
        return OpModel("norm", flops, data, a.dtype(ix), False, {"C": c, "backward": True})
    # layer / batch / group backward
    if kind == "layer_bwd":
        shape = a.ints(2)
        c = float(math.prod(shape)) if shape else float(x[-1])
        mask = _mask(a, 7, 3)
        training, affine, bias, grad_input = True, mask[1], mask[2], mask[0]
    elif kind == "group_bwd":
        groups = a.ints(8)
        c = float(x[1]) / (groups[0] if groups else 1)
        mask = _mask(a, 9, 3)
        training, bias, grad_input = True, True, mask[0]
    else:  # batch norm backward; cuDNN/MIOpen run it for training only
        c = float(x[1]) if len(x) > 1 else 1.0
        training = True if itrain == -1 else a.flag(itrain, default=True)
        bias, grad_input = True, True
    params = {"C": c, "training": training, "backward": True}
    flops = backward_flops(n, c, training, grad_input)
    data = backward_bytes(n, c, affine, bias, training, grad_input, bpe)
    return OpModel("norm", flops, data, a.dtype(ix), False, params)
