"""Rule families and their registry; ``all_rules()`` imports every module of this package once.

One module per family (device, host, memory, steps, distributed, compile, ...). A new family,
e.g. ``neuron.py`` for Trainium, only has to live here and use ``@rule``.

Rules read every layer below them (``core/`` up to ``result``, ``ledger`` and ``verdict``);
inside ``analyzers/`` only ``analysis`` imports this package (outside, ``cli/`` and ``agents/``
list the rules).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from neuron_explorer.analyzers.finding import SEVERITY_RANK, Finding
from neuron_explorer.analyzers.ledger import price_by_replay, settle_costs
from neuron_explorer.analyzers.rules.registry import RULES, Rule, RuleContext, RuleSkipped, rule

if TYPE_CHECKING:
    from neuron_explorer.analyzers.core.context import TraceFrames
    from neuron_explorer.analyzers.result import Analysis

__all__ = ["RULES", "Rule", "RuleContext", "RuleSkipped", "all_rules", "rule", "run_rules"]

_loaded = False

#: Severity follows cost: a finding whose cost is under this share of the wall time is at most
#: ``info``, whatever its rule's default severity (rules whose cost is not time, such as
#: ``memory_capacity``, declare ``cost_is_time=False`` and keep theirs).
MIN_COST_PCT_ABOVE_INFO = 2.0
#: ... and a warning whose cost is at least this share of the wall time dominates the run: error.
MIN_COST_PCT_FOR_ERROR = 50.0


def all_rules() -> dict[str, Rule]:
    """Every registered rule by id, in registration order (families sorted by module name)."""
    global _loaded
    if not _loaded:
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if info.name != "registry" and not info.name.startswith("_"):
                importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True
    return RULES


def run_rules(
    analysis: Analysis, frames: TraceFrames, selected: Sequence[Rule], overrides: dict[str, float]
) -> tuple[list[Finding], list[tuple[str, str]]]:
    """Run ``selected`` rules; returns (findings most costly first, [(rule_id, skip reason)]).

    Each rule runs isolated: one that raises (a bug: a column of a type it did not expect)
    loses its own findings only. ``analysis.rule_errors`` gets one line naming it, the other
    rules and the verdict still come out, and with ``NEURON_EXPLORER_STRICT_RULES=1`` (the
    test suite sets it) the exception propagates so a test fails loudly."""
    findings: list[Finding] = []
    skipped: list[tuple[str, str]] = []
    for r in selected:  # one call per rule: the rules themselves work on whole columns
        ctx = RuleContext(analysis, frames, r, overrides)
        try:
            found = cap_severity_by_cost(r.func(ctx) or [], r, analysis)
        except RuleSkipped as exc:
            reason = str(exc)
            skipped.append((r.id, reason if reason.startswith("skipped") else f"skipped: {reason}"))
            continue
        except Exception as exc:
            if strict_rules():
                raise
            analysis.rule_errors.append((r.id, rule_failure_line(r.id, exc)))
            continue
        findings.extend(found)
    # a fix that is an edit is priced by replay, the others' costs become a part of one
    # attribution category no other finding claims (the ledger); a claim cut below the severity
    # floor by that is shown as info too
    analysis.fixes = price_by_replay(findings, frames)
    findings = settle_costs(findings, analysis.attribution)
    for f in findings:
        cap_severity_by_cost([f], RULES[f.rule_id], analysis)
    findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], -f.cost_ns, f.rule_id))
    return findings, skipped


_SEVERITY_NOTE = re.compile(r" \(Shown as (?:(error)|info, not (\w+)): [^()]*(?:\([^()]*\)[^()]*)*\)")


def _undo_severity_note(f: Finding) -> None:
    """Remove the note an earlier ``cap_severity_by_cost`` added and restore the severity the
    rule gave, so a message never says both "Shown as error" and "Shown as info"."""
    m = _SEVERITY_NOTE.search(f.message)
    if m is None:
        return
    f.message = f.message[: m.start()] + f.message[m.end() :]  # (the ledger may have written after it)
    f.severity = "warning" if m.group(1) else m.group(2)


def rule_failure_line(rule_id: str, exc: BaseException) -> str:
    """One line saying that ``rule_id`` failed and where, for a bug report."""
    tb = exc.__traceback__
    where = ""
    while tb is not None:  # the innermost frame inside the package names the site
        code = tb.tb_frame.f_code
        if "neuron_explorer" in code.co_filename:
            where = f" at {code.co_filename.rsplit('neuron_explorer', 1)[-1].lstrip('/')}:{tb.tb_lineno}"
        tb = tb.tb_next
    text = " ".join(str(exc).split())[:300]
    return f"rule {rule_id} failed on this trace ({type(exc).__name__}: {text}{where}); its findings are missing, the others stand. Please report it."


def strict_rules() -> bool:
    """Whether a failing rule raises (``NEURON_EXPLORER_STRICT_RULES=1``: the test suite)."""
    from neuron_explorer import environment

    try:
        return environment.strict_rules()
    except environment.EnvironmentSettingError:
        return False  # (a malformed value: the CLI says so in one line before any rule runs)


def cap_severity_by_cost(found: list[Finding], r: Rule, analysis: Analysis) -> list[Finding]:
    """Lower to ``info`` every finding of ``r`` costing under ``MIN_COST_PCT_ABOVE_INFO`` % of the
    wall time, and raise a warning costing ``MIN_COST_PCT_FOR_ERROR`` % or more to ``error``: the
    wall time (the step windows the attribution splits, or the whole trace without steps) less
    its one-time work, which only a finding billing one-time work is held against; saying so in
    its message."""
    from neuron_explorer.analyzers.attribution.one_time import only_one_time
    from neuron_explorer.analyzers.ledger import RULE_CATEGORY
    from neuron_explorer.analyzers.rules._evidence import attributed_wall_ns

    if not r.cost_is_time:
        return found
    total = attributed_wall_ns(analysis, steady=False)
    at = analysis.attribution
    only_once = "one_time_ns" in at and only_one_time(at, analysis.steps)
    for f in found:
        _undo_severity_note(f)  # a second pass (after the ledger priced it) judges it afresh
        one_time = (f.category or RULE_CATEGORY.get(f.rule_id)) == "one_time"
        wall = attributed_wall_ns(analysis, steady=not one_time)
        if only_once and not one_time and f.severity != "info":
            f.message = (
                f"{f.message} (Shown as info, not {f.severity}: the trace holds only one-time work; the "
                f"{100.0 * max(wall, 0) / total:.1f}% left is no steady state to judge.)"
            )
            f.severity = "info"
            continue
        if wall <= 0:
            continue
        limit = MIN_COST_PCT_ABOVE_INFO / 100.0 * wall
        dominant = MIN_COST_PCT_FOR_ERROR / 100.0 * wall
        # (docs/rules.md "Words for numbers": every step window is the profiled time; less the
        # one-time work, the step time; a trace without steps is one window, the traced time)
        of = "the profiled time" if wall == attributed_wall_ns(analysis, steady=False) else "the step time"
        if not len(at) or not (at["step"] >= 0).any():
            of = "the traced time"
        if f.severity != "info" and f.cost_ns < limit:
            f.message = (
                f"{f.message} (Shown as info, not {f.severity}: it costs {100.0 * f.cost_ns / wall:.1f}% of "
                f"{of}, under {MIN_COST_PCT_ABOVE_INFO:g}%.)"
            )
            f.severity = "info"
        elif f.severity == "warning" and f.cost_ns >= dominant:
            f.message = (
                f"{f.message} (Shown as error: it costs {100.0 * f.cost_ns / wall:.0f}% of {of}, "
                f"{MIN_COST_PCT_FOR_ERROR:g}% or more.)"
            )
            f.severity = "error"
    return found
