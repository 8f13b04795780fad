"""What a kernel's name says: its category (GEMM, attention, conv, ...) and whether it runs on
tensor cores.

Classification runs on the distinct kernel names only (a trace has thousands of events but a
few hundred names), then maps back to the events through the categorical codes.
``core.context`` caches the category of every device event (``TraceFrames.device_category``);
the kernel breakdown (``metrics.kernels``) and the rules read them from there.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from neuron_explorer.trace.schema import Kind

CATEGORIES = ("gemm", "attention", "conv", "elementwise", "reduction", "communication", "memory", "other")


# Order matters: the first pattern that matches names the category.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "communication",
        re.compile(
            r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|broadcast|sendrecv|ncclDevKernel", re.I
        ),
    ),
    ("memory", re.compile(r"^(?:memcpy|memset|dma)|copy_device_to", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa|mha_", re.I)),
    ("conv", re.compile(r"conv|winograd|cudnn::detail::implicit|implicit_convolve|dgrad|wgrad|fprop", re.I)),
    (
        "gemm",
        re.compile(
            r"gemm|cutlass|cublas|matmul|xmma|wgmma|nvjet|Cijk_|\bmm_|_mm\b|bmm|tensorop|hmma|s884|h884|s1688|h1688|16816|splitk|ampere_s|volta_s|turing_s|sm\d+_xmma",
            re.I,
        ),
    ),
    (
        "reduction",
        re.compile(
            r"reduce|reduction|softmax|norm|sum_|_sum|mean|argmax|argmin|topk|scan|triton_red|triton_per|cross_entropy|nll_loss|cumsum|max_pool|avg_pool|pool",
            re.I,
        ),
    ),
    (
        "elementwise",
        re.compile(
            r"elementwise|vectorized|unrolled|pointwise|triton_poi|fill|copy|cat_|index|gather|scatter|where|relu|gelu|silu|sigmoid|tanh|dropout|add|mul|div|sub|exp|pow|clamp|cast|embedding|adam|sgd|foreach|fused",
            re.I,
        ),
    ),
)


# Kernel names that run on tensor cores (NVIDIA: hmma/884/1688/16816/tensorop/xmma/wgmma/nvjet;
# AMD: MFMA in Tensile names). Used by the tensor-core rule.
TENSOR_CORE = re.compile(
    r"884|1688|16816|hmma|tensorop|xmma|wgmma|nvjet|\bwmma|_tc_|mfma|_MI\d+x\d+x\d+|bf16|bfloat16|fp16|f16|half|e4m3|e5m2|e2m1|fp8|fp4"
    r"|sm80_|sm90_|sm100|tma|gemmSN_TN_kernel_half|cutlass.*(?:h|bf)16",
    re.I,
)


def classify_name(name: str) -> str:
    for category, pattern in _PATTERNS:
        if pattern.search(name):
            return category
    return "other"


def kernel_categories(device: pd.DataFrame) -> pd.Series:
    """The category of every device event (one regex pass per distinct name)."""
    if not len(device):
        return pd.Series([], dtype="object")
    names = device["name"].astype("category")
    cats = names.cat.categories
    lookup = np.array([classify_name(str(n)) for n in cats] + ["other"], dtype=object)
    codes = names.cat.codes.to_numpy()
    out = lookup[np.where(codes < 0, len(cats), codes)]
    kind = device["kind"].astype(str).to_numpy()
    out = np.where(kind == Kind.COLLECTIVE, "communication", out)
    out = np.where((kind == Kind.MEMCPY) | (kind == Kind.MEMSET), "memory", out)
    return pd.Series(out, index=device.index, name="category")


#: fp32 kernels on the CUDA cores, whatever else their name says: ``ffma`` (fp32 fused multiply-add
#: instead of an MMA: ``sm80_xmma_gemm_f32f32_..._ffma_...``), cutlass ``simt`` kernels, ``sgemm``.
NOT_TENSOR_CORE = re.compile(r"ffma|simt|(?:^|_)sgemm", re.I)


def uses_tensor_cores(names: pd.Series) -> pd.Series:
    cats = names.astype("category")
    lookup = np.array(
        [bool(TENSOR_CORE.search(str(n))) and not NOT_TENSOR_CORE.search(str(n)) for n in cats.cat.categories] + [False]
    )
    codes = cats.cat.codes.to_numpy()
    return pd.Series(lookup[np.where(codes < 0, len(lookup) - 1, codes)], index=names.index)
