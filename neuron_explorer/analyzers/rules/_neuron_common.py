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
