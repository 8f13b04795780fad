"""The report's data: one JSON-able dict built from an ``Analysis`` (and the trace, for the
timeline), before anything is rendered.

Every number here comes from the analysis computed once by ``analyzers.analyze``, so the page
shows what ``analyze`` prints. This module decides what the page holds (which rows, how many,
which notes to show) and turns DataFrames into plain lists; ``figures`` turns them into Plotly
figures and ``render`` into HTML. Strings stay raw here: escaping belongs to the output context.
"""

from __future__ import annotations

import linecache
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import ukey
from neuron_explorer.reports._format import skipped_details
from neuron_explorer.reports.fixes import fixes_line
from neuron_explorer.reports.html import figures, perf_figures
from neuron_explorer.reports.html.timeline import STEP_BUDGET, build_timeline
from neuron_explorer.reports.html.timeline_events import StringTable
from neuron_explorer.reports.location import Locations, function_level_hint
from neuron_explorer.reports.names import demangle
from neuron_explorer.trace.line_coverage import coverage_text
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.units import format_line_value, format_metric, format_quantity
from neuron_explorer.version import __version__

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis

#: Rows the sortable tables hold at most (the page says when a table was cut).
TABLE_ROWS = 300
#: Longest source line shown beside a file:line.
CODE_CHARS = 240

KERNEL_COLUMNS = (
    ("name", "Kernel", "text"),
    ("category", "Category", "text"),
    ("device_type", "Device", "text"),
    ("count", "Calls", "int"),
    ("total_ns", "Total", "ns"),
    ("mean_ns", "Mean", "ns"),
    ("min_ns", "Min", "ns"),
    ("max_ns", "Max", "ns"),
    ("pct", "% of device time", "pct"),
)
OP_COLUMNS = (
    ("name", "Op", "text"),
    ("count", "Calls", "int"),
    ("host_total_ns", "Host total", "ns"),
    ("host_self_ns", "Host self", "ns"),
    ("device_ns", "Device", "ns"),
    ("kernel_count", "Kernels", "int"),
)
LINE_COLUMNS = (
    ("location", "File:line", "text"),
    ("src_func", "Function", "text"),
    ("code", "Code", "code"),
    ("host_ns", "Host", "ns"),
    ("device_ns", "Device", "ns"),
    ("kernel_count", "Kernels", "int"),
    ("alloc_bytes", "Allocated", "bytes"),
    ("src_precision", "Precision", "text"),
)

RANK_COLUMNS = (
    ("rank", "Rank", "int"),
    ("steps", "Steps", "int"),
    ("wall_ns", "Step (mean)", "ns"),
    ("busy_ns", "Compute + copies", "ns"),
    ("busy_vs_median_pct", "vs median rank", "pct"),
    ("communication_ns", "Exposed comm.", "ns"),
    ("times_last", "Last to arrive", "int"),
    ("instances", "Collectives", "int"),
    ("caused_wait_ns", "Wait caused", "ns"),
)
COLLECTIVE_COLUMNS = (
    ("collective_name", "Collective", "text"),
    ("algorithm", "Algorithm", "text"),
    ("protocol", "Protocol", "text"),
    ("pg", "Group", "text"),
    ("step", "Step", "int"),
    ("seq", "#", "int"),
    ("num_ranks", "Ranks", "int"),
    ("bytes", "Size", "bytes"),
    ("skew_ns", "Arrival skew", "ns"),
    ("last_rank", "Last rank", "int"),
    ("wait_ns", "Wait (all ranks)", "ns"),
    ("busbw_gbps", "Bus GB/s", "float"),
)
COLLECTIVE_SIZE_COLUMNS = (
    ("collective_name", "Collective", "text"),
    ("algorithm", "Algorithm", "text"),
    ("protocol", "Protocol", "text"),
    ("size_bytes", "Size from", "bytes"),
    ("count", "Collectives", "int"),
    ("busbw_median_gbps", "Bus GB/s (median)", "float"),
    ("busbw_min_gbps", "Bus GB/s (min)", "float"),
    ("busbw_max_gbps", "Bus GB/s (max)", "float"),
    ("xfer_ns", "Transfer time", "ns"),
)
#: The page's roofline table: the columns that answer "how far from the roof, and where"
#: (category, dtypes, FLOPs and bytes per call stay in the JSON and the metrics export), so it
#: fits the 1,350 px page; ``check`` flags figures over 100% of a peak.
OP_PERF_COLUMNS = (
    ("name", "Op", "text"),
    ("shapes", "Shapes", "text"),
    ("count", "Calls", "int"),
    ("kernel_ns", "Kernel time", "ns"),
    ("tflops_per_s", "TFLOP/s", "float"),
    ("tb_per_s", "TB/s", "float"),
    ("bound", "Bound", "text"),
    ("pct_of_peak", "% of roof", "pct"),
    ("check", "Check", "text"),
    ("location", "File:line", "text"),
)
#: Over this % of a peak a figure is not physical: the device entry is wrong or a variant.
OVER_PEAK_PCT = 100.0

