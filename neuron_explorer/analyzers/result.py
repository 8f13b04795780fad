"""The ``Analysis`` of one trace: every metric table and finding, its JSON document, and its
critical path, built on first use.

``analyze`` (``analyzers.analysis``) fills it in. Every consumer (the text, markdown and JSON
reports, the HTML report, the TUI, MCP) shows it, so the same numbers appear everywhere, and
its attribute names are a public API (docs/rules.md, "JSON schema"). It sits below ``rules/``,
which read it, and above the metrics, the graph and the Finding, which it holds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers import memory_live
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.finding import SEVERITY_RANK, Finding
from neuron_explorer.trace.errors import AnalysisError

#: Version of the JSON document ``Analysis.to_dict`` produces (docs/rules.md, "JSON schema").
ANALYSIS_SCHEMA_VERSION = "2.6.0"


@dataclass
class Analysis:
    """All metrics and findings of one trace. DataFrames use ``*_ns`` / ``*_bytes`` / ``*_pct`` units."""

    summary: dict[str, Any]
    steps: pd.DataFrame
    step_stats: dict[str, Any]
    attribution: pd.DataFrame
    breakdown: pd.DataFrame
    temporal: pd.DataFrame
    idle: pd.DataFrame
    kernels: pd.DataFrame
    kernel_categories: pd.DataFrame
    kernel_types: pd.DataFrame
    ops: pd.DataFrame
    source_lines: pd.DataFrame
    memory: pd.DataFrame
    memory_summary: dict[str, Any]
    launches: pd.DataFrame
    launch_summary: dict[str, Any]
    overlap: pd.DataFrame
    #: Trainium: device time by framework layer and HLO op (AWS's Operator Table); empty elsewhere.
    neuron_operators: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Trainium: one row per NeuronCore, AWS's Summary fields and the kernel window (neuron_summary).
    neuron_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Trainium: per engine and DMA queue, instructions, active time, kernel and span utilization.
    neuron_engines: pd.DataFrame = field(default_factory=pd.DataFrame)
    findings: list[Finding] = field(default_factory=list)
    #: The findings' fixes replayed all together (analyzers/ledger.py ``price_by_replay``):
    #: ``all_fixes_ns``, ``sum_of_findings_ns``, ``priced``, ``baseline_error_pct``, ...
    fixes: dict[str, Any] = field(default_factory=dict)
    #: Per op group (name + shapes + dtypes): FLOPs, bytes, achieved rates, roofline (analyzers.perf).
    op_perf: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Device time per op category and the share of it the performance models cover.
    op_categories: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: The device spec used, model coverage, Neuron MFU/HFU/MBU (analyzers.perf.summary).
    perf_summary: dict[str, Any] = field(default_factory=dict)
    #: Per (rank, step): wall, attribution categories, busy (analyzers.ranks).
    rank_steps: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Per collective instance matched across ranks: arrival skew, last rank, wait, bus bandwidth.
    collectives: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Bus bandwidth per (collective, algorithm, protocol, power-of-two message size).
    collective_sizes: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Per collective kernel: its instance, arrival, wait and the window of work before it.
    collective_ranks: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Live memory at the trace's and each step's peak by phase, line, op and module (analyzers.memory_live).
    memory_at_peak: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Per rank, device and step: allocated at start, end and peak; what outlived the step.
    memory_live: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Per device: does the live-set replay agree with the trace's Total Allocated, and why not.
    memory_replay: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Per device: reserved against allocated, the largest gap, allocator calls inside steps.
    memory_fragmentation: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: The replay itself (blocks paired, phases) the memory rules read; not exported.
    live_memory: memory_live.LiveMemory | None = None
    #: Builds the critical path (``critical_path``); ``analyze`` reads it for the verdict, from
    #: the graph and baseline replay the replay-priced findings built.
    critical_path_source: Callable[[], pd.DataFrame] | None = field(default=None, repr=False)
    _critical_path: pd.DataFrame | None = field(default=None, repr=False)
    #: The events on the critical paths (rank, step, on_rank, event_id, ns): what a timeline highlights.
    critical_events_source: Callable[[], pd.DataFrame] | None = field(default=None, repr=False)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: (rule_id, one line) for each rule that raised on this trace (its findings are missing)
    rule_errors: list[tuple[str, str]] = field(default_factory=list)
    rules_run: list[str] = field(default_factory=list)
    timings_s: dict[str, float] = field(default_factory=dict)

    # ------------------------------------------------------------------------------ views
    def filter(self, min_severity: str = "info") -> list[Finding]:
        floor = SEVERITY_RANK[min_severity]
        return [f for f in self.findings if SEVERITY_RANK[f.severity] >= floor]

    @property
    def critical_path(self) -> pd.DataFrame:
        """Per (rank, step, category, op, kernel, source line): ns on the step's critical path
        (analyzers.graph); built on first use, empty when the trace has nothing to build from."""
        if self._critical_path is None:
            if self.critical_path_source is not None:
                t0 = time.perf_counter()
                self._critical_path = self.critical_path_source()
                self.timings_s["critical_path"] = time.perf_counter() - t0
            else:
                self._critical_path = pd.DataFrame()
        return self._critical_path

    @property
    def critical_events(self) -> pd.DataFrame:
        """The events on each step's critical path (analyzers.graph.critical.critical_paths)."""
        return self.critical_events_source() if self.critical_events_source is not None else pd.DataFrame()

    def to_dict(self, max_rows: int = 50) -> dict[str, Any]:
        """The JSON-able document of ``analyze --format json`` (schema in docs/rules.md)."""
        return {
            "schema_version": ANALYSIS_SCHEMA_VERSION,
            "summary": _jsonable(self.summary),
            "step_stats": _jsonable(self.step_stats),
            "findings": [_jsonable(f.to_dict()) for f in self.findings],
            "fixes": _jsonable(self.fixes),
            "skipped": [{"rule_id": r, "reason": why} for r, why in self.skipped],
            "rule_errors": [{"rule_id": r, "error": why} for r, why in self.rule_errors],
            "rules_run": list(self.rules_run),
            "memory_summary": _jsonable(self.memory_summary),
            "launch_summary": _jsonable(self.launch_summary),
            "perf_summary": _jsonable(self.perf_summary),
            "tables": {
                name: records(getattr(self, name), max_rows)
                for name in (
                    "steps",
                    "attribution",
                    "breakdown",
                    "temporal",
                    "idle",
                    "kernels",
                    "kernel_categories",
                    "kernel_types",
                    "ops",
                    "source_lines",
                    "launches",
                    "overlap",
                    "neuron_operators",
                    "neuron_summary",
                    "neuron_engines",
                    "op_perf",
                    "op_categories",
                    "rank_steps",
                    "collectives",
                    "collective_sizes",
                    "memory_at_peak",
                    "memory_live",
                    "memory_replay",
                    "memory_fragmentation",
                    "critical_path",
                )
            },
        }


def records(df: pd.DataFrame, max_rows: int | None = None) -> list[dict[str, Any]]:
    """DataFrame rows as JSON-able dicts (NaN -> None, numpy scalars -> Python)."""
    if max_rows is not None:
        df = df.head(max_rows)
    return [_jsonable(r) for r in df.to_dict(orient="records")]


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        v = float(value)
        return None if math.isnan(v) or math.isinf(v) else v
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def _critical_path(frames: TraceFrames) -> pd.DataFrame:
    from neuron_explorer.analyzers.graph import critical_path_table

    try:
        return critical_path_table(frames)
    except AnalysisError:  # nothing to build a graph from: no table, like the other empty ones
        return pd.DataFrame()


def _critical_events(frames: TraceFrames) -> pd.DataFrame:
    from neuron_explorer.analyzers.graph.critical import critical_paths

    try:
        return critical_paths(frames)[1]
    except AnalysisError:
        return pd.DataFrame()
