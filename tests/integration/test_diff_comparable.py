"""``diff`` checks that two traces are comparable before it compares them (issue 28, item 2)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import KINETO, run_cli

A100 = str(KINETO / "hta/nccl_data.json.gz")  # NVIDIA A100, world size 2
V100 = str(KINETO / "hta/ns_resolution_rank0.json.gz")  # Tesla V100, one rank


def test_different_hardware_is_not_comparable_and_does_not_fail_the_gate() -> None:
    r = run_cli("diff", A100, V100, "--fail-on-regression", "5", env={"COLUMNS": "100"})
    assert r.returncode == 0, r.stderr  # compute grew +16.9% of the step, but on other hardware
    assert "Not comparable: different devices: NVIDIA A100-PG509-200 vs Tesla V100-SXM2-32GB" in " ".join(
        r.stdout.split()
    )
    assert "different world size: 2 vs 1 ranks" in " ".join(r.stdout.split())
    assert "not comparable  compute:" in r.stdout  # the gate line says why it did not fail
    assert "regression" not in r.stderr


def test_force_gates_runs_that_are_not_comparable() -> None:
    r = run_cli("diff", A100, V100, "--fail-on-regression", "5", "--force")
    assert r.returncode == 1
    assert "neuron-explorer: regression: compute:" in r.stderr


def test_json_says_what_makes_the_runs_incomparable() -> None:
    r = run_cli("diff", A100, V100, "--format", "json", "--fail-on-regression", "5")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == "1.1.0"
    assert doc["comparable"] is False
    assert any("different devices" in x for x in doc["not_comparable_because"])
    assert doc["base"]["job"]["world_size"] == 2 and doc["new"]["job"]["devices"] == ["Tesla V100-SXM2-32GB"]
    assert doc["gate"]["failed"] is False
    assert any(c["not_comparable"] for c in doc["gate"]["checks"])


def test_similar_runs_are_compared_with_a_warning_line() -> None:
    r = run_cli("diff", str(KINETO / "hta/sampled_rank-0.json.gz"), str(KINETO / "hta/sampled_rank-1.json.gz"))
    assert r.returncode == 0, r.stderr
    assert "Not comparable" not in r.stdout
    assert "warning: different ranks: rank 0 vs rank 1 (compared anyway)" in r.stdout


@pytest.mark.parametrize("pair", [(V100, A100)])
def test_a_collective_kernel_is_answered_once(pair: tuple[str, str]) -> None:
    r = run_cli("diff", *pair, "--format", "json")
    doc = json.loads(r.stdout)
    texts = [a["text"] for a in doc["answer"]]
    assert any("`allreduce`" in t for t in texts), texts
    assert not any("ncclKernel" in t for t in texts), texts  # the same time listed again as a kernel
