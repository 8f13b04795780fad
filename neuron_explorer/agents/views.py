"""The answers the agent tools give, as JSON-able dicts, built from the trace and its analysis.

Nothing here computes a metric the analyzers compute: these functions select, filter, sort
and trim the analyzers' tables and findings (the same numbers the CLI, HTML and TUI show), and
add the trace facts ``trace.summary.describe`` reports. Kept apart from the MCP wiring so each
view is a plain function of a ``ServedTrace`` that unit tests call directly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.agents.catalog import ServedTrace
from neuron_explorer.analyzers.attribution import CATEGORIES
from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.trace.schema import DEVICE_KINDS, Kind

MAX_LIMIT = 500
#: The meaning of the unit suffixes every metrics table uses, said once per answer.
UNITS_NOTE = "*_ns: nanoseconds; *_pct: percent (0-100); *_bytes: bytes; count/*_count: events."


class ToolInputError(NeuronExplorerError):
    """A tool argument names something that does not exist (a column, a severity, a rank)."""


def records(df: pd.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows as JSON-able dicts, with the analyzers' own conversion (NaN -> null, numpy -> Python)."""
    from neuron_explorer.analyzers.result import records as analysis_records

    return analysis_records(df, limit)


def plain(value: Any) -> Any:
    """Nested dicts/lists of numpy and pandas scalars as plain JSON values (NaN, NA -> null)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


def clamp_offset(offset: int | None) -> int:
    if offset is None:
        return 0
    if offset < 0:
        raise ToolInputError(f"offset must be 0 or more, not {offset}")
    return min(int(offset), 2**62)  # past every table's end, and still a C integer for pandas


def clamp_limit(limit: int, default: int = 20) -> int:
    if limit is None:
        return default
    if limit < 1:
        raise ToolInputError(f"limit must be 1 or more, not {limit}")
    return min(int(limit), MAX_LIMIT)


def _sorted(df: pd.DataFrame, sort_by: str, table: str) -> pd.DataFrame:
    if not len(df) and sort_by in df.columns:
        return df  # an empty table (no kernels on a CPU trace) carries placeholder dtypes: nothing to sort
    numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]
    if sort_by not in numeric:
        raise ToolInputError(f"cannot sort {table} by {sort_by!r}; sort by one of: {', '.join(numeric)}")
    return df.sort_values(sort_by, ascending=False, kind="stable")


def _table_answer(
    served: ServedTrace, table: str, df: pd.DataFrame, limit: int, sort_by: str, offset: int = 0, **extra: Any
) -> dict[str, Any]:
    rows = _sorted(df, sort_by, table)
    offset = clamp_offset(offset)
    return {
        "trace": served.name,
        "table": table,
        "sort_by": sort_by,
        **extra,
        "total_rows": len(df),
        "offset": offset,
        "rows": records(rows.iloc[offset:], limit),
        "units": UNITS_NOTE,
    }


# ------------------------------------------------------------------------------ summary
def trace_summary(served: ServedTrace) -> dict[str, Any]:
    """The analyzers' summary and verdict, the three costliest findings, and the trace's facts."""
    a = served.analysis()
    facts = dict(served.facts())
    for key in ("streams", "steps", "devices"):  # long lists on big runs; the tools below page them
        if isinstance(facts.get(key), list) and len(facts[key]) > 32:
            facts[f"{key}_total"] = len(facts[key])
            facts[key] = facts[key][:32]
    return {
        "trace": served.name,
        # (names a trace carries can be any length: a 200 KB device name pushed the verdict
        # out of the budget; each long string is cut here, the verdict whole)
        "summary": {k: v if k == "verdict" else _short(v) for k, v in plain(a.summary).items()},
        "rule_errors": [line for _r, line in a.rule_errors],
        "step_stats": plain(a.step_stats),
        "top_findings": [
            {"rule_id": f.rule_id, "severity": f.severity, "title": f.title, "cost_ns": f.cost_ns}
            for f in a.findings[:3]
        ],
        "num_findings": len(a.findings),
        "memory_summary": plain(a.memory_summary),
        "trace_facts": _short(plain(facts)),
        "units": UNITS_NOTE,
    }


#: The longest string ``trace_summary`` shows of a name a trace carries.
SHORT_CHARS = 300


def _short(value: Any) -> Any:
    """``value`` with every string past ``SHORT_CHARS`` cut, marked as ``agents.budget`` marks cuts."""
    if isinstance(value, str) and len(value) > SHORT_CHARS:
        return f"{value[:SHORT_CHARS]}...[{len(value) - SHORT_CHARS} chars cut]"
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v) for v in value]
    return value


# ------------------------------------------------------------------------------ findings
def findings(
    served: ServedTrace, min_severity: str = "info", rules: list[str] | None = None, limit: int = 20, offset: int = 0
) -> dict[str, Any]:
    from neuron_explorer.analyzers.finding import SEVERITIES

    if min_severity not in SEVERITIES:
        raise ToolInputError(f"min_severity must be one of {', '.join(SEVERITIES)}, not {min_severity!r}")
    a = served.analysis()
    selected = a.filter(min_severity)
    wanted = {r.strip() for r in (rules or []) if r and r.strip()}
    if wanted:
        known = set(a.rules_run) | {f.rule_id for f in a.findings}
        unknown = sorted(wanted - known)
        if unknown:
            raise ToolInputError(
                f"unknown rule id(s): {', '.join(unknown)}; the rules run were: {', '.join(a.rules_run)}"
            )
        selected = [f for f in selected if f.rule_id in wanted]
    limit = clamp_limit(limit)
    where = _locations(a)
    offset = clamp_offset(offset)
    shown = [plain(f.to_dict()) for f in selected[offset : offset + limit]]
    for f in shown:
        for sl in f.get("source_lines") or []:
            sl["location"] = where.finding_line(sl)
    return {
        "trace": served.name,
        "total": len(selected),
        "offset": offset,
        "findings": shown,
        "skipped": [{"rule_id": r, "reason": why} for r, why in a.skipped if not wanted or r in wanted],
        "rule_errors": [{"rule_id": r, "error": why} for r, why in a.rule_errors if not wanted or r in wanted],
        "fixes": plain(a.fixes),
        "units": "cost_ns: ns; with cost_method 'replay' the time the fix (fix_edit) saves, replayed on the run's "
        "dependency graph, else ('attribution') the time lost in its category; fixes.all_fixes_ns: every replayed "
        "fix at once; time_ranges: [start_ns, end_ns] absolute; metrics carry their units.",
    }


# ------------------------------------------------------------------------------ tops
def top_kernels(
    served: ServedTrace, limit: int = 20, sort_by: str = "total_ns", category: str | None = None, offset: int = 0
) -> dict[str, Any]:
    a = served.analysis()
    df = a.kernels
    if category:
        cats = sorted(str(c) for c in a.kernel_categories["category"].unique()) if len(a.kernel_categories) else []
        if category not in cats:
            raise ToolInputError(
                f"no kernels of category {category!r} in this trace; categories here: {', '.join(cats) or 'none'}"
            )
        df = df[df["category"].astype(str) == category]
    return _table_answer(
        served, "kernels", df, clamp_limit(limit), sort_by, offset,
        categories=records(a.kernel_categories),
    )  # fmt: skip


def top_ops(served: ServedTrace, limit: int = 20, sort_by: str = "device_ns", offset: int = 0) -> dict[str, Any]:
    return _table_answer(served, "ops", served.analysis().ops, clamp_limit(limit), sort_by, offset)


def op_perf(
    served: ServedTrace,
    limit: int = 20,
    sort_by: str = "kernel_time_us",
    category: str | None = None,
    offset: int = 0,
) -> dict[str, Any]:
    """The performance models: op groups with FLOPs, bytes, achieved rates and roofline, the
    device time per op category, and the device spec they were measured against."""
    a = served.analysis()
    df = a.op_perf
    if category:
        known = sorted({str(c) for c in df["category"]}) if len(df) else []
        if category not in known:
            raise ToolInputError(f"no op group of category {category!r}; categories here: {', '.join(known) or 'none'}")
        df = df[df["category"] == category]
    return _table_answer(
        served,
        "op_perf",
        df,
        clamp_limit(limit),
        sort_by,
        offset,
        categories=records(a.op_categories),
        perf_summary=plain(a.perf_summary),
    )


def top_source_lines(
    served: ServedTrace,
    limit: int = 20,
    sort_by: str = "device_ns",
    file_contains: str | None = None,
    offset: int = 0,
) -> dict[str, Any]:
    a = served.analysis()
    df = a.source_lines
    if file_contains:
        df = df[df["src_file"].astype(str).str.contains(file_contains, regex=False)]
    where = _locations(a)
    # "location" is how every output shows the line (for people); src_file stays the recorded path
    df = df.assign(
        location=[
            where.format(f, n, fn, p)
            for f, n, fn, p in zip(df["src_file"], df["src_line"], df["src_func"], df["src_precision"])
        ]
    )
    return _table_answer(served, "source_lines", df, clamp_limit(limit), sort_by, offset)


def memory_at_peak(served: ServedTrace, by: str = "line", step: int | None = None, limit: int = 20) -> dict[str, Any]:
    """What is alive at the trace's peak (or one step's peak), summed by line, op, module or
    phase; with the replay check of that trace (does it agree with Total Allocated)."""
    from neuron_explorer.analyzers.memory_live import at_peak_view

    if by not in ("line", "op", "module", "phase"):
        raise ToolInputError(f"by must be one of line, op, module, phase, not {by!r}")
    a = served.analysis()
    live = a.live_memory
    replay = records(a.memory_replay)
    if live is None or not len(live.at_peak):
        return {
            "trace": served.name,
            "missing": a.memory_summary.get("missing") or "the trace has no allocation with a device and address",
            "rows": [],
            "replay": replay,
        }
    scope, at = ("trace", -1) if step is None else ("step", int(step))
    df = at_peak_view(live, by, scope, at)
    if step is not None and not len(df):
        steps = sorted({int(s) for s in live.at_peak["step"] if s >= 0})
        raise ToolInputError(f"no memory events in step {step}; steps with memory events: {steps}")
    peaks = live.at_peak[(live.at_peak["scope"] == scope) & (live.at_peak["step"] == at)]
    heads = peaks.drop_duplicates(["rank", "device_type", "device"])
    return {
        "trace": served.name,
        "scope": scope,
        "step": at,
        "by": by,
        "peaks": records(heads[["rank", "device_type", "device", "peak_ns", "peak_event_id", "peak_allocated_bytes"]]),
        "total_rows": len(df),
        "rows": records(df, clamp_limit(limit)),
        "replay": replay,
        "units": UNITS_NOTE,
    }


def _locations(a: Any) -> Any:
    from neuron_explorer.reports.location import Locations

    return Locations.for_analysis(a)


def step_breakdown(served: ServedTrace, rank: int | None = None, limit: int = 50, offset: int = 0) -> dict[str, Any]:
    a = served.analysis()
    limit = clamp_limit(limit, 50)
    offset = clamp_offset(offset)
    steps, attribution = a.steps, a.attribution
    if rank is not None:
        ranks = sorted(int(r) for r in attribution["rank"].unique()) if len(attribution) else []
        if rank not in ranks:
            raise ToolInputError(f"no rank {rank} in this trace; ranks: {', '.join(map(str, ranks)) or 'none'}")
        steps = steps[steps["rank"] == rank]
        attribution = attribution[attribution["rank"] == rank]
    return {
        "trace": served.name,
        "step_stats": plain(a.step_stats),
        "offset": offset,
        "steps_total": len(steps),
        "steps": records(steps.iloc[offset:], limit),
        "attribution_total": len(attribution),
        "attribution": records(attribution.iloc[offset:], limit),
        "categories": dict(CATEGORIES),
        "units": UNITS_NOTE
        + " Attribution: every instant of a step window in exactly one category, by priority in the order of"
        " `categories`; the category *_ns columns sum to wall_ns.",
    }


# ------------------------------------------------------------------------------ critical path
def critical_path(
    served: ServedTrace, rank: int | None = None, step: int | None = None, limit: int = 20, offset: int = 0
) -> dict[str, Any]:
    """The critical path's pieces of the chosen steps, heaviest first, and what they are made of."""
    from neuron_explorer.analyzers.graph.critical import path_words

    a = served.analysis()
    cp = a.critical_path
    if not len(cp):
        return {"trace": served.name, "total": 0, "rows": [], "note": "no dependency graph: the trace has no spans"}
    for name, value in (("rank", rank), ("step", step)):
        if value is not None:
            known = sorted(int(v) for v in cp[name].unique())
            if value not in known:
                raise ToolInputError(f"no {name} {value} on the critical path; {name}s: {', '.join(map(str, known))}")
            cp = cp[cp[name] == value]
    limit, offset = clamp_limit(limit), clamp_offset(offset)
    total = int(cp["ns"].sum())
    by = cp.groupby("category")["ns"].sum().sort_values(ascending=False)
    rows = cp.sort_values("ns", ascending=False, kind="stable")
    return {
        "trace": served.name,
        "summary": path_words(cp),
        "path_ns": total,
        "by_category": [
            {"category": str(c), "ns": int(ns), "pct": 100.0 * float(ns) / total if total else 0.0}
            for c, ns in by.items()
        ],
        "total": len(rows),
        "offset": offset,
        "rows": records(rows.iloc[offset:], limit),
        "fixes": plain(a.fixes),
        "units": UNITS_NOTE + " ns summed over the chosen steps; on_rank = the rank whose event the piece is.",
    }


