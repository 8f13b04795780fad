"""FLOP and byte models of the vector-unit ops: elementwise, reductions, softmax, norms, embedding.

These ops are memory-bound on every accelerator, so what matters is the bytes: every input
tensor read once and the output written once, as TraceLens counts them. FLOPs are one per
output element for elementwise math (none for pure data movement), one per input element for
reductions, and TraceLens's constants for softmax (docs/perf.md). The aten norms are in
``models_norm``; custom fused norm kernels are here.
"""

from __future__ import annotations

from neuron_explorer.analyzers.perf.models_dense import OpModel
from neuron_explorer.analyzers.perf.shapes import (
    SCALAR_TYPE_CODES,
    OpArgs,
    broadcast,
    bytes_per_element,
    canonical_dtype,
    numel,
)

UNARY = frozenset(
    [
        "abs",
        "neg",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sqrt",
        "rsqrt",
        "sin",
        "cos",
        "tan",
        "tanh",
        "sigmoid",
        "relu",
        "relu_",
        "gelu",
        "silu",
        "silu_",
        "erf",
        "erfinv",
        "reciprocal",
        "pow",
        "sign",
        "floor",
        "ceil",
        "round",
        "trunc",
        "frac",
        "clamp",
        "clamp_",
        "clamp_min",
        "clamp_min_",
        "clamp_max_",
        "clamp_max",
        "hardtanh",
        "leaky_relu",
        "elu",
        "selu",
        "softplus",
        "mish",
        "hardswish",
        "hardsigmoid",
        "logical_not",
        "bitwise_not",
        "nan_to_num",
        "square",
        "neg_",
        "exp_",
        "sqrt_",
        "rsqrt_",
        "sigmoid_",
        "tanh_",
        "gelu_",
        "mul_scalar",
        "native_dropout",
        "dropout",
        "isnan",
        "isinf",
    ]
)
BINARY = frozenset(
    [
        "add",
        "sub",
        "mul",
        "div",
        "rsub",
        "maximum",
        "minimum",
        "fmod",
        "remainder",
        "atan2",
        "eq",
        "ne",
        "lt",
        "gt",
        "le",
        "ge",
        "logical_and",
        "logical_or",
        "bitwise_and",
        "bitwise_or",
        "bitwise_xor",
        "add_",
        "sub_",
        "mul_",
        "div_",
        "pow_",
        "masked_fill",
        "masked_fill_",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "sigmoid_backward",
        "tanh_backward",
        "hardtanh_backward",
        "leaky_relu_backward",
        "where",
        "addcmul",
        "addcmul_",
        "addcdiv",
        "addcdiv_",
        "lerp",
        "lerp_",
        "floor_divide",
        "xlogy",
        "copysign",
        "hypot",
    ]
)
#: The binary ops that take three tensor inputs; every other one takes two (and its ``out=``).
THREE_INPUTS = frozenset(["addcdiv", "addcdiv_", "addcmul", "addcmul_", "lerp", "lerp_", "where"])
COPY = frozenset(["copy", "copy_", "_to_copy", "clone", "contiguous", "_copy_from", "_copy_from_and_resize"])
FILL = frozenset(
    ["fill_", "zero_", "zeros_like", "ones_like", "full_like", "normal_", "uniform_", "random_", "bernoulli_"]
)
REDUCE = frozenset(
    [
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "prod",
        "norm",
        "linalg_vector_norm",
        "var",
        "std",
        "var_mean",
        "std_mean",
        "any",
        "all",
        "logsumexp",
        "cumsum",
        "cumprod",
        "nansum",
        "count_nonzero",
    ]
)
_COMPARE = frozenset(["eq", "ne", "lt", "gt", "le", "ge", "logical_and", "logical_or", "logical_not", "isnan", "isinf"])
SOFTMAX = frozenset(["softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"])
SOFTMAX_BWD = frozenset(["_softmax_backward_data", "_log_softmax_backward_data"])
GATHER = frozenset(["embedding", "index_select", "gather", "index", "embedding_dense_backward"])
CAT = frozenset(["cat", "stack", "_cat"])


def _vector(category: str, flops: float, data: float, dtype: str | None, **params: object) -> OpModel:
    return OpModel(category, float(flops), float(data), dtype, False, dict(params))


