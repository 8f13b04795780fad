"""The text-mode timeline: one step of one rank, one lane per host thread and device queue.

``timeline(source, rank, step)`` cuts the step's events out of the trace once and merges each
lane's spans into non-overlapping busy intervals per kind; ``render_cells`` turns a zoomed and
panned window of those intervals into per-character coverage, with prefix sums and binary
search, so zooming a step of a 5M-event trace redraws without touching the trace again.

Host threads are named (``tui.threads``: main thread, autograd thread, ...). Under a thread
that has them, two more lanes show the step-time attribution's host categories
(``analyzers.attribution``): ``data loading`` (its DataLoader ``__next__`` spans) and
``Python`` (its Python frames outside framework ops and data loading: ``host_python``), so the
time a finding such as "Waiting for data" blames has a lane to show it in.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.analyzers.attribution import DATALOADER
from neuron_explorer.trace.schema import DEVICE_KINDS, Kind
from neuron_explorer.tui.data import TraceSource
from neuron_explorer.tui.snapshots import Lane, Timeline, TimelineEvent, frozen_array

#: Kinds drawn on host lanes; device lanes draw DEVICE_KINDS.
HOST_LANE_KINDS = (Kind.CPU_OP, Kind.RUNTIME, Kind.SYNC)
#: The kinds of a thread's sub-lanes (not event kinds: attribution categories).
DATA_LOADING = "data_loading"
PYTHON = "python"
SUB_LANES = ((DATA_LOADING, "data loading"), (PYTHON, "Python"))
#: Events of a step listed (and selectable) at most: the longest, so none that matters is left out.
EVENTS_LISTED = 3000


def merge_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [start, end) spans as sorted, disjoint intervals (nested host ops collapse)."""
    if len(starts) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(starts, kind="stable")
    s = starts[order]
    e = ends[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(len(out_s), dtype=np.int64)
    np.maximum.at(out_e, group, e)
    return out_s, out_e


def covered(starts: np.ndarray, ends: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Nanoseconds of disjoint sorted intervals that fall in each bin between ``edges``."""
    if len(starts) == 0:
        return np.zeros(len(edges) - 1, dtype=np.int64)
    durs = ends - starts
    before = np.concatenate(([0], np.cumsum(durs)))
    idx = np.searchsorted(starts, edges, side="right") - 1
    safe = np.clip(idx, 0, None)
    partial = np.clip(edges - starts[safe], 0, durs[safe])
    upto = np.where(idx >= 0, before[safe] + partial, 0)
    return np.diff(upto)


def timeline(source: TraceSource, rank: int | None = None, step: int | None = None) -> Timeline:
    """The lanes of one step (the first step of the first rank by default)."""
    e = source.trace.events
    steps_df = source.frame([Kind.STEP], ["rank", "step", "start_ns", "dur_ns"]).sort_values(["rank", "step"])
    all_steps = tuple(dict.fromkeys(zip(steps_df["rank"].tolist(), steps_df["step"].tolist())))
    ranks = source.trace.ranks or [0]
    if rank is None:
        rank = all_steps[0][0] if all_steps else ranks[0]
    if step is None and all_steps:
        step = next((s for r, s in all_steps if r == rank), None)

    kind = pc.cast(e["kind"], pa.string())
    lane_kinds = pa.array([*HOST_LANE_KINDS, *DEVICE_KINDS])
    # Python frames and loader spans are drawn where they overlap the step, whatever step
    # they started in (the training loop's own frame encloses every step)
    spans = pc.or_(
        pc.equal(kind, Kind.PYTHON),
        pc.and_(
            pc.is_in(kind, value_set=pa.array([Kind.ANNOTATION, Kind.CPU_OP])),
            pc.match_substring_regex(pc.cast(e["name"], pa.string()), DATALOADER.pattern),
        ),
    )
    spans = pc.fill_null(spans, False)
    mine = pc.equal(e["rank"], rank)
    in_step = pc.and_(pc.and_(pc.is_in(kind, value_set=lane_kinds), pc.invert(spans)), mine)
    window: tuple[int, int] | None = None
    if step is not None:
        in_step = pc.and_(in_step, pc.equal(e["step"], step))
        row = steps_df[(steps_df["rank"] == rank) & (steps_df["step"] == step)]
        if len(row):
            window = (int(row["start_ns"].min()), int((row["start_ns"] + row["dur_ns"]).max()))
    cols = ["event_id", "kind", "name", "tid", "device", "stream", "start_ns", "dur_ns"]
    cols += [c for c in ("src_file", "src_line", "src_func", "src_precision") if c in e.column_names]
    core_table = e.filter(pc.fill_null(in_step, False)).select(cols)
    core = source_frame_small(core_table)
    starts = core["start_ns"]
    ends = starts + core["dur_ns"]
    bounds = [int(starts.min()), int(ends.max())] if len(starts) else []
    if window is not None:
        bounds += list(window)
    lo, hi = (min(bounds), max(bounds)) if bounds else (0, 1)
    extra = pc.and_(pc.and_(spans, mine), pc.less(e["start_ns"], hi))
    extra = pc.and_(extra, pc.greater(pc.add(e["start_ns"], e["dur_ns"]), lo))
    table = pa.concat_tables([core_table, e.filter(extra).select(cols)])
    frame = source_frame_small(table)
    # the enclosing frames are cut to the window, so they do not stretch it
    clipped_start = np.maximum(frame["start_ns"], lo)
    frame["dur_ns"] = np.minimum(frame["start_ns"] + frame["dur_ns"], hi) - clipped_start
    frame["start_ns"] = clipped_start
    names = source.thread_names()
    frame["lane"] = _lane_keys(frame, {t: n for (r, t), n in names.items() if r == rank})
    frame["loader"] = np.asarray(
        pc.fill_null(pc.match_substring_regex(table["name"].cast(pa.string()), DATALOADER.pattern), False),
        dtype=bool,
    ) & np.isin(frame["kind"], (Kind.ANNOTATION, Kind.CPU_OP))
    lanes = _lanes(frame)
    from neuron_explorer.tui.tables import location_root

    root = location_root(source.analysis_ready)
    listed = {k: v[frame["kind"] != Kind.PYTHON] for k, v in frame.items()}  # frames have a lane, not rows
    # a loader span is marked in its thread's data-loading lane when selected
    sub_label = dict(SUB_LANES)[DATA_LOADING]
    listed["lane"] = np.where(listed["loader"], listed["lane"] + f" · {sub_label}", listed["lane"])
    events = _events(listed)
    return Timeline(rank, step, lo, max(hi, lo + 1), lanes, events, all_steps, len(listed["kind"]), root)


def source_frame_small(table: pa.Table) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for name in table.column_names:
        col = table[name]
        if pa.types.is_integer(col.type):
            out[name] = pc.fill_null(col, -1).to_numpy().astype(np.int64, copy=False)
        else:
            out[name] = np.asarray(pc.cast(col, pa.string()).to_numpy(zero_copy_only=False), dtype=object)
    return out


def _lane_keys(frame: dict[str, np.ndarray], names: dict[int, str]) -> np.ndarray:
    """Each row's lane: its thread's name (``names``: tid -> name) or its device queue."""
    is_host = host_rows(frame)
    tids, inverse = np.unique(frame["tid"], return_inverse=True)
    labels = np.array([names.get(int(t), f"thread {t}") for t in tids.tolist()] or [""], dtype=object)
    host_label = labels[inverse.ravel()] if len(tids) else np.array([], dtype=object)
    stream = frame["stream"]
    # a sync of the whole device is recorded on stream -1 (or its unsigned 32-bit form)
    queue = np.where(
        (stream < 0) | (stream == 0xFFFFFFFF), " (device-wide)", np.char.add(" queue ", stream.astype(str))
    )
    dev_label = np.char.add(np.char.add("device ", frame["device"].astype(str)), queue).astype(object)
    return np.where(is_host, host_label, dev_label)


def host_rows(frame: dict[str, np.ndarray]) -> np.ndarray:
    """Rows drawn on a host thread's lane: host kinds on no device (a device-side sync record
    goes to its device queue's lane)."""
    return ~np.isin(frame["kind"], DEVICE_KINDS) & (frame["device"] < 0)


def subtract_intervals(
    starts: np.ndarray, ends: np.ndarray, cut_starts: np.ndarray, cut_ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint sorted intervals [starts, ends) less the union of [cut_starts, cut_ends):
    a sweep over every boundary, the inside being where the first set holds and the second not."""
    if len(starts) == 0 or len(cut_starts) == 0:
        return starts, ends
    points = np.concatenate([starts, ends, cut_starts, cut_ends])
    n, m = len(starts), len(cut_starts)
    step_a = np.concatenate([np.ones(n), -np.ones(n), np.zeros(2 * m)])
    step_b = np.concatenate([np.zeros(2 * n), np.ones(m), -np.ones(m)])
    at, inverse = np.unique(points, return_inverse=True)
    in_a = np.cumsum(np.bincount(inverse, weights=step_a, minlength=len(at)))
    in_b = np.cumsum(np.bincount(inverse, weights=step_b, minlength=len(at)))
    keep = (in_a[:-1] > 0.5) & (in_b[:-1] < 0.5)  # holds on [at[i], at[i + 1])
    return merge_intervals(at[:-1][keep].astype(np.int64), at[1:][keep].astype(np.int64))


def _lanes(frame: dict[str, np.ndarray]) -> tuple[Lane, ...]:
    """A lane per host thread (main thread first, then by first event) with its data-loading
    and Python sub-lanes, then a lane per device queue."""
    if len(frame["kind"]) == 0:
        return ()
    keys = frame["lane"]
    kinds = frame["kind"]
    starts = frame["start_ns"]
    ends = starts + frame["dur_ns"]
    is_device = ~host_rows(frame)
    lanes: list[Lane] = []
    host_keys = sorted(
        set(keys[~is_device].tolist()),
        key=lambda k: (k != "main thread", int(starts[keys == k].min()), _natural(k)),
    )
    # One iteration per lane and kind (tens), each lane's spans merged with numpy.
    for label in host_keys:
        in_lane = keys == label
        ops = in_lane & np.isin(kinds, HOST_LANE_KINDS) & ~frame["loader"]
        intervals = {}
        for kind in sorted(set(kinds[ops].tolist())):
            m = ops & (kinds == kind)
            s, en = merge_intervals(starts[m], ends[m])
            intervals[kind] = (frozen_array(s), frozen_array(en))
        tid = int(frame["tid"][np.argmax(in_lane)])
        lanes.append(Lane(label, "host", intervals, int(ops.sum()), detail=f"tid {tid}"))
        loading = merge_intervals(starts[in_lane & frame["loader"]], ends[in_lane & frame["loader"]])
        op_s, op_e = merge_intervals(starts[ops], ends[ops])
        python = merge_intervals(starts[in_lane & (kinds == Kind.PYTHON)], ends[in_lane & (kinds == Kind.PYTHON)])
        busy = merge_intervals(np.concatenate([op_s, loading[0]]), np.concatenate([op_e, loading[1]]))
        python = subtract_intervals(*python, *busy)
        for (kind, sub), (s, en) in zip(SUB_LANES, (loading, python)):
            if len(s):
                lanes.append(
                    Lane(
                        f"{label} · {sub}",
                        "host",
                        {kind: (frozen_array(s), frozen_array(en))},
                        sub=sub,
                        detail=f"tid {tid}",
                    )
                )
    for label in sorted(set(keys[is_device].tolist()), key=_natural):
        in_lane = keys == label
        intervals = {}
        for kind in sorted(set(kinds[in_lane].tolist())):
            m = in_lane & (kinds == kind)
            s, en = merge_intervals(starts[m], ends[m])
            intervals[kind] = (frozen_array(s), frozen_array(en))
        lanes.append(Lane(label, "device", intervals, int(in_lane.sum())))
    return tuple(lanes)


def _natural(label: str) -> tuple:
    return tuple((0, int(p), "") if p.lstrip("-").isdigit() else (1, 0, p) for p in label.split())


def _events(frame: dict[str, np.ndarray]) -> tuple[TimelineEvent, ...]:
    """The step's events (the ``EVENTS_LISTED`` longest when there are more), by start time."""
    n = len(frame["kind"])
    if n == 0:
        return ()
    top = np.argsort(-frame["dur_ns"], kind="stable")[:EVENTS_LISTED]
    top = top[np.argsort(frame["start_ns"][top], kind="stable")]
    keys = frame["lane"][top]
    has_src = "src_file" in frame
    out = []
    for i, j in enumerate(top.tolist()):
        source = None
        if has_src and frame["src_file"][j] not in (None, "None") and frame["src_line"][j] >= 0:
            func, precision = frame["src_func"][j], frame["src_precision"][j]
            source = (
                str(frame["src_file"][j]),
                int(frame["src_line"][j]),
                None if func in (None, "None") else str(func),
                None if precision in (None, "None") else str(precision),
            )
        out.append(
            TimelineEvent(
                str(keys[i]),
                str(frame["kind"][j]),
                str(frame["name"][j]),
                int(frame["start_ns"][j]),
                int(frame["dur_ns"][j]),
                int(frame["event_id"][j]),
                source,
            )
        )
    return tuple(out)


def step_of(steps: tuple[tuple[int, int, int, int], ...], rank: int, time_ns: int) -> int | None:
    """The step of ``rank`` whose window (rank, step, start_ns, dur_ns) holds ``time_ns``, else
    the nearest one; None when the rank has no steps."""
    mine = [(s, start, dur) for r, s, start, dur in steps if r == rank]
    if not mine:
        return None
    inside = [s for s, start, dur in mine if start <= time_ns < start + dur]
    if inside:
        return inside[0]
    return min(mine, key=lambda x: min(abs(time_ns - x[1]), abs(time_ns - x[1] - x[2])))[0]


#: Characters for a cell's busy fraction: empty, <25 %, <50 %, <75 %, full.
SHADES = " ░▒▓█"


def render_cells(lane: Lane, start_ns: int, end_ns: int, width: int) -> list[tuple[str, str]]:
    """(character, dominant kind) per cell of ``width`` cells covering [start_ns, end_ns)."""
    edges = np.linspace(start_ns, end_ns, width + 1).round().astype(np.int64)
    bin_ns = np.maximum(np.diff(edges), 1)
    kinds = list(lane.intervals)
    if not kinds:
        return [(" ", "")] * width
    per_kind = np.vstack([covered(s, e, edges) for s, e in lane.intervals.values()])
    dominant = per_kind.argmax(axis=0)
    fraction = np.clip(per_kind.max(axis=0) / bin_ns, 0, 1)
    shade = np.where(fraction <= 0, 0, np.minimum(1 + (fraction * 4).astype(int), 4))
    return [(SHADES[sh], kinds[d] if sh else "") for sh, d in zip(shade.tolist(), dominant.tolist())]
