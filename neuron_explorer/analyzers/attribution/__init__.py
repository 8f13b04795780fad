"""Step-time attribution: every nanosecond of every step window in exactly one category.

Per (rank, step, device), each instant of the step window is given to the first class (in
``CLASSES`` order) whose condition holds at that instant; classes map onto the categories of
``CATEGORIES``:

0. ``one_time`` (compile, graph capture, warm-up step): the instant is inside torch.compile
   compilation, a CUDA/HIP graph capture or instantiation, or a warm-up step's window
   (``analyzers.attribution.one_time``): one-time work, whatever the device does meanwhile (autotuning's
   benchmark kernels are one-time too);
1. ``compute``: a compute kernel runs on the device (on a host-only rank: a framework op runs);
2. ``communication``: a communication kernel runs (and no compute): exposed communication;
3. ``copy``: a memcpy or memset runs (and none of the above): exposed copies;
   -- from here on the device runs nothing --
4. ``one_time`` (init): the host is in a one-time setup call (context creation, module loading,
   a kernel's slow first launch; on a trace without steps also the allocator, stream creation and
   the first call of an op enclosing one): initialization, not the steady state;
5. ``host_blocked``: a host thread of the rank is inside a call that blocks on the device:
   synchronize calls (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``, event syncs, the
   profiler's ``cuda_sync`` records), blocking copies (``cudaMemcpy``, ``hipMemcpyWithStream``,
   and ``cudaMemcpyAsync`` of pageable memory, which the driver turns synchronous);
6. ``device_wait``: work launched on the device is still waiting to start (the launch call
   returned over ``QUEUE_GRACE_NS`` ago): the device waits on a dependency (another stream,
   an event, a copy the host is staging), not on the host;
7. ``data_loading``: the host is inside a DataLoader ``__next__`` span;
8. ``host_launch``: the host runs framework ops or runtime calls and nothing is queued: the
   device is starved while the host works (host-bound);
9. ``host_python``: the host is inside a Python frame (only traces recorded ``with_stack``
   have them) and in none of the above;
10. ``untraced``: the host is inside no recorded event: what it did is unknown (a trace
   without Python events, CUDA-graph replay, a sleep); never called Python.

The categories sum to the window's wall time. Each class is the union of its intervals minus
the union of the higher-priority ones, computed as prefix unions over whole columns
(``intervals.union_length``), the same machinery as ``breakdown.step_breakdown``. The one-time
classes' totals by kind are kept apart (``one_time_by_kind``) for the verdict.

Imports ``core/`` and ``metrics/``; ``ranks/``, ``graph/``, the ledger, the verdict and the
rules read it, never the reverse. ``one_time`` and ``queued`` read this module's categories.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, name_mask, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.intervals import clip_to_windows, union_length
from neuron_explorer.analyzers.metrics.breakdown import device_part, device_slots
from neuron_explorer.analyzers.metrics.launches import MIN_GRACE_NS, grace_of
from neuron_explorer.trace.schema import Kind

#: (column stem, label) in priority order; ``<stem>_ns`` and ``<stem>_pct`` are the columns.
CATEGORIES: tuple[tuple[str, str], ...] = (
    ("one_time", "one-time work (initialization, compilation, graph capture, warm-up steps)"),
    ("compute", "device computing"),
    ("communication", "exposed communication"),
    ("copy", "exposed memcpy/memset"),
    ("host_blocked", "host blocked on the device (syncs, blocking copies)"),
    ("device_wait", "device idle with work queued (waiting on a dependency)"),
    ("data_loading", "data loading"),
    ("host_launch", "device starved while the host runs ops (host-bound)"),
    ("host_python", "host Python outside framework ops"),
    ("untraced", "untraced host time (no events recorded)"),
)
CATEGORY_NAMES: tuple[str, ...] = tuple(c for c, _ in CATEGORIES)
CATEGORY_LABELS: dict[str, str] = dict(CATEGORIES)
#: labels on a host-only rank (no device events): ops are the compute
HOST_ONLY_LABELS: dict[str, str] = {**CATEGORY_LABELS, "compute": "framework ops on the CPU"}
#: labels on a Neuron device profile alone (no host trace): the untraced part is the time no
#: engine or DMA queue worked, mostly the semaphore wait before the kernel, not host time
NEURON_DEVICE_LABELS: dict[str, str] = {
    **CATEGORY_LABELS,
    "untraced": "no engine or DMA work (the wait before the kernel; no host trace)",
}
CATEGORY_COLUMNS: tuple[str, ...] = tuple(f"{c}_ns" for c in CATEGORY_NAMES)
#: The categories the steady state is made of (all but ``one_time``).
STEADY_NAMES: tuple[str, ...] = tuple(c for c in CATEGORY_NAMES if c != "one_time")

#: Attribution classes in priority order and the category each counts to; the time no class
#: holds is ``untraced``. ``one_time`` appears twice: its spans outrank device work, its setup
#: calls only outrank the host categories (a call returning while the device computes is free).
CLASSES: tuple[tuple[str, str], ...] = (
    ("compile", "one_time"),
    ("graph_capture", "one_time"),
    ("warmup_step", "one_time"),
    ("compute", "compute"),
    ("communication", "communication"),
    ("copy", "copy"),
    ("init", "one_time"),
    ("host_blocked", "host_blocked"),
    ("device_wait", "device_wait"),
    ("data_loading", "data_loading"),
    ("host_launch", "host_launch"),
    ("host_python", "host_python"),
)
_CLASS = {name: i for i, (name, _) in enumerate(CLASSES)}

#: a launched kernel counts as queued only once its launch call returned this long ago: the
#: first microseconds after a launch are the launch latency, which the host pays. At least this;
#: per rank, what its launches onto an idle device measure (``metrics.launches.idle_launch_grace``:
#: 23-25 us with HIP on MI300X).
QUEUE_GRACE_NS = MIN_GRACE_NS

#: runtime calls during which the host waits for the device
BLOCKING_RUNTIME = re.compile(
    r"^(?:cuda|hip)(?:DeviceSynchronize|StreamSynchronize|EventSynchronize|CtxSynchronize|ThreadSynchronize)$"
    r"|^(?:cuda|hip)Memcpy(?:2D|3D|DtoH|HtoD|DtoD|ToSymbol|FromSymbol)?$|^hipMemcpyWithStream$"
    r"|^cu(?:Ctx|Stream|Event)Synchronize$|^nrt_.*wait",
    re.I,
)
#: runtime calls that copy memory: blocking when their copy involves pageable host memory
COPY_RUNTIME = re.compile(r"^(?:cuda|hip)Memcpy|^cuMemcpy", re.I)
#: the profiler's own span around fetching a batch
DATALOADER = re.compile(r"^enumerate\(DataLoader\)|DataLoaderIter.*__next__")
HOST_OP_KINDS = (Kind.CPU_OP, Kind.RUNTIME, Kind.SYNC)

_BLOCKED, _QUEUED, _LOADING, _OPS, _PYTHON = (
    _CLASS[c] for c in ("host_blocked", "device_wait", "data_loading", "host_launch", "host_python")
)


def blocking_calls(frames: TraceFrames) -> pd.DataFrame:
    """Host events during which the host waits on the device, with a ``reason`` column:
    ``sync`` (synchronize calls, ``cuda_sync`` records) or ``copy`` (blocking or pageable copies)."""
    return frames.memo("blocking_calls", lambda: _blocking_calls(frames))


def blocked_by_copies_ns(frames: TraceFrames) -> int:
    """The part of ``host_blocked`` under blocking copy calls (the rest is synchronize calls)."""

    def compute() -> int:
        calls = blocking_calls(frames)
        return exposed_ns(frames, calls[calls["reason"] == "copy"])

    return frames.memo("blocked_by_copies_ns", compute)


def _blocking_calls(frames: TraceFrames) -> pd.DataFrame:
    host = frames.host
    rt = host[host["kind"] == Kind.RUNTIME]
    is_block = name_mask(rt["name"], BLOCKING_RUNTIME)
    is_copy_call = name_mask(rt["name"], COPY_RUNTIME)
    # copy calls whose launched memcpy touched pageable memory block the host too
    dev = frames.device
    is_memcpy = (dev["kind"] == Kind.MEMCPY).to_numpy()
    mc = dev[is_memcpy & name_mask(dev["memcpy_kind"], predicate=lambda k: "Pageable" in k)]
    pageable = np.zeros(len(rt), bool)
    if len(mc) and len(rt):
        pos = lookup(
            ukey(rt["rank"].to_numpy(), rt["event_id"].to_numpy()),
            ukey(mc["rank"].to_numpy(), mc["launch_id"].to_numpy()),
        )
        pageable[pos[pos >= 0]] = True
    chosen = rt[is_block | (is_copy_call & pageable)]
    reason = np.where(name_mask(chosen["name"], COPY_RUNTIME), "copy", "sync")
    sync = host[host["kind"] == Kind.SYNC]
    out = pd.concat([chosen.assign(reason=reason), sync.assign(reason="sync")])
    return out[out["dur_ns"] > 0]


def queued_intervals(frames: TraceFrames) -> pd.DataFrame:
    """Per device event with a launch: [launch end + grace, start) when positive (rank, device)."""
    ev = frames.launch_events
    q0 = ev["launch_start_ns"].to_numpy() + ev["launch_dur_ns"].to_numpy() + grace_of(frames, ev["rank"].to_numpy())
    s = ev["start_ns"].to_numpy()
    m = s > q0
    return pd.DataFrame(
        {"rank": ev["rank"].to_numpy()[m], "device": ev["device"].to_numpy()[m], "start_ns": q0[m], "end_ns": s[m]}
    )


def step_attribution(frames: TraceFrames) -> pd.DataFrame:
    """Per (rank, step, device): ``wall_ns``, one ``<category>_ns`` per category (they sum to
    wall_ns) and ``<category>_pct`` of wall. A rank without device work gets one row per step
    with ``device`` -1 and ``device_type`` cpu."""
    return _attributed(frames)[0]


def one_time_by_kind(frames: TraceFrames) -> dict[str, int]:
    """The ``one_time`` category's ns split by kind (``analyzers.attribution.one_time.KINDS``), summed over
    every row of the attribution: they add up to its ``one_time_ns``."""
    return _attributed(frames)[1]


def _attributed(frames: TraceFrames) -> tuple[pd.DataFrame, dict[str, int]]:
    return frames.memo("attribution", lambda: _attribute(frames))


def _attribute(frames: TraceFrames) -> tuple[pd.DataFrame, dict[str, int]]:
    from neuron_explorer.analyzers.attribution.one_time import KINDS, one_time_spans, warmup_windows

    w = frames.step_windows.reset_index(drop=True)
    cols = ["rank", "step", "device", "device_type", "start_ns", "wall_ns", *CATEGORY_COLUMNS]
    no_kinds = dict.fromkeys((k for k, _ in KINDS), 0)
    if not len(w):
        return _with_pct(pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})), no_kinds
    dev = frames.device
    devices = device_slots(dev, w)
    n_dev = len(devices)
    slot_of = pd.Series(np.arange(n_dev), index=pd.MultiIndex.from_frame(devices[["rank", "device"]]))
    win = (w["rank"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy())
    rank_slots = devices.reset_index().groupby("rank")["index"].apply(np.asarray)

    groups: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    classes: list[np.ndarray] = []

    def add_device(rank: np.ndarray, device: np.ndarray, s: np.ndarray, e: np.ndarray, cls: np.ndarray | int) -> None:
        rows, wi, ps, pe = clip_to_windows(rank, s, e, *win)
        slot = slot_of.reindex(pd.MultiIndex.from_arrays([rank[rows], device[rows]])).to_numpy()
        groups.append(wi * n_dev + slot)
        starts.append(ps)
        ends.append(pe)
        classes.append(np.broadcast_to(cls if np.isscalar(cls) else np.asarray(cls)[rows], len(rows)).astype(np.int8))

    def add_host(spans: pd.DataFrame, cls: int) -> None:
        """Host spans hold for every device of their rank (a span over three or more windows, the
        training loop's own Python frame, holds for the whole windows inside it too)."""
        if not len(spans):
            return
        s = spans["start_ns"].to_numpy()
        e = s + spans["dur_ns"].to_numpy()
        r = spans["rank"].to_numpy()
        rows, wi, ps, pe = clip_to_windows(r, s, e, *win)
        inner_rows, inner_wi = _windows_inside(r, s, e, *win)
        rows, wi = np.concatenate([rows, inner_rows]), np.concatenate([wi, inner_wi])
        ps = np.concatenate([ps, win[1][inner_wi]])
        pe = np.concatenate([pe, win[2][inner_wi]])
        rank = r[rows]
        for r, slots in rank_slots.items():  # one pass per (rank, device): a handful
            m = rank == r
            for sl in slots:
                groups.append(wi[m] * n_dev + sl)
                starts.append(ps[m])
                ends.append(pe[m])
                classes.append(np.full(int(m.sum()), cls, np.int8))

    once = one_time_spans(frames)
    for kind in ("compile", "graph_capture", "init"):
        add_host(once[(once["kind"] == kind).to_numpy()], _CLASS[kind])
    warm = warmup_windows(frames)
    add_host(warm.assign(dur_ns=warm["end_ns"] - warm["start_ns"]), _CLASS["warmup_step"])
    part = device_part(frames)  # 0 compute, 1 memcpy, 2 memset, 3 communication
    dev_class = np.select([part == 3, part >= 1], [_CLASS["communication"], _CLASS["copy"]], _CLASS["compute"])
    ds = dev["start_ns"].to_numpy()
    add_device(
        dev["rank"].to_numpy(), dev["device"].to_numpy(), ds, ds + dev["dur_ns"].to_numpy(), dev_class.astype(np.int8)
    )
    add_host(blocking_calls(frames), _BLOCKED)
    q = queued_intervals(frames)
    if len(q):
        add_device(
            q["rank"].to_numpy(), q["device"].to_numpy(), q["start_ns"].to_numpy(), q["end_ns"].to_numpy(), _QUEUED
        )
    host = frames.host
    loading = host[host["kind"].isin([Kind.ANNOTATION, Kind.CPU_OP]).to_numpy() & name_mask(host["name"], DATALOADER)]
    add_host(loading, _LOADING)
    add_host(host[host["kind"].isin(HOST_OP_KINDS)], _OPS)
    add_host(host[host["kind"] == Kind.PYTHON], _PYTHON)

    g = np.concatenate(groups).astype(np.int64)
    st = np.concatenate(starts)
    en = np.concatenate(ends)
    cl = np.concatenate(classes)
    n_groups = len(w) * n_dev
    order = np.argsort(cl, kind="stable")
    g, st, en, cl = g[order], st[order], en[order], cl[order]
    bounds = np.searchsorted(cl, np.arange(len(CLASSES)), side="right")
    prefix = [union_length(g[:b], st[:b], en[:b], n_groups) for b in bounds]

    out = pd.DataFrame({"win": np.repeat(np.arange(len(w)), n_dev), "slot": np.tile(np.arange(n_dev), len(w))})
    out = out[w["rank"].to_numpy()[out["win"]] == devices["rank"].to_numpy()[out["slot"]]]
    keep = out.index.to_numpy()
    win_idx, slot_idx = out["win"].to_numpy(), out["slot"].to_numpy()
    res = pd.DataFrame(
        {
            "rank": w["rank"].to_numpy()[win_idx],
            "step": w["step"].to_numpy()[win_idx],
            "device": devices["device"].to_numpy()[slot_idx],
            "device_type": devices["device_type"].to_numpy()[slot_idx],
            "start_ns": w["start_ns"].to_numpy()[win_idx],
            "wall_ns": w["dur_ns"].to_numpy()[win_idx],
        }
    )
    for name in CATEGORY_NAMES:
        res[f"{name}_ns"] = np.zeros(len(res), np.int64)
    kinds = dict(no_kinds)
    prev = np.zeros(n_groups, np.int64)
    for (cls_name, category), cum in zip(CLASSES, prefix):
        part_ns = (cum - prev)[keep]
        res[f"{category}_ns"] += part_ns
        if category == "one_time":
            kinds[cls_name] += int(part_ns.sum())
        prev = cum
    res["untraced_ns"] = res["wall_ns"].to_numpy() - prev[keep]
    # a host-only rank: its framework ops are the compute (below data loading in priority)
    cpu = res["device"].to_numpy() < 0
    res.loc[cpu, "compute_ns"] += res.loc[cpu, "host_launch_ns"]
    res.loc[cpu, "host_launch_ns"] = 0
    return _with_pct(res[cols]), kinds


def _windows_inside(
    rank: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    win_rank: np.ndarray,
    win_start: np.ndarray,
    win_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(row, window) for every window lying wholly inside an interval of its rank (windows of a
    rank do not overlap, so their ends sort with their starts): what ``clip_to_windows`` leaves
    out of an interval spanning three or more windows."""
    rows: list[np.ndarray] = []
    wins: list[np.ndarray] = []
    for r in np.unique(win_rank):  # one pass per rank
        widx = np.flatnonzero(win_rank == r)
        widx = widx[np.argsort(win_start[widx], kind="stable")]
        ws, we = win_start[widx], win_end[widx]
        m = np.flatnonzero(rank == r)
        first = np.searchsorted(ws, start[m], side="left")
        last = np.searchsorted(we, end[m], side="right") - 1
        n = np.maximum(last - first + 1, 0)
        if not n.any():
            continue
        row = np.repeat(m, n)
        offset = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        rows.append(row)
        wins.append(widx[np.repeat(first, n) + offset])
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(rows), np.concatenate(wins)


def _with_pct(df: pd.DataFrame) -> pd.DataFrame:
    wall = df["wall_ns"].astype("float64").replace(0, np.nan)
    for name in CATEGORY_NAMES:
        df[f"{name}_pct"] = (100.0 * df[f"{name}_ns"] / wall).fillna(0.0)
    return df


def attribution_totals(attribution: pd.DataFrame) -> dict[str, int]:
    """Total ns per category over every row, plus ``wall_ns``."""
    if not len(attribution):
        return {"wall_ns": 0, **{c: 0 for c in CATEGORY_COLUMNS}}
    sums = attribution[["wall_ns", *CATEGORY_COLUMNS]].sum()
    return {k: int(v) for k, v in sums.items()}


def exposed_ns(frames: TraceFrames, spans: pd.DataFrame) -> int:
    """Time inside step windows during which ``spans`` (host events) hold while their rank's
    device runs nothing, summed over (step, device) rows like the attribution. Used to split a
    category between the calls that make it up (e.g. blocking copies vs synchronize calls)."""
    w = frames.step_windows.reset_index(drop=True)
    dev = frames.device
    if not len(w) or not len(spans):
        return 0
    win = (w["rank"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy())
    keys = pd.concat([dev[["rank", "device"]], spans[["rank"]].assign(device=-1)]).drop_duplicates()
    per_rank = keys.groupby("rank")["device"].apply(lambda d: sorted(set(d) - {-1}) or [-1])
    slots = {(int(r), int(d)): i for i, (r, d) in enumerate((r, d) for r, ds in per_rank.items() for d in ds)}
    n = len(slots)
    ds = dev["start_ns"].to_numpy()
    rows, wi, ps, pe = clip_to_windows(dev["rank"].to_numpy(), ds, ds + dev["dur_ns"].to_numpy(), *win)
    key = pd.MultiIndex.from_arrays([dev["rank"].to_numpy()[rows], dev["device"].to_numpy()[rows]])
    dslot = pd.Series(list(slots.values()), index=pd.MultiIndex.from_tuples(list(slots))).reindex(key).to_numpy()
    dg = wi * n + dslot
    ss = spans["start_ns"].to_numpy()
    hrows, hwi, hps, hpe = clip_to_windows(spans["rank"].to_numpy(), ss, ss + spans["dur_ns"].to_numpy(), *win)
    hrank = spans["rank"].to_numpy()[hrows]
    hg, hs, he = [], [], []
    for (r, _d), sl in slots.items():
        m = hrank == r
        hg.append(hwi[m] * n + sl)
        hs.append(hps[m])
        he.append(hpe[m])
    n_groups = len(w) * n
    busy = union_length(dg.astype(np.int64), ps, pe, n_groups)
    both = union_length(
        np.concatenate([dg, *hg]).astype(np.int64), np.concatenate([ps, *hs]), np.concatenate([pe, *he]), n_groups
    )
    return int((both - busy).sum())