# ------------------------------------------------------------------------------ one source line
def line_attribution(served: ServedTrace, file: str, line: int, limit: int = 10) -> dict[str, Any]:
    """What the trace attributes to ``file:line``: its row of the analyzers' source-line table,
    the kernels and ops recorded there, and the findings that name it."""
    out: dict[str, Any] = {"trace": served.name}
    a = served.analysis()
    sl = a.source_lines
    hit = sl[(sl["src_file"].astype(str) == file) & (sl["src_line"] == line)]
    out["source_line"] = records(hit)[0] if len(hit) else None
    out["findings"] = [
        {"rule_id": f.rule_id, "severity": f.severity, "title": f.title, "cost_ns": f.cost_ns}
        for f in a.findings
        if any(str(s.get("file")) == file and s.get("line") == line for s in f.source_lines)
    ]
    events = _events_at_line(served, file, line)
    if events is None or not len(events):
        out["kernels"], out["ops"] = [], []
        return out
    kinds = events["kind"].astype(str)
    dev = events[kinds.isin(DEVICE_KINDS)]
    ops = events[kinds == Kind.CPU_OP]
    out["kernels"] = records(_by_name(dev, "device_ns"), limit)
    out["ops"] = records(_by_name(ops, "host_ns"), limit)
    return out


def _events_at_line(served: ServedTrace, file: str, line: int) -> pd.DataFrame | None:
    table = served.trace.events
    if "src_line" not in table.column_names:
        return None
    # Filter on the integer line first (cheap), then compare the few remaining file names.
    at_line = table.filter(pc.equal(table["src_line"], pa.scalar(line, table["src_line"].type)))
    if not at_line.num_rows:
        return None
    at_line = at_line.filter(pc.equal(pc.cast(at_line["src_file"], pa.string()), file))
    return at_line.select(["kind", "name", "dur_ns"]).to_pandas()


def _by_name(df: pd.DataFrame, total: str) -> pd.DataFrame:
    if not len(df):
        return pd.DataFrame({"name": [], "count": [], total: []})
    g = df.assign(name=df["name"].astype(str)).groupby("name", observed=True)["dur_ns"].agg(["count", "sum"])
    g = g.rename(columns={"sum": total}).reset_index()
    return g.sort_values(total, ascending=False, kind="stable")
