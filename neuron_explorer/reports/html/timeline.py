"""The report's device timeline: one lane per device queue and per host thread, step by step.

For each profiler step the page can show, this module lays out the step's device work (one
lane per rank, device and stream) and its outermost host ops (one lane per host thread), and
downsamples lanes that hold more events than a browser draws quickly: consecutive events
closer than a gap are merged into one segment that keeps the count, the busy time and the
longest event's name and source line. The gap starts at the lane's span divided by its budget
and doubles until the lane fits, so short bursts merge first and long events stay exact.
The result is columnar, with every string interned once in a shared table, because kernel names
are long and repeat thousands of times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.reports.location import Locations
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import Kind

#: Segments drawn at most per lane of one step, per step, and in the whole page: SVG bars
#: beyond ~10k per view make Plotly slow to open and hover.
LANE_BUDGET = 2_000
STEP_BUDGET = 10_000
PAGE_BUDGET = 120_000
#: Steps with a timeline at most; the page lists how many were left out.
MAX_STEPS = 24
#: Event kinds drawn, in legend order; a segment's ``kind`` is an index into this tuple.
TIMELINE_KINDS = (Kind.CPU_OP, Kind.KERNEL, Kind.COLLECTIVE, Kind.MEMCPY, Kind.MEMSET)
_NO_STEP = np.iinfo(np.int64).min
_COLUMNS = (
    "event_id", "rank", "kind", "name", "device_type", "device", "stream", "tid",
    "start_ns", "dur_ns", "parent_id", "step", "src_file", "src_line", "src_module",
)  # fmt: skip


@dataclass
class StringTable:
    """Interns strings so each appears once in the page; index -1 means "none"."""

    values: list[str] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict)

    def codes(self, strings: pd.Series) -> np.ndarray:
        """The index of each string (-1 for null), interning the new ones."""
        cat = strings.astype("category").cat.remove_unused_categories()  # intern only what is shown
        lookup = np.array([self.add(str(v)) for v in cat.cat.categories] + [-1], dtype=np.int64)
        return lookup[cat.cat.codes.to_numpy()]  # code -1 (null) picks the trailing -1

    def add(self, value: str) -> int:
        idx = self._index.get(value)
        if idx is None:
            idx = self._index[value] = len(self.values)
            self.values.append(value)
        return idx


def build_timeline(
    trace: Trace, steps: pd.DataFrame, strings: StringTable, where: Locations | None = None
) -> dict[str, Any]:
    """The timeline payload: the steps shown, their lanes and (downsampled) segments.

    ``steps`` has one row per (rank, step) with ``start_ns`` and ``dur_ns`` (the analysis'
    step table); when it is empty the whole trace is one window (step -1).
    """
    payload: dict[str, Any] = {"kinds": list(TIMELINE_KINDS), "steps": [], "total_steps": 0, "downsampled": False}
    table = _select(trace.events, TIMELINE_KINDS)
    if not table.num_rows:
        return payload
    ids = {c: _int_column(table, c) for c in ("rank", "event_id", "parent_id", "start_ns", "dur_ns", "step")}
    windows = _windows(steps, ids)
    per_step = windows.groupby("step").agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max")).reset_index()
    per_step["dur_ns"] = per_step["end_ns"] - per_step["start_ns"]
    chosen = choose_steps(per_step["step"].to_numpy(), per_step["dur_ns"].to_numpy(), MAX_STEPS)
    payload["total_steps"] = len(per_step)
    # Pick the rows first, on plain id columns; only those rows become a DataFrame with strings.
    kind_code = _kind_codes(table["kind"])
    step_key = _assign_steps(ids, windows)
    keep = _outermost(kind_code, ids) & (ids["dur_ns"] >= 0) & np.isin(step_key, chosen)
    rows = np.flatnonzero(keep)
    events = _frame(table.take(pa.array(rows)), ids, rows)
    events["kind_code"] = kind_code[rows]
    events["step_key"] = step_key[rows]
    step_budget = max(1_000, min(STEP_BUDGET, PAGE_BUDGET // max(1, len(chosen))))
    groups = dict(iter(events.groupby("step_key", sort=False)))
    for row in per_step[per_step["step"].isin(chosen)].itertuples(index=False):
        step_events = groups.get(row.step)
        if step_events is None:
            continue
        entry = _step_entry(
            step_events, int(row.step), int(row.start_ns), int(row.dur_ns), step_budget, strings, where or Locations()
        )
        payload["downsampled"] = payload["downsampled"] or entry["downsampled"]
        payload["steps"].append(entry)
    return payload


def _select(events: pa.Table, kinds: tuple[str, ...]) -> pa.Table:
    """The timeline's columns of the events of ``kinds``; the kind test runs on the dictionary
    (a few entries), not on every row's string."""
    table = events.select([c for c in _COLUMNS if c in events.column_names])
    wanted = pa.array(list(kinds), pa.string())
    masks = []
    for chunk in table["kind"].chunks:
        if pa.types.is_dictionary(chunk.type):
            hit = pc.is_in(chunk.dictionary.cast(pa.string()), value_set=wanted)
            masks.append(pc.fill_null(pc.take(hit, chunk.indices), False))
        else:
            masks.append(pc.fill_null(pc.is_in(chunk.cast(pa.string()), value_set=wanted), False))
    return table.filter(pa.chunked_array(masks, pa.bool_())) if masks else table.slice(0, 0)


