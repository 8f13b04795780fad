"""The device idle with launched work queued, and what that work waits on.

The attribution's ``device_wait`` is the time the device runs nothing while work launched on it
has not started. Here the same condition is measured per *idle gap* of each (rank, device),
whatever the host does meanwhile (a host blocked in a copy that waits for this queue is part of
it: the host is not what the device waits for), and each gap is given the queued work that
waited longest in it (the earliest-launched work still to start; among equals the first to
start). Its class says what that work waited on:

- ``collective``: it is a collective (communication kernel): it waits for its peers;
- ``cross_stream``: its stream received a ``Stream Wait Event`` (``cudaStreamWaitEvent``,
  Kineto's ``cuda_sync`` record) after the previous work on the stream was launched: it waits
  for another stream's event;
- ``graph``: it is not the first work of its launch on its stream (a CUDA/HIP graph replay:
  one launch, many kernels): it waits on the graph's internal dependencies;
- ``before_trace``: it has no launch in the trace and starts before the rank's first recorded
  launch (the device ran it before the host launched anything in the window): launched before
  the trace began, queued since the rank's first event;
- ``unrecorded``: none of these: a dependency the trace does not record.

A rank on which every launched device event (at least ``CLOCK_MIN_EVENTS``) starts at least
``CLOCK_SKEW_NS`` after its launch call began, including work launched onto an idle device (its
stream and every other stream of the device done before the call), which no queue explains,
has host and device clocks that disagree (or a window that cut what the device waited on): a
launch takes microseconds. Its gaps are class ``clock``, a data-quality note, not a
bottleneck. (A host that always runs ahead of a busy device has no launch onto an idle one.)

Queued time: per gap ``[g0, g1)`` (no device event of the device runs), the suffix minimum of
the queued-from times (launch end + the rank's launch latency, ``metrics.launches.grace_of``) of the events starting at
or after ``g1`` gives the moment work was first waiting; the queued idle piece is
``[max(g0, that), g1)``. Pieces are clipped to the step windows (an idle stretch spanning three
or more steps keeps its first and last pieces only, as ``intervals.clip_to_windows`` says).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import group_codes, lookup, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.intervals import clip_to_windows, union_length
from neuron_explorer.analyzers.metrics.launches import grace_of
from neuron_explorer.trace.schema import Kind

#: every launched event of a rank waiting at least this long after its launch began: clocks
#: (or the window) are off; real launch latency is microseconds
CLOCK_SKEW_NS = 1_000_000
#: fewer launched events than this say nothing about the clocks
CLOCK_MIN_EVENTS = 8

WAIT_CLASSES: tuple[tuple[str, str], ...] = (
    ("collective", "a collective's peers"),
    ("cross_stream", "another stream's event (cudaStreamWaitEvent)"),
    ("graph", "a CUDA/HIP graph's internal dependency"),
    ("before_trace", "work launched before the trace began"),
    ("unrecorded", "a dependency the trace does not record"),
    ("clock", "host and device clocks that disagree (a data-quality artifact)"),
)
WAIT_LABELS: dict[str, str] = dict(WAIT_CLASSES)
_COLLECTIVE, _CROSS, _GRAPH, _BEFORE, _UNRECORDED, _CLOCK = range(6)
_INF = np.iinfo(np.int64).max // 4
_NEG = -_INF

PIECE_COLUMNS = (
    "rank",
    "device",
    "step",
    "start_ns",
    "end_ns",
    "wait_class",
    "event_id",
    "name",
    "stream",
    "launch_id",
)


def queue_waits(frames: TraceFrames) -> pd.DataFrame:
    """One row per piece of queued device idle time inside a step window: ``rank``, ``device``,
    ``step``, ``start_ns``, ``end_ns``, ``wait_class`` (see the module docstring), and the queued
    work that waited (``event_id``, ``name``, ``stream``, ``launch_id``: -1 when not in the trace)."""
    return frames.memo("queue_waits", lambda: _queue_waits(frames))


def clock_skewed_ranks(frames: TraceFrames) -> pd.DataFrame:
    """Ranks whose every launched device event waited ``CLOCK_SKEW_NS`` or more, one of them
    launched onto an idle device (module docstring): ``rank``, ``events``, ``min_delay_ns``,
    ``median_delay_ns``, ``free`` (launches onto an idle device)."""
    return frames.memo("clock_skewed_ranks", lambda: _clock_skew(frames))


def _clock_skew(frames: TraceFrames) -> pd.DataFrame:
    cols = ("rank", "events", "min_delay_ns", "median_delay_ns", "free")
    ev = frames.launch_events
    if not len(ev):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    # launches onto a drained stream of an idle device (every device event counts, linked or
    # not): nothing recorded explains a wait there
    dev = frames.device  # sorted by rank, device, start
    start = dev["start_ns"].to_numpy().astype(np.int64)
    end = start + dev["dur_ns"].to_numpy().astype(np.int64)
    dkey = group_codes(dev["rank"].to_numpy(), dev["device"].to_numpy())
    skey = group_codes(dev["rank"].to_numpy(), dev["device"].to_numpy(), dev["stream"].to_numpy())
    device_end = _previous_in_group(pd.Series(end).groupby(dkey).cummax().to_numpy().astype(np.int64), dkey, _NEG)
    stream_end = _previous_in_group(pd.Series(end).groupby(skey).cummax().to_numpy().astype(np.int64), skey, _NEG)
    row = lookup(
        ukey(dev["rank"].to_numpy(), dev["event_id"].to_numpy()), ukey(ev["rank"].to_numpy(), ev["event_id"].to_numpy())
    )
    launch = ev["launch_start_ns"].to_numpy().astype(np.int64)
    before = np.maximum(device_end, stream_end)[np.maximum(row, 0)]
    ev = ev.assign(free=(row >= 0) & (before <= launch))
    g = ev.groupby("rank").agg(
        events=("launch_delay_ns", "size"),
        min_delay_ns=("launch_delay_ns", "min"),
        median_delay_ns=("launch_delay_ns", "median"),
        free=("free", "sum"),
    )
    g = g.reset_index()
    g = g[(g["events"] >= CLOCK_MIN_EVENTS) & (g["free"] >= 1) & (g["min_delay_ns"] >= CLOCK_SKEW_NS)]
    return g.astype({"median_delay_ns": "int64"}).reset_index(drop=True)[list(cols)]


def _queue_waits(frames: TraceFrames) -> pd.DataFrame:
    dev = frames.device  # sorted by rank, device, start
    empty = pd.DataFrame({c: pd.Series(dtype="int64") for c in PIECE_COLUMNS})
    w = frames.step_windows
    if not len(dev) or not len(w):
        return empty
    n = len(dev)
    rank = dev["rank"].to_numpy().astype(np.int64)
    device = dev["device"].to_numpy().astype(np.int64)
    stream = dev["stream"].to_numpy().astype(np.int64)
    start = dev["start_ns"].to_numpy().astype(np.int64)
    end = start + dev["dur_ns"].to_numpy().astype(np.int64)
    launch_id = dev["launch_id"].to_numpy().astype(np.int64)

    # the launch of each device event (launch_events holds the linked ones)
    ev = frames.launch_events
    pos = lookup(ukey(ev["rank"].to_numpy(), ev["event_id"].to_numpy()), ukey(rank, dev["event_id"].to_numpy()))
    linked = pos >= 0
    safe = np.maximum(pos, 0)
    launch_start = np.where(linked, ev["launch_start_ns"].to_numpy()[safe] if len(ev) else 0, _INF)
    launch_end = np.where(linked, launch_start + (ev["launch_dur_ns"].to_numpy()[safe] if len(ev) else 0), _INF)
    queued_from = np.where(linked, launch_end + grace_of(frames, rank), _INF)

    # work without a launch that starts before the rank's first recorded launch: the device ran
    # it before the host launched anything in the window, so it was launched before the trace
    # began and queued since the rank's first event
    scode = group_codes(rank, device, stream)
    first_launch = pd.Series(np.where(linked, launch_start, _INF)).groupby(rank).transform("min").to_numpy()
    rank_has_links = pd.Series(linked).groupby(rank).transform("any").to_numpy()
    before = ~linked & rank_has_links & (start < first_launch)
    rank_t0 = _rank_starts(frames, rank)
    queued_from = np.where(before, rank_t0, queued_from)

    # idle gaps per (rank, device): before each event, since the latest end of the earlier ones
    dkey = group_codes(rank, device)
    group_first = np.r_[True, dkey[1:] != dkey[:-1]]
    running_end = pd.Series(end).groupby(dkey).cummax().to_numpy().astype(np.int64)
    prev_end = np.r_[np.int64(_NEG), running_end[:-1]]
    prev_end[group_first] = _NEG
    # suffix minimum of queued_from per device, and the first event reaching it
    rev = slice(None, None, -1)
    suffix_min = pd.Series(queued_from[rev]).groupby(dkey[rev]).cummin().to_numpy()[rev].astype(np.int64)
    reaches = queued_from == suffix_min
    idx = np.where(reaches, np.arange(n), n)
    waiting = pd.Series(idx[rev]).groupby(dkey[rev]).cummin().to_numpy()[rev].astype(np.int64)
    g0 = np.maximum(prev_end, suffix_min)
    gap = (start > g0) & (suffix_min < _INF) & (waiting < n)
    rows = np.flatnonzero(gap)
    if not len(rows):
        return empty
    wait_ev = waiting[rows]

    # the class of each waiting event
    prev_same = _previous_in_group(launch_id, scode, -2)
    # (device rows are in start order per device, so the previous row of a stream is its previous work)
    graph = linked & (launch_id >= 0) & (prev_same == launch_id)
    cross = _after_stream_wait(frames, rank, stream, scode, launch_start, linked)
    collective = frames.device_category.to_numpy() == "communication"
    cls = np.select(
        [collective, cross, graph, before],
        [_COLLECTIVE, _CROSS, _GRAPH, _BEFORE],
        _UNRECORDED,
    ).astype(np.int8)
    skewed = np.isin(rank, clock_skewed_ranks(frames)["rank"].to_numpy())
    cls = np.where(skewed, _CLOCK, cls).astype(np.int8)

    # clip the pieces to the step windows
    ps, pe = g0[rows], start[rows]
    prow, wi, cs, ce = clip_to_windows(
        rank[rows], ps, pe, w["rank"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
    )
    keep = ce > cs
    prow, wi, cs, ce = prow[keep], wi[keep], cs[keep], ce[keep]
    we = wait_ev[prow]
    names = np.array([c for c, _ in WAIT_CLASSES], dtype=object)
    return pd.DataFrame(
        {
            "rank": rank[rows][prow],
            "device": device[rows][prow],
            "step": w["step"].to_numpy()[wi],
            "start_ns": cs,
            "end_ns": ce,
            "wait_class": names[cls[we]],
            "event_id": dev["event_id"].to_numpy()[we],
            "name": dev["name"].astype(object).to_numpy()[we],
            "stream": stream[we],
            "launch_id": np.where(linked[we], launch_id[we], -1),
        }
    )


def _previous_in_group(values: np.ndarray, group: np.ndarray, fill: int) -> np.ndarray:
    """Per row: the value of the previous row of the same group in row order (``fill`` for the
    first), exact for int64 (no float round trip)."""
    order = np.argsort(group, kind="stable")
    v, g = values[order], group[order]
    prev = np.r_[np.int64(fill), v[:-1]].astype(np.int64)
    prev[np.r_[True, g[1:] != g[:-1]]] = fill
    out = np.empty(len(values), np.int64)
    out[order] = prev
    return out


def _rank_starts(frames: TraceFrames, rank: np.ndarray) -> np.ndarray:
    """Per device row: the first event start of its rank (host or device)."""
    spans = pd.concat([frames.host[["rank", "start_ns"]], frames.device[["rank", "start_ns"]]])
    first = spans.groupby("rank")["start_ns"].min()
    return first.reindex(rank).to_numpy().astype(np.int64)


def _after_stream_wait(
    frames: TraceFrames,
    rank: np.ndarray,
    stream: np.ndarray,
    scode: np.ndarray,
    launch_start: np.ndarray,
    linked: np.ndarray,
) -> np.ndarray:
    """Per device row: True when a ``Stream Wait Event`` record on its (rank, stream) lies after
    the previous work of the stream was launched and at or before its own launch."""
    out = np.zeros(len(rank), bool)
    sync = frames.trace.select([Kind.SYNC], ["rank", "name", "start_ns", "stream", "tid"]).to_pandas()
    sync = sync[sync["name"].astype(str) == "Stream Wait Event"]
    if not len(sync) or not linked.any():
        return out
    # the waiting stream: the record's stream column (Kineto), else the thread it is drawn on
    s = sync["stream"].to_numpy(dtype=float, na_value=np.nan) if "stream" in sync else np.full(len(sync), np.nan)
    tid = sync["tid"].to_numpy(dtype=float, na_value=np.nan)
    s = np.where(np.isnan(s), tid, s)
    ok = ~np.isnan(s)
    wr, ws, wt = sync["rank"].to_numpy()[ok].astype(np.int64), s[ok].astype(np.int64), sync["start_ns"].to_numpy()[ok]
    rec = pd.DataFrame({"key": wr * (1 << 32) + ws, "t": wt.astype(np.int64)}).sort_values("t")
    prev_launch = _previous_in_group(np.where(linked, launch_start, _NEG).astype(np.int64), scode, _NEG)
    probe = pd.DataFrame(
        {
            "key": rank * (1 << 32) + stream,
            "t": np.where(linked, launch_start, _NEG).astype(np.int64),
            "row": np.arange(len(rank)),
        }
    )
    probe = probe[linked].sort_values("t")
    if not len(probe):
        return out
    # the last record of the event's stream at or before its launch
    hit = pd.merge_asof(probe, rec.assign(rec_t=rec["t"].astype("Int64")), on="t", by="key", direction="backward")
    ok = hit["rec_t"].notna().to_numpy()
    rows = hit["row"].to_numpy()[ok]
    out[rows] = hit["rec_t"].to_numpy()[ok].astype(np.int64) > prev_launch[rows]
    return out


def queue_wait_totals(pieces: pd.DataFrame) -> dict[str, int]:
    """Queued idle ns per wait class (every class present as a key)."""
    if not len(pieces):
        return dict.fromkeys(WAIT_LABELS, 0)
    sums = (pieces["end_ns"] - pieces["start_ns"]).groupby(pieces["wait_class"]).sum()
    return {c: int(sums.get(c, 0)) for c in WAIT_LABELS}


def under_spans_ns(frames: TraceFrames, pieces: pd.DataFrame, spans: pd.DataFrame) -> int:
    """The part of the queued idle pieces during which one of ``spans`` (host events, e.g. the
    blocking calls) of the same rank holds: |A| + |B| - |A u B| per (rank, device)."""
    if not len(pieces) or not len(spans):
        return 0
    slots = pieces[["rank", "device"]].drop_duplicates().reset_index(drop=True)
    slot = pd.Series(np.arange(len(slots)), index=pd.MultiIndex.from_frame(slots))
    ga = slot.reindex(pd.MultiIndex.from_frame(pieces[["rank", "device"]])).to_numpy().astype(np.int64)
    a_s, a_e = pieces["start_ns"].to_numpy(), pieces["end_ns"].to_numpy()
    bg, bs, be = [], [], []
    ss = spans["start_ns"].to_numpy().astype(np.int64)
    se = ss + spans["dur_ns"].to_numpy().astype(np.int64)
    sr = spans["rank"].to_numpy()
    for i, r in enumerate(slots["rank"].to_numpy()):  # one pass per (rank, device): a handful
        m = sr == r
        bg.append(np.full(int(m.sum()), i, np.int64))
        bs.append(ss[m])
        be.append(se[m])
    g_b, s_b, e_b = np.concatenate(bg), np.concatenate(bs), np.concatenate(be)
    k = len(slots)
    a = union_length(ga, a_s, a_e, k)
    b = union_length(g_b, s_b, e_b, k)
    both = union_length(np.r_[ga, g_b], np.r_[a_s, s_b], np.r_[a_e, e_b], k)
    return int((a + b - both).sum())


def copy_queue_split(frames: TraceFrames, calls: pd.DataFrame) -> pd.DataFrame:
    """Per blocking copy call (rows of ``attribution.blocking_calls``): ``queue_end_ns``, the
    latest end of the work on its copy's stream launched before the call began (work the copy
    waits for in stream order; -inf when none or the copy is not in the trace), and the call
    cut there: ``queue_dur_ns`` (the call's time before, waiting for that queue) and
    ``own_dur_ns`` (the rest: the transfer and the driver's staging of it)."""
    out = calls[["rank", "event_id", "start_ns", "dur_ns"]].reset_index(drop=True).copy()
    out["queue_end_ns"] = np.int64(_NEG)
    dev = frames.device
    if len(out) and len(dev):
        rank = dev["rank"].to_numpy().astype(np.int64)
        stream = dev["stream"].to_numpy().astype(np.int64)
        # the stream of each call's own copy
        call_stream = np.full(len(out), -1, np.int64)
        at = lookup(ukey(out["rank"].to_numpy(), out["event_id"].to_numpy()), ukey(rank, dev["launch_id"].to_numpy()))
        call_stream[at[at >= 0]] = stream[at >= 0]
        ev = frames.launch_events
        pos = lookup(ukey(ev["rank"].to_numpy(), ev["event_id"].to_numpy()), ukey(rank, dev["event_id"].to_numpy()))
        start = dev["start_ns"].to_numpy().astype(np.int64)
        launched_at = np.where(pos >= 0, ev["launch_start_ns"].to_numpy()[np.maximum(pos, 0)] if len(ev) else 0, start)
        work = pd.DataFrame(
            {
                "key": rank * (1 << 32) + stream,
                "t": launched_at.astype(np.int64),
                "end": start + dev["dur_ns"].to_numpy(),
            }
        ).sort_values(["key", "t"], kind="stable")
        work["end"] = work.groupby("key")["end"].cummax().astype("Int64")  # (nullable: exact ns after the join)
        probe = pd.DataFrame(
            {
                "key": out["rank"].to_numpy().astype(np.int64) * (1 << 32) + call_stream,
                "t": out["start_ns"].to_numpy().astype(np.int64),
                "row": np.arange(len(out)),
            }
        ).sort_values("t")
        hit = pd.merge_asof(
            probe, work.sort_values("t"), on="t", by="key", direction="backward", allow_exact_matches=False
        )
        ok = hit["end"].notna().to_numpy() & (call_stream[hit["row"].to_numpy()] >= 0)
        q = hit["end"].to_numpy()[ok].astype(np.int64)
        qe = out["queue_end_ns"].to_numpy().copy()
        qe[hit["row"].to_numpy()[ok]] = q
        out["queue_end_ns"] = qe
    s = out["start_ns"].to_numpy()
    e = s + out["dur_ns"].to_numpy()
    cut = np.clip(out["queue_end_ns"].to_numpy(), s, e)
    out["queue_dur_ns"] = cut - s
    out["own_dur_ns"] = e - cut
    return out
