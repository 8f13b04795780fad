"""Helpers of the Trainium rules: the Neuron device list and events, interval unions."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped

_PCORE_STRIDE = 10_000


def devices(ctx: RuleContext) -> list[dict[str, Any]]:
    devices = (ctx.frames.metadata.get("neuron") or {}).get("devices") or []
    if not devices:
        raise RuleSkipped("needs a Neuron device profile")
    return devices


def neuron_events(ctx: RuleContext) -> pd.DataFrame:
    """The trace's Neuron device events with their core-local stream (memoized: five rules ask)."""

    def compute() -> pd.DataFrame:
        dev = ctx.frames.device
        dev = dev[(dev["device_type"] == "neuron").to_numpy()]  # (on the categories: no string per event)
        return dev.assign(local_stream=dev["stream"] % _PCORE_STRIDE)

    return ctx.frames.memo("neuron_events", compute)


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged, sorted intervals."""
    if len(starts) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = np.asarray(starts, np.int64)[order], np.asarray(ends, np.int64)[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_end[:-1]
    group = np.cumsum(new) - 1
    return s[new], np.maximum.reduceat(run_end, np.nonzero(new)[0])[: group.max() + 1]


def covered(us: np.ndarray, ue: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Length of the union of intervals before each time in ``t`` (vectorized)."""
    if us.size == 0:
        return np.zeros(len(t), np.int64)
    lengths = np.concatenate([[0], np.cumsum(ue - us)])
    i = np.searchsorted(us, t, side="right")  # intervals starting at or before t
    full = lengths[np.maximum(i - 1, 0)]
    partial = np.where(i > 0, np.clip(t - us[np.maximum(i - 1, 0)], 0, (ue - us)[np.maximum(i - 1, 0)]), 0)
    return np.where(i > 0, full + partial, 0)


def overlap(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> int:
    """Length of the intersection of two merged interval sets."""
    s, e = a
    if s.size == 0 or b[0].size == 0:
        return 0
    return int(np.sum(covered(*b, e) - covered(*b, s)))


def top_lines(events: pd.DataFrame, limit: int = 5) -> list[dict[str, Any]]:
    ev = events[events["src_line"] >= 0]
    if not len(ev):
        return []
    g = (
        ev.groupby(["src_file", "src_line", "src_func"], observed=True, dropna=False)["dur_ns"]
        .sum()
        .sort_values(ascending=False)
        .head(limit)
    )
    return [
        {"file": str(f), "line": int(ln), "func": None if pd.isna(fn) else str(fn), "ns": int(ns)}
        for (f, ln, fn), ns in g.items()
    ]


def spill_streams(ctx: RuleContext, device: int) -> list[int]:
    """DMA queues that carry spill traffic: by their type (q_type) when the profile gives one,
    by their name only when it does not (``qSyncSpillReload0`` with type ``weights`` is not)."""
    out = []
    for st in (ctx.frames.metadata.get("neuron") or {}).get("streams") or []:
        if st.get("type") != "dma" or st.get("device") != device:
            continue
        qtype = st.get("queue_type")
        label = str(qtype if qtype else st.get("name", ""))
        if re.search("spill|reload", label, re.I):
            out.append(int(st["stream"]))
    return out


#: DMA queue types that are the runtime's, not the user's (measured on trn2 and the inf2 matmul
#: exports: queue 14, ``queue_type`` instruction, is the instruction fetch).
RUNTIME_QUEUE_TYPES = frozenset({"instruction"})


def runtime_streams(ctx: RuleContext, device: int) -> list[int]:
    """DMA queues the runtime drives (instruction fetch), by the type their rows carry."""
    return [
        int(st["stream"])
        for st in (ctx.frames.metadata.get("neuron") or {}).get("streams") or []
        if st.get("type") == "dma"
        and st.get("device") == device
        and str(st.get("queue_type") or "").lower() in RUNTIME_QUEUE_TYPES
    ]


def metric_value(d: dict[str, Any], key: str) -> float | None:
    v = (d.get("metrics") or {}).get(key)
    return float(v) if isinstance(v, (int, float)) else None


def runs(edges: np.ndarray, mask: np.ndarray) -> list[list[int]]:
    if not mask.any():
        return []
    m = np.concatenate([[False], mask, [False]]).astype(np.int8)
    d = np.diff(m)
    starts, ends = np.nonzero(d == 1)[0], np.nonzero(d == -1)[0]
    return [[int(edges[s]), int(edges[e])] for s, e in zip(starts, ends)]


def metric_text(d: dict[str, Any], key: str) -> str | None:
    v = (d.get("metrics") or {}).get(key)
    return v if isinstance(v, str) and v else None


def kernel_is_nki(d: dict[str, Any]) -> bool | None:
    """True where no instruction carries an HLO name (an NKI or hand-written kernel: compiler
    flags and HLO-level advice do not reach it), None where the profile cannot say."""
    named = metric_value(d, "hlo_named_instructions")
    if named is None or not metric_value(d, "matmul_instructions"):
        return None
    return named == 0


def matmul_dtype_words(d: dict[str, Any]) -> tuple[str, str]:
    """(evidence, advice) about the dtype the MATMULs read (collectors/neuron/dtypes.py). A
    16-bit matmul already runs at the Tensor engine's full rate, fp32 at a quarter of it, so
    casting is advised for fp32 operands only, and "unknown" is said where no operand names one."""
    n = int(metric_value(d, "matmul_instructions") or 0)
    if not n:
        return "", ""
    known = int(metric_value(d, "matmul_dtype_known_instructions") or 0)
    fp32 = int(metric_value(d, "matmul_fp32_instructions") or 0)
    nki = kernel_is_nki(d)
    cast_nki = "load the tiles as bf16 (nl.load(tensor, dtype=nl.bfloat16)); the matmul still accumulates in fp32 PSUM"
    cast_xla = (
        "compile with neuronx-cc --auto-cast matmult --auto-cast-type bf16, or run the model in bf16 "
        "(model.to(torch.bfloat16))"
    )
    cast = cast_nki if nki else cast_xla if nki is False else f"in NKI, {cast_nki}; for a compiled model, {cast_xla}"
    if not known:
        return (
            f"The profile does not say what dtype its {n:,} MATMULs read (no src=<dtype> in their operands).",
            f"If they read fp32 (a quarter of the 16-bit rate), move them to bf16 where the accuracy allows: {cast}.",
        )
    if 2 * fp32 >= known:
        fp32_ns, all_ns = metric_value(d, "matmul_fp32_ns"), metric_value(d, "matmul_ns")
        share = f", {fp32_ns / 1e3:,.1f} us of their {all_ns / 1e3:,.1f} us" if fp32_ns and all_ns else ""
        return (
            f"{fp32:,} of {known:,} MATMULs read fp32 operands (src=fp32{share}), which the Tensor engine runs at a "
            "quarter of its 16-bit rate.",
            f"Move the fp32 matmuls to bf16 where the accuracy allows: {cast}.",
        )
    dtype = metric_text(d, "matmul_dtype") or "16-bit"
    return (
        f"{known - fp32:,} of {known:,} MATMULs already read 16-bit operands (mostly {dtype}, the Tensor engine's "
        "full rate): the headroom is in their shape and feeding, not their dtype.",
        "",
    )