NEURON_SUMMARY_COLUMNS = (
    ("device", "NeuronCore", "int"),
    ("total_time_ns", "Span", "ns"),
    ("kernel_time_ns", "Kernel window", "ns"),
    ("kernel_engines_active_pct", "Engines alone (kernel)", "pct"),
    ("kernel_dma_active_pct", "DMA (kernel)", "pct"),
    ("kernel_engines_dma_active_pct", "Engines plus DMA (kernel)", "pct"),
    ("mfu_kernel_pct", "MFU (kernel)", "pct"),
    ("mfu_estimated_pct", "MFU (span)", "pct"),
    ("mbu_kernel_pct", "MBU (kernel)", "pct"),
    ("dma_transfer_count", "DMA transfers", "int"),
    ("dma_transfer_total_bytes", "DMA bytes", "bytes"),
)
NEURON_ENGINE_COLUMNS = (
    ("device", "NeuronCore", "int"),
    ("core", "Physical core", "int"),
    ("unit", "Engine / DMA queue", "text"),
    ("type", "Type", "text"),
    ("instructions", "Instructions", "int"),
    ("waits", "Waits", "int"),
    ("bytes", "Bytes", "bytes"),
    ("active_ns", "Active", "ns"),
    ("kernel_util_pct", "% of kernel", "pct"),
    ("span_util_pct", "% of span", "pct"),
)
#: The Operator Table: device time by (framework layer, HLO op), waits excluded.
NEURON_OPERATOR_COLUMNS = (
    ("device", "NeuronCore", "int"),
    ("layer", "Layer", "text"),
    ("hlo_op", "HLO op", "text"),
    ("hlo_name", "HLO instruction", "text"),
    ("instructions", "Instructions", "int"),
    ("device_ns", "Device time", "ns"),
    ("device_pct", "% of device time", "pct"),
    ("engines", "Engines", "int"),
)

MEMORY_COLUMNS = (
    ("device", "Device", "text"),
    ("peak_allocated_bytes", "Peak allocated", "bytes"),
    ("peak_reserved_bytes", "Peak reserved", "bytes"),
    ("capacity_bytes", "Capacity", "bytes"),
    ("peak_pct", "Peak % of capacity", "pct"),
    ("allocs_per_step", "Allocations per step", "float"),
    ("alloc_bytes_per_step", "Allocated per step", "bytes"),
    ("churn_ratio", "Churn (allocated per step / peak)", "float"),
)


#: the critical path's composition, summed over the steps shown (analyzers/graph/critical.py)
CRITICAL_PATH_COLUMNS = (
    ("category", "On the critical path", "text"),
    ("what", "Op / kernel", "text"),
    ("location", "Source line", "text"),
    ("on_rank", "Rank", "int"),
    ("ns", "Time", "ns"),
    ("pct", "% of the path", "pct"),
)


def critical_path_rows(cp: pd.DataFrame | None, where: Locations) -> pd.DataFrame:
    """The critical path summed over steps, per category, op or kernel, line and rank."""
    if cp is None or not len(cp):
        return pd.DataFrame({c: pd.Series(dtype="object") for c, _, _ in CRITICAL_PATH_COLUMNS})
    what = cp["kernel"].where(cp["kernel"].astype(str) != "", cp["op"]).astype(str)
    df = cp.assign(what=what)
    g = df.groupby(["category", "what", "src_file", "src_line", "on_rank"], sort=False)["ns"].sum().reset_index()
    g["location"] = [
        where.format(f, int(n)) if f and int(n) >= 0 else "" for f, n in zip(g["src_file"].astype(str), g["src_line"])
    ]
    g["pct"] = 100.0 * g["ns"] / float(g["ns"].sum())
    return g.sort_values("ns", ascending=False, kind="stable").reset_index(drop=True)


