"""Every command's text output read as a user sees it: through the real CLI at 80 and 120
columns and in a pipe. No number wraps, no header is cut, no two different names read the
same, no line is wider than the terminal, and names from the trace cannot drive the terminal."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import KINETO, run_cli

BOX = "│┃"
#: A table's data or header line (rich's boxes) and its cells.
CELL_SPLIT = re.compile(r"\s*[│┃]\s*")
UNIT_ONLY = re.compile(r"^(ns|µs|us|ms|s|KiB|MiB|GiB|B|%)$")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A few bundled traces converted once: a GPU inference, an NCCL A100 job, a V100 job, a
    CPU training run, and a two-rank run directory."""
    out = tmp_path_factory.mktemp("width")
    sources = {
        "h100": KINETO / "tracelens/qwen_h100.json.gz",
        "a100": KINETO / "hta/nccl_data.json.gz",
        "v100": KINETO / "hta/ns_resolution_rank0.json.gz",
        "cpu": KINETO / "local/cpu_mlp_step4.json",
    }
    paths = {}
    for key, src in sources.items():
        paths[key] = out / f"{key}.parquet"
        r = run_cli("convert", str(src), "-o", str(paths[key]), "-q")
        assert r.returncode == 0, r.stderr
    run = out / "run"
    for rank, name in ((0, "sampled_rank-0.json.gz"), (1, "sampled_rank-1.json.gz")):
        (run / f"rank={rank}").mkdir(parents=True)
        r = run_cli("convert", str(KINETO / "hta" / name), "-o", str(run / f"rank={rank}" / "trace.parquet"), "-q")
        assert r.returncode == 0, r.stderr
    paths["run"] = run
    return paths


COMMANDS = {
    "info": lambda t: ("info", str(t["a100"])),
    "analyze-gpu": lambda t: ("analyze", str(t["h100"])),
    "analyze-nccl": lambda t: ("analyze", str(t["a100"])),
    "analyze-cpu": lambda t: ("analyze", str(t["cpu"])),
    "diff": lambda t: ("diff", str(t["a100"]), str(t["v100"])),
    "ranks": lambda t: ("ranks", str(t["run"])),
}


def _tables(text: str) -> list[list[list[str]]]:
    """The boxed tables in ``text``: each a list of rows (header first), each a list of cells."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if line.startswith(("┏", "┌")):
            current = []
            tables.append(current)
        elif line[:1] in BOX and current is not None:
            current.append([c.strip() for c in CELL_SPLIT.split(line.strip()[1:-1])])
        elif line.startswith(("└", "┗")):
            current = None
    return tables


def _plain_tables(text: str) -> list[list[list[str]]]:
    """The plain tables of ``diff`` (two-space indent, columns two spaces apart): rows of cells."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("  item ") or line.startswith("  metric "):
            current = [re.split(r"\s{2,}", line.strip())]
            tables.append(current)
        elif current is not None and line.startswith("  ") and not line.startswith("   ") and "=" not in line:
            current.append(re.split(r"\s{2,}", line.strip()))
        else:
            current = None
    return tables


def _check(text: str, width: int) -> None:
    from rich.cells import cell_len

    for line in text.splitlines():
        assert cell_len(line) <= width, f"wider than {width}: {line!r}"
    for table in _tables(text) + _plain_tables(text):
        header, *rows = table
        for h in header:
            assert "…" not in h and "..." not in h, f"cut header {h!r} in {header}"
        for row in rows:
            # a wrapped row shows up as a continuation line: an empty first cell beside others
            assert row[0].strip() or not any(c.strip() for c in row[1:]), f"a wrapped row: {row}"
            for cell in row:
                assert not UNIT_ONLY.match(cell.strip()), f"a number wrapped off its unit: {row}"
        names = [r[0] for r in rows if r and r[0].strip()]
        if header and header[0] in ("kernel", "op", "item") and len(header) > 1 and "shapes" not in header:
            assert len(names) == len(set(names)), f"two different names read the same: {names}"


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_text_output_fits_the_terminal(command: str, width: int, traces: dict[str, Path]) -> None:
    r = run_cli(*COMMANDS[command](traces), env={"COLUMNS": str(width)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    _check(r.stdout, width)


def test_three_cutlass_kernels_read_differently_at_80_columns(traces: dict[str, Path]) -> None:
    r = run_cli("analyze", str(traces["a100"]), "--top", "30", env={"COLUMNS": "80"})
    table = next(t for t in _tables(r.stdout) if t[0][0] == "kernel")
    cutlass = [row[0] for row in table[1:] if "cutlass" in row[0]]
    assert len(cutlass) >= 3
    assert len(set(cutlass)) == len(cutlass), cutlass


def test_piped_output_takes_the_width_its_tables_need(traces: dict[str, Path]) -> None:
    env = {"COLUMNS": ""}  # a pipe with no $COLUMNS: not rich's 80-column fallback
    r = run_cli("analyze", str(traces["h100"]), env=env)
    assert r.returncode == 0, r.stderr
    kernels = next(t for t in _tables(r.stdout) if t[0][0] == "kernel")
    assert max(len(row[0]) for row in kernels[1:]) > 60  # whole names, not cut at 60
    assert "category" in kernels[0]  # no column had to go
    _check(r.stdout, 200)
    header = next(t for t in _tables(r.stdout) if t[0][0] == "rank")[0]
    assert "host blocked" in header  # full headers, no legend needed


def test_wide_terminal_shows_kernel_names_past_60_characters(traces: dict[str, Path]) -> None:
    r = run_cli("analyze", str(traces["h100"]), env={"COLUMNS": "200"})
    kernels = next(t for t in _tables(r.stdout) if t[0][0] == "kernel")
    assert max(len(row[0]) for row in kernels[1:]) > 60


def test_control_characters_in_event_names_never_reach_the_terminal(tmp_path: Path) -> None:
    data = json.loads((KINETO / "local/example_cpu_small.json").read_text())
    evil = "aten::mm\x1b]0;owned\x07\x1b[2J[bold]x[/bold]\r"
    for e in data["traceEvents"]:
        if e.get("name") == "aten::mm":
            e["name"] = evil
    path = tmp_path / "evil.json"
    path.write_text(json.dumps(data))
    for command in ("info", "analyze"):
        r = run_cli(command, str(path), env={"COLUMNS": "120"})
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\r" not in r.stdout
    r = run_cli("analyze", str(path), env={"COLUMNS": "200"})
    assert "aten::mm\\x1b]0;owned\\x07\\x1b[2J[bold]x[/bold]\\x0d" in r.stdout  # shown, escaped, markup kept


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux to try a real 80x24 terminal")
def test_analyze_in_a_real_80_column_terminal(traces: dict[str, Path], tmp_path: Path) -> None:
    """In tmux at 80x24 (a terminal, not $COLUMNS): the output fits 80 columns."""
    import subprocess
    import sys
    import time

    out = tmp_path / "screen.txt"
    session = f"ne-width-{id(out)}"
    cmd = f"env -u COLUMNS {sys.executable} -m neuron_explorer analyze {traces['h100']} > /dev/tty; tmux wait -S {session}; sleep 30"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd], check=True)
    try:
        subprocess.run(["tmux", "wait", session], timeout=120, check=True)
    except subprocess.TimeoutExpired:
        pass
    finally:
        time.sleep(0.2)
        text = subprocess.run(
            ["tmux", "capture-pane", "-p", "-S", "-", "-t", session], capture_output=True, text=True
        ).stdout
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    out.write_text(text)
    assert "rules did not apply" in text or "Top source lines" in text
    _check(text, 80)
