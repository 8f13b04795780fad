"""Every shell command in README.md and docs/*.md runs as written, so the docs stay true.

Commands are read from the docs themselves: the lines of ``bash`` (and unlabelled) code blocks
and inline `neuron-explorer ...` spans with real arguments (synopses with ``[OPTIONS]``,
``A|B`` or ``TRACE`` placeholders are not commands). Each document's commands run in order, as
a reader would type them, in a fresh directory holding the files the docs name (converted from
the bundled example trace; a synthetic Neuron device profile for the Trainium commands). The
few that cannot run here are listed in ``NOT_RUN`` with the reason; a new command in the docs
fails ``test_every_documented_command_is_run_or_has_a_reason`` until it runs or gets one.
"""

from __future__ import annotations

import gzip
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SAMPLE = REPO / "neuron_explorer" / "examples" / "sample_cpu_trace.json"
PROGRAMS = ("neuron-explorer ", "python ", "./scripts/", ".venv/bin/", "bash ", "pip ", "duckdb ")

#: Documented commands that do not run in the test, and why.
NOT_RUN: dict[str, str] = {
    "./scripts/test": "runs this suite",
    "./scripts/test --quick": "runs part of this suite",
    "pip install -e .": "changes the environment",
    'pip install -e ".[capture]"': "changes the environment",
    "pip install mcp": "changes the environment",
    "bash bench/setup_peers.sh && .venv/bin/python bench/ingest.py": "installs peer tools from the network",
    "python bench/capture.py": "a benchmark of minutes",
    ".venv/bin/python bench/report.py": "a benchmark of minutes",
    ".venv/bin/python -m pytest tests/unit/test_report_escaping.py tests/unit/test_report_data.py "
    "tests/unit/test_report_cli.py -q": "runs part of this suite",
    ".venv/bin/python -m pytest tests/integration/test_report_browser.py -q": "runs part of this suite",
    "neuron-explorer --show-profile-schema": "AWS Neuron tools' own neuron-explorer, not this one",
    "neuron-explorer export --format chrome": "names the option in prose; docs/cli.md has the command",
}
#: Commands run in an adapted form (the reason is the adaptation).
ADAPTED: dict[str, str] = {
    # scripts/demo first creates .venv (network); the job it runs is this command
    "./scripts/demo": "neuron-explorer demo --output-dir out",
    # the module form of the command line: with no command it prints usage and exits 2
    "python -m neuron_explorer": "python -m neuron_explorer --help",
}
_INTERACTIVE = "neuron-explorer tui "  # a full-screen app: tests/integration/test_tui_tmux.py drives it
_PLACEHOLDER = re.compile(r"(^|\s)[A-Z][A-Z_.]*[A-Z](\s|$)")  # TRACE, DIR, OUT.parquet-style words


def _is_synopsis(cmd: str) -> bool:
    return (any(m in cmd for m in ("[", "|", "...", "…")) and not cmd.startswith("python -c")) or bool(
        _PLACEHOLDER.search(cmd)
    )


def documented_commands(doc: Path) -> list[str]:
    """The shell commands of one document, in order."""
    text = doc.read_text(encoding="utf-8")
    found: list[tuple[int, str]] = []
    for m in re.finditer(r"```(\w*)\n(.*?)```", text, re.S):
        if m.group(1) not in ("", "bash", "sh", "shell"):
            continue
        offset = m.start(2)
        for line in m.group(2).splitlines(keepends=True):
            cmd = re.split(r"\s{2,}#", line)[0].strip()
            if (cmd.startswith(PROGRAMS) or cmd in ADAPTED or cmd in NOT_RUN) and not _is_synopsis(cmd):
                found.append((offset, cmd))
            offset += len(line)
    outside = re.sub(r"```.*?```", lambda m: " " * len(m.group(0)), text, flags=re.S)
    for m in re.finditer(r"(?<!`)`([^`\n]+)`(?!`)", outside):
        cmd = m.group(1).strip()
        if cmd.startswith(PROGRAMS) and len(cmd.split()) > 2 and not _is_synopsis(cmd):
            found.append((m.start(), cmd))
    return [c for _, c in sorted(found)]