def critical_keys(analysis: Analysis) -> np.ndarray:
    """(rank, event id) keys of the events on the critical paths."""
    ev = analysis.critical_events
    if ev is None or not len(ev):
        return np.zeros(0, np.int64)
    return np.unique(ukey(ev["on_rank"].to_numpy(), ev["event_id"].to_numpy()))


def build_report_data(trace: Trace, analysis: Analysis, title: str | None = None) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data (see docs/report.md, "The data")."""
    strings = StringTable()
    where = Locations.for_analysis(analysis)
    timeline = build_timeline(trace, analysis.steps, strings, where, critical_keys(analysis))
    kernels = table(_readable_kernels(analysis.kernels), KERNEL_COLUMNS, titles={"name": "mangled"})
    ops = table(analysis.ops, OP_COLUMNS)
    line_rows = source_line_rows(analysis.source_lines, where)
    lines = table(line_rows, LINE_COLUMNS, titles={"location": "path"})
    notes = [str(line) for _r, line in analysis.rule_errors]
    notes += [f"The profile itself warns: {w}" for w in analysis.summary.get("profile_warnings") or []]
    notes += _notes(timeline, kernels, ops, lines)
    if len(line_rows) and (line_rows.get("src_precision") == "function").any():
        notes.append(function_level_hint(analysis.summary.get("collector")))
    if len(analysis.attribution) > figures.MAX_BARS:
        notes.append(
            f"The step-time breakdown has {len(analysis.attribution):,} bars, so it is drawn as a stacked area."
        )
    return {
        "version": __version__,
        "header": header(trace, analysis, title),
        "findings": [finding_view(f, where) for f in analysis.findings],
        "fixes_text": fixes_line(analysis.fixes) or "",
        "critical_path_text": str(analysis.summary.get("critical_path") or ""),
        "skipped": [
            {"rule_id": str(r), "reason": str(why)}
            for r, why in skipped_details(analysis.skipped, bool(analysis.summary.get("device_profile_only")))
        ],
        "figures": {
            "breakdown": figures.breakdown_figure(analysis.attribution),
            "kernels": figures.top_bar_figure(analysis.kernels, "name", "total_ns", "Total device time"),
            "ops": figures.ops_figure(analysis.ops),
            "lines": figures.lines_figure(line_rows),
            "memory": figures.memory_figure(analysis.memory),
            "memory_phases": figures.memory_phase_figure(_phase_timeline(analysis), analysis.memory_at_peak),
            "roofline": perf_figures.roofline_figure(analysis.op_perf, analysis.perf_summary),
            "op_categories": perf_figures.categories_figure(analysis.op_categories),
        },
        "tables": {
            "kernels": kernels,
            "ops": ops,
            "lines": lines,
            "memory": memory_table(analysis.memory_summary),
            "memory_at_peak": table(memory_at_peak_rows(analysis), MEMORY_AT_PEAK_COLUMNS),
            "op_perf": table(op_perf_rows(analysis.op_perf), OP_PERF_COLUMNS),
            "ranks": table(rank_rows(analysis), RANK_COLUMNS),
            "collectives": table(skewed_collectives(analysis), COLLECTIVE_COLUMNS),
            "collective_sizes": table(analysis.collective_sizes, COLLECTIVE_SIZE_COLUMNS),
            "critical_path": table(critical_path_rows(analysis.critical_path, where), CRITICAL_PATH_COLUMNS),
            # Trainium: the kernel window and the per-engine table (empty elsewhere)
            "neuron_summary": table(getattr(analysis, "neuron_summary", None), NEURON_SUMMARY_COLUMNS),
            "neuron_engines": table(getattr(analysis, "neuron_engines", None), NEURON_ENGINE_COLUMNS),
            "neuron_operators": table(getattr(analysis, "neuron_operators", None), NEURON_OPERATOR_COLUMNS),
        },
        "timeline": timeline,
        "strings": strings.values,
        "notes": notes,
    }


def _readable_kernels(kernels: pd.DataFrame | None) -> pd.DataFrame | None:
    """Kernels with demangled names; the name as recorded stays in ``mangled`` (the tooltip)."""
    if kernels is None or not len(kernels) or "name" not in kernels:
        return kernels
    recorded = kernels["name"].astype("object").astype(str)
    return kernels.assign(name=recorded.map(demangle), mangled=recorded)


def header(trace: Trace, analysis: Analysis, title: str | None) -> dict[str, Any]:
    s = analysis.summary
    meta = trace.metadata
    opened = str(trace.path) if trace.path is not None else ""
    original = str(meta.get("source_file") or "")  # the profiler's file a Parquet trace was converted from
    trace_name = str((meta.get("trace_metadata") or {}).get("traceName") or "")
    if trace.path is not None and trace.path.is_dir():  # a multi-rank run: named after its folder
        workload = title or trace.path.name
    else:
        workload = title or _stem(original) or _stem(opened) or _stem(trace_name) or "trace"
    names = [str(p.get("name")) for p in meta.get("device_properties") or [] if p.get("name")]
    devices = [str(d) for d in s.get("devices") or []]
    return {
        "workload": str(workload),
        "source": opened or original,
        "original": original if opened and original and not _same_file(original, opened) else None,
        "devices": devices,
        "device_names": sorted(set(names)),
        "device_types": [str(d) for d in s.get("device_types") or []],
        "torch_version": s.get("torch_version") or None,
        "ranks": [int(r) for r in s.get("ranks") or []],
        "world_size": meta.get("world_size"),
        "num_steps": int(s.get("num_steps") or 0),
        "wall_ns": int(s.get("wall_ns") or 0),
        # the step windows summed (per device of each rank): what a finding's cost share is of
        # (docs/rules.md "Words for numbers": the profiled time)
        "profiled_ns": int(analysis.attribution["wall_ns"].sum()) if len(analysis.attribution) else 0,
        "events": int(trace.num_events),
        "verdict": str(s.get("verdict") or ""),
        "line_coverage": (
            "none: a Neuron device profile alone (join the framework trace of the run for lines)"
            if s.get("device_profile_only")
            else coverage_text(s.get("line_coverage") or {})
        ),
        "device_profile_only": bool(s.get("device_profile_only")),
    }


def finding_view(f: Any, where: Locations | None = None) -> dict[str, Any]:
    d = f.to_dict() if hasattr(f, "to_dict") else dict(f)
    where = where or Locations()
    lines = []
    for sl in d.get("source_lines") or []:
        lines.append(
            {
                **_plain(sl),
                "location": where.finding_line(sl),
                "code": read_source_line(sl.get("file"), sl.get("line")),
                "value_text": format_line_value(sl),
            }
        )
    metrics, threshold = d.get("metrics") or {}, d.get("threshold") or {}
    return {
        "rule_id": str(d.get("rule_id", "")),
        "severity": str(d.get("severity", "info")),
        "title": str(d.get("title", "")),
        "message": str(d.get("message", "")),
        "cost_ns": int(d.get("cost_ns") or 0),
        "rank": d.get("rank"),
        "metrics": _plain(metrics),
        "threshold": _plain(threshold),
        # figures formatted once, by unit, in Python (trace.units): the page shows these strings
        "metrics_text": {k: format_metric(v) for k, v in metrics.items()},
        "threshold_text": {k: format_metric(v) for k, v in threshold.items()},
        "cost_text": format_quantity(int(d.get("cost_ns") or 0), "ns"),
        # how the cost was found: "replay" (what the fix saves, fix_edit) or "attribution"
        "cost_method": str(d.get("cost_method") or "attribution"),
        "fix_edit": str(d.get("fix_edit") or ""),
        "refers_to": d.get("refers_to"),
        "time_ranges": len(d.get("time_ranges") or []),
        "events": len(d.get("event_ids") or []),
        "source_lines": lines[:10],
        "recommendation": str(d.get("recommendation", "")),
    }


def source_line_rows(lines: pd.DataFrame, where: Locations | None = None) -> pd.DataFrame:
    """The line-level profile, most costly first, with its ``location`` as every output shows
    it, a ``label`` short enough for a chart axis, the full ``path`` and the line's ``code``."""
    if lines is None or not len(lines):
        return pd.DataFrame({c: [] for c, _, _ in LINE_COLUMNS})
    where = where or Locations()
    df = lines.copy()
    cost = df.get("host_ns", 0) + df.get("device_ns", 0)
    df = df.assign(_cost=cost).sort_values("_cost", ascending=False, kind="stable").head(TABLE_ROWS)
    files = df["src_file"].astype("object")
    nums = pd.to_numeric(df["src_line"], errors="coerce")
    precision = df["src_precision"].astype("object") if "src_precision" in df else [None] * len(df)
    df["location"] = [where.format(f, n, None, p) for f, n, p in zip(files, nums, precision)]
    df["label"] = [where.format(f, n, None, p, figures.LABEL_CHARS) for f, n, p in zip(files, nums, precision)]
    df["path"] = [f"{f}:{int(n)}" if n == n else str(f) for f, n in zip(files, nums)]
    df["code"] = [read_source_line(f, n) for f, n in zip(files, nums)]
    return df.drop(columns="_cost").reset_index(drop=True)


