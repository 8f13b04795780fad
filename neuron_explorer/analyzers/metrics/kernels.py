"""Kernel breakdown: device time per kernel name, with a category (GEMM, attention, conv, ...).

Classification runs on the distinct kernel names only (a trace has thousands of events but a
few hundred names), then maps back to the events through the categorical codes.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames
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


def kernel_breakdown(frames: TraceFrames) -> pd.DataFrame:
    """Per kernel name: category, device_type, count, total/mean/min/max ns and % of device time."""
    dev = frames.device
    cols = ["name", "category", "device_type", "count", "total_ns", "mean_ns", "min_ns", "max_ns", "pct"]
    if not len(dev):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c == "pct" else "object") for c in cols})
    # group on the categorical codes; a name has one category, so it is taken per group
    df = pd.DataFrame(
        {
            "name": dev["name"],
            "device_type": dev["device_type"],
            "dur_ns": dev["dur_ns"],
            "category": frames.device_category.to_numpy(),
        }
    )
    g = (
        df.groupby(["name", "device_type"], observed=True, sort=False)
        .agg(
            category=("category", "first"),
            count=("dur_ns", "count"),
            total_ns=("dur_ns", "sum"),
            mean_ns=("dur_ns", "mean"),
            min_ns=("dur_ns", "min"),
            max_ns=("dur_ns", "max"),
        )
        .reset_index()
    )
    g["name"] = g["name"].astype(str)
    g["device_type"] = g["device_type"].astype(str)
    total = g["total_ns"].sum()
    g["mean_ns"] = g["mean_ns"].round().astype("int64")
    g["pct"] = 100.0 * g["total_ns"] / total if total else 0.0
    return g.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)[cols]


def category_breakdown(kernels: pd.DataFrame) -> pd.DataFrame:
    """Kernel time per category: count, total_ns, pct."""
    if not len(kernels):
        return pd.DataFrame({"category": [], "count": [], "total_ns": [], "pct": []})
    g = (
        kernels.groupby("category", observed=True)
        .agg(count=("count", "sum"), total_ns=("total_ns", "sum"))
        .reset_index()
    )
    total = g["total_ns"].sum()
    g["pct"] = 100.0 * g["total_ns"] / total if total else 0.0
    return g.sort_values("total_ns", ascending=False).reset_index(drop=True)


HTA_TYPES = ("COMPUTATION", "COMMUNICATION", "MEMORY")


_HTA_COMM = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY = re.compile(r"^(?:Memcpy|Memset|dma)")


def hta_kernel_type(events: pd.DataFrame) -> np.ndarray:
    """HTA's kernel type of each device event, by HTA's own name rules (``^nccl.*Kernel``:
    COMMUNICATION; ``^Memcpy|^Memset|^dma``: MEMORY; the rest COMPUTATION) plus our event kinds
    (collective, memcpy, memset), which name the same events on devices whose names differ."""
    from neuron_explorer.analyzers.core.context import name_mask

    kind = events["kind"].astype(str).to_numpy()
    comm = name_mask(events["name"], _HTA_COMM) | (kind == Kind.COLLECTIVE)
    memory = name_mask(events["name"], _HTA_MEMORY) | (kind == Kind.MEMCPY) | (kind == Kind.MEMSET)
    return np.where(comm, "COMMUNICATION", np.where(memory, "MEMORY", "COMPUTATION"))


def kernel_type_breakdown(events: pd.DataFrame) -> pd.DataFrame:
    """Device time by HTA kernel type, overlap counted once: for every instant, the set of types
    running (e.g. "COMPUTATION overlapping COMMUNICATION") gets the time. Per rank: kernel_type,
    total_ns, pct. ``events`` are device events (``breakdown.hta_device_events``)."""
    cols = ["rank", "kernel_type", "total_ns", "pct"]
    if not len(events):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    types = hta_kernel_type(events)
    bit = np.select([types == t for t in HTA_TYPES], [1, 2, 4]).astype(np.int64)
    start = events["start_ns"].to_numpy()
    end = start + events["dur_ns"].to_numpy()
    rank = events["rank"].to_numpy()
    # sweep: +1/-1 per type at each boundary; the running counts give the active set
    t = np.concatenate([start, end])
    r = np.concatenate([rank, rank])
    b = np.concatenate([bit, bit])
    sign = np.concatenate([np.ones(len(start), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((t, r))
    t, r, b, sign = t[order], r[order], b[order], sign[order]
    counts = np.stack([np.cumsum(np.where(b == k, sign, 0)) for k in (1, 2, 4)], axis=1)
    state = (counts[:, 0] > 0) * 1 + (counts[:, 1] > 0) * 2 + (counts[:, 2] > 0) * 4
    dt = np.zeros(len(t), np.int64)
    same = r[1:] == r[:-1]
    dt[:-1] = np.where(same, t[1:] - t[:-1], 0)
    df = pd.DataFrame({"rank": r, "state": state, "dt": dt})
    df = df[df["state"] > 0]
    g = df.groupby(["rank", "state"], as_index=False)["dt"].sum()
    names = {s: " overlapping ".join(n for k, n in zip((1, 2, 4), HTA_TYPES) if s & k) for s in range(1, 8)}
    g["kernel_type"] = g["state"].map(names)
    g = g.rename(columns={"dt": "total_ns"})
    g["pct"] = 100.0 * g["total_ns"] / g.groupby("rank")["total_ns"].transform("sum")
    return g.sort_values(["rank", "total_ns"], ascending=[True, False]).reset_index(drop=True)[cols]
