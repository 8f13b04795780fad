"""The TUI's data source: a trace in, immutable snapshots out.

``TraceSource`` is what the app is given (injected, so tests hand it any trace). It opens only
the columns the views read, answers each question with whole-column pyarrow/pandas work, and
caches the answers. The analysis (findings, breakdown, the ops/kernels/source tables) is the
analyzers' own result, computed once in a worker; nothing here re-derives it.

Every method may be slow on a big trace and is called from a worker thread, never the UI.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.arrow import string_array, to_numpy
from neuron_explorer.trace.errors import AnalysisError, NeuronExplorerError, TraceFormatError
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import DEVICE_KINDS, Kind
from neuron_explorer.tui.isolate import AnalysisProcess
from neuron_explorer.tui.snapshots import (
    DeviceSummary,
    Overview,
    StepSummary,
)

if TYPE_CHECKING:
    import pandas as pd

    from neuron_explorer.analyzers import Analysis

#: The columns the TUI reads for its own views (drill-downs, timeline, overview).
VIEW_COLUMNS: tuple[str, ...] = (
    "event_id", "rank", "kind", "name", "device_type", "device", "stream", "pid", "tid", "start_ns",
    "dur_ns", "step", "parent_id", "launch_id", "op_id", "src_file", "src_line", "src_func", "src_precision",
)  # fmt: skip

_TIMED_OUT = (Kind.METADATA, Kind.FLOW)


class TraceSource:
    """Answers the TUI's questions about one trace.

    ``trace`` holds at least ``VIEW_COLUMNS``; ``full_trace`` returns the complete trace the
    analyzers need (the same object when it was loaded whole, e.g. an imported JSON).
    """

    def __init__(
        self,
        trace: Trace,
        full_trace: Callable[[], Trace] | None = None,
        analyzer: Callable[[Trace], Analysis] | None = None,
        name: str | None = None,
        analysis_path: Path | None = None,
    ) -> None:
        missing = [c for c in VIEW_COLUMNS if c not in trace.events.column_names]
        if missing:
            raise NeuronExplorerError(f"trace lacks columns the TUI needs: {', '.join(missing)}", trace.path)
        self.trace = trace
        self._full_trace = full_trace or (lambda: trace)
        self._analyzer = analyzer
        self.name = name or (trace.path.name if trace.path else str(trace.metadata.get("source_file") or "trace"))
        self._lock = threading.Lock()
        self._analysis: Analysis | None = None
        self._analysis_error: str | None = None
        self._thread_names: dict[tuple[int, int, int], str] | None = None
        self._lane_names: dict[tuple[int, int], str] | None = None
        self._names_lock = threading.RLock()  # (thread_names reads recorded_thread_names)
        # A Parquet trace on disk is analyzed in a child process (see tui.isolate).
        self._process = AnalysisProcess(analysis_path) if analysis_path is not None and analyzer is None else None

    # ------------------------------------------------------------------------ opening
    @classmethod
    def open(cls, path: str | Path, progress: Any = None) -> TraceSource:
        """Open a Parquet trace or run directory (only the view columns), or import a JSON trace.

        Raises ``NeuronExplorerError`` for a missing or unreadable input, before any UI starts.
        """
        from neuron_explorer.collectors.load import load

        p = Path(path)
        if p.is_dir() or p.suffix.lower() in (".parquet", ".pq"):
            try:
                trace = Trace.read(p, columns=VIEW_COLUMNS)
            except TraceFormatError:
                if not p.is_dir():
                    raise
                # not a run directory of Parquet traces: a Neuron export directory, say
                return cls(load(p, progress=progress), name=p.name)
            return cls(trace, full_trace=lambda: Trace.read(p), name=p.name, analysis_path=p)
        trace = load(p, progress=progress)  # a JSON trace is imported whole, once
        return cls(trace, name=p.name)

    # ------------------------------------------------------------------------ columns
    def _table(self, kinds: Sequence[str] | None, columns: Sequence[str]) -> pa.Table:
        return self.trace.select(kinds, columns)

    def frame(self, kinds: Sequence[str] | None, columns: Sequence[str]) -> pd.DataFrame:
        """Events of the given kinds as pandas: ints as int64 with -1 for null, strings as str."""
        import pandas as pd

        table = self._table(kinds, columns)
        data: dict[str, Any] = {}
        for name in table.column_names:
            col = table[name]
            if pa.types.is_integer(col.type):
                data[name] = pc.fill_null(col, -1).to_numpy().astype(np.int64, copy=False)
            elif pa.types.is_dictionary(col.type):
                data[name] = col.to_pandas()
            else:
                data[name] = col.to_numpy(zero_copy_only=False)
        return pd.DataFrame(data)

    @cached_property
    def _kind_strings(self) -> pa.ChunkedArray:
        return pc.cast(self.trace.events["kind"], pa.string())

    # ------------------------------------------------------------------------ overview
    def overview(self) -> Overview:
        """Devices, ranks, steps and time span, from the trace alone (fast: paints first)."""
        e = self.trace.events
        kind = self._kind_strings
        timed = pc.invert(pc.is_in(kind, value_set=string_array(list(_TIMED_OUT))))
        starts = pc.filter(e["start_ns"], timed)
        ends = pc.add(starts, pc.filter(e["dur_ns"], timed))
        start = int(pc.min(starts).as_py() or 0) if len(starts) else 0
        end = int(pc.max(ends).as_py() or 0) if len(ends) else 0

        # Compute kernels and numpy only: Table.group_by/sort_by load pyarrow's acero engine and,
        # with it, pandas (+0.5 s before the first screen).
        dev = self.trace.select(DEVICE_KINDS, ["rank", "device_type", "device", "stream", "dur_ns"])
        devices: list[DeviceSummary] = []
        if dev.num_rows:
            ints = {c: to_numpy(dev[c], fill=-1).astype(np.int64) for c in ("rank", "device", "stream", "dur_ns")}
            types = pc.dictionary_encode(pc.cast(dev["device_type"], pa.string())).combine_chunks()
            type_idx = to_numpy(types.indices, fill=-1).astype(np.int64)
            keys = np.stack([ints["rank"], type_idx, ints["device"]], axis=1)
            groups, which = np.unique(keys, axis=0, return_inverse=True)
            which = which.ravel()
            events = np.bincount(which, minlength=len(groups))
            busy = np.bincount(which, weights=ints["dur_ns"], minlength=len(groups))
            queues = np.bincount(
                np.unique(np.stack([which, ints["stream"]], axis=1), axis=0)[:, 0], minlength=len(groups)
            )
            names = types.dictionary.to_pylist()
            devices = [
                DeviceSummary(str(names[t]), int(d), int(r), int(q), int(n), int(b))
                for (r, t, d), q, n, b in zip(groups.tolist(), queues.tolist(), events.tolist(), busy.tolist())
                if d >= 0
            ]
        steps = self.trace.select([Kind.STEP], ["rank", "step", "start_ns", "dur_ns"])
        step_rows = tuple(
            sorted(
                (
                    StepSummary(int(r), int(s), int(t), int(d))
                    for r, s, t, d in zip(*(steps[c].to_pylist() for c in ("rank", "step", "start_ns", "dur_ns")))
                    if s is not None
                ),
                key=lambda x: (x.rank, x.step, x.start_ns),
            )
        )
        md = self.trace.metadata
        device_types = sorted({d.device_type for d in devices}) or ["cpu"]
        return Overview(
            name=self.name,
            path=str(self.trace.path or md.get("source_file") or ""),
            num_events=self.trace.num_events,
            ranks=tuple(self.trace.ranks),
            device_types=tuple(device_types),
            devices=tuple(devices),
            steps=step_rows,
            start_ns=start,
            end_ns=end,
            collector=str(md.get("collector") or ""),
            torch_version=str((md.get("trace_metadata") or {}).get("torch_version") or md.get("torch_version") or ""),
        )

    def thread_names(self) -> dict[tuple[int, int], str]:
        """(rank, tid) -> the name the timeline gives each host thread (``tui.threads``)."""
        with self._names_lock:
            if self._lane_names is None:
                from neuron_explorer.tui.threads import thread_names

                self._lane_names = thread_names(self)
            return self._lane_names

    def recorded_thread_names(self) -> dict[tuple[int, int, int], str]:
        """(rank, pid, tid) -> name from the ``thread_name`` metadata events of the Parquet
        file(s) behind a trace opened with the view columns only (their raw args are read for
        those rows alone); empty for a trace with no file."""
        with self._names_lock:  # (not the analysis lock: that one is held while it runs)
            if self._thread_names is None:
                self._thread_names = self._read_thread_names()
            return self._thread_names

    def _read_thread_names(self) -> dict[tuple[int, int, int], str]:
        import pyarrow.parquet as pq

        from neuron_explorer.tui.threads import parse_recorded

        path = self.trace.path
        if path is None or not path.exists():
            return {}
        files = [path] if path.is_file() else sorted(f for f in path.rglob("*") if f.suffix in (".parquet", ".pq"))
        out: dict[tuple[int, int, int], str] = {}
        for f in files:
            try:
                rows = pq.read_table(
                    f,
                    columns=["rank", "pid", "tid", "args"],
                    filters=[("kind", "=", Kind.METADATA), ("name", "=", "thread_name")],
                )
            except (OSError, ValueError, pa.ArrowException):  # names are a nicety: never an error
                continue
            out.update(parse_recorded(rows))
        return out

    # ------------------------------------------------------------------------ analysis
    def analysis(self) -> Analysis:
        """The analyzers' result for the whole trace, computed once (thread-safe)."""
        with self._lock:
            if self._analysis is not None:
                return self._analysis
            if self._analysis_error is not None:
                raise AnalysisError(self._analysis_error)
            analyzer = self._analyzer
            if analyzer is None and self._process is not None:
                analyzer = lambda _trace: self._process.result()  # noqa: E731
            if analyzer is None:
                try:
                    from neuron_explorer.analyzers import analyze
                except ImportError:
                    self._analysis_error = "the analyzers are not part of this install"
                    raise AnalysisError(self._analysis_error) from None
                analyzer = analyze
            try:
                trace = self.trace if self._process is not None else self._full_trace()
                self._analysis = analyzer(trace)
            except NeuronExplorerError as exc:
                self._analysis_error = str(exc)
                raise
            return self._analysis

    @property
    def analysis_ready(self) -> Analysis | None:
        return self._analysis

    def close(self) -> None:
        """Stop a running analysis process (the app is quitting)."""
        if self._process is not None:
            self._process.cancel()
