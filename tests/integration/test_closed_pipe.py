"""Every command whose reader goes away (``neuron-explorer analyze TRACE | head``) ends quietly:
no traceback, no error line, and the status a shell reports for ``cat`` in the same place
(141 = 128 + SIGPIPE). Run through the real CLI in a new process, its stdout a pipe whose
reading end is closed before it starts (or, for the long outputs, after the first bytes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from neuron_explorer.cli import COMMANDS, EXIT_BROKEN_PIPE
from tests.conftest import KINETO, run_cli

CLOSED = 141
assert EXIT_BROKEN_PIPE == CLOSED


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("pipe")
    paths = {}
    for key, src in {
        "cpu": KINETO / "local/cpu_mlp_step4.json",
        "base": KINETO / "hta/trace_compare_base.json.gz",
        "test": KINETO / "hta/trace_compare_test.json.gz",
    }.items():
        paths[key] = out / f"{key}.parquet"
        r = run_cli("convert", str(src), "-o", str(paths[key]), "-q")
        assert r.returncode == 0, r.stderr
    for rank in (0, 1):
        target = out / "run" / f"rank={rank}" / "trace.parquet"
        target.parent.mkdir(parents=True)
        r = run_cli("convert", str(KINETO / f"hta/sampled_rank-{rank}.json.gz"), "-o", str(target), "-q")
        assert r.returncode == 0, r.stderr
    paths["run"] = out / "run"
    paths["out"] = out
    return paths


def _closed(args: list[str], cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe nobody reads (its reading end closed first)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "neuron_explorer", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            input=stdin,
            text=True,
            cwd=cwd,
            timeout=600,
            env={**os.environ, "COLUMNS": "80"},
        )
    finally:
        os.close(write)


def _quiet(stderr: str) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert "error" not in stderr.lower(), stderr


T = dict[str, Path]
#: Every command as it writes to stdout, on the bundled traces.
WRITES_STDOUT: dict[str, Callable[[T], list[str]]] = {
    "info": lambda t: ["info", str(t["cpu"])],
    "info-json": lambda t: ["info", str(t["cpu"]), "--format", "json"],
    "analyze": lambda t: ["analyze", str(t["cpu"])],
    "analyze-json": lambda t: ["analyze", str(t["cpu"]), "--format", "json"],
    "analyze-markdown": lambda t: ["analyze", str(t["cpu"]), "--format", "markdown"],
    "diff": lambda t: ["diff", str(t["base"]), str(t["test"])],
    "compare": lambda t: ["compare", str(t["base"]), str(t["test"])],
    "ranks": lambda t: ["ranks", str(t["run"])],
    "whatif": lambda t: ["whatif", str(t["cpu"])],
}
#: Commands that write files and say so on stderr: a closed stdout changes nothing.
WRITES_FILES: dict[str, Callable[[T], list[str]]] = {
    "convert": lambda t: ["convert", str(KINETO / "local/cpu_mlp_step4.json"), "-o", str(t["out"] / "c.parquet")],
    "report": lambda t: ["report", str(t["cpu"]), "-o", str(t["out"] / "r.html")],
    "export": lambda t: ["export", str(t["cpu"]), "-o", str(t["out"] / "e.json.gz")],
    "metrics": lambda t: ["metrics", str(t["cpu"]), "-o", str(t["out"] / "metrics")],
}


def test_every_command_is_covered() -> None:
    covered = {args.split("-")[0] for args in (*WRITES_STDOUT, *WRITES_FILES)}
    covered |= {"record", "tui", "mcp", "demo"}  # their own tests below
    assert covered == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(WRITES_STDOUT))
def test_a_closed_pipe_ends_the_command_quietly(traces: T, name: str) -> None:
    r = _closed(WRITES_STDOUT[name](traces))
    _quiet(r.stderr)
    assert r.returncode == CLOSED, r.stderr


@pytest.mark.parametrize("name", sorted(WRITES_FILES))
def test_a_command_that_writes_files_does_not_mind_a_closed_stdout(traces: T, name: str) -> None:
    r = _closed(WRITES_FILES[name](traces))
    _quiet(r.stderr)
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stderr


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_into_a_closed_pipe(command: str | None) -> None:
    r = _closed(["--help"] if command is None else [command, "--help"])
    assert r.stderr == ""
    assert r.returncode == CLOSED


def test_version_into_a_closed_pipe() -> None:
    r = _closed(["--version"])
    assert (r.returncode, r.stderr) == (CLOSED, "")


def test_reader_leaving_after_the_first_bytes(traces: T) -> None:
    """``| head -c 100``: the output (77 kB of JSON, more than a pipe holds) stops mid-way."""
    p = subprocess.Popen(
        [sys.executable, "-m", "neuron_explorer", "analyze", str(traces["cpu"]), "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert p.stdout is not None and p.stderr is not None
    first = os.read(p.stdout.fileno(), 100)
    p.stdout.close()
    stderr = p.stderr.read().decode()
    assert p.wait(timeout=300) == CLOSED, stderr
    assert first.startswith(b"{")
    _quiet(stderr)
    whole = run_cli("analyze", str(traces["cpu"]), "--format", "json")
    assert len(whole.stdout) > 70_000  # (so the pipe, 64 kB, was full when the reader left)
    json.loads(whole.stdout)


def test_mcp_server_whose_client_closed_its_input(traces: T) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    r = _closed(["mcp", str(traces["cpu"])], stdin=json.dumps(request) + "\n")
    _quiet(r.stderr)
    assert r.returncode == CLOSED, r.stderr


def test_tui_without_a_terminal_says_so_in_one_line(traces: T) -> None:
    r = _closed(["tui", str(traces["cpu"])])
    assert r.returncode == 3
    assert r.stderr.strip().splitlines() == [
        "neuron-explorer: error: the TUI needs a terminal; use `neuron-explorer analyze` for text output"
    ]


@pytest.mark.slow
def test_demo_ends_quietly(tmp_path: Path) -> None:
    r = _closed(["demo", "--output-dir", str(tmp_path / "out")], cwd=tmp_path)
    _quiet(r.stderr)
    assert r.returncode == CLOSED, r.stderr


@pytest.mark.slow
def test_record_passes_the_program_through_unchanged(tmp_path: Path) -> None:
    """``record`` runs the program as itself: its own prints into a closed pipe end the way
    they do under plain ``python`` (the program's BrokenPipeError, status 1), and the trace is
    still written; record's own lines go to stderr."""
    program = tmp_path / "prog.py"
    program.write_text("import torch\nx = torch.ones(3) * 2\nprint('hello ' * 20000)\n")
    r = _closed(["record", "-o", str(tmp_path / "t.parquet"), str(program)], cwd=tmp_path)
    read, write = os.pipe()
    os.close(read)
    try:
        plain = subprocess.run([sys.executable, str(program)], stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert r.returncode == plain.returncode == 1
    assert "BrokenPipeError" in r.stderr and "BrokenPipeError" in plain.stderr
    assert (tmp_path / "t.parquet").exists()
    silent = tmp_path / "silent.py"
    silent.write_text("import torch\nx = torch.ones(3) * 2\n")
    r = _closed(["record", "-o", str(tmp_path / "s.parquet"), str(silent)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    _quiet(r.stderr)
