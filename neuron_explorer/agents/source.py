"""Source-code access for agents, confined to the roots the user gave the server.

An agent asks for the code around a ``src_file:src_line`` the trace blames. A trace may come
from anyone, so nothing in it widens what is served: the roots are the directories the user
named with ``--source-root`` (the current directory when none is named), never directories a
trace records. A file is served only if all of these hold:

- after every symlink and ``..`` is resolved (``os.path.realpath``) it lies inside a root, no
  component under the root is hidden (``.ssh``, ``.env``, ``.git``), and it is not under
  ``/proc``, ``/sys`` or ``/dev``;
- it is a regular file with exactly one link (a hard link inside a root can name a file
  outside it), opened without following a symlink, and the opened file is the one checked
  (same device and inode; on Linux its ``/proc/self/fd`` path is inside the root too), so
  swapping a path between the check and the open gains nothing;
- it is text: at most ``MAX_SOURCE_BYTES``, no NUL byte, valid UTF-8.

Anything else is refused with a one-line message that says why and names the roots, so the
agent knows what it may ask for.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neuron_explorer.trace.errors import NeuronExplorerError

#: Files larger than this are not source code an agent should page through.
MAX_SOURCE_BYTES = 8 * 1024 * 1024
MAX_CONTEXT_LINES = 200
#: Pseudo file systems whose files are the machine's state, not anyone's source.
_SYSTEM_DIRS = ("/proc", "/sys", "/dev")
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class SourceAccessError(NeuronExplorerError):
    """A source file an agent asked for is outside the roots, missing, or not a text file."""


def default_roots(given: Sequence[str | Path]) -> list[Path]:
    """The roots the user chose: ``given``, or else the current directory (never ``/``)."""
    if given:
        return [Path(r).expanduser() for r in given]
    cwd = Path.cwd()
    # A GUI client starts its servers in / : serving the whole disk is nobody's intent.
    return [] if cwd == Path(cwd.anchor) else [cwd]


class SourceAccess:
    """Reads source lines, but only from files whose real path lies inside a root."""

    def __init__(self, roots: Sequence[str | Path]) -> None:
        resolved: list[str] = []
        for root in roots:
            real = os.path.realpath(os.fspath(root))
            if os.path.isdir(real) and real not in resolved:
                resolved.append(real)
        self._roots = resolved

    @property
    def roots(self) -> list[str]:
        return list(self._roots)

    def _root_of(self, real: str) -> str | None:
        inside = [root for root in self._roots if real == root or os.path.commonpath([real, root]) == root]
        return max(inside, key=len) if inside else None

    def resolve(self, file: str) -> Path:
        """The real path of ``file`` (absolute, or relative to a root) if it is a file inside a root."""
        path, _ = self._find(file)
        return path

    def _find(self, file: str) -> tuple[Path, str]:
        if not file or "\x00" in file:
            raise SourceAccessError("give a source file path, as the trace records it in src_file")
        if not self._roots:
            raise SourceAccessError(
                "this server was given no source roots, so it shows no source code; restart it with "
                "--source-root DIR (the directory your code lives in)"
            )
        candidates = [file] if os.path.isabs(file) else [os.path.join(root, file) for root in self._roots]
        refused: str | None = None
        for candidate in candidates:
            # realpath resolves every symlink and '..', so the checks below see where the bytes really are.
            real = os.path.realpath(candidate)
            root = self._root_of(real)
            if root is None:
                if os.path.lexists(candidate):
                    refused = f"it resolves outside the source roots this server may read ({', '.join(self._roots)})"
                continue
            if os.path.lexists(real):
                why = _refusal(real, root)
                if why:
                    raise SourceAccessError(f"refused: {file!r} {why}")
                return Path(real), root
        roots = ", ".join(self._roots)
        if refused is not None or os.path.isabs(file) or ".." in Path(file).parts:
            raise SourceAccessError(
                f"refused: {file!r} " + (refused or f"resolves outside the source roots this server may read ({roots})")
            )
        raise SourceAccessError(f"no file {file!r} under the source roots ({roots})")

    def read_text(self, file: str) -> tuple[Path, str]:
        """The real path and the text of ``file``, if every rule of this module allows it."""
        path, root = self._find(file)
        try:
            before = os.stat(path)
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as exc:
            raise SourceAccessError(f"cannot read {file!r}: {exc.strerror or exc}") from None
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(opened.st_mode):
                raise SourceAccessError(f"refused: {file!r} changed while it was being opened")
            if opened.st_nlink != 1:
                raise SourceAccessError(f"refused: {file!r} {_hard_links(opened.st_nlink)}")
            fd_path = f"/proc/self/fd/{fd}"
            if os.path.islink(fd_path) and self._root_of(os.readlink(fd_path)) != root:
                raise SourceAccessError(f"refused: {file!r} changed while it was being opened")
            if opened.st_size > MAX_SOURCE_BYTES:
                raise SourceAccessError(f"{file!r} is {opened.st_size:,} bytes, too large to be a source file")
            data = _read(fd, MAX_SOURCE_BYTES + 1)
        finally:
            os.close(fd)
        if len(data) > MAX_SOURCE_BYTES:
            raise SourceAccessError(f"{file!r} is over {MAX_SOURCE_BYTES:,} bytes, too large to be a source file")
        if b"\x00" in data:
            raise SourceAccessError(f"refused: {file!r} is a binary file, not source code")
        try:
            return path, data.decode("utf-8")
        except UnicodeDecodeError:
            raise SourceAccessError(f"refused: {file!r} is not UTF-8 text, so not source code shown here") from None

    def read_lines(self, file: str) -> list[str]:
        return self.read_text(file)[1].splitlines()

    def context(self, file: str, line: int, context: int = 10) -> dict[str, Any]:
        """The lines ``line - context`` .. ``line + context`` of ``file``, numbered from 1."""
        if line < 1:
            raise SourceAccessError(f"line must be 1 or more, not {line}")
        context = max(0, min(int(context), MAX_CONTEXT_LINES))
        path, text = self.read_text(file)
        lines = text.splitlines()
        if line > len(lines):
            raise SourceAccessError(
                f"{file!r} has {len(lines)} lines, so it has no line {line} (the file may have changed since the trace)"
            )
        first = max(1, line - context)
        last = min(len(lines), line + context)
        return {
            "file": file,
            "path": str(path),
            "line": line,
            "first_line": first,
            "last_line": last,
            "total_lines": len(lines),
            "lines": [{"line": n, "text": lines[n - 1], "is_target": n == line} for n in range(first, last + 1)],
        }


def _refusal(real: str, root: str) -> str | None:
    """Why the resolved path ``real`` inside ``root`` is not served; None when it may be."""
    if any(real == d or real.startswith(d + os.sep) for d in _SYSTEM_DIRS):
        return "is a system file (/proc, /sys, /dev), not source code"
    rel = os.path.relpath(real, root)
    if any(part.startswith(".") for part in Path(rel).parts if part not in (".", "..")):
        return "is hidden (a path component starts with '.'), and hidden files (.ssh, .env, .git) are not served"
    try:
        st = os.stat(real)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_nlink != 1:
        return _hard_links(st.st_nlink)
    return None


def _hard_links(n: int) -> str:
    return (
        f"has {n} hard links; a hard link inside a root can be a file from outside it, so it is not served "
        "(copy the file into the root, or serve the directory it was linked from)"
    )


def _read(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size < limit:
        chunk = os.read(fd, min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