def op_perf_rows(op_perf: pd.DataFrame | None) -> pd.DataFrame | None:
    """The op_perf table with kernel time in ns (the page formats ns) and one File:line column."""
    if op_perf is None or not len(op_perf) or "kernel_time_us" not in op_perf:
        return None
    # modelled rows first (their roofline is the point of the table), each group by time as before
    op_perf = op_perf.assign(_modelled=op_perf["pct_of_peak"].notna()).sort_values(
        "_modelled", ascending=False, kind="stable"
    )
    line = op_perf["src_line"].fillna(-1).astype("int64")
    location = [f"{f}:{n}" if n >= 0 and isinstance(f, str) else None for f, n in zip(op_perf["src_file"], line)]
    over = op_perf["pct_of_peak"] > OVER_PEAK_PCT
    check = ["over the device's peak: wrong device entry or a variant (--device-spec)" if o else None for o in over]
    out = op_perf.drop(columns="_modelled").assign(kernel_ns=op_perf["kernel_time_us"] * 1e3, location=location)
    return out.assign(check=check) if over.any() else out


def rank_rows(analysis: Analysis) -> pd.DataFrame | None:
    """``culprit.rank_summary`` of a multi-rank trace (None for one rank)."""
    from neuron_explorer.analyzers.ranks.culprit import rank_summary, wait_by_rank

    rs = analysis.rank_steps
    if rs is None or not len(rs):
        return None
    out = rank_summary(rs, wait_by_rank(analysis.collective_ranks))
    return out if len(out) else None


