"""What an importer or reader changed in its input to make a valid trace, said out loud.

Every validation rule either rejects the file (a ``TraceFormatError``) or repairs it: drops the
events that break the rule, sets an unusable value to null, or ignores a metadata key. A repair
is never silent: it is counted here, stored in the trace metadata under ``repairs`` (shown by
``info``) and announced once per file as a ``TraceRepairWarning`` (one line on stderr from the
CLI). docs/schema.md, "Validation", lists the rules.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

#: The actions a repair can take (the ``action`` of a metadata entry).
DROPPED = "dropped"  # the event is not in the trace
NULLED = "set to null"  # the column's value is null; the original stays in ``args``/``extra``
CLAMPED = "clamped"  # the value was moved to the nearest valid one
IGNORED = "ignored"  # a metadata key or file-level value was not used
KEPT_AS_TEXT = "kept as text"  # the value is kept verbatim but not interpreted
REPLACED = "bytes replaced"  # text that is not UTF-8: the bad bytes became U+FFFD
FILLED = "filled"  # a null in a column that has no nulls (name, kind): the empty string


class TraceRepairWarning(UserWarning):
    """An input was repaired (events dropped, values nulled or clamped) to make a valid trace."""


class Repairs:
    """Counts of repairs by (what, action), in the order first seen."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}

    def add(self, what: str, action: str, count: int = 1) -> None:
        if count > 0:
            key = (what, action)
            self._counts[key] = self._counts.get(key, 0) + int(count)

    def merge(self, other: Repairs | dict[tuple[str, str], int] | None) -> None:
        items = other._counts if isinstance(other, Repairs) else (other or {})
        for (what, action), count in items.items():
            self.add(what, action, count)

    def __bool__(self) -> bool:
        return bool(self._counts)

    def count(self, action: str | None = None) -> int:
        return sum(c for (_, a), c in self._counts.items() if action is None or a == action)

    def entries(self) -> list[dict[str, Any]]:
        """The metadata form: ``[{"what": ..., "action": ..., "count": ...}, ...]``."""
        return [{"what": w, "action": a, "count": c} for (w, a), c in self._counts.items()]

    def record(self, metadata: dict[str, Any]) -> None:
        """Append these repairs to ``metadata["repairs"]`` (and the dropped events to
        ``metadata["dropped_events"]``)."""
        if not self:
            return
        entries = list(metadata.get("repairs") or []) + self.entries()
        # (sorted: a streamed import counts chunk by chunk, and must record the same list)
        metadata["repairs"] = entries = sorted(entries, key=lambda e: (str(e.get("action")), str(e.get("what"))))
        metadata["dropped_events"] = sum(e["count"] for e in entries if e.get("action") == DROPPED)

    def summary(self) -> str:
        parts: dict[str, list[str]] = {}
        for (what, action), count in self._counts.items():
            parts.setdefault(action, []).append(f"{what}: {count:,}")
        return "; ".join(f"{action} ({', '.join(items)})" for action, items in parts.items())

    def warn(self, path: str | Path | None, stacklevel: int = 3) -> None:
        if self:
            where = f"{path}: " if path is not None else ""
            text = f"{where}repaired the input: {self.summary()}; see `neuron-explorer info` (repairs)"
            warnings.warn(text, TraceRepairWarning, stacklevel=stacklevel)
