"""Source-code access for agents, confined to the roots the user gave the server.

An agent asks for the code around a ``src_file:src_line`` the trace blames. A trace may come
from anyone, so nothing in it widens what is served: the roots are the directories the user
named with ``--source-root`` (the current directory when none is named), never directories a
trace records. Each root is resolved once, when the server starts (the user's own symlinks are
trusted); below a root the path is never handed to the kernel whole. It is walked one
component at a time, each opened relative to its parent's descriptor with ``O_NOFOLLOW``, so
the file read is the one checked and swapping a path during the walk gains nothing:

- every step stays inside a root: ``..`` and symlinks are resolved here (``os.readlink``, at
  most ``MAX_SYMLINKS`` of them), and one that leaves the roots is refused;
- no component passed through below the root is hidden (``.ssh``, ``.env``, ``.git``), and no
  step enters ``/proc``, ``/sys`` or ``/dev``;
- the opened file is a regular file with exactly one link (a hard link inside a root can name
  a file outside it), the same inode the walk saw, not on a pseudo file system (the device of
  ``/proc``, ``/sys``, ``/dev``, or procfs, sysfs and their kin on Linux), and each directory
  of the walk is still the child of the one before (checked through ``..`` after the open);
- it is text: at most ``MAX_SOURCE_BYTES``, no NUL byte, valid UTF-8, read from that
  descriptor only.

Anything else, every ``OSError`` included, is refused with a one-line message that says why and
names the roots, so the agent knows what it may ask for. Where the platform cannot open a file
relative to a directory without following symlinks, no code is served at all.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from neuron_explorer.trace.errors import NeuronExplorerError

#: Files larger than this are not source code an agent should page through.
MAX_SOURCE_BYTES = 8 * 1024 * 1024
MAX_CONTEXT_LINES = 200
#: Symlinks followed while resolving one path (Linux's own limit).
MAX_SYMLINKS = 40
#: Pseudo file systems whose files are the machine's state, not anyone's source.
_SYSTEM_DIRS = ("/proc", "/sys", "/dev")
_SYSTEM_TOP = frozenset(d.strip("/") for d in _SYSTEM_DIRS)
#: Linux statfs f_type of procfs, sysfs and the other kernel-state file systems.
_PSEUDO_FS = frozenset(
    {
        0x9FA0,  # proc
        0x62656572,  # sysfs
        0x64626720,  # debugfs
        0x74726163,  # tracefs
        0x73636673,  # securityfs
        0x27E0EB,  # cgroup
        0x63677270,  # cgroup2
        0xCAFE4A11,  # bpf
        0x1CD1,  # devpts
        0x62656570,  # configfs
        0xDE5E81E4,  # efivarfs
        0x6165676C,  # pstore
        0xF97CFF8C,  # selinuxfs
        0x42494E4D,  # binfmt_misc
        0x65735543,  # fusectl
        0x19800202,  # mqueue
        0x6E736673,  # nsfs
    }
)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | _O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | _O_CLOEXEC
#: openat, fstatat and readlinkat without following symlinks: what the walk needs.
_CAN_WALK = (
    bool(_O_NOFOLLOW and _O_DIRECTORY)
    and {os.open, os.stat, os.readlink} <= os.supports_dir_fd
    and os.stat in os.supports_follow_symlinks
)


class SourceAccessError(NeuronExplorerError):
    """A source file an agent asked for is outside the roots, missing, or not a text file."""


class _Missing(Exception):
    """The path names nothing in this root (try the next)."""


class _Outside(Exception):
    """The path leaves the roots (try the next; refused if none serves it)."""


def default_roots(given: Sequence[str | Path]) -> list[Path]:
    """The roots the user chose: ``given``, or else the current directory (never ``/``)."""
    if given:
        return [Path(r).expanduser() for r in given]
    cwd = Path.cwd()
    # A GUI client starts its servers in / : serving the whole disk is nobody's intent.
    return [] if cwd == Path(cwd.anchor) else [cwd]


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _under(parts: list[str], root: list[str]) -> bool:
    return parts[: len(root)] == root


class SourceAccess:
    """Reads source lines, but only from files reached inside a root by the walk above."""

    def __init__(self, roots: Sequence[str | Path]) -> None:
        resolved: list[str] = []
        spellings: list[tuple[list[str], list[str]]] = []
        for root in roots:
            given = os.path.abspath(os.fspath(root))
            real = os.path.realpath(given)  # the user's own symlinks, resolved once: trusted
            if not os.path.isdir(real):
                continue
            if real not in resolved:
                resolved.append(real)
            spellings += [(_parts(real), _parts(real)), (_parts(given), _parts(real))]
        self._roots = resolved
        self._root_parts = [_parts(r) for r in resolved]
        # An absolute src_file may be spelled through the root as the user named it.
        self._spellings = sorted(spellings, key=lambda s: len(s[0]), reverse=True)
        self._system_devs: set[int] = set()
        for directory in _SYSTEM_DIRS:
            with contextlib.suppress(OSError):
                self._system_devs.add(os.stat(directory).st_dev)

    @property
    def roots(self) -> list[str]:
        return list(self._roots)

    def resolve(self, file: str) -> Path:
        """The real path of ``file`` (absolute, or relative to a root) if it is a file inside a root."""
        fd, path = self._open(file)
        os.close(fd)
        return path

    def read_text(self, file: str) -> tuple[Path, str]:
        """The real path and the text of ``file``, if every rule of this module allows it."""
        fd, path = self._open(file)
        try:
            size = os.fstat(fd).st_size
            if size > MAX_SOURCE_BYTES:
                raise SourceAccessError(f"{file!r} is {size:,} bytes, too large to be a source file")
            data = _read(fd, MAX_SOURCE_BYTES + 1)
        except OSError as exc:
            raise self._os_error(file, exc) from None
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
            "lines": [
                {"line": n, "text": _shown(lines[n - 1]), "is_target": n == line} for n in range(first, last + 1)
            ],
        }

    # ------------------------------------------------------------------------------ the walk
    def _open(self, file: str) -> tuple[int, Path]:
        """A descriptor of the regular file ``file`` names inside a root, and its real path."""
        if not file or "\x00" in file:
            raise SourceAccessError("give a source file path, as the trace records it in src_file")
        if not self._roots:
            raise SourceAccessError(
                "this server was given no source roots, so it shows no source code; restart it with "
                "--source-root DIR (the directory your code lives in)"
            )
        if not _CAN_WALK:
            raise SourceAccessError(
                "this platform cannot open a file relative to a directory without following symlinks "
                "(openat with O_NOFOLLOW), so this server shows no source code"
            )
        roots = ", ".join(self._roots)
        if os.path.isabs(file):
            anchored = self._anchor(file)
            candidates = [anchored] if anchored else []
        else:
            candidates = [a for a in (self._anchor(os.path.join(root, file)) for root in self._roots) if a]
        refused = not candidates
        for root, parts in candidates:
            try:
                return self._walk(file, root, parts)
            except _Missing:
                continue
            except _Outside:
                refused = True
        if refused:
            raise SourceAccessError(
                f"refused: {file!r} resolves outside the source roots this server may read ({roots})"
            )
        raise SourceAccessError(f"no file {file!r} under the source roots ({roots})")

    def _anchor(self, path: str) -> tuple[list[str], list[str]] | None:
        """The outermost root holding the absolute ``path`` and the components below it, or None.

        ``path`` is matched against the roots by its spelling first; failing that, its
        ``realpath`` picks the root (an untrusted guess: the walk checks every component again).
        """
        parts = _parts(path)
        full = next((real + parts[len(spelled) :] for spelled, real in self._spellings if _under(parts, spelled)), None)
        if full is None:
            try:
                full = _parts(os.path.realpath(path))
            except (OSError, ValueError):
                return None
        outer = [root for root in self._root_parts if _under(full, root)]
        if not outer:
            return None
        root = min(outer, key=len)
        return root, full[len(root) :]

    def _check_step(self, file: str, position: list[str]) -> None:
        """Refuse a step of the walk that leaves the roots, enters a system or a hidden directory."""
        if position and position[0] in _SYSTEM_TOP:
            raise SourceAccessError(f"refused: {file!r} is a system file (/proc, /sys, /dev), not source code")
        inside = [root for root in self._root_parts if _under(position, root)]
        if not inside:
            raise _Outside
        below = position[len(max(inside, key=len)) :]
        on_the_way = any(len(root) > len(position) and _under(root, position) for root in self._root_parts)
        if any(part.startswith(".") for part in below) and not on_the_way:
            raise SourceAccessError(
                f"refused: {file!r} is hidden (a path component starts with '.'), and hidden files "
                "(.ssh, .env, .git) are not served"
            )

    def _walk(self, file: str, root: list[str], parts: list[str]) -> tuple[int, Path]:
        pending = parts[::-1]  # the components still to walk, the next one last
        stack: list[tuple[str, int, os.stat_result]] = []  # the directories opened below root
        root_fd, links = -1, 0
        try:
            root_fd = os.open("/" + "/".join(root), _DIR_FLAGS)
            root_st = os.fstat(root_fd)
            while pending:
                name = pending.pop()
                if name == "..":
                    if not stack:
                        raise _Outside
                    os.close(stack.pop()[1])
                    continue
                position = root + [entry[0] for entry in stack] + [name]
                self._check_step(file, position)
                parent = stack[-1][1] if stack else root_fd
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > MAX_SYMLINKS:
                        raise SourceAccessError(f"refused: {file!r} passes through over {MAX_SYMLINKS} symlinks")
                    try:
                        target = os.readlink(name, dir_fd=parent)
                    except OSError as exc:  # EINVAL: no longer a symlink since the fstatat
                        raise self._changed(file) if exc.errno == errno.EINVAL else exc from None
                    if target.startswith("/"):  # start again from the root that holds the target
                        anchored = self._anchor(target)
                        if anchored is None:
                            raise _Outside
                        for entry in stack:
                            os.close(entry[1])
                        stack.clear()
                        os.close(root_fd)
                        root_fd = -1
                        root, rest = anchored
                        root_fd = os.open("/" + "/".join(root), _DIR_FLAGS)
                        root_st = os.fstat(root_fd)
                        pending += rest[::-1]
                    else:
                        pending += _parts(target)[::-1]
                    continue
                if pending:  # a directory on the way
                    if not stat.S_ISDIR(st.st_mode):
                        raise _Missing
                    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
                    stack.append((name, fd, os.fstat(fd)))
                    if not _same(stack[-1][2], st):
                        raise self._changed(file)
                    continue
                if not stat.S_ISREG(st.st_mode):
                    raise SourceAccessError(f"refused: {file!r} is not a regular file")
                if st.st_nlink != 1:
                    raise SourceAccessError(f"refused: {file!r} {_hard_links(st.st_nlink)}")
                fd = os.open(name, _FILE_FLAGS, dir_fd=parent)
                try:
                    self._check_opened(file, fd, st, root_st, stack)
                except BaseException:
                    os.close(fd)
                    raise
                return fd, Path("/" + "/".join(position))
            raise SourceAccessError(f"refused: {file!r} is not a regular file")  # it names a directory
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise _Missing from None
            raise self._os_error(file, exc) from None
        finally:
            for entry in stack:
                os.close(entry[1])
            if root_fd >= 0:
                os.close(root_fd)

    def _check_opened(
        self, file: str, fd: int, seen: os.stat_result, root_st: os.stat_result, stack: list[tuple[str, int, Any]]
    ) -> None:
        """The opened file is the one the walk saw, still below the root, and not the kernel's state."""
        opened = os.fstat(fd)
        if not _same(opened, seen) or not stat.S_ISREG(opened.st_mode):
            raise self._changed(file)
        if opened.st_nlink != 1:
            raise SourceAccessError(f"refused: {file!r} {_hard_links(opened.st_nlink)}")
        if opened.st_dev in self._system_devs or _fs_type(fd) in _PSEUDO_FS:
            raise SourceAccessError(f"refused: {file!r} is a system file (/proc, /sys, /dev), not source code")
        for i, (_, dir_fd, _) in enumerate(stack):  # each directory is still the child of the one before
            up = os.open("..", _DIR_FLAGS, dir_fd=dir_fd)
            try:
                if not _same(os.fstat(up), stack[i - 1][2] if i else root_st):
                    raise self._changed(file)
            finally:
                os.close(up)

    def _changed(self, file: str) -> SourceAccessError:
        return SourceAccessError(f"refused: {file!r} changed while it was being opened; ask again")

    def _os_error(self, file: str, exc: OSError) -> SourceAccessError:
        if exc.errno == errno.ELOOP:  # a component became a symlink between its check and its open
            return self._changed(file)
        why = exc.strerror or type(exc).__name__
        return SourceAccessError(f"cannot read {file!r}: {why} (source roots: {', '.join(self._roots)})")


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@functools.cache
def _fstatfs() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).fstatfs
    except (OSError, AttributeError, ImportError):
        return None


def _fs_type(fd: int) -> int | None:
    """The Linux statfs ``f_type`` of the file system ``fd`` lies on; None where it is unknown."""
    fstatfs = _fstatfs()
    if fstatfs is None:
        return None
    import ctypes

    buf = ctypes.create_string_buffer(512)  # struct statfs is 120 bytes on 64-bit Linux
    if fstatfs(fd, buf) != 0:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF  # f_type: the first member, a long


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


#: The most characters of one source line ``context`` shows: a generated or minified line of 8 MB
#: was cut from every answer whole, at any budget, so its neighbours never showed either.
MAX_LINE_CHARS = 2_000


def _shown(text: str) -> str:
    return (
        text if len(text) <= MAX_LINE_CHARS else f"{text[:MAX_LINE_CHARS]}...[{len(text) - MAX_LINE_CHARS} chars cut]"
    )
