"""The verdict: one sentence on what a trace's time is made of, from the step-time attribution.

The largest category names it ("Mostly host blocked on the device (70% of step time)"); when that
is one-time work, the sentence says what it was and what the steady state is made of, and a
trace of one-time work alone is called that ("Only one-time work: ...").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from neuron_explorer.analyzers import attribution
from neuron_explorer.analyzers.attribution import one_time, queued
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.finding import Finding
from neuron_explorer.trace.units import format_duration


def one_time_summary(
    frames: TraceFrames,
    attribution_table: pd.DataFrame,
    rank_steps: pd.DataFrame,
    steps: pd.DataFrame,
    step_stats: Mapping[str, Any],
) -> dict[str, Any]:
    """The one-time work of the trace as a rank sees it (the mean over ranks and their devices):
    ``one_time_ns``, ``wall_ns``, ``steady_ns``, ``kinds`` (ns per kind, largest first) and
    ``only`` (the trace holds one-time work and no steady state: ``one_time.only_one_time``)."""
    rs = rank_steps
    n_ranks = max(int(rs["rank"].nunique()), 1) if len(rs) else 1
    one = float(rs["one_time_ns"].sum()) / n_ranks if len(rs) else 0.0
    wall = float(rs["wall_ns"].sum()) / n_ranks if len(rs) else 0.0
    by_kind = attribution.one_time_by_kind(frames)
    total = float(sum(by_kind.values())) or 1.0
    kinds = {k: round(one * v / total) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]) if v > 0}
    return {
        "one_time_ns": round(one),
        "wall_ns": round(wall),
        "steady_ns": round(wall - one),
        "kinds": kinds,
        "only": one_time.only_one_time(attribution_table, steps),
        "steady_steps": int(step_stats.get("num_steps", 0)) - int(step_stats.get("num_warmup", 0)),
    }


def verdict(summary: Mapping[str, Any], top: Finding | None) -> str:
    """One sentence: the largest category of the step-time attribution and what to look at first.
    When one-time work is the largest, it says so, what it was, and what the steady state is
    made of; a trace of one-time work alone is called that."""
    labels = attribution.HOST_ONLY_LABELS if summary["device_types"] == ["cpu"] else attribution.CATEGORY_LABELS
    name = max(attribution.CATEGORY_NAMES, key=lambda c: summary[f"{c}_pct"])
    if name == "one_time":
        return _one_time_verdict(summary, labels, top)
    text = f"Mostly {labels[name]} ({summary[f'{name}_pct']:.0f}% of step time)"
    if top is not None and top.rule_id == "device_queue_wait" and name in ("host_blocked", "device_wait"):
        # the host blocks on a queue that waits on a dependency: name what the device waits on
        waits = {c: top.metrics.get(f"{c}_ns", {}).get("value", 0) for c in queued.WAIT_LABELS}
        on = queued.WAIT_LABELS[max(waits, key=lambda c: waits[c])]
        pct = top.metrics["queued_idle_pct"]["value"]
        text += (
            f", waiting on {on}"
            if name == "device_wait"
            else f", the device waiting on {on} with launched work queued ({pct:.0f}% of step time)"
        )
    if top is not None:
        text += f"; top issue: {top.title}"
    return text + "."


def _one_time_verdict(summary: Mapping[str, Any], labels: Mapping[str, str], top: Finding | None) -> str:
    """ "Mostly one-time work: 37.3 ms of 41.7 ms (graph capture 35.3 ms, ...); the steady state
    (4.4 ms) is mostly device computing (42% of it)", or "Only one-time work: ..." when what is
    left is no steady state (``one_time.only_one_time``)."""

    once = summary["one_time"]
    parts = ", ".join(f"{one_time.KIND_LABELS[k]} {format_duration(v)}" for k, v in once["kinds"].items())
    head = f"{format_duration(once['one_time_ns'])} of {format_duration(once['wall_ns'])}" + (
        f" ({parts})" if parts else ""
    )
    steady_pct = 100.0 - summary["one_time_pct"]
    if once["only"]:
        text = (
            f"Only one-time work: {head}; the trace holds no steady state to judge: profile steps after the "
            "warm-up (torch.profiler.schedule(wait=1, warmup=1, active=3))"
        )
    else:
        rest = max(attribution.STEADY_NAMES, key=lambda c: summary[f"{c}_pct"])
        text = (
            f"Mostly one-time work: {head}; the steady state ("
            + (
                f"{once['steady_steps']} step{'s' if once['steady_steps'] != 1 else ''}, "
                if once["steady_steps"] > 0
                else ""
            )
            + f"{format_duration(once['steady_ns'])}) is mostly "
            f"{labels[rest]} ({100.0 * summary[f'{rest}_pct'] / steady_pct:.0f}% of it)"
        )
    if top is not None:
        text += f"; top issue: {top.title}"
    return text + "."
