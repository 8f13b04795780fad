"""The rule registry: ``@rule(...)`` registers a function that turns an analysis into findings.

A rule is a function ``(ctx: RuleContext) -> list[Finding]``. It reads the metrics already
computed (``ctx.analysis``), the shared column views (``ctx.frames``) and its thresholds
(``ctx.threshold(name)``, defaults declared in the decorator, overridable per run). A rule that
lacks the data it needs raises ``RuleSkipped("needs kernel events")``; it never guesses.

Adding a rule family (e.g. Trainium): create ``neuron_explorer/analyzers/rules/<family>.py`` and
decorate functions with ``@rule``; every module of this package is imported on first use, so
nothing else needs editing. See docs/rules.md, "Writing a rule".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neuron_explorer.analyzers.finding import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from neuron_explorer.analyzers.core.context import TraceFrames
    from neuron_explorer.analyzers.result import Analysis


class RuleSkipped(Exception):
    """Raised by a rule that lacks its data; the message says what is needed ("needs X")."""


RuleFunc = Callable[["RuleContext"], "list[Finding]"]


@dataclass(frozen=True)
class Rule:
    id: str
    family: str
    title: str
    func: RuleFunc
    severity: str = "warning"
    thresholds: dict[str, tuple[float, str]] = field(default_factory=dict)
    needs: str = ""
    doc: str = ""
    #: False where ``cost_ns`` is not the time the problem costs (capacity risk): then severity
    #: is not capped by cost (see ``rules.cap_severity_by_cost``).
    cost_is_time: bool = True


RULES: dict[str, Rule] = {}


def rule(
    id: str,
    *,
    family: str,
    title: str,
    severity: str = "warning",
    thresholds: dict[str, tuple[float, str]] | None = None,
    needs: str = "",
    cost_is_time: bool = True,
) -> Callable[[RuleFunc], RuleFunc]:
    """Register a rule. ``thresholds`` maps a name to ``(default value, unit)``."""
    if severity not in SEVERITY_RANK:
        raise ValueError(f"rule {id}: unknown severity {severity!r}")

    def decorate(func: RuleFunc) -> RuleFunc:
        if id in RULES and RULES[id].func is not func:
            raise ValueError(f"rule id {id!r} registered twice")
        doc = (func.__doc__ or "").strip()
        RULES[id] = Rule(id, family, title, func, severity, dict(thresholds or {}), needs, doc, cost_is_time)
        return func

    return decorate


@dataclass
class RuleContext:
    """What a rule sees: the computed metrics, the column views and its thresholds."""

    analysis: Analysis
    frames: TraceFrames
    rule: Rule
    overrides: dict[str, float] = field(default_factory=dict)

    def threshold(self, name: str) -> float:
        key = f"{self.rule.id}.{name}"
        if key in self.overrides:
            return float(self.overrides[key])
        return float(self.rule.thresholds[name][0])

    def threshold_dict(self, *names: str) -> dict[str, dict[str, Any]]:
        """The thresholds used, as a finding carries them (``{name: {value, unit}}``)."""
        return {
            n: {"value": self.threshold(n), "unit": self.rule.thresholds[n][1]} for n in (names or self.rule.thresholds)
        }

    def finding(self, **kwargs: Any) -> Finding:
        """A Finding of this rule, with its id, default severity and thresholds filled in."""
        kwargs.setdefault("severity", self.rule.severity)
        kwargs.setdefault("threshold", self.threshold_dict())
        return Finding(rule_id=self.rule.id, **kwargs)