def _int_column(table: pa.Table, name: str) -> np.ndarray:
    if name not in table.column_names:
        return np.full(table.num_rows, -1, dtype=np.int64)
    return pc.fill_null(table[name], -1).to_numpy().astype(np.int64, copy=False)


def _kind_codes(kind: pa.ChunkedArray) -> np.ndarray:
    """The index of each event's kind in ``TIMELINE_KINDS`` (-1 for others), via the dictionary."""
    arr = kind.combine_chunks()
    if pa.types.is_dictionary(arr.type):
        lookup = np.array([TIMELINE_KINDS.index(v) if v in TIMELINE_KINDS else -1 for v in arr.dictionary.to_pylist()])
        return lookup[pc.fill_null(arr.indices, 0).to_numpy()] if len(lookup) else np.full(len(arr), -1)
    values = np.asarray(arr.to_pylist(), dtype=object)
    return np.select([values == k for k in TIMELINE_KINDS], range(len(TIMELINE_KINDS)), -1)


def _outermost(kind_code: np.ndarray, ids: dict[str, np.ndarray]) -> np.ndarray:
    """False for host ops nested in another op: they would overlap their parent in one lane."""
    is_op = kind_code == 0
    rank, parent = ids["rank"], ids["parent_id"]
    op_keys = (rank[is_op] << 40) + ids["event_id"][is_op]
    return ~(is_op & (parent >= 0) & np.isin((rank << 40) + parent, op_keys))


def _frame(table: pa.Table, ids: dict[str, np.ndarray], rows: np.ndarray) -> pd.DataFrame:
    data: dict[str, Any] = {}
    for name in table.column_names:
        if name in ids:
            data[name] = ids[name][rows]
        elif pa.types.is_integer(table[name].type):
            data[name] = _int_column(table, name)
        else:
            data[name] = table[name].to_pandas()
    return pd.DataFrame(data, copy=False)


