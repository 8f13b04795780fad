"""Immutable snapshots the TUI renders: plain frozen data, computed off the UI thread.

Widgets never touch the trace or pandas: a worker asks the data source for a snapshot, and
the widget draws it. Snapshots are frozen (tuples, read-only numpy arrays), so a worker can
hand one to the UI thread without copying or locking.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Column:
    """One column of a table snapshot: key, label, and how to show its values."""

    key: str
    label: str
    # "ns" (duration), "bytes", "%", "" (plain), "count", "float" (3 significant digits),
    # "rate" (a TFLOP/s or TB/s figure, no exponents), "roof%" (a share of a peak, "!" over 100),
    # "kernel" (a name, shown demangled), "path" (a source file) or "loc" (a source location:
    # (file, line, func, precision)); paths and locations are shown the one way every output
    # shows them (reports.location), fitted to the column
    unit: str = ""
    width: int | None = None
    drop: int = 0  # on a narrow terminal, columns with drop > 0 are left out, highest first
    short: str | None = None  # the header when the full one does not fit (the legend says it)
    wrap: bool = False  # a long value wraps onto more lines instead of being cut (titles)


@dataclass(frozen=True)
class TableSnapshot:
    """A sortable, filterable table: column specs and rows of raw (unformatted) values."""

    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]
    title: str = ""
    note: str = ""  # e.g. "showing the 200 longest of 5,301 calls"
    root: str | None = None  # source paths are shown relative to it (see reports.location)

    def column_index(self, key: str) -> int:
        return next(i for i, c in enumerate(self.columns) if c.key == key)

    @classmethod
    def empty(cls, columns: tuple[Column, ...], note: str = "") -> TableSnapshot:
        return cls(columns, (), note=note)

    def text_of(self, column: Column, value: Any) -> str:
        """What a filter matches: a location as it reads, other values as text."""
        if column.unit == "kernel" and value is not None:
            from neuron_explorer.reports.names import demangle

            readable = demangle(str(value))
            return readable if readable == value else f"{readable} {value}"  # either matches a filter
        if column.unit in ("path", "loc") and value is not None:
            from neuron_explorer.reports.location import Locations

            where = Locations(self.root)
            return where.path(value) if column.unit == "path" else where.format(*value)
        return "" if value is None else str(value)


@dataclass(frozen=True)
class DeviceSummary:
    device_type: str
    device: int
    rank: int
    queues: int
    events: int
    busy_ns: int


@dataclass(frozen=True)
class StepSummary:
    rank: int
    step: int
    start_ns: int
    dur_ns: int


@dataclass(frozen=True)
class Overview:
    """What the first screen shows; computed from the trace alone, so it paints at once."""

    name: str
    path: str
    num_events: int
    ranks: tuple[int, ...]
    device_types: tuple[str, ...]
    devices: tuple[DeviceSummary, ...]
    steps: tuple[StepSummary, ...]
    start_ns: int
    end_ns: int
    collector: str = ""
    torch_version: str = ""

    @property
    def span_ns(self) -> int:
        return max(self.end_ns - self.start_ns, 0)


@dataclass(frozen=True)
class Detail:
    """The drill-down of one op or kernel name: its calls, source lines and related work."""

    name: str
    calls: TableSnapshot
    source_lines: TableSnapshot
    related: TableSnapshot  # an op's kernels, or a kernel's launching ops


@dataclass(frozen=True)
class SourceFile:
    """One source file: its text when readable, and the per-line time table."""

    path: str
    resolved: str | None  # the readable file on this machine, None when it cannot be read
    text_lines: tuple[str, ...]
    lines: TableSnapshot  # line, func, host_ns, device_ns, kernel_count, ...


def frozen_array(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values)
    values.setflags(write=False)
    return values


@dataclass(frozen=True)
class Lane:
    """One timeline row: a host thread or a device queue, as merged busy intervals by kind."""

    label: str
    group: str  # "host" or "device"
    # kind -> (starts, ends) of merged, non-overlapping busy intervals, sorted by start
    intervals: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    events: int = 0
    sub: str = ""  # "data loading" or "Python": a thread's attribution lane, drawn under it
    detail: str = ""  # what the label leaves out ("tid 1149")


@dataclass(frozen=True)
class TimelineEvent:
    """One event of a step, selectable in the timeline: where, when, and the line behind it."""

    lane: str
    kind: str
    name: str
    start_ns: int
    dur_ns: int
    event_id: int = -1
    source: tuple[Any, ...] | None = None  # (file, line, func, precision), as a "loc" column shows it

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


@dataclass(frozen=True)
class Timeline:
    """One step of one rank: lanes and its events (the longest, up to a cap), with the step's
    time window; ``root`` is where source paths are shown from."""

    rank: int
    step: int | None  # None: the trace has no steps, the whole trace is shown
    start_ns: int
    end_ns: int
    lanes: tuple[Lane, ...]
    events: tuple[TimelineEvent, ...]  # sorted by start
    steps: tuple[tuple[int, int], ...]  # every (rank, step) there is, to move between steps
    total_events: int = 0
    root: str | None = None
