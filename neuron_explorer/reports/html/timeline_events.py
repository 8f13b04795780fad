"""One step's events for the report's timeline: every event, in nested lanes, with its links.

Each host thread is a lane whose rows are nesting depths (a Python frame, the annotation and op
under it, the runtime call under that), each device queue a lane of one row. Events are kept
whole, not merged: the page decides what to draw for the range in view (every event once few
enough are in view, merged bars only when zoomed out; ``report.js``). When a step holds more
events than its budget, the longest are kept (so an event's parents always are) and the step
says how many were left out. A device event links to the runtime call that launched it, so the
page can draw the flow; the longest events carry their args for the details panel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.reports.location import Locations
from neuron_explorer.reports.names import demangle
from neuron_explorer.trace.schema import DEVICE_KINDS


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


#: Events a step keeps args for (the longest), and the longest args text kept.
ARGS_EVENTS = 300
ARGS_CHARS = 600
#: Nesting deeper than this is drawn on the deepest row (it would only add empty-looking rows).
MAX_DEPTH = 12


def nesting_depth(keys: np.ndarray, parent_keys: np.ndarray) -> np.ndarray:
    """Each event's depth below its outermost enclosing event (parents found by key among the
    same events; a parent that is not among them ends the chain), by whole-array passes."""
    n = len(keys)
    order = np.argsort(keys, kind="stable")
    pos = np.searchsorted(keys[order], parent_keys)
    found = (parent_keys >= 0) & (pos < n)
    parent = np.full(n, -1, dtype=np.int64)
    hit = found.copy()
    hit[found] = keys[order[pos[found]]] == parent_keys[found]
    parent[hit] = order[pos[hit]]
    depth = np.zeros(n, dtype=np.int64)
    for _ in range(MAX_DEPTH):  # each pass settles one more level of every chain
        new = np.where(parent >= 0, depth[np.clip(parent, 0, None)] + 1, 0)
        if np.array_equal(new, depth):
            break
        depth = new
    return np.minimum(depth, MAX_DEPTH)


def step_entry(
    ev: pd.DataFrame,
    step: int,
    start_ns: int,
    dur_ns: int,
    budget: int,
    strings: StringTable,
    where: Locations,
    kinds: tuple[str, ...],
) -> dict[str, Any]:
    """The step's lanes, rows and events (columnar, strings interned in ``strings``)."""
    total = len(ev)
    if total > budget:
        ev = ev.nlargest(budget, "dur_ns", keep="first")
    lane, labels = _lanes(ev, kinds)
    depth = ev["depth"].to_numpy()
    # one row per (lane, depth) in use, lanes in order and depths top-down within a lane
    row_keys = np.unique(lane * (MAX_DEPTH + 1) + depth)
    row_lane, row_depth = row_keys // (MAX_DEPTH + 1), row_keys % (MAX_DEPTH + 1)
    row = np.searchsorted(row_keys, lane * (MAX_DEPTH + 1) + depth)
    rows = [labels[la] + (f" ·{d}" if d else "") for la, d in zip(row_lane.tolist(), row_depth.tolist())]
    order = np.lexsort((ev["start_ns"].to_numpy(), row))
    ev, row = ev.iloc[order], row[order]
    start = ev["start_ns"].to_numpy() - start_ns
    files = ev["src_file"].astype("object") if "src_file" in ev else pd.Series([None] * len(ev), dtype="object")
    lines = ev["src_line"].to_numpy() if "src_line" in ev else np.full(len(ev), -1)
    modules = ev["src_module"] if "src_module" in ev else pd.Series([None] * len(ev), dtype="object")
    names = ev["name"].astype("object").astype(str)
    return {
        "step": step,
        "start_ns": start_ns,
        "dur_ns": dur_ns,
        "lanes": labels,
        "rows": rows,
        "row_lane": row_lane.tolist(),
        "events": total,
        "kept": len(ev),
        "downsampled": bool(len(ev) < total),
        "ev": {
            "row": row.tolist(),
            "kind": ev["kind_code"].to_numpy().tolist(),
            "start": start.tolist(),
            "dur": ev["dur_ns"].to_numpy().tolist(),
            "name": strings.codes(names.map(demangle)).tolist(),
            "raw": strings.codes(names.where(names.map(demangle) != names, None)).tolist(),
            "src": strings.codes(
                pd.Series(
                    [None if f is None or f != f else where.format(f, n) for f, n in zip(files, lines)], dtype="object"
                )
            ).tolist(),
            "module": strings.codes(modules).tolist(),
            "link": _launch_links(ev).tolist(),
            "id": ev["event_id"].to_numpy().tolist(),
            "args": _args_codes(ev, strings).tolist(),
            # 1: on the critical path of its rank's step (analyzers/graph), outlined on the page
            "crit": ev["crit"].astype(int).tolist() if "crit" in ev else [0] * len(ev),
        },
    }


