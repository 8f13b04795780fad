"""What kind of file an input may be.

``require_input`` refuses, before anything opens it, an input that is not a regular file or a directory: opening
a FIFO blocks until someone writes to it, and a device never ends.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from neuron_explorer.trace.errors import TraceFormatError, TraceNotFoundError

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def require_input(path: str | os.PathLike[str]) -> os.stat_result:
    """The ``stat`` of an input that is a regular file or a directory (symbolic links followed);
    ``TraceNotFoundError`` when it does not exist, ``TraceFormatError`` for anything else."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise TraceNotFoundError("no such file or directory", p) from None
    except OSError as exc:
        raise TraceFormatError(f"cannot read it ({exc.strerror or type(exc).__name__})", p) from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise TraceFormatError(f"is {file_kind(st.st_mode)}, not a trace file or directory", p)
    return st
