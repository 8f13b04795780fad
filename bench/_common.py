"""Helpers the benchmarks share: measuring a child process, decompression speed, the result table.

Peak RSS is the child's own ``ru_maxrss`` from ``os.wait4`` (per child, unlike
``RUSAGE_CHILDREN``, which is the maximum over every child ever waited for).
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    from isal import igzip as _isal_gzip
except ImportError:  # pragma: no cover - isal is a dependency of the project
    _isal_gzip = None


@dataclass
class Measured:
    """One child process: wall clock from spawn to exit, its peak RSS, its CPU time (user +
    system; on a shared machine the steadier figure) and what it printed."""

    wall_s: float
    peak_rss_bytes: int
    cpu_s: float
    returncode: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        """The last stdout line parsed as JSON (how the in-process probes report)."""
        lines = [ln for ln in self.stdout.splitlines() if ln.strip()]
        if not lines:
            raise RuntimeError(f"the child printed nothing; stderr:\n{self.stderr[-2000:]}")
        return json.loads(lines[-1])


def run_measured(
    cmd: Sequence[str], cwd: str | Path | None = None, env: dict[str, str] | None = None, timeout: float = 1800
) -> Measured:
    """Run ``cmd`` to completion (raising with its stderr when it fails), reaped with
    ``os.wait4`` to get its own peak RSS.

    Output goes to temporary files (not pipes) so the parent can block in ``wait4`` without a
    pipe filling up and stalling the child.
    """
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        start = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=out_f, stderr=err_f, text=True)
        killer = threading.Timer(timeout, proc.kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            killer.cancel()
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    if status and os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9 and wall >= timeout:
        raise RuntimeError(f"timed out after {timeout:.0f} s: {' '.join(cmd)}")
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: {' '.join(cmd)}\n{err[-3000:]}")
    return Measured(wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime, proc.returncode, out, err)


def repeat(fn: Callable[[], Measured], times: int) -> list[Measured]:
    return [fn() for _ in range(max(1, times))]


def median_of(runs: list[Measured], key: Callable[[Measured], float]) -> float:
    return statistics.median(key(r) for r in runs)


def decompress_seconds(path: Path, use_isal: bool = True, chunk: int = 16 << 20) -> tuple[float, int]:
    """Seconds to stream-decompress ``path`` to nowhere, and the uncompressed size."""
    opener = _isal_gzip.open if (use_isal and _isal_gzip is not None) else gzip.open
    start = time.perf_counter()
    total = 0
    with opener(path, "rb") as fh:
        while True:
            block = fh.read(chunk)
            if not block:
                break
            total += len(block)
    return time.perf_counter() - start, total


# ------------------------------------------------------------------------------- the table
@dataclass
class Row:
    """One line of the result table. ``ratio`` is how many times better ours is than the
    reference (already oriented: > 1 is better); ``target`` the ratio or value to reach."""

    metric: str
    ours: str
    reference: str = ""
    ratio: float | None = None
    target: str = ""
    passed: bool | None = None
    note: str = ""
    values: dict[str, Any] = field(default_factory=dict)


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def print_table(rows: list[Row], title: str) -> str:
    """Render rows as a fixed-width table (also returned, for saving)."""
    headers = ("metric", "ours", "reference", "ratio", "target", "result")
    body = [
        (
            r.metric,
            r.ours,
            r.reference,
            "" if r.ratio is None else f"{r.ratio:,.1f}x",
            r.target,
            "" if r.passed is None else ("PASS" if r.passed else "FAIL"),
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = [title, line, "  ".join(h.ljust(w) for h, w in zip(headers, widths)), line]
    out += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    out.append(line)
    notes = [f"  {r.metric}: {r.note}" for r in rows if r.note]
    if notes:
        out += ["notes:", *notes]
    text = "\n".join(out)
    print(text, flush=True)
    return text
