"""The ``Finding``: one problem a rule found, with its evidence, cost and fix.

A finding is plain data (numbers with units, time ranges, event ids, source lines) so that the
text, markdown, JSON, HTML, TUI and MCP views all show the same thing, computed once.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from neuron_explorer.analyzers.graph.edits import Edits

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

    ``cost_ns`` estimates the time the problem costs (ranking key, most costly first): where the
    fix is an ``edits`` of the run's dependency graph (``analyzers/graph``), the replayed saving
    of that edit alone (``cost_method`` ``"replay"``); else a part of one step-time attribution
    ``category`` that no other finding claims too (``"attribution"``, ``analyzers/ledger.py``);
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
    #: how ``cost_ns`` was found: "replay" (the saving of ``edits``) or "attribution"
    cost_method: str = "attribution"
    #: the fix as a what-if edit of the graph (kept out of ``to_dict``: it names every event;
    #: ``fix_edit`` says it in words)
    edits: Edits | None = field(default=None, repr=False)
    #: the edit in words ("12 synchronizing calls wait for nothing"), set when it is priced
    fix_edit: str = ""
    #: the rule of a more specific finding that owns (and prices) some of this one's kernels
    refers_to: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in SEVERITY_RANK:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self) if f.name != "edits"}
