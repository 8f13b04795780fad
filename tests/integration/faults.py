"""Shared pieces of the fault suite (issue 26): the real CLI in a subprocess, the commands that
write an output, and the file systems that fail (read-only, full) where this machine can make
them."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from tests.conftest import KINETO

ROOT = Path(__file__).resolve().parents[2]
SMALL_JSON = KINETO / "local" / "example_cpu_small.json"
#: A trace with enough events that a spooled convert runs a few seconds.
SPOOLED_JSON = KINETO / "tracelens" / "qwen_h100.json.gz"
ERROR = "neuron-explorer: error: "


def cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    preexec: Callable[[], None] | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``neuron-explorer ARGS`` as a user runs it: a new process, this checkout first."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "neuron_explorer", *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd,
        preexec_fn=preexec,
        timeout=timeout,
    )


def one_error_line(result: subprocess.CompletedProcess[str], *words: str) -> str:
    """Assert exit status 3 and exactly one error line on stderr holding ``words``; return it."""
    assert result.returncode == 3, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR), result.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


#: Every command that writes an output file: its arguments, ``{o}`` standing for the output
#: (``{parquet}`` for a converted trace to read).
FILE_WRITERS: dict[str, tuple[str, ...]] = {
    "convert": ("convert", str(SMALL_JSON), "-o", "{o}", "-q"),
    "analyze": ("analyze", "{parquet}", "-o", "{o}"),
    "analyze-json": ("analyze", "{parquet}", "--format", "json", "-o", "{o}"),
    "report": ("report", "{parquet}", "-o", "{o}", "-q"),
    "export": ("export", "{parquet}", "--format", "chrome", "-o", "{o}"),
    "diff": ("diff", "{parquet}", "{parquet}", "-o", "{o}"),
}
#: ... and a directory.
DIR_WRITERS: dict[str, tuple[str, ...]] = {"metrics": ("metrics", "{parquet}", "-o", "{o}")}


def argv(template: tuple[str, ...], output: Path | str, parquet: Path) -> list[str]:
    return [a.format(o=output, parquet=parquet) for a in template]


def _mount(*args: str) -> bool:
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only_dir(tmp_path: Path) -> Iterator[tuple[Path, str] | None]:
    """A directory writes to fail in, and the error expected: a read-only bind mount as root
    (where permissions do not stop root), a directory without write permission otherwise;
    None where neither can be made."""
    target = tmp_path / "ro"
    target.mkdir()
    if os.geteuid() == 0:
        src = tmp_path / "ro_src"
        src.mkdir()
        if not _mount("--bind", "-o", "ro", str(src), str(target)):
            yield None
            return
        try:
            yield target, "Read-only file system"
        finally:
            subprocess.run(["umount", str(target)], capture_output=True)
        return
    target.chmod(0o555)
    try:
        yield target, "Permission denied"
    finally:
        target.chmod(0o755)


@contextlib.contextmanager
def full_dir(tmp_path: Path, size: str = "64k") -> Iterator[Path | None]:
    """A directory on a tiny tmpfs (ENOSPC once ``size`` is used), None where it cannot be mounted."""
    target = tmp_path / "full"
    target.mkdir()
    if not _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)):
        yield None
        return
    try:
        yield target
    finally:
        subprocess.run(["umount", str(target)], capture_output=True)


def file_size_limit(limit: int) -> Callable[[], None]:
    """A ``preexec_fn``: writes past ``limit`` bytes fail with EFBIG (the kernel's RLIMIT_FSIZE;
    SIGXFSZ ignored so the write returns the error instead of killing the process)."""

    def apply() -> None:
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply
