"""Which frames are "user code", and how profiler frame names map to file, line and function.

User code is any file outside torch, the Python standard library, installed packages
(site-packages / dist-packages), this tool (and its ``neuron-explorer`` launcher) and generated
code (Inductor, TorchDynamo, FX): ``trace.frames.path_origin`` is the one definition, shared
with the rules. The set is configurable: ``UserCode(exclude=..., include=...)``
takes extra path patterns, and the ``NEURON_EXPLORER_EXCLUDE`` environment variable (``os.pathsep``
separated substrings) adds more without code changes.

The exact-lines mode (``collectors.lines.exact_lines``) names a profiler marker after the calling
line of each torch call (``marker_name``); ``parse_marker`` reads it back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from neuron_explorer.environment import exclude_patterns
from neuron_explorer.trace.frames import (
    LIBRARY_MARKERS,
    module_name,
    parse_python_frame,
    path_origin,
)

__all__ = [
    "DEFAULT_EXCLUDE",
    "MARKER_PREFIX",
    "UserCode",
    "marker_name",
    "module_name",
    "parse_marker",
    "parse_python_frame",
]

#: Substrings that mark library code in any path (the definition traces and rules share).
DEFAULT_EXCLUDE: tuple[str, ...] = LIBRARY_MARKERS


@dataclass(frozen=True)
class UserCode:
    """A predicate over file paths: True for the user's own code."""

    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    include: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def default(cls, extra_exclude: Iterable[str] = (), include: Iterable[str] = ()) -> UserCode:
        return cls(DEFAULT_EXCLUDE + tuple(extra_exclude) + exclude_patterns(), tuple(include))

    def is_user(self, path: str | None) -> bool:
        return self.origin(path) == "user"

    def origin(self, path: str | None) -> str:
        """``"user"``, ``"library"`` or ``"generated"`` (see ``trace.frames.path_origin``)."""
        return path_origin(path, self.exclude, self.include)


#: A marker's name starts with this; the rest is ``"<line> <function> <file>"``.
MARKER_PREFIX = "neuron_explorer.line "


def marker_name(line: int, func: str, file: str) -> str:
    return f"{MARKER_PREFIX}{line} {func} {file}"


def parse_marker(name: str) -> tuple[str, int, str] | None:
    """``marker_name``'s inverse: (file, line, function), or None for any other name."""
    if not name.startswith(MARKER_PREFIX):
        return None
    parts = name[len(MARKER_PREFIX) :].split(" ", 2)
    if len(parts) != 3 or not parts[0].isdigit():
        return None
    return parts[2], int(parts[0]), parts[1]
