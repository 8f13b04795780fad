"""End to end: ``neuron-explorer tui`` in a real terminal (tmux), keys in, screen text out.

Each test runs the CLI in a detached tmux session on a private server socket at 120x40,
sends keys with ``send-keys`` and reads the screen with ``capture-pane``. Bad inputs are also
checked without tmux: one line on stderr and exit code 3, before any screen is drawn.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..unit.tui_trace import SOURCE_DIR, write_tiny_trace

REPO = Path(__file__).resolve().parents[2]
KINETO = REPO / "tests" / "data" / "kineto"
EXIT_INPUT = 3

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One detached tmux session running a shell command, on its own server socket."""

    def __init__(self, command: str, cwd: Path) -> None:
        self.socket = f"ne-tui-{uuid.uuid4().hex[:8]}"
        self.session = "tui"
        # Keep the pane open after the command exits, so its last screen can be read; drop the
        # COLUMNS/LINES a test runner may export, so the app sizes itself from the terminal.
        wrapped = f"env -u COLUMNS -u LINES {command}; echo EXIT=$?; sleep 60"
        self._tmux("new-session", "-d", "-s", self.session, "-x", "120", "-y", "40", "-c", str(cwd), wrapped)

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30)
        return out.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", self.session)

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", self.session, *keys)

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} did not appear within {timeout:.0f} s; the screen shows:\n{screen}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def cli(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", "neuron_explorer", *args))


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    write_tiny_trace(tmp_path / "tiny.parquet")
    shutil.copy(SOURCE_DIR / "train.py", tmp_path / "train.py")
    return tmp_path


@pytest.fixture
def sessions() -> Iterator[list[Tmux]]:
    started: list[Tmux] = []
    yield started
    for s in started:
        s.close()


@needs_tmux
@pytest.mark.slow
def test_tui_in_a_terminal_navigates_filters_opens_a_file_and_quits(trace_dir: Path, sessions: list[Tmux]) -> None:
    term = Tmux(cli("tui", "tiny.parquet"), cwd=trace_dir)
    sessions.append(term)
    term.wait_for("Top findings")
    term.wait_for("Mostly device computing")  # the analysis worker finished and filled the overview

    term.keys("3")
    term.wait_for("aten::addmm")
    term.keys("/", "r", "e", "l", "u")
    screen = term.wait_for("1 of 3")
    assert "aten::relu" in screen

    term.keys("Escape")  # leave the filter: digits switch views again
    term.wait_for("Sort")  # the table's key hints are back in the footer
    term.keys("5")
    term.wait_for("Source files by time")
    term.keys("Enter")
    screen = term.wait_for("y = self.linear(x)")
    assert "read from train.py" in screen

    term.keys("Escape")
    term.wait_for("Source files by time")
    term.keys("6")
    term.wait_for("rank 0 · step 1 (1 of 2)")
    term.keys("q")
    screen = term.wait_for("EXIT=0")
    assert "Traceback" not in screen


@needs_tmux
@pytest.mark.slow
def test_tui_imports_a_json_trace_before_showing_it(sessions: list[Tmux], tmp_path: Path) -> None:
    term = Tmux(cli("tui", str(KINETO / "local" / "cpu_mlp_step4.json")), cwd=tmp_path)
    sessions.append(term)
    term.wait_for("cpu_mlp_step4.json")
    term.wait_for("Step times")
    term.keys("q")
    term.wait_for("EXIT=0")


@needs_tmux
def test_a_missing_trace_in_a_terminal_prints_one_error_line_and_no_app(sessions: list[Tmux], tmp_path: Path) -> None:
    term = Tmux(cli("tui", "nope.parquet"), cwd=tmp_path)
    sessions.append(term)
    screen = term.wait_for("EXIT=3")
    lines = [ln for ln in screen.splitlines() if ln.strip() and not ln.startswith("EXIT=")]
    assert lines == ["neuron-explorer: error: nope.parquet: no such file or directory"]


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("missing.parquet", None, "no such file or directory"),
        ("corrupt.parquet", b"PAR1 this is not parquet", "not a readable Parquet file"),
        ("corrupt.json", b'{"traceEvents": [ {"ph": "X", ', "corrupt.json"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_3(
    tmp_path: Path, name: str, content: bytes | None, expected: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    result = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "tui", str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == EXIT_INPUT
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("neuron-explorer: error: ") and expected in lines[0]
    assert result.stdout == ""