def choose_steps(steps: np.ndarray, durations: np.ndarray, limit: int) -> list[int]:
    """At most ``limit`` steps: the slowest, the fastest, the median, then evenly spread ones."""
    order = np.argsort(durations, kind="stable")
    if len(steps) <= limit:
        return [int(s) for s in steps]
    picked = {int(steps[order[-1]]), int(steps[order[0]]), int(steps[order[len(order) // 2]])}
    for i in np.linspace(0, len(steps) - 1, limit).astype(int):
        if len(picked) >= limit:
            break
        picked.add(int(steps[i]))
    return sorted(picked)


def _windows(steps: pd.DataFrame | None, ids: dict[str, np.ndarray]) -> pd.DataFrame:
    cols = ["rank", "step", "start_ns", "end_ns"]
    if steps is not None and len(steps) and {"rank", "step", "start_ns", "dur_ns"} <= set(steps.columns):
        w = steps[["rank", "step", "start_ns", "dur_ns"]].astype("int64")
        w = w.assign(end_ns=w["start_ns"] + w["dur_ns"])
        return w[cols].sort_values(["rank", "start_ns"]).reset_index(drop=True)
    spans = pd.DataFrame({"rank": ids["rank"], "start_ns": ids["start_ns"], "end_ns": ids["start_ns"] + ids["dur_ns"]})
    g = spans.groupby("rank").agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max"))
    return g.reset_index().assign(step=-1)[cols]


def _assign_steps(ids: dict[str, np.ndarray], windows: pd.DataFrame) -> np.ndarray:
    """Each event's step: its ``step`` column when that is a known step, else the window of its
    rank it starts in (device work without a resolved launch, or a trace without steps)."""
    step = ids["step"]
    known = np.isin(step, windows["step"].to_numpy()) & (step >= 0)
    out = np.where(known, step, _NO_STEP)
    rank, start = ids["rank"], ids["start_ns"]
    for r, w in windows.groupby("rank"):  # one pass per rank
        sel = np.flatnonzero(~known & (rank == r))
        if not len(sel):
            continue
        starts, ends, nums = w["start_ns"].to_numpy(), w["end_ns"].to_numpy(), w["step"].to_numpy()
        i = np.searchsorted(starts, start[sel], side="right") - 1
        ok = (i >= 0) & (start[sel] <= ends[np.clip(i, 0, None)])
        out[sel[ok]] = nums[i[ok]]
    return out


def _step_entry(
    ev: pd.DataFrame,
    step: int,
    start_ns: int,
    dur_ns: int,
    step_budget: int,
    strings: StringTable,
    where: Locations,
) -> dict[str, Any]:
    lane, labels = _lanes(ev)
    lane_budget = max(200, min(LANE_BUDGET, step_budget // max(1, len(labels))))
    start, dur = ev["start_ns"].to_numpy(), ev["dur_ns"].to_numpy()
    order = np.lexsort((start, lane))
    lane, start, dur = lane[order], start[order], dur[order]
    end = start + dur
    group = _merge_groups(lane, start, end, lane_budget)
    # Groups are contiguous runs of the sorted events: reduce each run with reduceat.
    first = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    seg_start = np.minimum.reduceat(start, first)
    seg_end = np.maximum.reduceat(end, first)
    # The longest event of each group names the segment (same run boundaries in this order).
    longest = order[np.lexsort((-dur, group))[first]]
    rows = ev.iloc[longest]
    # Segments are bounded by the budget, so building their source labels in Python is cheap.
    files = rows["src_file"].astype("object") if "src_file" in rows else [None] * len(rows)
    lines = rows["src_line"].to_numpy() if "src_line" in rows else np.full(len(rows), -1)
    src_text = [None if f is None or f != f else where.format(f, n) for f, n in zip(files, lines)]
    modules = rows["src_module"] if "src_module" in rows else pd.Series([None] * len(rows), dtype="object")
    return {
        "step": step,
        "start_ns": start_ns,
        "dur_ns": dur_ns,
        "lanes": labels,
        "events": len(ev),
        "downsampled": bool(len(first) < len(ev)),
        "segments": {
            "lane": lane[first].tolist(),
            "kind": rows["kind_code"].to_numpy().tolist(),
            "start": (seg_start - start_ns).tolist(),
            "dur": (seg_end - seg_start).tolist(),
            "busy": np.add.reduceat(dur, first).tolist(),
            "count": np.diff(np.r_[first, len(group)]).tolist(),
            "name": strings.codes(rows["name"]).tolist(),
            "src": strings.codes(pd.Series(src_text, dtype="object")).tolist(),
            "module": strings.codes(modules).tolist(),
        },
    }


def _lanes(ev: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Each event's lane index and the lane labels, ordered by rank, then host lanes (one per
    thread) before device lanes (one per device type, device and stream)."""
    is_device = ev["kind_code"].to_numpy() != 0
    dtype = ev["device_type"].astype("category") if "device_type" in ev else pd.Categorical([None] * len(ev))
    dtype_names = [str(c) for c in dtype.cat.categories] if hasattr(dtype, "cat") else []
    dtype_code = dtype.cat.codes.to_numpy() if hasattr(dtype, "cat") else np.full(len(ev), -1)

    def col(name: str) -> np.ndarray:
        return ev[name].to_numpy() if name in ev else np.full(len(ev), -1, dtype=np.int64)

    keys = np.stack(
        [
            col("rank"),
            is_device.astype(np.int64),
            np.where(is_device, dtype_code, -1),
            np.where(is_device, col("device"), -1),
            np.where(is_device, col("stream"), col("tid")),
        ],
        axis=1,
    ).astype(np.int64)
    uniq, lane = np.unique(keys, axis=0, return_inverse=True)
    multi_rank = len(np.unique(uniq[:, 0])) > 1
    labels = []
    for r, dev, code, device, queue in uniq.tolist():  # one per lane
        prefix = f"rank {r} · " if multi_rank else ""
        name = dtype_names[code] if 0 <= code < len(dtype_names) else "?"
        labels.append(f"{prefix}{name}:{device} · stream {queue}" if dev else f"{prefix}host ops · thread {queue}")
    return lane.reshape(-1).astype(np.int64), labels


def _merge_groups(lane: np.ndarray, start: np.ndarray, end: np.ndarray, budget: int) -> np.ndarray:
    """Group ids (non-decreasing) that merge nearby events until each lane has <= budget groups.

    Input is sorted by lane, then start. A new group begins at a lane's first event and at any
    event starting more than the lane's gap after every earlier event of its group ended.
    """
    n = len(lane)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.r_[True, lane[1:] != lane[:-1]]
    lane_ids = np.cumsum(first) - 1
    counts = np.bincount(lane_ids)
    # The running max of end within a lane: nested or overlapping events do not start a group.
    prev_end = np.r_[np.iinfo(np.int64).min, pd.Series(end).groupby(lane_ids).cummax().to_numpy()[:-1]]
    lane_end = np.maximum.reduceat(end, np.flatnonzero(first))
    span = np.maximum(lane_end - start[first], 1).astype(np.float64)
    gap = np.where(counts > budget, span / budget, -np.inf)
    while True:
        new = first | (start > prev_end + gap[lane_ids])
        per_lane = np.bincount(lane_ids, weights=new.astype(np.float64))
        over = per_lane > budget
        if not over.any():
            return np.cumsum(new) - 1
        gap = np.where(over, gap * 2, gap)
