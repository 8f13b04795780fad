"""Source-code access for agents, confined to the roots the server was given.

An agent asks for the code around a ``src_file:src_line`` the trace blames. The server reads
only files that, after every symlink and ``..`` is resolved (``os.path.realpath``), lie inside
one of its roots: the directories given with ``--source-root`` and the directories of the
absolute source files the served traces recorded. Anything else (``../../etc/passwd``, a
symlink inside a root that points out of it, a device file) is refused with a message that
names the roots, so the agent knows what it may ask for.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.trace.model import Trace

#: Files larger than this are not source code an agent should page through.
MAX_SOURCE_BYTES = 8 * 1024 * 1024
MAX_CONTEXT_LINES = 200


class SourceAccessError(NeuronExplorerError):
    """A source file an agent asked for is outside the roots, missing, or not a text file."""


def recorded_source_files(trace: Trace) -> list[str]:
    """The distinct ``src_file`` values of a trace (one pass over the dictionary column)."""
    if "src_file" not in trace.events.column_names or trace.num_events == 0:
        return []
    unique = pc.unique(trace.events["src_file"])
    if pa.types.is_dictionary(unique.type):
        unique = unique.dictionary_decode()
    return [f for f in unique.to_pylist() if f]


def roots_of_recorded_sources(traces: Iterable[Trace]) -> list[Path]:
    """The directories of the absolute source files the traces recorded that exist here."""
    dirs: set[str] = set()
    for trace in traces:
        for f in recorded_source_files(trace):
            if os.path.isabs(f) and os.path.isfile(f):
                dirs.add(os.path.dirname(os.path.realpath(f)))
    return [Path(d) for d in sorted(dirs)]


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

    def _inside(self, real: str) -> bool:
        return any(real == root or os.path.commonpath([real, root]) == root for root in self._roots)

    def resolve(self, file: str) -> Path:
        """The real path of ``file`` (absolute, or relative to a root) if it is a file inside a root."""
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
            # realpath resolves every symlink and '..', so the check below sees where the bytes really are.
            real = os.path.realpath(candidate)
            if not self._inside(real):
                if os.path.lexists(candidate):
                    refused = real
                continue
            try:
                mode = os.stat(real).st_mode
            except OSError:
                continue
            if stat.S_ISREG(mode):
                return Path(real)
        roots = ", ".join(self._roots)
        if refused is not None or os.path.isabs(file) or ".." in Path(file).parts:
            raise SourceAccessError(
                f"refused: {file!r} resolves outside the source roots this server may read ({roots})"
            )
        raise SourceAccessError(f"no file {file!r} under the source roots ({roots})")

    def context(self, file: str, line: int, context: int = 10) -> dict[str, Any]:
        """The lines ``line - context`` .. ``line + context`` of ``file``, numbered from 1."""
        if line < 1:
            raise SourceAccessError(f"line must be 1 or more, not {line}")
        context = max(0, min(int(context), MAX_CONTEXT_LINES))
        path = self.resolve(file)
        size = path.stat().st_size
        if size > MAX_SOURCE_BYTES:
            raise SourceAccessError(f"{file!r} is {size:,} bytes, too large to be a source file")
        with open(path, "rb") as fh:
            data = fh.read(MAX_SOURCE_BYTES + 1)
        if b"\x00" in data[:8192]:
            raise SourceAccessError(f"{file!r} is a binary file, not source code")
        lines = data.decode("utf-8", errors="replace").splitlines()
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
