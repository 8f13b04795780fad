"""Every output the tool writes, through one helper: checked, atomic, and never half there.

- **Only a regular file or a new name.** ``check_output`` refuses an output that exists and is
  a directory (where a file is wanted), a device node, a FIFO, a socket or a symbolic link,
  in one line naming it: as root ``-o /dev/null`` would otherwise replace the system's
  ``/dev/null`` with a regular file, and a symbolic link would be replaced, not followed.
  Commands call it before their work, and the write checks again.
- **Atomic.** ``atomic_path`` (a file) and ``atomic_dir`` (a directory) hand out a temporary
  name beside the target; the body writes it, the data is flushed to disk (``fsync``), it gets
  the usual permissions (0666 or 0777 less the umask, not the private ones of a temporary file)
  and is renamed onto the target. A failed or interrupted write removes the temporary name, so
  no partial output is ever left looking complete.
- **One line per write error.** Every ``OSError`` of the write (no permission, a read-only
  file system, a full disk, an I/O error, a parent that cannot be made) becomes an
  ``OutputError`` naming the output and the reason; the CLI prints it and exits with 3.
- **Stale temporaries removed.** A temporary name says it is ours and which process owns it
  (``.NAME.neuron-explorer-PID-XXXX.tmp``); one left by a process that was killed (SIGKILL, the
  OOM killer) is removed by the next write beside it, and a live process's is left alone.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.trace.paths import file_kind
from neuron_explorer.trace.printable import printable

#: The part of a temporary name that marks it as ours; the owner's pid follows.
TMP_TAG = ".neuron-explorer-"
TMP_SUFFIX = ".tmp"

#: Temporary paths this process is writing now (removed by ``remove_temporaries`` when a
#: signal ends the command while one is open).
_LIVE: set[str] = set()


class OutputError(NeuronExplorerError):
    """An output cannot be written: the path is not a regular file or a new name, or the
    write failed (permissions, a read-only or full file system, an I/O error)."""


def describe_os_error(exc: OSError) -> str:
    """``No space left on device (ENOSPC)``: the reason and its errno name."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    code = errno.errorcode.get(exc.errno or -1)
    return f"{reason} ({code})" if code and code not in reason else reason


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_output(path: str | Path, directory: bool = False) -> Path:
    """``path`` when it may be written: a new name, or an existing regular file (a directory
    when ``directory``); else ``OutputError`` in one line naming it."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise OutputError(f"cannot write here: {_not_a_directory(path)}", path) from None
    except OSError as exc:
        raise OutputError(f"cannot write here ({describe_os_error(exc)})", path) from None
    if st is not None:
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            raise OutputError("is a symbolic link; refusing to replace it: name the file itself", path)
        wanted = stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)
        if not wanted:
            kind = "a directory" if directory else "a file"
            hint = "; give a file name such as out.parquet" if stat.S_ISDIR(mode) else ""
            raise OutputError(f"is {file_kind(mode)}, not {kind}: refusing to write onto it{hint}", path)
    parent = path.parent
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        return path  # made by the write (``_make_parent``), or its error then
    except OSError as exc:
        raise OutputError(f"cannot write here ({describe_os_error(exc)})", path) from None
    if not stat.S_ISDIR(pst.st_mode):
        raise OutputError(f"cannot write here: {_not_a_directory(path)}", path)
    return path


def _not_a_directory(path: Path) -> str:
    """Which of ``path``'s parents exists and is not a directory, in words."""
    for parent in reversed(path.parents):
        try:
            st = os.stat(parent)
        except OSError:
            break
        if not stat.S_ISDIR(st.st_mode):
            return f"{printable(parent)} is {file_kind(st.st_mode)}, not a directory"
    return "a parent is not a directory"


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot make its directory ({describe_os_error(exc)})", path) from None


def _tmp_pattern(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(f".{name}{TMP_TAG}") + r"(\d+)-[^/]*" + re.escape(TMP_SUFFIX))


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (this process included; another user's counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (another user's process: it exists)
        return True
    return True


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Remove the temporary names of ours beside ``path`` whose owner process is gone."""
    path = Path(path)
    pattern = _tmp_pattern(path.name)
    removed = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for entry in names:
        m = pattern.fullmatch(entry)
        if not m or process_alive(int(m.group(1))):
            continue
        stale = path.parent / entry
        with suppress(OSError):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale)
            else:
                stale.unlink()
            removed.append(stale)
    return removed


def _new_temporary(path: Path, directory: bool) -> Path:
    prefix = f".{path.name}{TMP_TAG}{os.getpid()}-"
    try:
        if directory:
            tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=TMP_SUFFIX, dir=path.parent))
        else:
            fd, name = tempfile.mkstemp(prefix=prefix, suffix=TMP_SUFFIX, dir=path.parent)
            os.close(fd)
            tmp = Path(name)
    except OSError as exc:
        raise OutputError(f"cannot write here ({describe_os_error(exc)})", path) from None
    _LIVE.add(str(tmp))
    return tmp


def _remove(tmp: Path) -> None:
    with suppress(OSError):
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
    _LIVE.discard(str(tmp))


def register_temporary(path: str | Path) -> None:
    """Count ``path`` (a spool, say) among the temporaries ``remove_temporaries`` removes."""
    _LIVE.add(str(path))


def forget_temporary(path: str | Path) -> None:
    _LIVE.discard(str(path))


def remove_temporaries() -> None:
    """Remove every temporary output this process has open (a signal is ending it)."""
    for name in list(_LIVE):
        _remove(Path(name))


def _fsync(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):  # (a file system without it)
            raise
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for f in files:
            _fsync(Path(dirpath) / f)
        _fsync(Path(dirpath), directory=True)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on error it is removed
    (an ``OSError`` of the write becomes an ``OutputError`` naming ``path``)."""
    path = check_output(path)
    _make_parent(path)
    remove_stale_temporaries(path)
    tmp = _new_temporary(path, directory=False)
    try:
        yield tmp
        _fsync(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        check_output(path)  # (it may have become something else while we wrote)
        os.replace(tmp, path)
        _LIVE.discard(str(tmp))
        _fsync(path.parent, directory=True)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f"cannot write ({describe_os_error(exc)}); nothing was written", path) from None
    except BaseException:
        _remove(tmp)
        raise


@contextmanager
def atomic_dir(path: str | Path, replace: bool = True) -> Iterator[Path]:
    """Yield a temporary directory to fill; on success it takes the place of ``path`` (an
    existing directory there is replaced when ``replace``, else it must be empty), on error it
    is removed."""
    path = check_output(path, directory=True)
    _make_parent(path)
    remove_stale_temporaries(path)
    tmp = _new_temporary(path, directory=True)
    try:
        yield tmp
        _fsync_tree(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
        check_output(path, directory=True)
        if path.exists() and replace:
            old = _new_temporary(path, directory=True)
            _LIVE.discard(str(old))  # (it holds the previous output for a moment: not for a signal to remove)
            os.rmdir(old)
            os.replace(path, old)
            try:
                os.replace(tmp, path)
            except BaseException:
                os.replace(old, path)  # (the previous output back in place)
                raise
            _remove(old)
        else:
            if path.exists():
                path.rmdir()  # (empty, or OSError: ENOTEMPTY)
            os.replace(tmp, path)
        _LIVE.discard(str(tmp))
        _fsync(path.parent, directory=True)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f"cannot write ({describe_os_error(exc)}); nothing was written", path) from None
    except BaseException:
        _remove(tmp)
        raise
