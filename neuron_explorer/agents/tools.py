"""The registry of the MCP server's tools: names, titles and how each answer pages.

The one list both the server (``agents.server`` registers exactly these, and refuses to start
if one is missing or extra) and ``neuron-explorer mcp --help`` read, so the help cannot drift
from what the server serves. Importing it costs nothing: no ``mcp`` SDK, no analyzers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolInfo:
    """What ``--help`` and the size budget need to know about one tool."""

    title: str
    #: What to do when the answer is cut to fit ``max_chars`` (besides raising it).
    how_to_page: str
    #: The lists ``offset`` pages (the tool takes ``offset`` when there are any).
    pages: tuple[str, ...] = ()


_ROWS = "narrow with a filter, or lower limit and page with offset"

TOOLS: dict[str, ToolInfo] = {
    "list_traces": ToolInfo("List served traces", "serve fewer traces"),
    "trace_summary": ToolInfo("Trace summary and verdict", "use findings, step_breakdown or sql for the lists"),
    "findings": ToolInfo(
        "Findings (problems, evidence, fixes)",
        "filter with rules or min_severity, lower limit and page with offset; "
        "a finding's full event_ids are in the findings table (sql)",
        pages=("findings",),
    ),
    "top_kernels": ToolInfo("Top kernels by device time", _ROWS + " (category)", pages=("rows",)),
    "top_ops": ToolInfo("Top framework ops", _ROWS, pages=("rows",)),
    "op_perf": ToolInfo("Op performance vs the hardware's peak (roofline)", _ROWS + " (category)", pages=("rows",)),
    "top_source_lines": ToolInfo("Top source lines", _ROWS + " (file_contains)", pages=("rows",)),
    "memory_at_peak": ToolInfo("Memory alive at the peak, by line, op, module or phase", _ROWS + " (by, step)"),
    "step_breakdown": ToolInfo(
        "Per-step time breakdown", "pass rank, lower limit and page with offset", pages=("steps", "attribution")
    ),
    "critical_path": ToolInfo(
        "Critical path per step: what sets the step time, and what fixing each finding saves",
        "pass rank or step, lower limit and page with offset",
        pages=("rows",),
    ),
    "diff": ToolInfo("Diff two traces: what got slower", "lower limit"),
    "source_context": ToolInfo("Source code around a line, with its cost", "lower context"),
    "schema": ToolInfo("Tables and columns for SQL", "pass table for one table's columns"),
    "sql": ToolInfo(
        "Read-only SQL (DuckDB)",
        "aggregate (GROUP BY, ORDER BY ... LIMIT n), select fewer columns, substr() long values, "
        "or page with LIMIT n OFFSET m",
    ),
}


def help_text() -> str:
    """The tools as ``--help`` lists them: one line each, in the server's order."""
    width = max(map(len, TOOLS))
    return "tools:\n" + "\n".join(f"  {name:<{width}}  {info.title}" for name, info in TOOLS.items())
