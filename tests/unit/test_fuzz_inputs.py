"""Bounded fuzzing of the input boundaries through the CLI (the long run is bench/fuzz.py).

Each input ends as a clean one-line error (exit 3, no output file) or as a correct trace: one
that agrees with the reference implementation of the Kineto rules (same events, same times,
kept + dropped = the file's events) or, for Parquet, keeps the trace invariants and lists a
repair for every lossy change. Budget: ~1 minute on two cores.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import _fuzz, _fuzz_parquet

BAD = ("traceback", "wrong")


@pytest.fixture(scope="module")
def kineto_seeds() -> list[dict]:
    return [_fuzz.load_seed(p, 40) for p in _fuzz.SEEDS]


@pytest.fixture(scope="module")
def parquet_seeds() -> list:
    return _fuzz_parquet.parquet_seeds()


def test_mutated_kineto_traces_never_traceback_nor_come_out_wrong(kineto_seeds: list, tmp_path: Path) -> None:
    rng = random.Random(19)
    outcomes: dict[str, int] = {}
    for _ in range(250):
        data, mutation, gz = _fuzz.kineto_input(rng, kineto_seeds)
        outcome, detail = _fuzz.kineto_case(data, gz, tmp_path)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert outcome not in BAD, (mutation, detail)
    assert outcomes.get("correct", 0) > 50 and outcomes.get("rejected", 0) > 20  # both sides exercised


def test_mutated_kineto_traces_through_analyze(kineto_seeds: list, tmp_path: Path) -> None:
    rng = random.Random(7)
    for _ in range(12):
        data, mutation, gz = _fuzz.kineto_input(rng, kineto_seeds)
        outcome, detail = _fuzz.kineto_case(data, gz, tmp_path, command="analyze")
        assert outcome not in BAD, (mutation, detail)


def test_mutated_parquet_traces_never_traceback_nor_open_silently_changed(parquet_seeds: list, tmp_path: Path) -> None:
    rng = random.Random(18)
    outcomes: dict[str, int] = {}
    for i in range(120):
        data, mutation = _fuzz_parquet.parquet_input(rng, parquet_seeds)
        command = ("info", "analyze", "export", "report")[i % 4]
        outcome, detail = _fuzz_parquet.parquet_case(data, tmp_path, command, mutation)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert outcome not in BAD, (mutation, detail)
    assert outcomes.get("correct", 0) > 20 and outcomes.get("rejected", 0) > 20


def test_mutated_neuron_exports_never_traceback_nor_come_out_wrong(tmp_path: Path) -> None:
    rng = random.Random(16)
    seeds = _fuzz_parquet.neuron_seeds()
    outcomes: dict[str, int] = {}
    for i in range(150):
        data, mutation = _fuzz_parquet.neuron_input(rng, seeds)
        outcome, detail = _fuzz_parquet.neuron_case(data, tmp_path, "info" if i % 10 == 0 else "convert")
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert outcome not in BAD, (mutation, detail)
    assert outcomes.get("correct", 0) > 60 and outcomes.get("rejected", 0) > 10, outcomes


_JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_PLAUSIBLE_TIME = st.one_of(st.integers(0, 10**13), st.decimals(0, 10**13, places=3).map(float))
_ANY_TIME = st.one_of(
    _PLAUSIBLE_TIME,
    _PLAUSIBLE_TIME,
    st.integers(-(2**66), 2**66),
    st.floats(allow_nan=False, allow_infinity=False),
    _JSON_SCALARS,
)
_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "i", "s", "f", "M", "C", "B", "E"]), "ts": _ANY_TIME},
    optional={
        "dur": _ANY_TIME,
        "name": st.one_of(
            st.sampled_from(["aten::mm", "ProfilerStep#2", "ProfilerStep#3000000000", "[memory]"]), _JSON_VALUES
        ),
        "cat": st.one_of(
            st.sampled_from(["cpu_op", "kernel", "ac2g", "user_annotation", "cuda_runtime"]), _JSON_VALUES
        ),
        "pid": _JSON_SCALARS,
        "tid": _JSON_SCALARS,
        "id": _JSON_SCALARS,
        "args": _JSON_VALUES,
    },
)
_TOP = st.fixed_dictionaries(
    {"traceEvents": st.lists(_EVENT, min_size=0, max_size=8)},
    optional={
        "baseTimeNanoseconds": _JSON_SCALARS,
        "deviceProperties": _JSON_VALUES,
        "distributedInfo": _JSON_VALUES,
    },
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(doc=_TOP)
def test_generated_kineto_traces_match_the_reference_or_are_rejected(doc: dict, tmp_path: Path) -> None:
    data = json.dumps(doc).encode()
    outcome, detail = _fuzz.kineto_case(data, False, tmp_path)
    assert outcome not in BAD, detail


def test_every_input_the_fuzzer_ever_broke_on_stays_fixed(tmp_path: Path) -> None:
    inputs = sorted((_fuzz.FUZZ_DATA / "kineto").iterdir()) + sorted((_fuzz.FUZZ_DATA / "parquet").iterdir())
    inputs += sorted((_fuzz.FUZZ_DATA / "neuron").iterdir())
    assert len(inputs) >= 40
    for path in inputs:
        if path.parent.name == "neuron":
            for command in ("convert", "info"):
                outcome, detail = _fuzz_parquet.neuron_case(path.read_bytes(), tmp_path, command)
                assert outcome == "correct", (path.name, command, outcome, detail)
            continue
        if path.suffix == ".parquet":
            commands = ("info", "analyze", "report", "export") if path.name.startswith("fuzzer_") else ("analyze",)
            for command in commands:
                outcome, detail = _fuzz_parquet.parquet_case(path.read_bytes(), tmp_path, command)
                assert outcome not in BAD, (path.name, command, detail)
        else:
            outcome, detail = _fuzz.kineto_case(path.read_bytes(), path.name.endswith(".gz"), tmp_path)
            if path.name.startswith("fuzzer_") and outcome not in BAD:  # (found through analyze)
                outcome, detail = _fuzz.kineto_case(path.read_bytes(), path.name.endswith(".gz"), tmp_path, "analyze")
        assert outcome not in BAD, (path.name, detail)
