"""How a source location reads, everywhere: text, markdown, the HTML report, the TUI and MCP.

A location is ``path:line``, the path relative to the common root of the trace's user files
(else the current directory; installed packages from ``site-packages/`` on), and when it does
not fit it is elided from the left: the ``:line`` and how exact the line is are never cut.
A function-level line (an imported trace knows only each function's ``def`` line) says so,
and ``FUNCTION_LEVEL_HINT`` tells how to get exact call lines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neuron_explorer.environment import exclude_patterns
from neuron_explorer.trace.frames import is_library_path

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis

ELLIPSIS = "…"
#: How exact a line is, in words (``src_precision``); exact lines ("line", "launch") say nothing.
PRECISION_MARK = {"function": "def, function-level", "forward": "forward op's line"}
#: The same, for when the words do not fit.
PRECISION_SHORT = {"function": "def", "forward": "fwd"}
FUNCTION_LEVEL_HINT = "function-level: def line only; `neuron-explorer record` captures exact lines"
#: The same note for a trace ``record``/``profile()`` captured (telling it to use ``record`` is no help).
RECORDED_FUNCTION_LEVEL_HINT = "function-level: def line only (the profiler recorded no call line for these events)"


def function_level_hint(collector: str | None) -> str:
    """The note under function-level lines: how to get exact lines, unless the trace was
    captured by this tool already."""
    return RECORDED_FUNCTION_LEVEL_HINT if collector == "torch_profiler" else FUNCTION_LEVEL_HINT


_SITE_DIRS = ("site-packages/", "dist-packages/")


def common_root(files: Iterable[str], cwd: str | None = None) -> str | None:
    """The deepest directory holding every absolute user file (every file outside installed
    packages when none is user code, e.g. this tool's own example), or the current directory
    when they share nothing but ``/``; None when no file is absolute (shown as written)."""
    absolute = [f for f in files if f and os.path.isabs(f)]
    excludes = exclude_patterns()
    dirs = {os.path.dirname(f) for f in absolute if not is_library_path(f.replace("\\", "/"), excludes)}
    if not dirs:
        dirs = {os.path.dirname(f) for f in absolute if not any(m in f.replace("\\", "/") for m in _SITE_DIRS)}
    if not dirs:
        return None
    try:
        root = os.path.commonpath(sorted(dirs))
    except ValueError:  # paths on different drives
        root = ""
    if root in ("", os.sep, "/"):
        return cwd if cwd is not None else os.getcwd()
    return root


@dataclass(frozen=True)
class Locations:
    """Formats source locations of one trace: its root, and the precision of each known line."""

    root: str | None = None
    precision: dict[tuple[str, int], str] = field(default_factory=dict)

    @classmethod
    def for_files(cls, files: Iterable[str], cwd: str | None = None) -> Locations:
        return cls(common_root(files, cwd))

    @classmethod
    def for_analysis(cls, a: Analysis, cwd: str | None = None) -> Locations:
        """From the analysis' line-level profile: its files give the root, its rows the
        precision of lines that findings name without one."""
        sl = a.source_lines
        if sl is None or not len(sl):
            return cls(None)
        files = [str(f) for f in sl["src_file"].astype(object).dropna().unique()]
        precision = {}
        if "src_precision" in sl:
            for f, n, p in zip(sl["src_file"].astype(object), sl["src_line"], sl["src_precision"].astype(object)):
                if isinstance(p, str) and p in PRECISION_MARK:
                    precision[(str(f), int(n))] = p
        return cls(common_root(files, cwd), precision)

    def path(self, file: str) -> str:
        """``file`` relative to the root, or from its package on for installed packages."""
        p = str(file)
        if self.root and os.path.isabs(p):
            rel = os.path.relpath(p, self.root) if _is_below(p, self.root) else None
            if rel is not None:
                return rel
        norm = p.replace("\\", "/")
        for marker in _SITE_DIRS:
            i = norm.rfind(marker)
            if i >= 0:
                return norm[i + len(marker) :]
        return p

    def format(
        self,
        file: Any,
        line: Any = None,
        func: Any = None,
        precision: Any = None,
        width: int | None = None,
    ) -> str:
        """``model.py:40 (forward)``, ``train.py:5 (step; def, function-level)``; at most
        ``width`` characters where that can hold the file name's end, ``:line`` and precision."""
        if file is None or (isinstance(file, float) and file != file):
            return "-"
        path = self.path(str(file))
        lineno = _int(line)
        loc = f":{lineno}" if lineno is not None and lineno >= 0 else ""
        if precision is None and lineno is not None:
            precision = self.precision.get((str(file), lineno))
        mark = PRECISION_MARK.get(precision) if isinstance(precision, str) else None
        short = PRECISION_SHORT.get(precision) if isinstance(precision, str) else None
        fn = str(func) if isinstance(func, str) and func else None
        tails = []
        if fn:
            tails.append(f" ({fn}; {mark})" if mark else f" ({fn})")
        tails.append(f" ({mark})" if mark else "")
        if short:
            tails.append(f" ({short})")
        if width is None:
            return path + loc + tails[0]
        for tail in tails:
            if len(path) + len(loc) + len(tail) <= width:
                return path + loc + tail
        # The path gives way from the left, at a "/" where it can; the last tail is kept whole.
        for tail in tails:
            room = width - len(loc) - len(tail)
            name = os.path.basename(path)
            if room >= len(name) + 2:
                return elide_left(path, room) + loc + tail
        tail = tails[-1]
        return elide_left(path, max(width - len(loc) - len(tail), 2)) + loc + tail

    def finding_line(self, sl: dict[str, Any], width: int | None = None) -> str:
        """One of a finding's ``source_lines`` (``{"file", "line", "func", ...}``); a line split
        by nn.Module path and op (one line held nearly all the time) says ``in MODULE: OP`` after it."""
        inside = ""
        if sl.get("module"):
            inside = f" in {sl['module']}" + (f": {sl['op']}" if sl.get("op") else "")
            if width is not None:
                room = max(width // 2, 8)
                inside = inside if len(inside) <= room else inside[: room - 1] + ELLIPSIS
                width = max(width - len(inside), 8)
        return self.format(sl.get("file"), sl.get("line"), sl.get("func"), sl.get("precision"), width) + inside

    def is_function_level(self, file: Any, line: Any, precision: Any = None) -> bool:
        lineno = _int(line)
        if precision is None and lineno is not None:
            precision = self.precision.get((str(file), lineno))
        return precision == "function"


def elide_left(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut from the left (at a "/" where it can)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    kept = text[-(width - 1) :]
    cut = kept.find("/")
    if 0 <= cut < len(kept) - 1 and cut < len(kept) // 2:
        kept = kept[cut:]
    return ELLIPSIS + kept


def _is_below(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:
        return False


def _int(value: Any) -> int | None:
    try:
        if value is None or value != value:
            return None
        return int(value)
    except (TypeError, ValueError):
        return None