def _needs_torch(cmd: str) -> bool:
    return cmd.startswith(("neuron-explorer record", "neuron-explorer demo", "./scripts/demo"))


def test_every_documented_command_is_run_or_has_a_reason() -> None:
    runnable = ("neuron-explorer ", "python -c ")
    for doc in DOCS:
        for cmd in documented_commands(doc):
            assert cmd in NOT_RUN or cmd in ADAPTED or cmd.startswith(runnable), (
                f"{doc.name}: `{cmd}` is neither run by this test nor listed in NOT_RUN with a reason"
            )
    # the extraction finds the commands it must (a regression here would make the test vacuous)
    readme = documented_commands(REPO / "README.md")
    assert "neuron-explorer analyze mlp.parquet" in readme
    assert "neuron-explorer tui run.parquet" in readme
    assert not [c for c in readme if "TRACE" in c]


def _workspace(root: Path) -> None:
    """The files the docs name, made from the bundled example trace."""
    import neuron_explorer as ne
    from neuron_explorer.collectors.neuron import synth

    trace = ne.load(SAMPLE)
    trace.write(root / "trace.parquet")
    for name in ("mlp.parquet", "run.parquet", "before.parquet", "after.parquet"):
        shutil.copy(root / "trace.parquet", root / name)
    (root / "run").mkdir()
    shutil.copy(root / "trace.parquet", root / "run" / "trace.parquet")
    (root / "run_dir" / "rank=0").mkdir(parents=True)
    shutil.copy(root / "trace.parquet", root / "run_dir" / "rank=0" / "trace.parquet")
    for name in ("trace.json.gz", "rank0.pt.trace.json.gz", "x.json.gz"):
        (root / name).write_bytes(gzip.compress(SAMPLE.read_bytes()))
    # a Trainium run: the framework trace and its device profile export (synthetic, see docs/neuron.md)
    synth.write_framework_trace(root / "fw.json.gz")
    synth.write_parquet_export(root / "neuron_export")
    synth.write_parquet_export(root / "inspect" / "export")
    synth.write_legacy_json(root / "profile.json")  # a Neuron export on its own (legacy JSON)
    for src in ("src/my-model", "src/myproject"):
        (root / src).mkdir(parents=True)


def _run(cmd: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    cmd = ADAPTED.get(cmd, cmd).replace("~/src/", f"{cwd}/src/")
    if cmd.startswith("python -m neuron_explorer"):
        cmd = "neuron-explorer" + cmd[len("python -m neuron_explorer") :]
    argv = shlex.split(cmd)
    if argv[0] == "neuron-explorer":
        stdin_closed = argv[1] == "mcp"  # a stdio server: it serves until its input ends
        if stdin_closed:
            return subprocess.run(
                [sys.executable, "-m", "neuron_explorer", *argv[1:]],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
        return run_cli(*argv[1:], cwd=cwd)
    assert argv[0] == "python", cmd
    return subprocess.run([sys.executable, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=300)


def _doc_param(doc: Path):
    slow = any(_needs_torch(c) for c in documented_commands(doc))
    return pytest.param(doc, id=doc.name, marks=[pytest.mark.slow] if slow else [])


#: the documents that show shell commands (the others, such as docs/perf.md, are prose and tables)
DOCS_WITH_COMMANDS = [d for d in DOCS if documented_commands(d)]


@pytest.mark.parametrize("doc", [_doc_param(d) for d in DOCS_WITH_COMMANDS])
def test_documented_commands_run_as_written(doc: Path, tmp_path: Path) -> None:
    commands = documented_commands(doc)
    _workspace(tmp_path)
    has_torch = importlib.util.find_spec("torch") is not None
    ran, not_run = [], []
    for cmd in commands:
        if cmd in NOT_RUN or cmd.startswith(_INTERACTIVE) or (_needs_torch(cmd) and not has_torch):
            not_run.append(cmd)
            continue
        result = _run(cmd, tmp_path)
        assert result.returncode == 0, f"{doc.name}: `{cmd}` exited {result.returncode}:\n{result.stderr[-2000:]}"
        ran.append(cmd)
    assert ran or not has_torch, f"{doc.name}: none of its commands ran: {not_run}"
