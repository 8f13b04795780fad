"""Render an ``Analysis`` as the documented JSON document (``analyze --format json``).

The schema (docs/rules.md, "JSON output") is versioned by ``schema_version``; agents and CI
read ``findings`` and ``summary``; ``tables`` hold the head of each metric table.
"""

from __future__ import annotations

import json

from neuron_explorer.analyzers import Analysis
from neuron_explorer.analyzers.finding import SEVERITY_RANK


def to_document(a: Analysis, min_severity: str = "info", max_rows: int = 50) -> dict:
    doc = a.to_dict(max_rows=max_rows)
    floor = SEVERITY_RANK[min_severity]
    doc["findings"] = [f for f in doc["findings"] if SEVERITY_RANK[f["severity"]] >= floor]
    return doc


def render(a: Analysis, min_severity: str = "info", max_rows: int = 50) -> str:
    return json.dumps(to_document(a, min_severity, max_rows), indent=2, allow_nan=False)