def skewed_collectives(analysis: Analysis) -> pd.DataFrame | None:
    """Collectives matched across two or more ranks, the largest arrival skew first."""
    c = analysis.collectives
    if c is None or not len(c) or "num_ranks" not in c:
        return None
    matched = c[c["num_ranks"] >= 2]
    return matched.sort_values("skew_ns", ascending=False, kind="stable") if len(matched) else None


MEMORY_AT_PEAK_COLUMNS = (
    ("device", "Device", "text"),
    ("location", "Line", "text"),
    ("op", "Op", "text"),
    ("src_module", "Module", "text"),
    ("phase", "Phase", "text"),
    ("live_bytes", "Alive at the peak", "bytes"),
    ("blocks", "Blocks", "int"),
    ("pct_of_peak", "% of the peak", "pct"),
)


def _phase_timeline(analysis: Analysis) -> pd.DataFrame | None:
    from neuron_explorer.analyzers.memory_live.timeline import phase_timeline

    live = analysis.live_memory
    return phase_timeline(live.events, live.blocks) if live is not None and len(live.events) else None


def memory_at_peak_rows(analysis: Analysis) -> pd.DataFrame | None:
    """What is alive at the trace's peak of each device (``Analysis.memory_at_peak``), largest first."""
    t = analysis.memory_at_peak
    if t is None or not len(t):
        return None
    t = t[t["scope"] == "trace"].copy()
    multi_rank = t["rank"].nunique() > 1
    t["device"] = [
        (f"rank {r} · " if multi_rank else "") + (f"{dt}:{d}" if d >= 0 else "host")
        for r, dt, d in zip(t["rank"], t["device_type"], t["device"])
    ]
    t["location"] = [
        f"{f}:{n}" + (f" ({fn})" if fn else "")
        if f
        else "(allocated before the trace)"
        if ph == "before_trace"
        else "-"
        for f, n, fn, ph in zip(t["src_file"], t["src_line"], t["src_func"], t["phase"])
    ]
    t["phase"] = t["phase"].str.replace("_", " ")
    return t.sort_values("live_bytes", ascending=False, kind="stable")


