"""SIGINT and SIGTERM end a command promptly, with 130 / 143, leaving no spool, temporary file
or output (issue 26), through the real CLI.

The command is an out-of-core convert (``NEURON_EXPLORER_SPOOL_EVENTS=0`` forces it on a small
trace): it runs DuckDB queries, which turn an interrupt into their own error, and a spool
directory to remove. The signal goes to the process, or to its whole process group as Ctrl-C
in a terminal sends it; and a SIGINT reaches it even when its parent started it with SIGINT
ignored, as a non-interactive shell starts a background job (the case the issue found: the
convert ran to its end and exited 0).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_explorer.collectors.kineto.spool_store import SPOOL_PREFIX
from tests.integration.faults import ROOT, SPOOLED_JSON

#: How long a command may take to end after the signal.
PROMPT_S = 15.0


def _start(tmp_path: Path, group: bool, ignore_sigint: bool) -> tuple[subprocess.Popen[str], Path]:
    out = tmp_path / "out" / "x.parquet"
    out.parent.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "NEURON_EXPLORER_SPOOL_EVENTS": "0",
        "NEURON_EXPLORER_SPOOL_DIR": str(tmp_path / "spool"),
    }
    (tmp_path / "spool").mkdir()

    def preexec() -> None:
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_explorer", "convert", str(SPOOLED_JSON), "-o", str(out)],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=group,
        preexec_fn=preexec,
    )
    return proc, out


def _wait_for_spool(proc: subprocess.Popen[str], spool: Path) -> None:
    for _ in range(2000):
        if any(p.name.startswith(SPOOL_PREFIX) for p in spool.iterdir()) or proc.poll() is not None:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the convert ended before it could be interrupted"
    time.sleep(0.3)  # (into the spooling, the DuckDB queries)


@pytest.mark.parametrize(
    ("signum", "group", "ignore_sigint"),
    [
        (signal.SIGINT, False, False),
        (signal.SIGINT, True, False),  # Ctrl-C in a terminal: the whole process group
        (signal.SIGINT, False, True),  # a background job of a shell: SIGINT ignored at the start
        (signal.SIGTERM, False, False),
        (signal.SIGTERM, True, False),
    ],
    ids=["sigint", "sigint-group", "sigint-ignored-at-start", "sigterm", "sigterm-group"],
)
def test_a_signal_ends_a_spooled_convert_promptly_and_leaves_nothing(
    signum: int, group: bool, ignore_sigint: bool, tmp_path: Path
) -> None:
    proc, out = _start(tmp_path, group, ignore_sigint)
    _wait_for_spool(proc, tmp_path / "spool")
    t0 = time.monotonic()
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    try:
        _, stderr = proc.communicate(timeout=PROMPT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - t0 < PROMPT_S
    assert proc.returncode == 128 + signum, stderr
    assert stderr.strip().splitlines()[-1] == f"neuron-explorer: interrupted ({signal.Signals(signum).name})", stderr
    assert "Traceback" not in stderr
    assert os.listdir(tmp_path / "spool") == []  # the spool is gone
    assert os.listdir(out.parent) == []  # no output, no temporary file
