"""Which model an op gets, its category, and which op owns the kernels of a composite op.

``model(name, args)`` dispatches on the op name (namespace stripped: ``aten::addmm`` ->
``addmm``); ``category_of(name)`` classifies any op name, modelled or not, into the categories
of ``CATEGORIES``. ``ROLLUP_PRIORITY`` names the composite ops that own the kernels launched by
the ops nested in them (``_scaled_dot_product_flash_attention`` owns the flash kernel that its
inner ``_flash_attention_forward`` launches), as TraceLens attributes them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from neuron_explorer.analyzers.perf import models_memory as mem
from neuron_explorer.analyzers.perf.models_dense import (
    ATTENTION_OPS,
    CONV_OPS,
    OpModel,
    attention_model,
    conv_model,
    gemm_model,
)
from neuron_explorer.analyzers.perf.models_norm import NORM_OPS, norm_model
from neuron_explorer.analyzers.perf.shapes import OpArgs

#: Op categories of the op_perf table, in report order.
CATEGORIES = ("gemm", "attention", "conv", "elementwise", "reduction", "norm", "communication", "other")

GEMM_OPS = frozenset(["mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_scaled_mm", "_scaled_grouped_mm"])

ModelFunc = Callable[[str, OpArgs], "OpModel | None"]


def _dispatch() -> dict[str, ModelFunc]:
    table: dict[str, ModelFunc] = {}
    for names, fn in (
        (GEMM_OPS, gemm_model),
        (ATTENTION_OPS, attention_model),
        (CONV_OPS, conv_model),
        (mem.UNARY | mem.BINARY | mem.COPY | mem.FILL, mem.elementwise_model),
        (mem.REDUCE, mem.reduction_model),
        (mem.SOFTMAX | mem.SOFTMAX_BWD, mem.softmax_model),
        (NORM_OPS, norm_model),
        (mem.GATHER, mem.gather_model),
        (mem.CAT, mem.cat_model),
    ):
        for n in names:
            table[n] = fn
    return table


_MODELS = _dispatch()
_CUSTOM_NORM = re.compile(r"rms_?norm|layer_?norm", re.I)


def short_name(name: str) -> str:
    """``aten::addmm`` -> ``addmm``; ``aten::add.Tensor`` -> ``add``; custom ops keep their namespace."""
    base = name[6:] if name.startswith("aten::") else name
    return base.split(".", 1)[0] if name.startswith("aten::") else base


def model(name: str, args: OpArgs | None) -> OpModel | None:
    """FLOPs and bytes of one call of ``name`` with these arguments; None when there is no
    model for the op or its arguments were not recorded."""
    if args is None:
        return None
    op = short_name(name)
    fn = _MODELS.get(op)
    if fn is None and _CUSTOM_NORM.search(op):
        fn = mem.custom_norm_model
    if fn is None:
        return None
    try:
        return fn(op, args)
    except (IndexError, TypeError, ValueError, ZeroDivisionError):
        return None  # arguments not in the shape the model expects: no model, not a guess


_NAME_CATEGORIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "communication",
        re.compile(
            r"^c10d::|^nccl|record_param_comms|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast_", re.I
        ),
    ),
    ("attention", re.compile(r"attention|attn|sdpa|flash_fwd|flash_bwd|fmha", re.I)),
    ("conv", re.compile(r"conv", re.I)),
    ("norm", re.compile(r"norm(?!al_)", re.I)),
    (
        "gemm",
        re.compile(r"(?:^|_|::)(?:mm|bmm|addmm|baddbmm|matmul|linear|gemm|scaled_mm)(?:$|_)|moe|grouped_mm", re.I),
    ),
    (
        "reduction",
        re.compile(r"softmax|reduce|^aten::(?:sum|mean|amax|amin|max|min|argmax|argmin|var|std|topk|sort)", re.I),
    ),
)


def category_of(name: str) -> str | None:
    """The category an op name implies, or None when the name alone does not say (the
    kernels' own category is used then)."""
    op = short_name(name)
    if op in GEMM_OPS:
        return "gemm"
    if op in ATTENTION_OPS:
        return "attention"
    if op in CONV_OPS:
        return "conv"
    if op in NORM_OPS:
        return "norm"
    if op in mem.REDUCE or op in mem.SOFTMAX or op in mem.SOFTMAX_BWD:
        return "reduction"
    if op in mem.UNARY or op in mem.BINARY or op in mem.COPY or op in mem.FILL or op in mem.GATHER or op in mem.CAT:
        return "elementwise"
    for category, rx in _NAME_CATEGORIES:
        if rx.search(name):
            return category
    return None


#: Composite ops that own the kernels of the ops nested in them; the highest priority on a
#: kernel's op chain wins (ties: the innermost).
ROLLUP_PRIORITY: dict[str, int] = {
    **{f"aten::{n}": 3 for n in ATTENTION_OPS if n.startswith("_scaled_dot_product")},
    **{f"aten::{n}": 2 for n in ATTENTION_OPS if n.startswith(("_flash", "_efficient"))},
    "aten::scaled_dot_product_attention": 1,
    "aten::convolution": 3,
    "aten::convolution_backward": 3,
    "aten::_convolution": 2,
    "aten::embedding_dense_backward": 3,
    # norms own the layout copies and helper kernels they launch (TraceLens counts every
    # descendant kernel of a norm op); the dispatched implementation wins over the wrapper
    **{f"aten::{n}": 3 for n in NORM_OPS if n.startswith(("native_", "cudnn_", "miopen_", "_native", "_fused"))},
    **{f"aten::{n}": 2 for n in ("layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm")},
    "aten::_batch_norm_impl_index": 2,
}

#: Kernel categories (``kernel_names.classify_name``) -> op categories, for kernels without an op.
KERNEL_CATEGORY = {
    "gemm": "gemm",
    "attention": "attention",
    "conv": "conv",
    "elementwise": "elementwise",
    "reduction": "reduction",
    "communication": "communication",
    "memory": "other",
    "other": "other",
}
