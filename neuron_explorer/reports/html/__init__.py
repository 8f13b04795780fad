"""The self-contained HTML report: Plotly charts and sortable tables of one analysis.

``write_report(trace, path)`` analyzes the trace (or takes an ``Analysis`` already computed),
builds the page's data (``data.build_report_data``), renders it (``render.render_html``) and
writes one HTML file that needs no network. See docs/report.md.

Imports ``analyzers/``, ``trace/`` and ``reports``' shared helpers; its modules never import this face.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_explorer.reports.html.data import build_report_data
from neuron_explorer.reports.html.render import ReportError, render_html, write_html
from neuron_explorer.trace.model import Trace

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis

__all__ = ["ReportError", "build_report_data", "render_html", "write_report"]


def write_report(trace: Trace, path: str | Path, analysis: Analysis | None = None, title: str | None = None) -> Path:
    """Write the HTML report of ``trace`` to ``path``; returns the path written."""
    if analysis is None:
        from neuron_explorer.analyzers import analyze

        analysis = analyze(trace)
    data: dict[str, Any] = build_report_data(trace, analysis, title=title)
    return write_html(render_html(data), path)
