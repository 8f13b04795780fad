"""A trace without ProfilerStep annotations has no steps: a finding about it never speaks of
"step time" or "per step" (its window is the whole traced time, and says so)."""

from __future__ import annotations

import re
import warnings

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers.analysis import analyze
from neuron_explorer.analyzers.core.context import TraceFrames
from tests._fuzz import ROOT

HTA = ROOT / "tests/data/kineto/hta"
STEP = re.compile(r"\bstep(s)?\b|per step|/step", re.I)


@pytest.mark.parametrize(
    "name", ["event_sync_multi_stream.json.gz", "old_categories_inference_rank_1.json.gz", "alexnet_a100.json.gz"]
)
def test_findings_of_a_trace_without_steps_never_speak_of_steps(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = ne.load(HTA / name)
    # (the premise, checked the other way round: no ProfilerStep#N name among the events)
    names = trace.events["name"].to_pylist()
    assert not any(str(n).startswith("ProfilerStep#") for n in names)
    assert not TraceFrames(trace).has_steps
    findings = analyze(trace).findings
    assert findings, "each of these traces has at least one finding"
    for f in findings:
        assert not STEP.search(f.title), (f.rule_id, f.title)
        assert not STEP.search(f.message), (f.rule_id, f.message)
        for key, m in f.metrics.items():
            assert "/step" not in str(m.get("unit")), (f.rule_id, key, m)
