"""Every command's text output read as a user sees it: through the real CLI at 60, 80 and 120
columns and in a pipe (issue 45 item 2: the attribution table was 81 wide at 80 and every help
wrapped mid-sentence). No number wraps, no header is cut, no two different names read the
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
        # a 134-character cutlass kernel name in a finding; the op performance table
        "sampled": KINETO / "hta/sampled_rank-0.json.gz",
        "h200": KINETO / "h200/eager_train.json.gz",
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
    "analyze-sampled": lambda t: ("analyze", str(t["sampled"])),
    "analyze-h200": lambda t: ("analyze", str(t["h200"])),
    "whatif-h200": lambda t: ("whatif", str(t["h200"]), "--scale", "gemm=0.5"),
    "diff": lambda t: ("diff", str(t["a100"]), str(t["v100"])),
    "ranks": lambda t: ("ranks", str(t["run"])),
    "whatif": lambda t: ("whatif", str(t["a100"]), "--scale", "gemm|cudnn=0.5", "--nonblocking-copies"),
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


@pytest.mark.parametrize("width", [60, 80, 120])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_text_output_fits_the_terminal(command: str, width: int, traces: dict[str, Path]) -> None:
    r = run_cli(*COMMANDS[command](traces), env={"COLUMNS": str(width)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    _check(r.stdout, width)


HELP = ["", "analyze", "info", "record", "convert", "diff", "whatif", "report", "metrics", "mcp", "tui", "compare"]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_every_help_fits_the_width(width: int) -> None:
    """The help of every command: a two-column entry wraps as a whole under its second column,
    an example command too long for the line continues with a backslash (it still pastes)."""
    from rich.cells import cell_len

    for command in HELP:
        r = run_cli(*([command] if command else []), "--help", env={"COLUMNS": str(width)}, timeout=60)
        assert r.returncode == 0, (command, r.stderr)
        wide = [x for x in r.stdout.splitlines() if cell_len(x) > width]
        assert not wide, (command, wide[:3])


def test_a_long_kernel_name_is_folded_whole_not_cut(traces: dict[str, Path]) -> None:
    """The 134-character cutlass name in sampled_rank-0's finding, at 80 columns: on two lines,
    and joined they are the name."""
    name = (
        "cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align1>"
        "(cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align1::Params)"
    )
    r = run_cli("analyze", str(traces["sampled"]), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    _check(r.stdout, 80)
    assert name in "".join(x.strip() for x in r.stdout.splitlines())


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
    assert "aten::mm\\x1b]0;owned\\x07\\x1b[2J[bold]x[/bold]\\r" in r.stdout  # shown, escaped, markup kept


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


def test_roofline_over_the_peak_is_flagged_not_printed_as_fact(traces: dict[str, Path]) -> None:
    # the H100 trace held against an L4's peaks: its GEMMs run at several times the L4's peak
    r = run_cli("analyze", str(traces["h100"]), "--device-spec", "L4", env={"COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "above 100% of the L4 peak (marked !)" in text
    assert "device entry is wrong or this is a variant" in text
    table = next(t for t in _tables(r.stdout) if t[0][:2] == ["op", "shapes"])
    assert any(row[-1].endswith("!") for row in table[1:])
    md = run_cli("analyze", str(traces["h100"]), "--device-spec", "L4", "--format", "markdown").stdout
    assert "above 100% of the L4 peak" in md and "⚠" in md


def test_a_cpu_trace_gets_no_device_roofline_table(traces: dict[str, Path]) -> None:
    r = run_cli("analyze", str(traces["cpu"]), env={"COLUMNS": "120"})
    assert r.returncode == 0, r.stderr
    assert "Op performance vs" not in r.stdout
    assert "Op performance: no device roofline" in r.stdout
    ops = next(t for t in _tables(r.stdout) if t[0][0] == "op")
    assert "device" not in ops[0] and "kernels" not in ops[0]  # zero on every row: left out
    md = run_cli("analyze", str(traces["cpu"]), "--format", "markdown").stdout
    assert "### Op performance vs" not in md


def test_thresholds_and_tables_in_text_and_markdown(traces: dict[str, Path]) -> None:
    text = run_cli("analyze", str(traces["h100"]), env={"COLUMNS": "120"}).stdout
    assert "threshold: min_share_pct 3.0% of device time" in text
    md = run_cli("analyze", str(traces["h100"]), "--format", "markdown").stdout
    assert "Threshold: min_share_pct 3.0% of device time" in md
    for title in ("### Top kernels", "### Top ops", "### Top source lines"):
        assert title in md


def test_exit_status_of_usage_errors_and_bad_values_is_as_documented() -> None:
    # docs/cli.md: 2 for a command line that does not parse, 3 for a value naming nothing
    assert run_cli("analyze").returncode == 2
    assert run_cli("analyze", "x.parquet", "--no-such-option").returncode == 2
    assert run_cli("analyze", "x.parquet", "--format", "yaml").returncode == 2
    bad = run_cli("analyze", str(KINETO / "local/cpu_mlp_step4.json"), "--device-spec", "NoSuchGPU")
    assert bad.returncode == 3 and bad.stderr.count("\n") == 1
    docs = (Path(__file__).resolve().parents[2] / "docs/cli.md").read_text()
    assert "2 usage error: a command line that does not parse" in " ".join(docs.split())


def test_metrics_help_lists_every_table_and_no_tool_that_is_not_installed() -> None:
    from neuron_explorer.reports.metrics_parquet import TABLES

    r = run_cli("metrics", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    for table in TABLES:
        assert table in text, table
    assert "duckdb -c" not in text


def test_analyze_to_a_file_says_what_it_wrote(tmp_path: Path) -> None:
    out = tmp_path / "a.md"
    r = run_cli("analyze", str(KINETO / "local/cpu_mlp_step4.json"), "--format", "markdown", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stderr and out.read_text().startswith("## Neuron Explorer analysis")


def test_record_without_torch_says_how_to_install_capture(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    blocker = (
        "import sys, importlib.abc\n"
        "class NoTorch(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "from neuron_explorer.cli import main\n"
        f"sys.exit(main(['record', '-o', {str(tmp_path / 'x.parquet')!r}, {str(script)!r}]))\n"
    )
    r = subprocess.run([sys.executable, "-c", blocker], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0
    assert "pip install 'neuron-explorer[capture]'" in r.stderr


def test_a_directory_of_two_unrelated_jobs_is_refused_in_one_line(traces: dict[str, Path], tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    import neuron_explorer as ne

    # two ranks recorded 8.5 days apart: not one run
    run = tmp_path / "apart"
    (run / "rank=0").mkdir(parents=True)
    (run / "rank=1").mkdir()
    for rank in (0, 1):
        src = traces["run"] / f"rank={rank}" / "trace.parquet"
        t = ne.Trace.read(src)
        if rank == 1:
            shifted = pc.add(t.events["start_ns"], pa.scalar(int(8.5 * 86400e9), pa.int64()))
            t = ne.Trace(
                t.events.set_column(t.events.schema.get_field_index("start_ns"), "start_ns", shifted), t.metadata
            )
        t.write(run / f"rank={rank}" / "trace.parquet")
    for command in ("info", "analyze"):
        r = run_cli(command, str(run))
        assert r.returncode == 3, r.stdout
        assert r.stderr.count("\n") == 1 and "different jobs" in r.stderr and "8.5 days" in r.stderr
    # two world sizes (an A100 job of 2 ranks beside a rank of a 128-rank job)
    mixed = tmp_path / "mixed"
    (mixed / "rank=0").mkdir(parents=True)
    (mixed / "rank=1").mkdir()
    (mixed / "rank=0" / "trace.parquet").write_bytes(traces["a100"].read_bytes())
    (mixed / "rank=1" / "trace.parquet").write_bytes((traces["run"] / "rank=1" / "trace.parquet").read_bytes())
    r = run_cli("info", str(mixed))
    assert r.returncode == 3 and "different jobs (world sizes rank 0: 2, rank 1: 128)" in r.stderr
    # the run of one job still reads
    assert run_cli("info", str(traces["run"])).returncode == 0


def test_the_exact_lines_hint_is_not_shown_on_a_trace_record_captured(tmp_path: Path) -> None:
    import neuron_explorer as ne

    imported = ne.load(KINETO / "local/cpu_mlp_step4.json")  # function-level lines only
    hint = "`neuron-explorer record` captures exact lines"
    assert hint in run_cli("analyze", str(KINETO / "local/cpu_mlp_step4.json")).stdout
    captured = ne.Trace(imported.events, {**imported.metadata, "collector": "torch_profiler"})
    path = captured.write(tmp_path / "recorded.parquet")
    r = run_cli("analyze", str(path))
    assert r.returncode == 0, r.stderr
    assert "function-level: def line only" in r.stdout and hint not in r.stdout
