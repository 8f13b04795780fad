"""What-if edits of the graph: which nodes change duration and which edges stop binding.

An ``Edits`` is what a fix does to the run, in terms the replay understands:

- ``scale``: (regex over op and kernel names, factor): matching ops (with everything nested in
  them, and their kernels) and matching kernels take factor x their duration; the first
  matching pattern wins, and a nested event takes its innermost matching op's edit;
- ``remove``: regexes whose matching events take no time and, for synchronizing calls, wait
  for nothing;
- ``events``: ``EventEdit``s naming events by (rank, event id), as a finding names its evidence
  (the syncs it found, the kernels of an op group, the Python frames of a line): each scales
  them (``factor``), with or without what is nested in them and their kernels, and may
  ``unblock`` them (the synchronizing calls among them wait for nothing);
- ``nonblocking_copies``: every blocking or pageable copy (``attribution.blocking_calls``,
  reason ``copy``) becomes asynchronous: the calling thread no longer waits for the transfer,
  which stays on its stream, in its order, at its measured duration;
- ``overlap_comm``: communication no longer delays compute or the host: every cross edge
  leaving a communication node (a collective kernel; a synchronize waiting for it, a stream
  waiting on its event) is dropped. Communication itself still runs in its stream's order and,
  across ranks, waits for its last rank; only what waited *for* it stops waiting.

Where several edits hit one node, the smallest factor wins (a node fixed twice is not twice as
fast).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np

from neuron_explorer.analyzers.core.columns import ukey
from neuron_explorer.trace.errors import AnalysisError


@dataclass(frozen=True, eq=False)
class EventEdit:
    """Scale (and optionally unblock) the events ``(rank, event_id)``: host events with what is
    nested in them (``nested``) and their kernels (``kernels``), device events themselves."""

    rank: np.ndarray
    event_id: np.ndarray
    factor: float = 1.0
    nested: bool = True
    kernels: bool = True
    unblock: bool = False
    #: what the edit does, in words ("12 synchronizing calls wait for nothing")
    label: str = ""
    #: (rank, event id) keys (``columns.ukey``) of device work this edit leaves alone: work a
    #: more specific finding owns and prices (``analyzers/ledger.py``)
    exempt: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    @classmethod
    def of(cls, rank: object, event_id: object, **kwargs: object) -> EventEdit:
        r = np.asarray(rank, np.int64).reshape(-1)
        e = np.asarray(event_id, np.int64).reshape(-1)
        if len(r) == 1 and len(e) != 1:
            r = np.full(len(e), r[0], np.int64)
        if len(r) != len(e):
            raise ValueError("EventEdit: one rank per event id (or one rank for all)")
        factor = float(kwargs.get("factor", 1.0))  # type: ignore[arg-type]
        if not (factor >= 0 and np.isfinite(factor)):
            raise AnalysisError(f"an edit's factor must be a finite number >= 0, not {factor}")
        return cls(r, e, **kwargs)  # type: ignore[arg-type]

    @property
    def keys(self) -> np.ndarray:
        return ukey(self.rank, self.event_id)

    def sparing(self, keys: np.ndarray) -> EventEdit:
        """This edit, leaving the device work ``keys`` alone too."""
        return replace(self, exempt=np.union1d(self.exempt, np.asarray(keys, np.int64)))


@dataclass(frozen=True)
class Edits:
    """What-if edits (see the module docstring)."""

    scale: tuple[tuple[str, float], ...] = ()
    remove: tuple[str, ...] = ()
    events: tuple[EventEdit, ...] = field(default=())
    nonblocking_copies: bool = False
    overlap_comm: bool = False

    @property
    def empty(self) -> bool:
        return not (self.scale or self.remove or self.events or self.nonblocking_copies or self.overlap_comm)

    def patterns(self) -> list[tuple[re.Pattern[str], float, bool]]:
        out = []
        for pattern, factor in self.scale:
            if not (factor >= 0 and np.isfinite(factor)):
                raise AnalysisError(f"scale factor must be a finite number >= 0: {pattern}={factor}")
            out.append((_compile(pattern), float(factor), False))
        out.extend((_compile(p), 0.0, True) for p in self.remove)
        return out

    def __add__(self, other: Edits) -> Edits:
        """Both edits at once (``all fixes together``)."""
        return Edits(
            self.scale + other.scale,
            self.remove + other.remove,
            self.events + other.events,
            self.nonblocking_copies or other.nonblocking_copies,
            self.overlap_comm or other.overlap_comm,
        )

    def sparing(self, keys: np.ndarray) -> Edits:
        """These edits, leaving the device work ``keys`` (ukeys) alone."""
        return replace(self, events=tuple(e.sparing(keys) for e in self.events))

    def describe(self) -> str:
        """The edit in words, for reports (``scale aten::mm=0.5; 12 syncs wait for nothing``)."""
        parts = [f"scale {p}={f:g}" for p, f in self.scale] + [f"remove {p}" for p in self.remove]
        parts += [e.label or f"{len(e.event_id)} events x{e.factor:g}" for e in self.events]
        if self.nonblocking_copies:
            parts.append("blocking copies made asynchronous")
        if self.overlap_comm:
            parts.append("communication overlapped")
        return "; ".join(parts)


def _compile(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise AnalysisError(f"bad pattern {pattern!r}: {exc}") from None
