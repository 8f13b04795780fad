"""A diff as the documented JSON document (``diff --format json``; schema in docs/diff.md)."""

from __future__ import annotations

import json as _json

from neuron_explorer.analyzers.diff import GateCheck, TraceDiff


def to_document(d: TraceDiff, max_rows: int = 50, checks: list[GateCheck] | None = None, threshold: float | None = None) -> dict:  # fmt: skip
    doc = d.to_dict(max_rows=max_rows)
    if checks is not None:
        doc["gate"] = {
            "threshold_pct": threshold,
            "failed": any(c.failed for c in checks),
            "checks": [
                {
                    "metric": c.metric,
                    "delta_pct": c.delta_pct,
                    "confidence": None if c.confidence != c.confidence else c.confidence,
                    "failed": c.failed,
                    "not_comparable": c.excused,
                }
                for c in checks
            ],
        }
    return doc


def render(d: TraceDiff, max_rows: int = 50, checks: list[GateCheck] | None = None, threshold: float | None = None) -> str:  # fmt: skip
    return _json.dumps(to_document(d, max_rows, checks, threshold), indent=2, allow_nan=False)
