"""Planted bottlenecks: each CPU workload in tests/planted has one known problem; the right rule
must fire on it and name the right source line, and must not fire on the clean run.

Each workload is profiled for real (torch.profiler with with_stack, profile_memory,
record_shapes and a schedule, exported to Chrome JSON) in a subprocess, then imported and
analysed exactly as a user's trace would be.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze

pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.torch]

ROOT = Path(__file__).resolve().parents[2]
PLANTED = (
    "clean",
    "slow_loader",
    "python_hotspot",
    "tiny_ops",
    "alloc_heavy",
    "unfused_optimizer",
    "graph_breaks",
    "periodic_stall",
    "slow_first_step",
)


@pytest.fixture(scope="module")
def analyses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Analysis]:
    out_dir = tmp_path_factory.mktemp("planted")
    procs = {}
    for name in PLANTED:  # two at a time: the captures are independent processes
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "tests.planted._harness", name, str(out_dir / f"{name}.json")],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if len(procs) % 2 == 0:
            for p in list(procs.values())[-2:]:
                p.wait(timeout=600)
    result = {}
    for name, p in procs.items():
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, f"capturing {name} failed:\n{err[-2000:]}"
        result[name] = analyze(ne.load(out_dir / f"{name}.json"))
    return result


#: Rules about run-to-run step timing (see test_clean_run_fires_none_of_the_planted_rules).
TIMING_RULES = frozenset({"step_variance", "warmup_cost"})


def capture(name: str, out: Path) -> Path:
    """Profile one planted workload in a subprocess, as the fixture does."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.planted._harness", name, str(out)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"capturing {name} failed:\n{proc.stderr[-2000:]}"
    return out


def fired(a: Analysis, rule_id: str) -> list:
    return [f for f in a.findings if f.rule_id == rule_id]


def lines_of(finding) -> set[tuple[str, str]]:
    return {(Path(s["file"]).name, s["func"]) for s in finding.source_lines}


@pytest.mark.parametrize(
    ("workload", "rule_id", "expected_line"),
    [
        ("slow_loader", "dataloader_stall", ("slow_loader.py", "__getitem__")),
        ("python_hotspot", "host_hotspot", ("python_hotspot.py", "normalize_rows")),
        ("tiny_ops", "tiny_ops", ("tiny_ops.py", "step")),
        ("alloc_heavy", "alloc_churn", ("alloc_heavy.py", "step")),
        ("unfused_optimizer", "unfused_optimizer", None),
        ("graph_breaks", "compile_graph_breaks", ("graph_breaks.py", "body")),
        ("periodic_stall", "step_variance", None),
        ("slow_first_step", "warmup_cost", None),
    ],
)
def test_planted_bottleneck_fires_its_rule_naming_the_line(analyses, workload, rule_id, expected_line):
    # given a workload with one planted problem, when analysed
    findings = fired(analyses[workload], rule_id)
    # then its rule fires, with numbers, a threshold, a fix and the responsible line
    assert findings, f"{rule_id} did not fire on {workload}: {[f.rule_id for f in analyses[workload].findings]}"
    f = findings[0]
    assert f.metrics and f.threshold and f.recommendation
    if expected_line is not None:
        assert expected_line in lines_of(f), f.source_lines


@pytest.mark.parametrize(
    "rule_id",
    [
        "dataloader_stall",
        "host_hotspot",
        "tiny_ops",
        "alloc_churn",
        "unfused_optimizer",
        "compile_graph_breaks",
        "step_variance",
        "warmup_cost",
        "python_overhead",
    ],
)
def test_clean_run_fires_none_of_the_planted_rules(analyses, rule_id, tmp_path):
    analysis = analyses["clean"]
    if rule_id in TIMING_RULES:
        # Step-time jitter rules describe the machine as much as the workload: a neighbour
        # process (the other capture running beside it, a busy CI host) can stall a clean step
        # by tens of ms. The clean workload is captured again alone, up to twice, and must be
        # quiet at least once; a workload with a real periodic stall fires every time.
        for attempt in range(2):
            if not fired(analysis, rule_id):
                break
            analysis = analyze(ne.load(capture("clean", tmp_path / f"clean-{attempt}.json")))
    assert not fired(analysis, rule_id), [f.title for f in analysis.findings]


def test_planted_finding_is_the_top_issue_of_its_workload(analyses):
    # the planted problem is what the verdict points at first (most costly warning)
    # Rules about run-to-run timing (step variance, warm-up) can rank first on a noisy shared
    # machine; they describe the machine's jitter, not the workload, so they are set aside here.
    top = {
        w: next(f.rule_id for f in analyses[w].findings if f.rule_id not in TIMING_RULES)
        for w in ("slow_loader", "tiny_ops", "alloc_heavy")
        if any(f.rule_id not in TIMING_RULES for f in analyses[w].findings)
    }
    assert top["slow_loader"] in ("dataloader_stall", "host_hotspot")
    assert top["tiny_ops"] in ("tiny_ops", "host_hotspot", "python_overhead")
    # the allocation-heavy loop is also 1,500 tiny ops per step, which tiny_ops rightly reports
    assert top["alloc_heavy"] in ("alloc_churn", "tiny_ops")
    assert fired(analyses["alloc_heavy"], "alloc_churn")


def test_rules_needing_a_device_say_what_they_need_on_cpu_traces(analyses):
    skipped = dict(analyses["clean"].skipped)
    assert skipped["device_idle"].startswith("skipped: needs device events")
    assert skipped["sync_in_loop"].startswith("skipped: needs device runtime events")
    assert skipped["stragglers"].startswith("skipped: needs a multi-rank run")


def _native_capture_available() -> str | None:
    try:
        import neuron_explorer.collectors.capture.torch_profiler  # noqa: F401
    except ImportError as exc:
        return f"neuron_explorer.profile() not importable: {exc}"
    return None


NATIVE = ("clean", "slow_loader", "python_hotspot", "tiny_ops", "alloc_heavy")


@pytest.fixture(scope="module")
def native_analyses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Analysis]:
    reason = _native_capture_available()
    if reason:
        pytest.skip(reason)
    out_dir = tmp_path_factory.mktemp("planted_native")
    result = {}
    for name in NATIVE:
        out = out_dir / f"{name}.parquet"
        r = subprocess.run(
            [sys.executable, "-m", "tests.planted._harness", name, str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, f"capturing {name} with neuron_explorer.profile failed:\n{r.stderr[-2000:]}"
        result[name] = analyze(ne.load(out))
    return result


@pytest.mark.parametrize(
    ("workload", "rule_id", "expected_file"),
    [
        ("slow_loader", "dataloader_stall", "slow_loader.py"),
        ("python_hotspot", "host_hotspot", "python_hotspot.py"),
        ("tiny_ops", "tiny_ops", "tiny_ops.py"),
        ("alloc_heavy", "alloc_churn", "alloc_heavy.py"),
    ],
)
def test_in_process_capture_names_the_planted_file(native_analyses, workload, rule_id, expected_file):
    # given the same workloads captured by neuron_explorer.profile (exact call lines)
    findings = fired(native_analyses[workload], rule_id)
    assert findings, [f.rule_id for f in native_analyses[workload].findings]
    assert expected_file in {Path(s["file"]).name for s in findings[0].source_lines}, findings[0].source_lines
    assert not fired(native_analyses["clean"], rule_id)
