"""The ``Finding``: one problem a rule found, with its evidence, cost and fix.

A finding is plain data (numbers with units, time ranges, event ids, source lines) so that the
text, markdown, JSON, HTML, TUI and MCP views all show the same thing, computed once.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("info", "warning", "error")
SEVERITY_RANK = {name: i for i, name in enumerate(SEVERITIES)}


def metric(value: Any, unit: str = "") -> dict[str, Any]:
    """A number with its unit, as findings carry them (``{"value": 12.5, "unit": "%"}``)."""
    if hasattr(value, "item"):  # numpy scalar -> Python scalar, so the dict is JSON-able
        value = value.item()
    if isinstance(value, float):
        value = round(value, 4)
    return {"value": value, "unit": unit}


@dataclass
class Finding:
    """One problem found by one rule.

    ``cost_ns`` estimates the time the problem costs (ranking key, most costly first), as a part
    of one step-time attribution ``category`` that no other finding claims too;
    ``metrics`` and ``threshold`` map a name to ``{"value": v, "unit": u}``;
    ``source_lines`` are ``{"file", "line", "func", "ns"}`` dicts, the most costly first.
    """

    rule_id: str
    severity: str
    title: str
    message: str
    metrics: dict[str, dict[str, Any]] = field(default_factory=dict)
    threshold: dict[str, dict[str, Any]] = field(default_factory=dict)
    cost_ns: int = 0
    time_ranges: list[list[int]] = field(default_factory=list)
    event_ids: list[int] = field(default_factory=list)
    source_lines: list[dict[str, Any]] = field(default_factory=list)
    recommendation: str = ""
    rank: int | None = None
    #: the step-time attribution category ``cost_ns`` is a part of (analyzers/ledger.py)
    category: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
