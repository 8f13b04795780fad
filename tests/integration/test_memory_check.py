"""A Parquet trace or run too large for the memory available is refused in one line, naming
what to run instead, before anything is read (not killed by the kernel with no message)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from neuron_explorer.cli.memory_check import BASE_BYTES, BYTES_PER_EVENT, budget_bytes
from tests.conftest import KINETO, run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two real sampled ranks converted to a run directory of Parquet files."""
    tmp = tmp_path_factory.mktemp("memcheck")
    src = tmp / "json"
    src.mkdir()
    for name in ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz"):
        shutil.copy(KINETO / "hta" / name, src / name)
    out = tmp / "run_pq"
    r = run_cli("convert", str(src), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    return out


def test_a_run_over_the_budget_is_refused_in_one_line_naming_the_ranks_command(run_dir: Path, tmp_path: Path) -> None:
    events = ds.dataset(run_dir, format="parquet").count_rows()  # (counted apart from the check)
    need_mb = (BASE_BYTES + BYTES_PER_EVENT * events) / (1 << 20)
    out = tmp_path / "a.json"
    r = run_cli("analyze", str(run_dir), "--format", "json", "-o", str(out), env={"NEURON_EXPLORER_MEMORY": "50MB"})
    assert r.returncode == 3
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"neuron-explorer: error: {run_dir}: ")
    assert f"2 rank files, {events:,} events" in r.stderr
    assert f"about {need_mb:,.0f} MB and 50 MB is available" in r.stderr
    assert f"neuron-explorer ranks {run_dir} --workers N" in r.stderr
    assert not out.exists()
    # the command it names is not refused: it never holds the whole run
    r = run_cli("ranks", str(run_dir), env={"NEURON_EXPLORER_MEMORY": "50MB"})
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("command", ["report", "info", "export", "metrics", "tui", "mcp"])
def test_every_command_that_loads_a_whole_trace_checks_first(command: str, run_dir: Path, tmp_path: Path) -> None:
    one = next(run_dir.rglob("*.parquet"))
    out = tmp_path / ("out" if command == "metrics" else "out.json" if command == "export" else "out.html")
    args = [command, str(one)] + ([] if command in ("info", "tui", "mcp") else ["-o", str(out)])
    r = run_cli(*args, env={"NEURON_EXPLORER_MEMORY": "1KB"})
    assert r.returncode == 3 and "and 1 KB is available; record fewer steps (torch.profiler.schedule(" in r.stderr
    assert r.stderr.count("\n") == 1 and not out.exists()


def test_off_or_a_large_budget_runs_and_a_bad_value_is_a_one_line_error(run_dir: Path) -> None:
    assert run_cli("info", str(run_dir), env={"NEURON_EXPLORER_MEMORY": "off"}).returncode == 0
    assert run_cli("info", str(run_dir), env={"NEURON_EXPLORER_MEMORY": "64GB"}).returncode == 0
    r = run_cli("info", str(run_dir), env={"NEURON_EXPLORER_MEMORY": "lots"})
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "expected a size such as 8GB" in r.stderr


def test_budget_sizes_and_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, expect in (("8GB", 8 << 30), ("512MB", 512 << 20), ("1.5G", int(1.5 * (1 << 30))), ("2048", 2048)):
        monkeypatch.setenv("NEURON_EXPLORER_MEMORY", value)
        assert budget_bytes() == expect
    monkeypatch.delenv("NEURON_EXPLORER_MEMORY")
    if sys.platform.startswith("linux"):  # the system's available memory, as /proc/meminfo says
        lines = Path("/proc/meminfo").read_text().splitlines()
        avail = next(int(ln.split()[1]) for ln in lines if ln.startswith("MemAvailable:"))
        assert abs(budget_bytes() - avail * 1024) < 512 << 20  # (it moves while the tests run)


def test_json_traces_are_not_estimated(tmp_path: Path) -> None:
    r = run_cli("info", str(KINETO / "hta" / "sampled_rank-0.json.gz"), env={"NEURON_EXPLORER_MEMORY": "1KB"})
    assert r.returncode == 0, r.stderr
