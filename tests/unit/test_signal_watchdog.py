"""A signal that arrives while the main thread is in a long C call that releases the GIL and
never checks for signals (a DuckDB query, a Parquet write; here PBKDF2) still ends the process
within ``signals.GRACE_S``, removing the temporary outputs it has open (``cli.signals``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_explorer.cli import signals

ROOT = Path(__file__).resolve().parents[2]
# "ready" comes from a second thread once the main thread has been in the C call a while: a
# signal sent between a "ready" printed by the main thread and its entering the call is handled
# at once by Python (seen on a loaded machine: the process ended in 0.05 s, not the grace time).
STUCK = """
import hashlib, sys, threading, time
from neuron_explorer.cli import signals
from neuron_explorer.trace import atomic
def ready():
    time.sleep(0.5)
    print("ready", flush=True)
with signals.handled():
    with atomic.atomic_path(sys.argv[1]) as tmp:
        tmp.write_text("partial")
        threading.Thread(target=ready, daemon=True).start()
        hashlib.pbkdf2_hmac("sha256", b"p", b"s", 2**31 - 1)  # (minutes in C, no signal check)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_a_process_stuck_in_c_within_the_grace_time(signum: int, tmp_path: Path) -> None:
    out = tmp_path / "x.out"
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert len(os.listdir(tmp_path)) == 1  # the temporary file
        t0 = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=signals.GRACE_S + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert signals.GRACE_S - 1 <= time.monotonic() - t0 < signals.GRACE_S + 30
    assert proc.returncode == 128 + signum
    assert stderr.strip() == f"neuron-explorer: interrupted ({signal.Signals(signum).name})"
    assert os.listdir(tmp_path) == []
