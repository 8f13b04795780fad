"""The report's timeline: which steps it shows, and each step's events in nested lanes.

For each profiler step the page can show (at most ``MAX_STEPS``: the slowest, the fastest, the
median and evenly spaced ones), ``timeline_events.step_entry`` lays out the step's events:
host threads as lanes nested by call depth (Python frames, annotations, ops, runtime calls),
device queues as lanes of kernels, copies and collectives. Events are kept whole; the page
draws every one once few enough are in view and merges them only when zoomed out. The result
is columnar, with every string interned once in a shared table, because kernel names are long
and repeat thousands of times.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.analyzers.core.columns import ukey
from neuron_explorer.reports.colors import kind_color
from neuron_explorer.reports.html.timeline_events import StringTable, nesting_depth, step_entry
from neuron_explorer.reports.location import Locations
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import DEVICE_KINDS, Kind

#: Events kept at most per step and in the whole page (the page stays under ~15 MB); a step
#: over its budget keeps its longest events and says how many it left out.
STEP_BUDGET = 20_000
PAGE_BUDGET = 120_000
#: Steps with a timeline at most; the page lists how many were left out.
MAX_STEPS = 24
#: Event kinds drawn, in legend order; an event's ``kind`` is an index into this tuple.
TIMELINE_KINDS = (
    Kind.CPU_OP, Kind.KERNEL, Kind.COLLECTIVE, Kind.MEMCPY, Kind.MEMSET,
    Kind.PYTHON, Kind.ANNOTATION, Kind.RUNTIME, Kind.SYNC,
)  # fmt: skip
_NO_STEP = np.iinfo(np.int64).min
_COLUMNS = (
    "event_id", "rank", "kind", "name", "device_type", "device", "stream", "tid",
    "start_ns", "dur_ns", "parent_id", "launch_id", "step", "src_file", "src_line", "src_module", "args",
)  # fmt: skip


def build_timeline(
    trace: Trace,
    steps: pd.DataFrame,
    strings: StringTable,
    where: Locations | None = None,
    critical: np.ndarray | None = None,
) -> dict[str, Any]:
    """The timeline payload: the steps shown, their lanes, rows and events.

    ``steps`` has one row per (rank, step) with ``start_ns`` and ``dur_ns`` (the analysis'
    step table); when it is empty the whole trace is one window (step -1). ``critical``: the
    (rank, event id) keys (``columns.ukey``) of the events on the critical paths, which the
    page outlines (``ev.crit``).
    """
    payload: dict[str, Any] = {
        "kinds": list(TIMELINE_KINDS),
        "colors": [kind_color(k) for k in TIMELINE_KINDS],
        "steps": [],
        "total_steps": 0,
        "downsampled": False,
    }
    table = _select(trace.events, TIMELINE_KINDS)
    if not table.num_rows:
        return payload
    ids = {
        c: _int_column(table, c) for c in ("rank", "event_id", "parent_id", "launch_id", "start_ns", "dur_ns", "step")
    }
    windows = _windows(steps, ids)
    per_step = windows.groupby("step").agg(start_ns=("start_ns", "min"), end_ns=("end_ns", "max")).reset_index()
    per_step["dur_ns"] = per_step["end_ns"] - per_step["start_ns"]
    chosen = choose_steps(per_step["step"].to_numpy(), per_step["dur_ns"].to_numpy(), MAX_STEPS)
    payload["total_steps"] = len(per_step)
    # Pick the rows first, on plain id columns; only those rows become a DataFrame with strings.
    kind_code = _kind_codes(table["kind"])
    step_key = _assign_steps(ids, windows)
    depth = _host_depth(kind_code, ids)
    keep = (kind_code >= 0) & (ids["dur_ns"] >= 0) & np.isin(step_key, chosen)
    rows = np.flatnonzero(keep)
    events = _frame(table.take(pa.array(rows)), ids, rows)
    events["kind_code"] = kind_code[rows]
    events["step_key"] = step_key[rows]
    events["depth"] = depth[rows]
    if critical is not None and len(critical):
        events["crit"] = np.isin(ukey(ids["rank"][rows], ids["event_id"][rows]), critical)
    step_budget = max(1_000, min(STEP_BUDGET, PAGE_BUDGET // max(1, len(chosen))))
    groups = dict(iter(events.groupby("step_key", sort=False)))
    for row in per_step[per_step["step"].isin(chosen)].itertuples(index=False):
        step_events = groups.get(row.step)
        if step_events is None:
            continue
        entry = step_entry(
            step_events,
            int(row.step),
            int(row.start_ns),
            int(row.dur_ns),
            step_budget,
            strings,
            where or Locations(),
            TIMELINE_KINDS,
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


def _host_depth(kind_code: np.ndarray, ids: dict[str, np.ndarray]) -> np.ndarray:
    """Call depth of each host event under the outermost host event that encloses it (device
    events: 0), from the ``parent_id`` links of the whole trace."""
    device = np.isin(kind_code, [TIMELINE_KINDS.index(k) for k in DEVICE_KINDS])
    keys = (ids["rank"] << 40) + ids["event_id"]
    parents = np.where(~device & (ids["parent_id"] >= 0), (ids["rank"] << 40) + ids["parent_id"], -1)
    keys = np.where(device, -2 - np.arange(len(keys)), keys)  # device events are nobody's parent
    return np.where(device, 0, nesting_depth(keys, parents))


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
