"""SIGINT, SIGTERM and SIGHUP end every command promptly and leave nothing of ours behind.

While a command runs, each of these signals raises an exception in the main thread
(``KeyboardInterrupt`` for SIGINT, ``Terminated`` for the others), so the ``finally`` and
``except BaseException`` blocks that remove temporary files and spools run, and ``cli.main``
exits with 128 + the signal number (130, 143, 129) after one line. The signal is remembered:
code that turns the exception into another one (DuckDB answers an interrupted query with its
own error) still ends as an interruption, not as an error or a traceback.

SIGINT and SIGTERM are handled even when the parent started the process with them ignored (a
background job of a non-interactive shell ignores SIGINT): a signal sent to this command is
meant for it. SIGHUP is left ignored under ``nohup``.

Python runs a signal handler only between bytecodes: a long call in C (one regular-expression
scan of a 100 MB string, a Parquet row group) delays it. A watchdog thread woken by the
signal itself (``signal.set_wakeup_fd``) ends the process when the main thread has not done
so ``GRACE_S`` seconds later: it removes the temporary outputs and spools this process has
open (``trace.atomic``), prints the line and exits with the same status.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
#: Seconds the main thread has to end after a signal before the watchdog ends the process.
GRACE_S = 5.0


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (a ``BaseException``, like ``KeyboardInterrupt``: not an error)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if not _received:
        _received.append(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def received() -> int | None:
    """The signal that interrupted the command, or None."""
    return _received[0] if _received else None


def exit_code(signum: int) -> int:
    return 128 + signum


def name(signum: int) -> str:
    return signal.Signals(signum).name


@contextmanager
def handled(watchdog: bool = True) -> Iterator[None]:
    """Handle the signals (main thread only; elsewhere a no-op) while the block runs; with the
    watchdog thread unless ``watchdog`` is False (``record``: the user's program runs in this
    process, and the profiler records every thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    saved = {}
    for signum in _HANDLED:
        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
            continue
        saved[signum] = signal.signal(signum, _on_signal)
    guard = _Watchdog() if watchdog else None
    try:
        yield
    finally:
        if guard is not None:
            guard.stop()
        for signum, old in saved.items():
            signal.signal(signum, old)


class _Watchdog:
    """Ends the process ``GRACE_S`` after a signal the main thread has not acted on."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)
        try:
            self._previous = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        except (ValueError, OSError):  # (not the main thread of the main interpreter)
            self._previous = None
            os.close(self._read)
            os.close(self._write)
            return
        threading.Thread(target=self._watch, name="neuron-explorer-signal-watchdog", daemon=True).start()

    def _watch(self) -> None:
        try:
            got = os.read(self._read, 1)  # (b"" once ``stop`` closes the write end)
        except OSError:
            got = b""
        finally:
            os.close(self._read)
        if not got or self._done.wait(GRACE_S):
            return
        from neuron_explorer.trace.atomic import remove_temporaries

        signum = received() or got[0]
        remove_temporaries()
        os.write(2, f"neuron-explorer: interrupted ({name(signum)})\n".encode())
        os._exit(exit_code(signum))

    def stop(self) -> None:
        self._done.set()
        if self._previous is not None:
            signal.set_wakeup_fd(self._previous)
            self._previous = None
            os.close(self._write)  # (the reader wakes with b"" and closes its end)
