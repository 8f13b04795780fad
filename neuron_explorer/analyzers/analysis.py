"""``analyze(trace)``: every metric and every rule, computed once, in one ``Analysis``
(``analyzers.result``): the metric tables first, then the rules, then the summary.

The one module of ``analyzers/`` that reads ``rules/``; what compares whole analyses
(``diff/``, ``sweep``) sits above it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Mapping
from typing import Any

from neuron_explorer.analyzers import attribution, memory_live, perf, ranks, verdict
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.metrics import (
    breakdown,
    idle,
    kernels,
    launches,
    memory,
    neuron_summary,
    ops,
    overlap,
    source_lines,
    steps,
)
from neuron_explorer.analyzers.perf import DeviceSpec
from neuron_explorer.analyzers.result import Analysis, _critical_events, _critical_path
from neuron_explorer.trace.errors import AnalysisError
from neuron_explorer.trace.line_coverage import line_coverage
from neuron_explorer.trace.model import Trace


def analyze(
    trace: Trace,
    rules: Iterable[str] | None = None,
    thresholds: Mapping[str, float] | None = None,
    device_spec: DeviceSpec | str | None = None,
    frames: TraceFrames | None = None,
) -> Analysis:
    """Compute all metrics, then run the rules (all when ``rules`` is None; ids or families).

    ``thresholds`` overrides rule thresholds by ``"rule_id.name"`` (e.g. ``{"device_idle.idle_pct": 20}``).
    ``device_spec``: the device whose peaks the op roofline uses (a ``DeviceSpec``, a name from
    ``analyzers.perf.DEVICES`` or a TOML file); by default detected from the trace.
    ``frames``: the trace's ``TraceFrames`` when the caller already has them (``diff`` shares them).
    """
    from neuron_explorer.analyzers.rules import all_rules, run_rules

    registry = all_rules()
    selected = _select_rules(registry, rules)
    timings: dict[str, float] = {}
    frames = frames if frames is not None else TraceFrames(trace)

    def timed(name: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        value = fn(*args)
        timings[name] = time.perf_counter() - t0
        return value

    step_df = timed("steps", steps.step_table, frames)
    hta_events = timed("hta_events", breakdown.hta_device_events, frames)
    kernel_df = timed("kernels", kernels.kernel_breakdown, frames)
    a = Analysis(
        summary={},
        steps=step_df,
        step_stats=steps.step_summary(step_df),
        attribution=timed("attribution", attribution.step_attribution, frames),
        breakdown=timed("breakdown", breakdown.step_breakdown, frames),
        temporal=timed("temporal", breakdown.temporal_breakdown, frames, hta_events),
        idle=timed("idle", idle.idle_breakdown, frames, hta_events),
        kernels=kernel_df,
        kernel_categories=kernels.category_breakdown(kernel_df),
        kernel_types=kernels.kernel_type_breakdown(hta_events),
        ops=timed("ops", ops.op_table, frames),
        source_lines=timed("source_lines", source_lines.source_line_table, frames),
        memory=timed("memory", memory.memory_timeline, frames),
        memory_summary={},
        launches=timed("launches", launches.launch_table, frames),
        launch_summary={},
        overlap=timed("overlap", overlap.comm_overlap, frames),
    )
    a.neuron_operators = neuron_summary.operator_table(frames.metadata)
    a.neuron_summary = neuron_summary.summary_table(frames.metadata)
    a.neuron_engines = neuron_summary.engine_table(frames.metadata)
    a.op_perf, a.op_categories, a.perf_summary = timed("op_perf", perf.perf_tables, frames, device_spec)
    a.rank_steps = ranks.rank_steps(a.attribution)
    a.collective_ranks = timed("collectives", ranks.collective_ranks, frames)
    a.collectives = ranks.collectives(a.collective_ranks)
    a.collective_sizes = ranks.bandwidth_by_size(a.collectives)
    a.critical_path_source = functools.partial(_critical_path, frames)
    a.critical_events_source = functools.partial(_critical_events, frames)
    a.memory_summary = memory.memory_summary(frames, a.memory)
    live = timed("memory_live", memory_live.live_memory, frames, step_df)
    a.live_memory = live
    a.memory_at_peak = live.at_peak
    a.memory_live = memory_live.published_steps(live)
    a.memory_replay = live.replay
    a.memory_fragmentation = live.fragmentation
    a.launch_summary = launches.launch_summary(a.launches)
    t0 = time.perf_counter()
    a.findings, a.skipped = run_rules(a, frames, selected, dict(thresholds or {}))
    timings["rules"] = time.perf_counter() - t0
    a.rules_run = [r.id for r in selected]
    a.timings_s = timings
    a.summary = _summary(trace, frames, a)
    _name_the_critical_path(a)
    return a


def _name_the_critical_path(a: Analysis) -> None:
    """The verdict says what the critical path is made of, not only the largest category."""
    from neuron_explorer.analyzers.graph.critical import path_words

    words = path_words(a.critical_path)
    a.summary["critical_path"] = words
    if a.summary.get("device_profile_only"):
        # A Neuron device profile alone records no dependencies between its engines and queues
        # beyond their order: its gaps are semaphore waits the profile shows, not unexplained
        # waits, and the verdict reads the kernel window instead.
        return
    if words and a.summary.get("verdict"):
        v = str(a.summary["verdict"]).rstrip(".")
        a.summary["verdict"] = f"{v}; {words}."


def _select_rules(registry: Mapping[str, Any], wanted: Iterable[str] | None) -> list[Any]:
    if wanted is None:
        return list(registry.values())
    wanted = [w.strip() for w in wanted if w and w.strip()]
    families = {r.family for r in registry.values()}
    unknown = [w for w in wanted if w not in registry and w not in families]
    if unknown:
        raise AnalysisError(
            f"unknown rule or family: {', '.join(unknown)} (known rules: {', '.join(registry)}; "
            f"families: {', '.join(sorted(families))})"
        )
    return [r for r in registry.values() if r.id in wanted or r.family in wanted]


def _summary(trace: Trace, frames: TraceFrames, a: Analysis) -> dict[str, Any]:
    w = frames.step_windows
    wall = int((w.groupby("rank")["end_ns"].max() - w.groupby("rank")["start_ns"].min()).max()) if len(w) else 0
    totals = attribution.attribution_totals(a.attribution)
    wall_sum = float(totals["wall_ns"]) or 1.0
    trace_meta = frames.metadata.get("trace_metadata") or {}
    devices = _devices(frames)
    top = a.findings[0] if a.findings else None
    summary = {
        "source": str(frames.metadata.get("source_file") or trace.path or ""),
        "collector": frames.metadata.get("collector"),
        "num_events": int(trace.num_events),
        "wall_ns": wall,
        "num_steps": int(a.step_stats.get("num_steps", 0)),
        "step_p50_ns": a.step_stats.get("p50_ns"),
        "ranks": frames.ranks,
        "world_size": frames.metadata.get("world_size"),
        "device_types": frames.device_types or ["cpu"],
        "devices": devices,
        "torch_version": _torch_version(frames.metadata, trace_meta),
        # the step-time attribution (analyzers/attribution/__init__.py): shares of the summed step windows
        **{f"{c}_pct": 100.0 * float(totals[f"{c}_ns"]) / wall_sum for c in attribution.CATEGORY_NAMES},
        "num_findings": len(a.findings),
        "top_finding": top.title if top else None,
        # op time and device time by source precision (trace.line_coverage; info shows the same)
        "line_coverage": line_coverage(trace),
    }
    summary["one_time"] = verdict.one_time_summary(frames, a.attribution, a.rank_steps, a.steps, a.step_stats)
    summary["verdict"] = verdict.verdict(summary, top)
    neuron = neuron_summary.neuron_overview(frames.metadata)
    if neuron:
        summary["neuron"] = neuron
        summary["profile_warnings"] = neuron_summary.profile_warnings(frames.metadata)
        # A Neuron device profile alone: no framework events (ops, steps, launches, Python), so
        # the outputs speak of NeuronCores, not of torch.profiler's host side.
        summary["device_profile_only"] = set(frames.device_types) <= {"neuron"} and not len(frames.host)
        text = neuron_summary.neuron_verdict(neuron)
        # Device-only Neuron profiles: instruction time counts semaphore waits; the engines'
        # active time against total_time is what the core really did.
        if text and (not summary["devices"] or set(summary["device_types"]) <= {"neuron"}):
            summary["verdict"] = text + (f"; top issue: {top.title}." if top is not None else ".")
    return summary


def _devices(frames: TraceFrames) -> list[str]:
    d = frames.device[["device_type", "device"]].drop_duplicates()
    return sorted(f"{t}:{int(i)}" for t, i in zip(d["device_type"].astype(str), d["device"]))


def _torch_version(meta: Mapping[str, Any], trace_meta: Mapping[str, Any]) -> str | None:
    for source in (meta, trace_meta):
        for key in ("torch_version", "pytorch_version", "torchVersion"):
            if source.get(key):
                return str(source[key])
    return None
