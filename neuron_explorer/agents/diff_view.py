"""The MCP ``diff`` tool's answer: two served traces compared (``analyzers.diff``).

Reuses each served trace's analysis (computed once per trace), reads source lines for
matching across code versions only through ``SourceAccess`` (inside the server's roots), and
returns the head of each table so the answer stays an aggregate, not raw data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from neuron_explorer.agents.catalog import ServedTrace
from neuron_explorer.agents.source import SourceAccess
from neuron_explorer.agents.views import clamp_limit
from neuron_explorer.analyzers.diff import diff_traces, gate
from neuron_explorer.trace.errors import NeuronExplorerError


def _reader(sources: SourceAccess) -> Callable[[str], Sequence[str] | None] | None:
    def read_lines(path: str) -> Sequence[str] | None:
        try:
            return sources.read_lines(path)  # every check source_context makes
        except NeuronExplorerError:
            return None

    return read_lines if sources.roots else None


def diff_answer(
    base: ServedTrace,
    new: ServedTrace,
    sources: SourceAccess,
    limit: int = 10,
    fail_on_regression_pct: float | None = None,
    metrics: list[str] | None = None,
) -> dict[str, Any]:
    d = diff_traces(
        base.trace,
        new.trace,
        read_lines=_reader(sources),
        base_analysis=base.analysis(),
        new_analysis=new.analysis(),
    )
    doc = d.to_dict(max_rows=clamp_limit(limit, 10))
    doc["base"]["trace"], doc["new"]["trace"] = base.name, new.name
    if fail_on_regression_pct is not None:
        checks = gate(d, fail_on_regression_pct, metrics)
        doc["gate"] = {
            "threshold_pct": fail_on_regression_pct,
            "failed": any(c.failed for c in checks),
            "checks": [c.describe() + (" FAIL" if c.failed else " ok") for c in checks],
        }
    return doc
