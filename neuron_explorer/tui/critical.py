"""The critical path in the TUI: what sets the step time, as a few rows of the Overview.

Self-contained: one renderable built from ``Analysis.critical_path`` (analyzers/graph), the
categories that make up the critical paths of the steps with their share and the heaviest op
or kernel and line in each; the Overview shows it under the findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

from neuron_explorer.tui.format import fmt_ns

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis

#: categories listed at most
TOP_CATEGORIES = 4


def critical_path_renderable(analysis: Analysis, top: int = TOP_CATEGORIES) -> Table | None:
    """Category, share of the critical path, time, and its heaviest piece (op or kernel at a
    line); None when the trace has no critical path."""
    cp = analysis.critical_path
    if not len(cp) or cp["ns"].sum() <= 0:
        return None
    total = float(cp["ns"].sum())
    table = Table(title="Critical path (what sets the step time)", title_justify="left", box=None, expand=True)
    table.add_column("On the path", ratio=1, no_wrap=True)
    table.add_column("Share", justify="right", width=6)
    table.add_column("Time", justify="right", width=9)
    table.add_column("Most", ratio=2, no_wrap=True, overflow="ellipsis")
    by = cp.groupby("category")["ns"].sum().sort_values(ascending=False).head(top)
    for cat, ns in by.items():
        rows = cp[cp["category"] == cat]
        what = rows["kernel"].where(rows["kernel"].astype(str) != "", rows["op"]).astype(str)
        heavy = rows.assign(what=what).groupby(["what", "src_file", "src_line"])["ns"].sum()
        most = ""
        if len(heavy):
            (name, file, line), _ = next(iter(heavy.sort_values(ascending=False).items()))
            at = f" {str(file).rsplit('/', 1)[-1]}:{int(line)}" if file and int(line) >= 0 else ""
            most = f"{name}{at}" if name else ""
        table.add_row(str(cat), f"{100.0 * float(ns) / total:.0f}%", fmt_ns(int(ns)), most)
    return table
