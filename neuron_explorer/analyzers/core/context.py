"""``TraceFrames``: the column views every metric and rule shares, extracted from a trace once.

Analyzers never read the events table directly: they ask this object for the device events,
the host spans, the steps or the memory events, each converted to pandas once with only the
columns the analyzers use. Integer id columns come back as plain ``int64`` numpy-backed
columns with ``-1`` for null (nullable pandas integers are several times slower to compute on),
string columns as categoricals. What several analyzers derive from these views is computed
here once and cached: the launch join (``launch_events``), host self time (``self_time``), the
kernel categories and the run kind.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.analyzers.core.columns import group_codes, lookup, ukey
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import DEVICE_KINDS, Kind

if TYPE_CHECKING:
    from neuron_explorer.analyzers.core.hardware import Hardware
    from neuron_explorer.analyzers.core.run_kind import RunKind

#: Step number used for rows that cover the whole trace because it has no ProfilerStep spans.
WHOLE_TRACE_STEP = -1

_DEVICE_COLUMNS = (
    "event_id",
    "rank",
    "kind",
    "name",
    "device_type",
    "device",
    "stream",
    "start_ns",
    "dur_ns",
    "launch_id",
    "op_id",
    "step",
    "src_file",
    "src_line",
    "src_func",
    "src_precision",
    "src_module",
    "memcpy_kind",
    "bytes",
    "collective_name",
    "group_size",
    "process_group",
    "in_msg_nelems",
    "out_msg_nelems",
    "msg_dtype",
    "graph_id",
)
_HOST_COLUMNS = (
    "event_id",
    "rank",
    "kind",
    "category",
    "name",
    "tid",
    "start_ns",
    "dur_ns",
    "parent_id",
    "op_id",
    "step",
    "src_file",
    "src_line",
    "src_func",
    "src_precision",
    "src_module",
    "fwd_id",
)
_MEMORY_COLUMNS = (
    "event_id",
    "rank",
    "device_type",
    "device",
    "start_ns",
    "bytes",
    "mem_total_allocated_bytes",
    "mem_total_reserved_bytes",
    "op_id",
    "src_file",
    "src_line",
    "src_func",
    "src_precision",
    "step",
    "mem_addr",
    "src_module",
)
#: Category of the annotation a device-profile importer writes for its capture window.
PROFILE_WINDOW_CATEGORY = "neuron_profile_window"
_HOST_KINDS = (Kind.CPU_OP, Kind.PYTHON, Kind.ANNOTATION, Kind.RUNTIME, Kind.SYNC, Kind.STEP)
#: Every column any metric or rule reads: ``Trace.read(path, columns=ANALYSIS_COLUMNS)`` skips
#: the rest (raw args, shapes, flows), which is most of a trace's bytes.
ANALYSIS_COLUMNS: tuple[str, ...] = tuple(
    dict.fromkeys((*_DEVICE_COLUMNS, *_HOST_COLUMNS, *_MEMORY_COLUMNS, "input_types", "input_shapes"))
)


def table_to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow -> pandas with integer columns as int64 (null -> -1) and strings as categoricals."""
    data: dict[str, Any] = {}
    for name in table.column_names:
        col = table[name]
        t = col.type
        if pa.types.is_integer(t):
            data[name] = pc.fill_null(col, -1).to_numpy().astype(np.int64, copy=False)
        elif pa.types.is_floating(t):
            data[name] = col.to_numpy()
        elif pa.types.is_dictionary(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
            if not pa.types.is_dictionary(t):
                col = pc.dictionary_encode(col)
            data[name] = col.to_pandas()
        else:
            data[name] = col.to_pandas()
    return pd.DataFrame(data, copy=False)


class TraceFrames:
    """Cached pandas views of one trace, shared by all metrics and rules of one analysis."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.metadata = trace.metadata
        self._kind = pc.cast(trace.events["kind"], pa.string()) if trace.events.num_rows else None

    def _select(self, kinds: tuple[str, ...], columns: tuple[str, ...]) -> pd.DataFrame:
        events = self.trace.events
        present = [c for c in columns if c in events.column_names]
        if self._kind is None:
            return table_to_frame(events.select(present))
        mask = pc.is_in(self._kind, value_set=pa.array(list(kinds), pa.string()))
        table = events.select(present).filter(mask)
        return table_to_frame(table)

    @cached_property
    def device(self) -> pd.DataFrame:
        """Device work (kernel, collective, memcpy, memset) sorted by rank, device, start."""
        df = self._select(DEVICE_KINDS, _DEVICE_COLUMNS)
        df = df[df["dur_ns"] >= 0]
        return df.sort_values(["rank", "device", "start_ns"], kind="stable").reset_index(drop=True)

    @cached_property
    def host(self) -> pd.DataFrame:
        """Host spans (ops, python, annotations, runtime and sync calls, steps)."""
        return self._select(_HOST_KINDS, _HOST_COLUMNS)

    @cached_property
    def memory(self) -> pd.DataFrame:
        df = self._select((Kind.MEMORY,), _MEMORY_COLUMNS)
        return df.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per trace: for derived views several rules share."""
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = compute()
        return cache[key]

    def host_of(self, *kinds: str) -> pd.DataFrame:
        host = self.host
        return host[host["kind"].isin(kinds)]

    @cached_property
    def ranks(self) -> list[int]:
        return self.trace.ranks or [int(self.metadata.get("rank", 0) or 0)]

    @cached_property
    def step_windows(self) -> pd.DataFrame:
        """One row per (rank, step): start_ns, end_ns, dur_ns. Without ProfilerStep spans, one
        row per rank (step ``-1``) covering every host and device event of that rank."""
        host = self.host
        steps = host[host["kind"] == Kind.STEP]
        if len(steps):
            w = steps[["rank", "step", "start_ns", "dur_ns", "event_id", "tid"]].copy()
            w = w[w["dur_ns"] > 0]
            # A step recorded twice (e.g. on two threads) keeps its longest span.
            w = w.sort_values(["rank", "step", "dur_ns"]).drop_duplicates(["rank", "step"], keep="last")
            w["end_ns"] = w["start_ns"] + w["dur_ns"]
            return w.sort_values(["rank", "start_ns"]).reset_index(drop=True)
        spans = pd.concat(
            [
                host[["rank", "start_ns", "dur_ns"]],
                self.device[["rank", "start_ns", "dur_ns"]],
                self.profile_windows[["rank", "start_ns", "dur_ns"]],
            ],
            ignore_index=True,
        )
        if not len(spans):
            return pd.DataFrame(
                {
                    c: pd.Series(dtype="int64")
                    for c in ("rank", "step", "start_ns", "dur_ns", "event_id", "tid", "end_ns")
                }
            )
        spans["end_ns"] = spans["start_ns"] + spans["dur_ns"]
        g = spans.groupby("rank").agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max")).reset_index()
        g["step"] = WHOLE_TRACE_STEP
        g["dur_ns"] = g["end_ns"] - g["start_ns"]
        g["event_id"] = -1
        g["tid"] = -1
        return g[["rank", "step", "start_ns", "dur_ns", "event_id", "tid", "end_ns"]]

    @cached_property
    def profile_windows(self) -> pd.DataFrame:
        """Device profiles' own capture windows (a Neuron profile's first to last hardware
        timestamp): without steps, the run is at least that long, even where the first or last
        instruction is not at its edge or the engines only waited."""
        rows = self._select((Kind.DEVICE_ANNOTATION,), ("rank", "category", "start_ns", "dur_ns"))
        if not len(rows) or "category" not in rows:
            return pd.DataFrame({c: pd.Series(dtype="int64") for c in ("rank", "start_ns", "dur_ns")})
        return rows[rows["category"].astype(str) == PROFILE_WINDOW_CATEGORY].reset_index(drop=True)

    @cached_property
    def has_steps(self) -> bool:
        return bool((self.step_windows["step"] != WHOLE_TRACE_STEP).any())

    @cached_property
    def device_types(self) -> list[str]:
        dt = self.device["device_type"]
        return sorted({str(x) for x in dt.dropna().unique()}) if len(dt) else []

    @cached_property
    def hardware(self) -> Hardware:
        """The device model and what it supports (``analyzers.core.hardware``): rules ask it before
        suggesting a fix."""
        from neuron_explorer.analyzers.core.hardware import hardware_of

        return hardware_of(self.metadata, self.device_types)

    @cached_property
    def run_kind(self) -> RunKind:
        """Training or inference (``analyzers.core.run_kind``): rules ask it before training advice."""
        from neuron_explorer.analyzers.core.run_kind import run_kind_of

        return run_kind_of(self.host)

    @cached_property
    def device_properties(self) -> list[dict[str, Any]]:
        return list(self.metadata.get("device_properties") or [])

    @cached_property
    def device_category(self) -> pd.Series:
        """Kernel category of every row of ``device`` (see ``kernel_names.classify_name``)."""
        from neuron_explorer.analyzers.core.kernel_names import kernel_categories

        return kernel_categories(self.device)

    @cached_property
    def encloses_step(self) -> np.ndarray:
        """Per row of ``host``: True for a non-step span that contains a whole step window of its
        rank (the training-loop driver: ``<module>``, ``main``, ``train``). Profiler steps start
        and end inside ``prof.step()`` calls, so they do not nest in the driver's frame and its
        "self time" would be the whole run; line-level metrics leave these frames out."""
        host = self.host
        w = self.step_windows
        out = np.zeros(len(host), bool)
        if not len(w) or not len(host) or not self.has_steps:
            return out
        from neuron_explorer.analyzers.core.intervals import clip_to_windows

        start = host["start_ns"].to_numpy()
        end = start + host["dur_ns"].to_numpy()
        # an enclosing span clips to the *whole* window of some step: piece == window
        rows, wins, ps, pe = clip_to_windows(
            host["rank"].to_numpy(), start, end, w["rank"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
        )
        whole = (ps == w["start_ns"].to_numpy()[wins]) & (pe == w["end_ns"].to_numpy()[wins])
        out[rows[whole]] = True
        # a span crossing a step boundary and longer than a step is a driver frame too
        counts = np.bincount(rows, minlength=len(host))
        out |= (counts >= 2) & (host["dur_ns"].to_numpy() > w["dur_ns"].min())
        out &= (host["kind"] != Kind.STEP).to_numpy()
        return out

    @cached_property
    def launch_events(self) -> pd.DataFrame:
        """Device events joined to their launch (see ``launch_events`` below)."""
        return launch_events(self)

    @cached_property
    def host_self_ns(self) -> pd.Series:
        """Host self time of every row of ``host`` (duration minus direct children)."""
        return self_time(self)


def launch_events(frames: TraceFrames) -> pd.DataFrame:
    """One row per device event with its launch: rank, device, stream, start_ns, dur_ns,
    launch_start_ns, launch_dur_ns, launch_delay_ns, queue_depth, name, category."""
    dev = frames.device
    rt = frames.host_of(Kind.RUNTIME)
    pos = lookup(
        ukey(rt["rank"].to_numpy(), rt["event_id"].to_numpy()),
        ukey(dev["rank"].to_numpy(), dev["launch_id"].to_numpy()),
    )
    m = pos >= 0
    safe = np.maximum(pos, 0)
    ls = rt["start_ns"].to_numpy()[safe] if len(rt) else np.zeros(len(dev), np.int64)
    ld = rt["dur_ns"].to_numpy()[safe] if len(rt) else np.zeros(len(dev), np.int64)
    out = pd.DataFrame(
        {
            "rank": dev["rank"].to_numpy()[m],
            "device": dev["device"].to_numpy()[m],
            "stream": dev["stream"].to_numpy()[m],
            "event_id": dev["event_id"].to_numpy()[m],
            "name": dev["name"].to_numpy()[m],
            "category": frames.device_category.to_numpy()[m],
            "start_ns": dev["start_ns"].to_numpy()[m],
            "dur_ns": dev["dur_ns"].to_numpy()[m],
            "launch_start_ns": ls[m].astype(np.int64),
            "launch_dur_ns": ld[m].astype(np.int64),
        }
    )
    out["launch_delay_ns"] = out["start_ns"] - out["launch_start_ns"]
    out["queue_depth"] = _queue_depth(out)
    return out


def _queue_depth(ev: pd.DataFrame) -> np.ndarray:
    """Per event: events on its stream launched at or before its launch and not finished by then."""
    if not len(ev):
        return np.zeros(0, np.int64)
    codes = group_codes(ev["rank"].to_numpy(), ev["device"].to_numpy(), ev["stream"].to_numpy())
    launch = ev["launch_start_ns"].to_numpy()
    end = (ev["start_ns"] + ev["dur_ns"]).to_numpy()
    n_streams = int(codes.max()) + 1
    if n_streams == 1:  # one stream: its own times, no shared axis
        return _in_flight(launch, end, _NO_FLOOR)
    t0 = int(min(launch.min(), end.min()))
    span = int(max(launch.max(), end.max())) - t0 + 1
    if n_streams * span >= 1 << 63:  # streams' times too far apart for one int64 axis
        out = np.zeros(len(ev), np.int64)
        for code in range(n_streams):
            rows = np.flatnonzero(codes == code)
            out[rows] = _in_flight(launch[rows], end[rows], _NO_FLOOR)
        return out
    # each stream on its own stretch of one axis, starting at code x span
    return _in_flight((launch - t0) + codes * span, (end - t0) + codes * span, codes * span)


_NO_FLOOR = np.int64(np.iinfo(np.int64).min)


def _in_flight(launch: np.ndarray, end: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """Per event: those launched at or before its launch and not finished by then, itself aside;
    ``floor``: the lowest time of its stream's stretch of the axis (``_NO_FLOOR`` for one stream)."""
    ls, es = np.sort(launch), np.sort(end)
    launched = np.searchsorted(ls, launch, side="right") - np.searchsorted(ls, floor, side="left")
    finished = np.searchsorted(es, launch, side="right") - np.searchsorted(es, floor, side="left")
    # minus itself when it is in flight at its own launch; (a kernel that starts before its launch,
    # clock skew, could make it negative)
    return np.maximum(launched - finished - (end > launch), 0)


def child_time(host: pd.DataFrame) -> pd.Series:
    """Sum of direct children's durations, indexed like ``host`` (0 where no child)."""
    pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
        ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy()),
    )
    ok = pos >= 0
    sums = np.bincount(pos[ok], weights=host["dur_ns"].to_numpy()[ok], minlength=len(host))
    return pd.Series(np.rint(sums).astype(np.int64), index=host.index)


def self_time(frames: TraceFrames) -> pd.Series:
    """Host self time of every host span, aligned with ``frames.host``."""
    host = frames.host
    self_ns = host["dur_ns"] - child_time(host)
    return self_ns.clip(lower=0)
