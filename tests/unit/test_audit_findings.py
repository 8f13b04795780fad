"""The issue-25 audit as a test: every warning and error finding on every bundled real trace holds
in its number (recomputed from the raw JSON by tests/_audit_reference.py, not the analyzers'
code), its cause (the evidence in the raw events) and its fix (it applies to the run and the
device that were traced). scripts/audit_findings.py prints the same judgements as a table."""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from tests._audit_reference import advice_applies, check, raw
from tests.conftest import BUNDLED_TRACES, SCALE_TRACE

TRACES = sorted({*BUNDLED_TRACES, SCALE_TRACE}, key=lambda p: (p.name, str(p)))


@cache
def analysis(path: Path) -> Analysis:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(ne.load(path))


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_every_warning_holds_in_number_cause_and_fix(path: Path) -> None:
    for f in analysis(path).filter("warning"):
        v = check(path, f)
        assert v.ref is not None, f"{f.rule_id}: no independent recomputation"
        assert v.number, (f.rule_id, f.title, v.metric, v.ours, v.ref)
        assert v.cause, (f.rule_id, f.title, v.why)
        assert v.fix, (f.rule_id, f.title, v.why)


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_every_fix_applies_to_the_run_and_device_traced(path: Path) -> None:
    # no training advice on inference, no graph capture where the device lacks it, no bf16 on a V100
    r = raw(path)
    for f in analysis(path).findings:
        ok, why = advice_applies(r, f.recommendation)
        assert ok, (f.rule_id, why, f.recommendation)


def test_the_audit_reference_catches_a_wrong_number_and_wrong_advice() -> None:
    # the checks can fail: a finding whose number is off, and training advice on inference
    from dataclasses import replace

    path = next(p for p in TRACES if p.name == "qwen_h100.json.gz")
    f = next(x for x in analysis(path).findings if x.rule_id == "op_below_roofline")
    off = replace(
        f, metrics={**f.metrics, "pct_of_peak": {"value": f.metrics["pct_of_peak"]["value"] * 1.5, "unit": "%"}}
    )
    assert not check(path, off).number
    wrong = replace(f, recommendation="torch.optim.AdamW(model.parameters(), lr=..., fused=True)")
    assert not check(path, wrong).fix
