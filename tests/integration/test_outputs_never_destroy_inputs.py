"""Outputs never destroy inputs (issue 43): every command that writes refuses an output that is
one of its inputs, through any alias, in one line, leaving the input as it was; ``metrics -o``
never deletes a file it did not write; standard output on a full disk is one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import KINETO, REPO, run_cli


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copy(KINETO / "local/example_cpu_small.json", tmp_path / "t.json")
    assert run_cli("convert", "t.json", "-o", "t.parquet", "-q", cwd=tmp_path).returncode == 0
    (tmp_path / "d").mkdir()
    shutil.copy(tmp_path / "t.parquet", tmp_path / "d/t.parquet")
    (tmp_path / "link").symlink_to(tmp_path / "d")
    os.link(tmp_path / "t.parquet", tmp_path / "hard.parquet")
    (tmp_path / "spec.toml").write_text('name = "mine"\npeak_tflops = 100\nmem_bw_gbps = 1000\n')
    return tmp_path


#: (command before the output, the input the output names through an alias)
CASES = [
    (["analyze", "t.parquet", "-o"], "t.parquet"),
    (["analyze", "t.parquet", "-o"], "./t.parquet"),
    (["analyze", "d/t.parquet", "-o"], "d/../d/t.parquet"),
    (["report", "t.parquet", "-o"], "/proc/self/cwd/t.parquet"),
    (["report", "d/t.parquet", "-o"], "link/t.parquet"),
    (["export", "t.parquet", "-o"], "hard.parquet"),
    (["compare", "t.parquet", "-o"], "t.parquet"),
    (["compare", "t.parquet", "--html"], "t.parquet"),
    (["diff", "t.parquet", "t.json", "-o"], "t.json"),
    (["metrics", "t.parquet", "-o"], "t.parquet"),
    (["convert", "t.json", "-o"], "./t.json"),
    (["analyze", "d", "-o"], "d/t.parquet"),  # a file inside an input directory
    (["analyze", "t.parquet", "--device-spec", "spec.toml", "-o"], "./spec.toml"),
]


@pytest.mark.parametrize(("command", "alias"), CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_an_output_naming_an_input_is_refused_in_one_line_and_the_input_is_unchanged(
    work: Path, command: list[str], alias: str
) -> None:
    before = {
        p: p.read_bytes() for p in (work / "t.parquet", work / "t.json", work / "d/t.parquet", work / "spec.toml")
    }
    done = run_cli(*command, alias, cwd=work, timeout=120)
    assert done.returncode == 3, (done.stdout[-300:], done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert alias in lines[0] and ("is the input" in lines[0] or "inside the input directory" in lines[0])
    assert {p: p.read_bytes() for p in before} == before


def test_a_report_beside_the_traces_of_an_input_directory_may_be_written_again(work: Path) -> None:
    for _ in range(2):
        done = run_cli("report", "d", "-o", "d/report.html", cwd=work, timeout=120)
        assert done.returncode == 0, done.stderr
    assert (work / "d/report.html").stat().st_size > 0


def test_metrics_never_deletes_a_file_it_did_not_write(work: Path) -> None:
    out = work / "m"
    assert run_cli("metrics", "t.parquet", "-o", str(out), cwd=work).returncode == 0
    (out / "notes.txt").write_text("mine")
    done = run_cli("metrics", "t.parquet", "-o", str(out), cwd=work)
    assert done.returncode == 3 and "notes.txt" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert (out / "notes.txt").read_text() == "mine"
    (out / "notes.txt").unlink()
    assert run_cli("metrics", "t.parquet", "-o", str(out), cwd=work).returncode == 0  # its own export: replaced


@pytest.mark.parametrize("command", ["analyze", "info", "compare", "whatif"])
def test_standard_output_on_a_full_device_is_one_line(work: Path, command: str) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "neuron_explorer", command, "t.parquet"],
            cwd=work,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    assert done.returncode == 3
    assert done.stderr.strip() == "neuron-explorer: error: cannot write to standard output: No space left on device"