def _lanes(ev: pd.DataFrame, kinds: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """Each event's lane and the lane labels, by rank, host threads before device queues."""
    device_codes = [i for i, k in enumerate(kinds) if k in DEVICE_KINDS]
    code = ev["kind_code"].to_numpy()
    is_device = np.isin(code, device_codes)
    if "sync" in kinds and "stream" in ev and "device" in ev:  # a sync recorded on a device queue
        on_queue = (ev["stream"].to_numpy() >= 0) & (ev["device"].to_numpy() >= 0)
        is_device |= (code == kinds.index("sync")) & on_queue
    dtype = ev["device_type"].astype("category") if "device_type" in ev else pd.Categorical([None] * len(ev))
    dtype_names = [str(c) for c in dtype.cat.categories] if hasattr(dtype, "cat") else []
    dtype_codes = dtype.cat.codes.to_numpy() if hasattr(dtype, "cat") else np.full(len(ev), -1)

    def col(name: str) -> np.ndarray:
        return ev[name].to_numpy() if name in ev else np.full(len(ev), -1, dtype=np.int64)

    keys = np.stack(
        [
            col("rank"),
            is_device.astype(np.int64),
            np.where(is_device, dtype_codes, -1),
            np.where(is_device, col("device"), -1),
            np.where(is_device, col("stream"), col("tid")),
        ],
        axis=1,
    ).astype(np.int64)
    if not len(keys):
        return np.zeros(0, dtype=np.int64), []
    uniq, lane = np.unique(keys, axis=0, return_inverse=True)
    multi_rank = len(np.unique(uniq[:, 0])) > 1
    labels = []
    for r, dev, type_code, device, queue in uniq.tolist():  # one per lane
        prefix = f"rank {r} · " if multi_rank else ""
        name = dtype_names[type_code] if 0 <= type_code < len(dtype_names) else "?"
        labels.append(f"{prefix}{name}:{device} · stream {queue}" if dev else f"{prefix}host · thread {queue}")
    return lane.reshape(-1).astype(np.int64), labels


def _launch_links(ev: pd.DataFrame) -> np.ndarray:
    """For each event, the position (in ``ev``) of the runtime call that launched it, else -1."""
    if "launch_id" not in ev or not len(ev):
        return np.full(len(ev), -1, dtype=np.int64)
    rank = ev["rank"].to_numpy().astype(np.int64) if "rank" in ev else np.zeros(len(ev), np.int64)
    keys = (rank << 40) + ev["event_id"].to_numpy()
    launch = ev["launch_id"].to_numpy()
    want = np.where(launch >= 0, (rank << 40) + launch, -1)
    order = np.argsort(keys, kind="stable")
    pos = np.clip(np.searchsorted(keys[order], want), 0, max(len(keys) - 1, 0))
    hit = (want >= 0) & (keys[order[pos]] == want)
    return np.where(hit, order[pos], -1)


def _args_codes(ev: pd.DataFrame, strings: StringTable) -> np.ndarray:
    """Interned args text of the ``ARGS_EVENTS`` longest events that have args, else -1."""
    out = np.full(len(ev), -1, dtype=np.int64)
    if "args" not in ev or not len(ev):
        return out
    args = ev["args"].astype("object")
    has = args.notna().to_numpy() & (args.astype(str).str.len().to_numpy() > 2)
    if not has.any():
        return out
    candidates = np.flatnonzero(has)
    top = candidates[np.argsort(-ev["dur_ns"].to_numpy()[candidates], kind="stable")[:ARGS_EVENTS]]
    text = [a if len(a) <= ARGS_CHARS else a[: ARGS_CHARS - 1] + "…" for a in args.iloc[top].astype(str)]
    out[top] = strings.codes(pd.Series(text, dtype="object"))
    return out
