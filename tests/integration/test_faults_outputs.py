"""Outputs that cannot or must not be written (issue 26), through the real CLI.

Every command that writes refuses a device node, a FIFO, a directory where a file belongs and a
symbolic link, in one line naming it, and leaves the thing there unchanged (as root, `-o
/dev/null` must not replace the system's /dev/null). Every write error (a read-only directory
or file system, a full disk, a file-size limit, a parent that is a file) is one line and exit
status 3, with no file of ours left behind. A temporary file left by a killed process is
removed by the next write beside it; a live process's is not.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_explorer.trace.atomic import TMP_TAG
from tests.integration.faults import (
    DIR_WRITERS,
    FILE_WRITERS,
    SMALL_JSON,
    SPOOLED_JSON,
    argv,
    cli,
    file_size_limit,
    full_dir,
    one_error_line,
    read_only_dir,
)


@pytest.fixture(scope="module")
def parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("input") / "small.parquet"
    r = cli("convert", str(SMALL_JSON), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    return out


def _listing(d: Path) -> list[str]:
    return sorted(os.listdir(d))


@pytest.fixture
def null_device(tmp_path: Path) -> Path:
    """A character device to write onto: as root, a node of its own made like /dev/null (so a
    regression replaces that one, not the machine's); otherwise /dev/null itself (which a user
    cannot replace)."""
    if os.geteuid() != 0:
        return Path("/dev/null")
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return node


@pytest.mark.parametrize("command", sorted(FILE_WRITERS) + sorted(DIR_WRITERS))
def test_an_output_onto_a_device_node_is_refused_and_the_device_stays(
    command: str, parquet: Path, null_device: Path
) -> None:
    template = FILE_WRITERS.get(command) or DIR_WRITERS[command]
    before = os.stat(null_device)
    r = cli(*argv(template, null_device, parquet))
    one_error_line(r, str(null_device), "is a character device", "refusing")
    after = os.stat(null_device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


#: A sample of the writers for the checks past the first (every writer goes through
#: ``trace.atomic``; the device-node test above runs them all).
SAMPLE = ("analyze", "convert", "export")


@pytest.mark.parametrize("command", ["analyze", "convert"])
def test_an_output_onto_dev_full_is_one_line_not_a_traceback(command: str, parquet: Path, tmp_path: Path) -> None:
    full = Path("/dev/full")
    if os.geteuid() == 0:  # (a node of its own, as above)
        full = tmp_path / "full"
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    one_error_line(cli(*argv(FILE_WRITERS[command], full, parquet)), str(full), "character device")
    assert stat.S_ISCHR(os.stat(full).st_mode)


@pytest.mark.parametrize("command", SAMPLE)
def test_an_output_onto_a_fifo_a_directory_or_a_symlink_is_refused_and_left_as_it_was(
    command: str, parquet: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo.out"
    os.mkfifo(fifo)
    r = cli(*argv(FILE_WRITERS[command], fifo, parquet), timeout=60)  # (opening it would block)
    one_error_line(r, str(fifo), "is a FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)

    directory = tmp_path / "adir"
    directory.mkdir()
    (directory / "keep").write_text("x")
    one_error_line(cli(*argv(FILE_WRITERS[command], directory, parquet)), str(directory), "is a directory")
    assert _listing(directory) == ["keep"]

    target = tmp_path / "target.txt"
    target.write_text("precious")
    link = tmp_path / "link.out"
    link.symlink_to(target)
    one_error_line(cli(*argv(FILE_WRITERS[command], link, parquet)), str(link), "symbolic link")
    assert link.is_symlink() and os.readlink(link) == str(target) and target.read_text() == "precious"
    assert _listing(tmp_path) == ["adir", "fifo.out", "link.out", "target.txt"]


def test_a_metrics_directory_onto_a_file_or_a_symlink_is_refused(parquet: Path, tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    one_error_line(cli("metrics", str(parquet), "-o", str(f)), str(f), "is a regular file, not a directory")
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    one_error_line(cli("metrics", str(parquet), "-o", str(link)), str(link), "symbolic link")
    assert _listing(real) == [] and link.is_symlink()


@pytest.mark.parametrize("command", [*SAMPLE, "report", "metrics"])
def test_a_read_only_directory_is_one_line_and_leaves_nothing(command: str, parquet: Path, tmp_path: Path) -> None:
    with read_only_dir(tmp_path) as made:
        if made is None:
            pytest.skip("cannot make a read-only directory here (root without mount)")
        ro, reason = made
        template = FILE_WRITERS.get(command) or DIR_WRITERS[command]
        r = cli(*argv(template, ro / "out.file", parquet))
        one_error_line(r, str(ro / "out.file"), reason)
        assert _listing(ro) == []


@pytest.mark.parametrize("command", ["convert", "export", "metrics"])
def test_a_full_disk_is_one_line_and_leaves_nothing(command: str, parquet: Path, tmp_path: Path) -> None:
    with full_dir(tmp_path) as full:
        if full is None:
            pytest.skip("cannot mount a tmpfs here")
        (full / "ballast").write_bytes(b"\0" * 40_000)  # (the rest of the 64 KB goes in the write)
        template = FILE_WRITERS.get(command) or DIR_WRITERS[command]
        src = SPOOLED_JSON if command == "convert" else parquet
        args = [a if a != str(SMALL_JSON) else str(src) for a in argv(template, full / "out.file", parquet)]
        one_error_line(cli(*args), str(full / "out.file"), "No space left on device")
        assert _listing(full) == ["ballast"]


@pytest.mark.parametrize("command", ["convert", "report", "analyze-json"])
def test_a_write_past_the_file_size_limit_is_one_line_and_leaves_nothing(
    command: str, parquet: Path, tmp_path: Path
) -> None:
    """A real OS write error (EFBIG from RLIMIT_FSIZE) in the middle of the write, on any
    machine and for any user: the error is one line and no partial file is left."""
    template = FILE_WRITERS.get(command) or DIR_WRITERS[command]
    out = tmp_path / "outdir" / "out.file"
    out.parent.mkdir()
    r = cli(*argv(template, out, parquet), preexec=file_size_limit(2000))
    one_error_line(r, str(out), "File too large")
    assert _listing(out.parent) == []


def test_a_parent_that_is_a_file_is_one_line_naming_it(parquet: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    for template in (FILE_WRITERS["convert"], FILE_WRITERS["analyze"], DIR_WRITERS["metrics"]):
        r = cli(*argv(template, blocker / "sub" / "out.file", parquet))
        one_error_line(r, f"{blocker} is a regular file, not a directory")
    assert blocker.read_text() == "x"


def test_analyze_o_writes_with_the_umask_and_says_so(parquet: Path, tmp_path: Path) -> None:
    for umask, mode in ((0o022, 0o644), (0o027, 0o640)):
        out = tmp_path / f"analysis{umask:o}.txt"
        r = cli("analyze", str(parquet), "-o", str(out), preexec=lambda m=umask: os.umask(m) and None)
        assert r.returncode == 0, r.stderr
        assert stat.S_IMODE(os.stat(out).st_mode) == mode
        assert f"wrote {out}" in r.stderr


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_temporary_file_of_a_killed_process_is_removed_by_the_next_write(tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    dead = tmp_path / f".x.parquet{TMP_TAG}{_dead_pid()}-abc123.tmp"
    dead.write_bytes(b"half a parquet file")
    dead_dir = tmp_path / f".x.parquet{TMP_TAG}{_dead_pid()}-def456.tmp"
    dead_dir.mkdir()
    live = tmp_path / f".x.parquet{TMP_TAG}{os.getpid()}-ghi789.tmp"  # (this test's process: alive)
    live.write_bytes(b"being written")
    other = tmp_path / ".x.parquet.notours.tmp"  # (not our name: never touched)
    other.write_bytes(b"someone else's")
    r = cli("convert", str(SMALL_JSON), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert _listing(tmp_path) == sorted([live.name, other.name, out.name])


def test_sigkill_during_the_parquet_write_leaves_a_temporary_file_the_next_run_removes(tmp_path: Path) -> None:
    """The real case: a convert killed (SIGKILL: nothing of ours runs) while its Parquet file
    is being written leaves the temporary file; the next convert to that name removes it."""
    out = tmp_path / "x.parquet"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), "NEURON_EXPLORER_SPOOL_EVENTS": "0"}
    env["NEURON_EXPLORER_SPOOL_DIR"] = str(tmp_path)
    for _ in range(5):  # (the write lasts a fraction of a second: catch it, or try again)
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuron_explorer", "convert", str(SPOOLED_JSON), "-o", str(out), "-q"], env=env
        )
        tmp = []
        while proc.poll() is None and not tmp:
            tmp = [n for n in os.listdir(tmp_path) if n.startswith(f".x.parquet{TMP_TAG}{proc.pid}-")]
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if tmp and not out.exists():
            break
        out.unlink(missing_ok=True)
    else:
        pytest.skip("the write was never caught in progress")
    assert (tmp_path / tmp[0]).exists()
    r = cli("convert", str(SMALL_JSON), "-o", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / tmp[0]).exists() and out.exists()
