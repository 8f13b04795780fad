"""Inputs that are not trace files, names that would break a one-line message, and malformed
environment variables (issue 26), through the real CLI.

A FIFO (``info`` on one blocked forever), a device, a socket: one line naming it, at once. A
newline in a file name does not split the error line, and an escape sequence in it does not
reach the terminal raw (``trace.printable.printable``). Every ``NEURON_EXPLORER_*`` variable is
read in ``neuron_explorer.environment``; a malformed value is one line naming it, never a
default taken silently.
"""

from __future__ import annotations

import re
import shutil
import socket
from pathlib import Path

import pytest

from neuron_explorer import environment
from neuron_explorer.trace.printable import printable
from tests.integration.faults import ROOT, SMALL_JSON, cli, one_error_line

FUZZ_KINETO = ROOT / "tests" / "data" / "fuzz" / "kineto"


@pytest.mark.parametrize("command", ["info", "analyze", "convert", "export", "report", "diff"])
def test_a_fifo_is_refused_at_once_not_waited_on(command: str, tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    args = {"export": ["-o", str(tmp_path / "x.json")], "diff": [str(fifo)], "convert": ["-o", str(tmp_path / "x.pq")]}
    r = cli(command, str(fifo), *args.get(command, []), timeout=60)
    one_error_line(r, str(fifo), "is a FIFO (named pipe), not a trace file or directory")


def test_a_device_and_a_socket_are_refused(tmp_path: Path) -> None:
    one_error_line(cli("info", "/dev/zero", timeout=60), "/dev/zero", "is a character device")
    path = tmp_path / "s.parquet"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        one_error_line(cli("analyze", str(path), timeout=60), str(path), "is a socket")


def test_a_newline_or_an_escape_in_a_file_name_stays_on_one_escaped_line(tmp_path: Path) -> None:
    name = "evil\nname\x1b[2J\x1b]0;title\x07\u202e.json"
    bad = tmp_path / name
    bad.write_text("not json")
    line = one_error_line(cli("info", str(bad)))
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line
    assert printable(bad) in line and "evil\\nname\\x1b[2J\\x1b]0;title\\x07\\u202e.json" in line
    # a warning (a repaired input) and a "wrote" line name it the same way
    repaired = tmp_path / "neg\n\x1b[31m.json"
    shutil.copy(FUZZ_KINETO / "negative_dur.json", repaired)
    out = tmp_path / "out\x1b[0m\n.parquet"
    r = cli("convert", str(repaired), "-o", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2 and "\x1b" not in r.stderr, r.stderr
    assert lines[0].startswith(f"neuron-explorer: warning: {printable(repaired)}: repaired the input")
    assert lines[1].startswith(f"wrote {printable(out)} ")


def test_printable_escapes_controls_once_and_leaves_text_alone() -> None:
    assert printable("run/rank=0/tracé.json") == "run/rank=0/tracé.json"
    assert printable("a\nb\tc\x1b[31m\x7f\x9b") == "a\\nb\\tc\\x1b[31m\\x7f\\x9b"
    assert printable("back\\slash") == "back\\slash"
    assert printable(printable("x\ny")) == printable("x\ny")
    assert printable("bytes \udcff") == "bytes \\xff"  # (a name that is not UTF-8)


MALFORMED = {
    environment.WORKERS: ["abc", "-1", "2.5", "4 workers"],
    environment.SPOOL_EVENTS: ["1e6", "-5", "many"],
    environment.MEMORY: ["abc", "8 gigs", "-1GB"],
    environment.DEBUG: ["maybe"],
}


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, vs in MALFORMED.items() for v in vs])
def test_a_malformed_environment_variable_is_one_line_naming_it(name: str, value: str) -> None:
    line = one_error_line(cli("info", str(SMALL_JSON), env={name: value}))
    assert line.startswith(f"neuron-explorer: error: {name}={value!r}: expected ")


def test_well_formed_environment_variables_are_taken() -> None:
    env = {
        environment.WORKERS: "0",
        environment.SPOOL_EVENTS: "5000",
        environment.MEMORY: "off",
        environment.DEBUG: "1",
        environment.EXCLUDE: "/vendor/:/third_party/",
    }
    r = cli("info", str(SMALL_JSON), "--format", "json", env=env)
    assert r.returncode == 0, r.stderr


def test_every_neuron_explorer_variable_is_read_in_one_module() -> None:
    """Every ``NEURON_EXPLORER_*`` name in the package is one of ``environment.VARIABLES``, and
    no module but ``environment`` reads one from ``os.environ`` itself."""
    package = ROOT / "neuron_explorer"
    named: set[str] = set()
    for path in package.rglob("*.py"):
        text = path.read_text()
        named |= set(re.findall(r"NEURON_EXPLORER_[A-Z_]+[A-Z]", text))
        if path.name != "environment.py":
            assert not re.search(r"environ(?:\.get)?\(?\[?[\"']NEURON_EXPLORER_", text), path
    assert named <= set(environment.VARIABLES), named - set(environment.VARIABLES)


def test_a_device_spec_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    one_error_line(
        cli("analyze", str(SMALL_JSON), "--device-spec", str(fifo), timeout=60), str(fifo), "not a regular file"
    )