def elementwise_model(op: str, a: OpArgs) -> OpModel | None:
    tensors = a.tensors()
    if not tensors:
        return None
    i0 = tensors[0]
    s0, b0 = a.shape(i0), a.bpe(i0)
    if s0 is None or b0 is None:
        return None
    if op in COPY:
        # copy_(self, src): read src, write self; clone / _to_copy: read self, write a copy
        if op in ("copy", "copy_") and len(tensors) >= 2:
            return _vector("elementwise", numel(s0), numel(s0) * (b0 + (a.bpe(tensors[1]) or b0)), a.dtype(i0))
        out_bpe = b0
        if op == "_to_copy":  # _to_copy(self, dtype=...): the dtype as a ScalarType code
            code = a.value(1)
            out_bpe = (bytes_per_element(SCALAR_TYPE_CODES.get(code)) if code and code.isdigit() else None) or b0
        return _vector("elementwise", numel(s0), numel(s0) * (b0 + out_bpe), a.dtype(i0))
    if op in FILL:
        return _vector("elementwise", 0, numel(s0) * b0, a.dtype(i0))
    if op in UNARY or (op not in BINARY and len(tensors) == 1):
        out_bpe = 1 if op in _COMPARE else b0
        return _vector("elementwise", numel(s0), numel(s0) * (b0 + out_bpe), a.dtype(i0))
    # binary / ternary: inputs read at their own size, output at the broadcast size; a tensor
    # past a two-input op's inputs is its ``out=`` argument: written, not read (mul.out)
    if op not in THREE_INPUTS and len(tensors) > 2:
        tensors = tensors[:2]
    out = s0
    read = 0.0
    for i in tensors:
        s = a.shape(i)
        if s is None:
            continue
        out = broadcast(out, s)
        read += a.nbytes(i)
    out_bpe = 1 if op in _COMPARE else b0
    return _vector("elementwise", numel(out), read + numel(out) * out_bpe, a.dtype(i0))


def reduction_model(op: str, a: OpArgs) -> OpModel | None:
    s, b = a.shape(0), a.bpe(0)
    if s is None or b is None:
        return None
    n_in = numel(s)
    if op in ("cumsum", "cumprod"):
        n_out = n_in
    else:
        dims = a.ints(1)
        keep = set()
        if dims is not None and len(s):
            keep = {d % len(s) for d in dims}
            n_out = numel([x for i, x in enumerate(s) if i not in keep]) if keep else 1
        else:
            n_out = 1  # a full reduction (or dims we could not read)
    out_bpe = 8 if op in ("argmax", "argmin") else (1 if op in ("any", "all") else b)
    return _vector(
        "reduction", n_in, n_in * b + n_out * out_bpe, a.dtype(0), num_input_elems=n_in, num_output_elems=n_out
    )


def softmax_model(op: str, a: OpArgs) -> OpModel | None:
    """TraceLens: ``3*N`` FLOPs (exp, sum, divide) and input + output bytes; the backward twice that."""
    if op in SOFTMAX_BWD:
        s, b = a.shape(0), a.bpe(0)
        if s is None or b is None:
            return None
        return _vector("reduction", 6 * numel(s), 4 * numel(s) * b, a.dtype(0), backward=True)
    s, b = a.shape(0), a.bpe(0)
    if s is None or b is None:
        return None
    return _vector("reduction", 3 * numel(s), 2 * numel(s) * b, a.dtype(0), backward=False)


def custom_norm_model(op: str, a: OpArgs) -> OpModel | None:
    """Custom fused norm kernels (``_C::rms_norm``, ``_C::fused_add_rms_norm``): the largest
    tensor is x; every full-size tensor is read once and the first written back, the smaller
    ones (the weight) read once; 4 FLOPs per element as an RMS norm with its weight."""
    tensors = a.tensors()
    if not tensors:
        return None
    big = max(tensors, key=lambda i: numel(a.shape(i) or []))
    s, b = a.shape(big), a.bpe(big)
    if s is None or b is None:
        return None
    n = numel(s)
    small = sum(a.nbytes(i) for i in tensors if numel(a.shape(i) or []) < n)
    same = sum(1 for i in tensors if numel(a.shape(i) or []) == n)
    return _vector("norm", 4 * n, (same + 1) * n * b + small, a.dtype(big))


def gather_model(op: str, a: OpArgs) -> OpModel | None:
    """embedding / index_select / gather: the gathered rows read and written, indices read."""
    tensors = a.tensors()
    if len(tensors) < 2:
        return None
    if op == "embedding_dense_backward":  # grad rows read, the weight gradient written
        g, b = a.shape(0), a.bpe(0)
        if g is None or b is None:
            return None
        rows = a.number(2) or 0
        return _vector("elementwise", numel(g), numel(g) * b + a.nbytes(1) + rows * g[-1] * b, a.dtype(0))
    w = tensors[0]
    idx = tensors[-1]
    sw, si, b = a.shape(w), a.shape(idx), a.bpe(w)
    if sw is None or si is None or b is None:
        return None
    if op == "embedding":
        out = numel(si) * sw[-1]
    elif op == "index_select":
        dim = int(a.number(1) or 0) % max(len(sw), 1)
        out = numel(si) * numel(sw) // max(sw[dim], 1)
    else:
        out = numel(si)
    return _vector("elementwise", 0, 2 * out * b + a.nbytes(idx), a.dtype(w))


def cat_model(op: str, a: OpArgs) -> OpModel | None:
    """cat / stack: every input read, the result written. Kineto types a TensorList argument
    as ``TensorList`` without its element type, so without one the bytes are unknown: no model."""
    if not a.shapes or not isinstance(a.shapes[0], list):
        return None
    parts = a.shapes[0]
    dtypes = [t for t in a.types if canonical_dtype(t)]
    if not dtypes or not parts or not all(isinstance(p, list) for p in parts):
        return None
    b = bytes_per_element(dtypes[0]) or 0
    total = sum(numel(p) for p in parts)
    return _vector("elementwise", 0, 2 * total * b, canonical_dtype(dtypes[0]))