def memory_table(summary: dict[str, Any] | None) -> dict[str, Any]:
    """Per-device memory peaks and churn (``Analysis.memory_summary["devices"]``) as a table."""
    devices = pd.DataFrame((summary or {}).get("devices") or [])
    if len(devices):
        multi_rank = "rank" in devices and devices["rank"].nunique() > 1
        devices["device"] = [
            (f"rank {r} · " if multi_rank else "") + (f"{t}:{d}" if d is not None and d >= 0 else "host")
            for r, t, d in zip(devices.get("rank", 0), devices.get("device_type", "?"), devices.get("device", -1))
        ]
    return table(devices, MEMORY_COLUMNS)


def read_source_line(path: Any, line: Any) -> str | None:
    """The text of ``path:line`` when it is a readable Python file here, else None.

    Only ``.py`` files are read: a trace names the paths, and a report must not copy lines of
    arbitrary files (``/etc/...``) into a page that may be shared.
    """
    try:
        n = int(line)
    except (TypeError, ValueError):
        return None
    if not path or n <= 0 or not str(path).endswith(".py") or not os.path.isfile(str(path)):
        return None
    text = linecache.getline(str(path), n).rstrip("\n")
    return text[:CODE_CHARS] if text.strip() else None


def table(
    df: pd.DataFrame | None, columns: tuple[tuple[str, str, str], ...], titles: dict[str, str] | None = None
) -> dict[str, Any]:
    """A sortable, filterable table: column specs and the first ``TABLE_ROWS`` rows, column by
    column; ``titles`` maps a column to the one whose values are its cells' tooltips."""
    present = [c for c in columns if df is not None and c[0] in df.columns]
    total = 0 if df is None else len(df)
    head = df.head(TABLE_ROWS) if df is not None else None
    tips = {k: v for k, v in (titles or {}).items() if head is not None and v in head.columns}
    rows = {k: _column(head[k], t) for k, _, t in present} if head is not None else {}
    for source in set(tips.values()) - set(rows):
        rows[source] = _column(head[source], "text")  # type: ignore[index]
    return {
        "columns": [
            {"key": k, "label": label, "type": t, **({"title": tips[k]} if k in tips else {})}
            for k, label, t in present
        ],
        "rows": rows,
        "total_rows": total,
        "shown_rows": min(total, TABLE_ROWS),
    }


def _column(values: pd.Series, kind: str) -> list[Any]:
    if kind in ("text", "code"):
        obj = values.astype("object")
        return [None if v is None or v != v else str(v) for v in obj]  # bounded by TABLE_ROWS
    num = pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
    if kind in ("int", "ns", "bytes"):
        return [None if v != v else int(v) for v in num]
    return [None if v != v else round(float(v), 4) for v in num]


def _notes(timeline: dict[str, Any], *tables: dict[str, Any]) -> list[str]:
    notes = []
    shown, total = len(timeline["steps"]), timeline["total_steps"]
    if total and shown < total:
        notes.append(f"The timeline holds {shown} of {total} steps (slowest, fastest, median and evenly spaced).")
    if timeline["downsampled"]:
        notes.append(
            "The timeline is downsampled to keep this page small and fast: a step with more events than its "
            f"budget ({STEP_BUDGET:,}) keeps its longest ones (its caption says how many)."
        )
    for t, what in zip(tables, ("kernels", "ops", "source lines")):
        if t["total_rows"] > t["shown_rows"]:
            notes.append(f"The {what} table shows the top {t['shown_rows']} of {t['total_rows']} rows.")
    return notes


def _plain(value: Any) -> Any:
    """Numpy scalars and containers -> Python values json can write."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, ValueError):
        return a == b


def _stem(source: str) -> str:
    name = Path(source).name if source else ""
    for suffix in (".gz", ".json", ".parquet", ".pq", ".pt.trace"):
        name = name.removesuffix(suffix)
    return name
