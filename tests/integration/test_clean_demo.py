"""The bundled demo, recorded as a user would, is a clean workload: no finding at warning or
above, its steps are its iterations (the trailing partial step is dropped and reported), and
none of its source lines is the tool's own launcher or a library."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.analyzers.finding import SEVERITY_RANK
from neuron_explorer.analyzers.metrics.source_lines import is_user_file

pytestmark = [pytest.mark.slow, pytest.mark.torch]

ROOT = Path(__file__).resolve().parents[2]
STEPS = 6
#: Step timing on a shared machine: another process can stall one short step by tens of ms, so a
#: timing finding is checked again on a fresh recording (as the planted clean run is). The
#: Python share too: time the process is descheduled counts to the frame it was in, and the
#: demo's loop is mostly Python frames between ms-long ops (seen once at 55% with load 4 on 2
#: cores; 31% in a clean-clone demo run).
TIMING_RULES = frozenset({"step_variance", "warmup_cost", "python_overhead"})


def record(out: Path) -> ne.Trace:
    proc = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "record", "-o", str(out), "-m",
         "neuron_explorer.examples.train_mlp", "--steps", str(STEPS)],
        cwd=out.parent, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return ne.load(out)


def loud(a: Analysis, rules: frozenset[str] | None = None) -> list[str]:
    return [
        f"{f.rule_id}: {f.title}"
        for f in a.findings
        if SEVERITY_RANK[f.severity] >= SEVERITY_RANK["warning"] and (rules is None or f.rule_id in rules)
    ]


def test_the_demo_is_clean_and_its_steps_are_its_iterations(tmp_path: Path) -> None:
    trace = record(tmp_path / "demo.parquet")
    a = analyze(trace)
    assert len(a.steps) == STEPS
    assert [d["step"] for d in trace.metadata["dropped_steps"]] == [STEPS]
    assert [x for x in loud(a) if x.split(":")[0] not in TIMING_RULES] == []
    for attempt in range(2):
        if not loud(a, TIMING_RULES):
            break
        a = analyze(record(tmp_path / f"again-{attempt}.parquet"))
    assert loud(a, TIMING_RULES) == []
    files = trace.events.column("src_file").unique().to_pylist()
    assert all(is_user_file(f) for f in files if f), files
    assert any(str(f).endswith("examples/train_mlp.py") for f in files)
