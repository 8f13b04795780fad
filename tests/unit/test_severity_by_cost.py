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
