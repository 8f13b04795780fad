"""Analyses that end on any input, and rules that cannot take each other down (issues 40, 43).

Each input is built in the test from a real bundled trace; none of these cases needs a file of
its own.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.rules import RULES, all_rules
from neuron_explorer.collectors.load import load
from neuron_explorer.trace.model import Trace
from tests.conftest import KINETO, run_cli


def _copy_stamped_at_zero(tmp_path: Path) -> Path:
    """AlexNet on an A100 (HTA's test data) with its third ``cudaMemcpyAsync`` stamped ``ts`` 0,
    as the held-out audit's 1,348-event trace had one: the copy's sync edge then has a delay of
    minus the epoch, the replay's binding chain closes on itself, and the critical-path walk
    (``graph/critical._path``) looped forever, growing without bound (6.85 GB at 68 s)."""
    data = json.loads(gzip.decompress((KINETO / "hta/alexnet_a100.json.gz").read_bytes()))
    copies = [e for e in data["traceEvents"] if e.get("name") == "cudaMemcpyAsync"]
    assert len(copies) >= 3
    copies[2]["ts"] = 0
    out = tmp_path / "ts0.json"
    out.write_text(json.dumps(data))
    return out


def test_a_copy_stamped_at_ts_0_ends_analyze_whatif_and_the_critical_path(tmp_path: Path) -> None:
    trace = _copy_stamped_at_zero(tmp_path)
    for args in (("analyze", str(trace)), ("whatif", str(trace), "--scale", "gemm=0.5")):
        done = run_cli(*args, timeout=120)  # (the walk looped without end before the fix)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    a = analyze(load(trace))
    cp = a.critical_path
    assert len(cp)
    # the walk is one piece per run at most: a step's path never sums past its window
    per_step = cp.groupby(["rank", "step"])["ns"].sum()
    walls = a.steps.set_index(["rank", "step"])["dur_ns"]
    assert (per_step <= walls.reindex(per_step.index).fillna(per_step) * 1.001 + 1).all()


def test_gemm_kernels_without_durations_skip_the_tensor_core_rule_in_words() -> None:
    """Kernels of ``dur`` 0 are valid (docs/schema.md); ``tensor_cores`` divided by their total."""
    t = load(KINETO / "h200/gemm_shapes.json.gz")
    ev = t.events
    kernel = pc.equal(ev["kind"].cast(pa.string()), "kernel")
    dur = pc.if_else(kernel, pa.scalar(0, ev["dur_ns"].type), ev["dur_ns"])
    a = analyze(Trace(events=ev.set_column(ev.column_names.index("dur_ns"), "dur_ns", dur), metadata=t.metadata))
    assert not a.rule_errors
    reasons = dict(a.skipped)
    assert "no recorded duration" in reasons["tensor_cores"]


def test_a_failing_rule_is_one_line_and_the_others_and_the_verdict_stand(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule that raises (the issue's crash: ``float + str`` in ``dataloader_stall`` on a
    column that was NaN) loses its own findings only; the strict mode the suite runs in
    raises, so a test that meets such a bug fails loudly."""
    all_rules()
    victim = "device_idle"
    rule = RULES[victim]

    def broken(ctx):
        return 1.0 + "x"  # type: ignore[operator]

    monkeypatch.setitem(RULES, victim, dataclasses.replace(rule, func=broken))
    t = load(KINETO / "h200/eager_train.json.gz")
    with pytest.raises(TypeError):
        analyze(t)  # NEURON_EXPLORER_STRICT_RULES=1, set by the suite's conftest
    monkeypatch.delenv("NEURON_EXPLORER_STRICT_RULES")
    a = analyze(t)
    assert [r for r, _ in a.rule_errors] == [victim]
    line = a.rule_errors[0][1]
    assert "\n" not in line and len(line) < 600
    assert line.startswith(f"rule {victim} failed on this trace (TypeError: ")
    assert "test_bounded_analysis.py" not in line  # names the package's site, not the caller's
    assert a.summary["verdict"]
    assert a.findings and all(f.rule_id != victim for f in a.findings)
    assert a.to_dict()["rule_errors"] == [{"rule_id": victim, "error": line}]


#: Columns every trace has: nulling them makes no valid trace.
_CORE = {"event_id", "rank", "kind", "name", "start_ns", "dur_ns"}
#: One trace per device family and kind of run the rules distinguish.
_PROPERTY_TRACES = (
    "h200/eager_train.json.gz",  # CUDA training, stacks, memory
    "tracelens/qwen_mi300.json.gz",  # HIP inference
    "hta/cupti_profiler_a100.json.gz",  # CUPTI counters, GEMMs
    "local/eager_attention_cpu.json.gz",  # CPU only
)


def _variants(col: pa.ChunkedArray) -> dict[str, pa.Array]:
    n = len(col)
    out = {"null": pa.nulls(n, col.type)}
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        out["empty"] = pa.array([""] * n, t)
    elif pa.types.is_dictionary(t) and pa.types.is_string(t.value_type):
        out["empty"] = pa.array([""] * n).dictionary_encode().cast(t)
    elif pa.types.is_floating(t):
        out["nan"] = pa.array([float("nan")] * n, t)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", _PROPERTY_TRACES)
def test_every_rule_runs_with_each_optional_column_null_empty_or_nan(name: str, tmp_path: Path) -> None:
    """Every rule on a real trace with each optional column made null, empty or NaN in turn,
    through a Parquet file as a user would have it (the reader's repairs included): no rule
    raises (the suite's strict mode turns a rule's failure into this test's), under the pandas
    the project installs (3.x)."""
    t = load(KINETO / name)
    ev = t.events
    failures = []
    for i, col in enumerate(ev.column_names):
        if col in _CORE:
            continue
        for variant, values in _variants(ev[col]).items():
            path = tmp_path / f"{col}_{variant}.parquet"
            Trace(events=ev.set_column(i, col, values), metadata=t.metadata).write(path)
            try:
                a = analyze(load(path))
            except Exception as exc:
                failures.append(f"{col}={variant}: {type(exc).__name__}: {exc}")
                continue
            assert not a.rule_errors
            path.unlink()
    assert not failures, failures
