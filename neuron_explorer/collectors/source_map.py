"""Which frames are "user code", and how profiler frame names map to file, line and function.

User code is any file outside torch, the Python standard library and installed packages
(site-packages / dist-packages). The set is configurable: ``UserCode(exclude=..., include=...)``
takes extra path patterns, and the ``NEURON_EXPLORER_EXCLUDE`` environment variable (``os.pathsep``
separated substrings) adds more without code changes.
"""

from __future__ import annotations

import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass, field

from neuron_explorer.trace.frames import (
    LIBRARY_MARKERS,
    env_excludes,
    is_library_path,
    module_name,
    parse_python_frame,
)

__all__ = ["DEFAULT_EXCLUDE", "UserCode", "module_name", "parse_python_frame"]

#: Substrings that mark library code in any path (the definition traces and rules share).
DEFAULT_EXCLUDE: tuple[str, ...] = LIBRARY_MARKERS


@dataclass(frozen=True)
class UserCode:
    """A predicate over file paths: True for the user's own code."""

    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    include: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def default(cls, extra_exclude: Iterable[str] = (), include: Iterable[str] = ()) -> UserCode:
        local = [sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")]
        exclude = DEFAULT_EXCLUDE + tuple(p.replace("\\", "/").rstrip("/") + "/" for p in local if p)
        return cls(exclude + tuple(extra_exclude) + env_excludes(), tuple(include))

    def is_user(self, path: str | None) -> bool:
        if not path:
            return False
        p = path.replace("\\", "/")
        if any(s in p for s in self.include):
            return True
        return not is_library_path(p, self.exclude)
