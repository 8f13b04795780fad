"""The traces an agent server serves: loaded once, named, analyzed lazily and at most once.

A ``TraceCatalog`` owns every ``ServedTrace`` of one server. Each has a short unique name
(the file or run-directory name without its suffix) that tools take as their ``trace``
argument; a tool may leave it out when only one trace is served. The analysis of a trace is
computed on first use and cached, so the tools that only read the trace (schema, SQL over
events, source context) answer without paying for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_explorer.trace.errors import AnalysisError, NeuronExplorerError
from neuron_explorer.trace.model import Trace

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis

_TRACE_SUFFIXES = (".pt.trace.json.gz", ".json.gz", ".trace.json", ".json", ".parquet", ".pq", ".gz")


class UnknownTraceError(NeuronExplorerError):
    """A tool named a trace the server does not serve (or named none when several are served)."""


def trace_name(path: Path) -> str:
    """The short name of a trace file or run directory: its name without the trace suffix."""
    name = path.name
    for suffix in _TRACE_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


@dataclass
class ServedTrace:
    """One trace the server serves, with its analysis computed on first use."""

    name: str
    path: Path
    trace: Trace
    _analysis: Analysis | None = field(default=None, repr=False)
    _facts: dict[str, Any] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def analysis(self) -> Analysis:
        """The analyzers' result for this trace (all metrics and rules), computed once."""
        with self._lock:  # tools run on worker threads: two first calls must not analyze twice
            if self._analysis is None:
                try:
                    from neuron_explorer.analyzers import analyze
                except ImportError as exc:  # pragma: no cover - the analyzers ship with the package
                    raise AnalysisError(f"the analyzers are not available in this install ({exc})") from None
                self._analysis = analyze(self.trace)
            return self._analysis

    def facts(self) -> dict[str, Any]:
        """What is inside the trace (``trace.summary.describe``), computed once."""
        with self._lock:
            if self._facts is None:
                from neuron_explorer.trace.summary import describe

                self._facts = describe(self.trace)
            return self._facts

    @property
    def analyzed(self) -> bool:
        return self._analysis is not None


class TraceCatalog:
    """The served traces by name, in the order they were given."""

    def __init__(self, traces: Iterable[ServedTrace]) -> None:
        self._traces: dict[str, ServedTrace] = {}
        for served in traces:
            if served.name in self._traces:
                raise ValueError(f"two served traces named {served.name!r}")
            self._traces[served.name] = served

    @classmethod
    def open(cls, paths: Sequence[str | Path], loader: Callable[[Path], Trace] | None = None) -> TraceCatalog:
        """Load every trace (Parquet file, run directory, or Kineto JSON) and name it uniquely."""
        from neuron_explorer.collectors.load import load

        read: Callable[[Path], Trace] = loader or load
        served: list[ServedTrace] = []
        taken: set[str] = set()
        for raw in paths:
            path = Path(raw).expanduser()
            trace = read(path)
            base = trace_name(path.resolve() if path.name in ("", ".", "..") else path)
            name, n = base, 2
            while name in taken:  # rank0.json.gz from two run directories: rank0, rank0-2
                name, n = f"{base}-{n}", n + 1
            taken.add(name)
            served.append(ServedTrace(name=name, path=path, trace=trace))
        return cls(served)

    def __len__(self) -> int:
        return len(self._traces)

    def __iter__(self):
        return iter(self._traces.values())

    @property
    def names(self) -> list[str]:
        return list(self._traces)

    def get(self, name: str | None) -> ServedTrace:
        """The trace called ``name``; the only one when ``name`` is empty and one is served."""
        if not name:
            if len(self._traces) == 1:
                return next(iter(self._traces.values()))
            if not self._traces:
                raise UnknownTraceError("the server serves no trace")
            raise UnknownTraceError(
                f"{len(self._traces)} traces are served; pass `trace` as one of: {', '.join(self._traces)}"
            )
        try:
            return self._traces[name]
        except KeyError:
            raise UnknownTraceError(
                f"no trace named {name!r}; the served traces are: {', '.join(self._traces) or 'none'}"
            ) from None

    def select(self, name: str | None) -> list[ServedTrace]:
        """One named trace, or every trace when ``name`` is empty."""
        return [self.get(name)] if name else list(self._traces.values())

    def describe(self) -> list[dict[str, Any]]:
        """One line of facts per served trace, cheap enough for ``list_traces``."""
        out = []
        for served in self:
            meta = served.trace.metadata
            out.append(
                {
                    "name": served.name,
                    "path": str(served.path),
                    "events": served.trace.num_events,
                    "ranks": served.trace.ranks,
                    "world_size": meta.get("world_size"),
                    "device_types": meta.get("device_types"),
                    "collector": meta.get("collector"),
                    "schema_version": meta.get("schema_version"),
                    "analyzed": served.analyzed,
                }
            )
        return out
