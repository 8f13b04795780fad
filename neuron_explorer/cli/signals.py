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
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []


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
def handled() -> Iterator[None]:
    """Handle the signals (main thread only; elsewhere a no-op) while the block runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _received.clear()
    saved = {}
    for signum in _HANDLED:
        if signum == signal.SIGHUP and signal.getsignal(signum) == signal.SIG_IGN:
            continue
        saved[signum] = signal.signal(signum, _on_signal)
    try:
        yield
    finally:
        for signum, old in saved.items():
            signal.signal(signum, old)
