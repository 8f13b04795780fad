"""Severity follows cost: under 2% of the profiled time a finding is at most info (one central place)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pandas as pd

from neuron_explorer.analyzers.finding import Finding
from neuron_explorer.analyzers.rules import MIN_COST_PCT_ABOVE_INFO, all_rules, cap_severity_by_cost


def _analysis(step_ns: list[int]) -> Any:
    """The wall time the cap compares with is the attribution's: one row per step and device."""
    return SimpleNamespace(
        attribution=pd.DataFrame({"step": range(len(step_ns)), "wall_ns": step_ns, "device": [0] * len(step_ns)})
    )


def _finding(severity: str, cost_ns: int) -> Finding:
    return Finding(rule_id="x", severity=severity, title="t", message="m.", cost_ns=cost_ns)


def test_a_cheap_warning_becomes_info_and_says_why() -> None:
    a = _analysis([50_000_000, 50_000_000])  # 100 ms of wall time
    rule = all_rules()["tiny_ops"]
    cheap, costly, error = _finding("warning", 1_000_000), _finding("warning", 2_000_000), _finding("error", 10)
    out = cap_severity_by_cost([cheap, costly, error], rule, a)
    assert [f.severity for f in out] == ["info", "warning", "info"]
    assert "costs 1.0% of the profiled time, under 2%" in cheap.message
    assert costly.message == "m."


def test_rules_whose_cost_is_not_time_keep_their_severity() -> None:
    rule = all_rules()["memory_capacity"]
    assert not rule.cost_is_time
    f = _finding("warning", 0)
    assert cap_severity_by_cost([f], rule, _analysis([1_000_000]))[0].severity == "warning"


def test_a_finding_at_exactly_the_cap_keeps_its_severity() -> None:
    a = _analysis([100_000_000])
    f = _finding("error", int(MIN_COST_PCT_ABOVE_INFO / 100 * 100_000_000))
    assert cap_severity_by_cost([f], all_rules()["device_idle"], a)[0].severity == "error"


def test_a_warning_that_costs_half_the_run_or_more_is_an_error() -> None:
    a = _analysis([50_000_000, 50_000_000])  # 100 ms of wall time
    rule = all_rules()["host_bound"]
    half, less = _finding("warning", 50_000_000), _finding("warning", 49_999_999)
    out = cap_severity_by_cost([half, less], rule, a)
    assert [f.severity for f in out] == ["error", "warning"]
    assert "costs 50% of the profiled time" in half.message


def test_a_finding_judged_twice_carries_one_severity_note() -> None:
    """Issue 40 item 10: the severity is judged before the ledger prices a finding and again
    after; a warning raised to error and then priced under the floor read "Shown as error ...
    Shown as info" in one message. The second judgment starts from the rule's own severity."""
    from neuron_explorer.analyzers.finding import Finding
    from neuron_explorer.analyzers.rules import _undo_severity_note

    f = Finding(
        rule_id="python_overhead",
        severity="error",
        title="t",
        message="Text. (Shown as error: it costs 61% of the step time, 50% or more.)",
    )
    _undo_severity_note(f)
    assert (f.severity, f.message) == ("warning", "Text.")
    f.message, f.severity = (
        "Text (a, b). (Shown as info, not warning: it costs 0.4% of the step time, under 2%.)",
        "info",
    )
    _undo_severity_note(f)
    assert (f.severity, f.message) == ("warning", "Text (a, b).")
    f.message = "No note (Shown as nothing)."
    _undo_severity_note(f)
    assert f.message == "No note (Shown as nothing)."
    f.message = "A. (Shown as error: it costs 89% of the profiled time, 50% or more.) (120 of its events are X's.)"
    f.severity = "error"
    _undo_severity_note(f)
    assert (f.severity, f.message) == ("warning", "A. (120 of its events are X's.)")
