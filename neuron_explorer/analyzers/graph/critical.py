"""The critical path of each step, its composition, and the replay summary (what-if).

A step's window is its ``ProfilerStep#N`` span on its thread: it ends where the segment that
closes the span ends. Walking back from that segment along each node's binding predecessor
(``Replay.binding``) until a node starts at or before the window's start gives the chain of
events and delays that set the step's end. Its pieces are the nodes (by category, op, kernel,
source line), the modelled launch latencies and the unexplained delays on its edges; clipped to
the window and counted once where they overlap (an edge clamped below zero), with any part of
the window the chain does not reach counted as unexplained, so a step's rows sum to its wall
time. Without steps, each rank's window runs from its first to its last event.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import WHOLE_TRACE_STEP, TraceFrames
from neuron_explorer.analyzers.graph.build import Graph, build_graph, distinct
from neuron_explorer.analyzers.graph.describe import node_codes, text_values
from neuron_explorer.analyzers.graph.edges import LAUNCH
from neuron_explorer.analyzers.graph.edits import Edits
from neuron_explorer.analyzers.graph.nodes import CATEGORIES, DEVICE, JOIN, SEGMENT
from neuron_explorer.analyzers.graph.replay import Replay, replay

#: the baseline replay should reproduce each measured step within this (issue 31)
BASELINE_TOLERANCE_PCT = 2.0
#: ``on_rank``: the rank whose event the piece is (another rank's where the path crosses ranks
#: at a collective that waited for it)
CRITICAL_PATH_COLUMNS = ("rank", "step", "category", "op", "kernel", "src_file", "src_line", "on_rank", "ns")


def _windows(graph: Graph, rep: Replay) -> pd.DataFrame:
    """Per (rank, step): measured start/end, replayed start/end and the node that ends it."""
    w = window_nodes(graph)
    out = w[["rank", "step", "measured_start", "measured_end"]].copy()
    if w.attrs.get("steps"):
        b, s_ = w["begin_node"].to_numpy(), w["start_node"].to_numpy()
        out["replay_start"] = np.where(
            b >= 0,
            rep.end[np.maximum(b, 0)],
            np.where(s_ >= 0, rep.start[np.maximum(s_, 0)], w["measured_start"].to_numpy()),
        )
        out["replay_end"] = rep.end[w["end_node"].to_numpy()]
        out["end_node"] = w["end_node"].to_numpy()
        return out
    nodes = graph.nodes
    rank = nodes["rank"].to_numpy()
    real = nodes["node_kind"].to_numpy() != JOIN
    starts, ends, last = [], [], []
    for r in out["rank"]:  # one per rank
        m = np.flatnonzero((rank == r) & real)
        e_node = int(m[np.argmax(rep.end[m])])
        starts.append(int(rep.start[m].min()))
        ends.append(int(rep.end[e_node]))
        last.append(e_node)
    out["replay_start"], out["replay_end"], out["end_node"] = starts, ends, last
    return out


def baseline(graph: Graph, frames: TraceFrames) -> tuple[Replay, int, int]:
    """The baseline replay (memoized per trace), its summed window time and the measured one."""

    def compute() -> tuple[Replay, int, int]:
        rep = replay(graph)
        w = _windows(graph, rep)
        replayed = int((w["replay_end"] - w["replay_start"]).sum())
        measured = int((w["measured_end"] - w["measured_start"]).sum())
        return rep, replayed, measured

    return frames.memo("baseline_replay", compute)


def window_nodes(graph: Graph) -> pd.DataFrame:
    """Per (rank, step): the measured window and the host segments that bound it (what any
    replay's window is read from): ``end_node`` (closes the step span), ``begin_node`` (ends
    where the span begins) and ``start_node`` (begins there). Without steps, one row per rank.
    Memoized on the graph: it depends on the graph, not on a replay."""
    cached = graph.__dict__.get("_window_nodes")
    if cached is not None:
        return cached
    nodes = graph.nodes
    w = graph.step_windows
    t0 = graph.t0_ns
    start = nodes["start_ns"].to_numpy()
    end = start + nodes["dur_ns"].to_numpy()
    cols = ["rank", "step", "measured_start", "measured_end", "end_node", "begin_node", "start_node"]
    if len(w) and (w["step"] != WHOLE_TRACE_STEP).any():
        named = np.flatnonzero(nodes["host_row"].to_numpy() >= 0)
        hr = nodes["host_row"].to_numpy()[named]
        thread = pd.DataFrame(
            {
                "rank": nodes["rank"].to_numpy()[named],
                "tid": graph.host["tid"].to_numpy()[hr],
                "chain": nodes["chain"].to_numpy()[named],
            }
        ).drop_duplicates(["rank", "tid"])
        hn = np.flatnonzero(~nodes["is_device"].to_numpy().astype(bool))  # host segments, gaps included
        chain = nodes["chain"].to_numpy()[hn]
        wc = w.merge(thread, on=["rank", "tid"], how="left")
        wc = wc[wc["chain"].notna().to_numpy()]
        wchain = wc["chain"].to_numpy().astype(np.int64)
        # host nodes are sorted by (chain, start) and back to back: their ends ascend too
        ekey = chain * (1 << 42) + end[hn]
        skey = chain * (1 << 42) + start[hn]

        def find(keys: np.ndarray, wanted: np.ndarray, side: str) -> np.ndarray:
            pos = np.searchsorted(keys, wanted, side=side)
            pos = pos - 1 if side == "right" else pos
            ok = (pos >= 0) & (pos < len(keys))
            pos = np.clip(pos, 0, len(keys) - 1)
            return np.where(ok & (keys[pos] == wanted), hn[pos], -1)

        ws, we = wc["start_ns"].to_numpy() - t0, wc["end_ns"].to_numpy() - t0
        e_node = find(ekey, wchain * (1 << 42) + we, "right")
        m = e_node >= 0
        out = pd.DataFrame(
            {
                "rank": wc["rank"].to_numpy()[m].astype(np.int64),
                "step": wc["step"].to_numpy()[m].astype(np.int64),
                "measured_start": ws[m],
                "measured_end": we[m],
                "end_node": e_node[m],
                "begin_node": find(ekey, wchain * (1 << 42) + ws, "right")[m],
                "start_node": find(skey, wchain * (1 << 42) + ws, "left")[m],
            }
        )
        out.attrs["steps"] = True
    else:
        rank = nodes["rank"].to_numpy()
        real = nodes["node_kind"].to_numpy() != JOIN
        measured = {int(r): (int(a) - t0, int(b) - t0) for r, a, b in zip(w["rank"], w["start_ns"], w["end_ns"])}
        rows = []
        for r in distinct(rank[real]):  # one per rank
            m = np.flatnonzero((rank == r) & real)
            ms, me = measured.get(int(r), (int(start[m].min()), int(end[m].max())))
            rows.append((int(r), WHOLE_TRACE_STEP, ms, me, -1, -1, -1))
        out = pd.DataFrame(rows, columns=cols)
        out.attrs["steps"] = False
    graph.__dict__["_window_nodes"] = out
    return out


def _run_starts(rep: Replay) -> np.ndarray:
    """Per node: the first node of its run, the stretch of its chain bound node to node by the
    chain edge (a path crosses chains only where a run begins)."""
    n = len(rep.start)
    jump = (rep.binding_edge >= 0) | (rep.binding < 0)
    return np.maximum.accumulate(np.where(jump, np.arange(n), 0))


def _path(rep: Replay, runs: np.ndarray, end_node: int, t_start: int) -> np.ndarray:
    """Nodes of the chain of binding predecessors ending at ``end_node``, earliest first, back to
    the first node starting at or before ``t_start``: one step per run, not per node."""
    pieces = []
    v = end_node
    seen: set[int] = set()  # run starts walked: a binding chain can close on itself (below)
    while True:
        a = int(runs[v])
        if a in seen:
            # An edge of negative delay (an event whose clock contradicts its dependency: a
            # copy stamped at ts 0) lets a binding chain return to a run it left; the path ends
            # where it would repeat, so the walk is at most one step per run on any input.
            break
        seen.add(a)
        # the last node of the run starting at or before t_start ends the walk (starts ascend)
        pos = int(np.searchsorted(rep.start[a : v + 1], t_start, side="right")) - 1
        if pos >= 0:
            pieces.append(np.arange(a + pos, v + 1))
            break
        pieces.append(np.arange(a, v + 1))
        if rep.binding[a] < 0:
            break
        v = int(rep.binding[a])
    return np.concatenate(pieces[::-1])


def _composition(
    graph: Graph, rep: Replay, p: np.ndarray, t0: int, t1: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of one step's critical path: the node each is shown under (-1: none), its
    label (-1: the node's category) and its ns inside the window."""
    nodes = graph.nodes
    # per node on the path: the edge into it from the previous path node
    eidx = rep.binding_edge[p[1:]]
    chain_edge = eidx < 0
    e_safe = np.maximum(eidx, 0)
    edges = graph.edges
    pad = np.zeros(1, np.int64)  # (a graph without cross edges)
    edge_unexplained = np.r_[edges["unexplained_ns"].to_numpy(), pad]
    edge_kind = np.r_[edges["kind"].to_numpy(), pad - 1]
    unexplained = np.where(chain_edge, nodes["chain_unexplained_ns"].to_numpy()[p[1:]], edge_unexplained[e_safe])
    launch = ~chain_edge & (edge_kind[e_safe] == LAUNCH)
    gap_start = rep.end[p[:-1]]
    gap_end = rep.start[p[1:]]
    modelled_end = np.maximum(gap_start, gap_end - unexplained)
    k = len(p)
    # pieces in time order: node 0, (edge modelled, edge unexplained, node i) for i >= 1
    a = np.empty(3 * k - 2, np.int64)
    b = np.empty_like(a)
    who = np.empty_like(a)  # the node whose op / kernel / line the piece is shown under
    a[0], b[0], who[0] = rep.start[p[0]], rep.end[p[0]], p[0]
    idx = np.arange(1, k)
    a[3 * idx - 2], b[3 * idx - 2] = gap_start, modelled_end
    a[3 * idx - 1], b[3 * idx - 1] = modelled_end, np.maximum(gap_end, modelled_end)
    a[3 * idx], b[3 * idx] = rep.start[p[1:]], rep.end[p[1:]]
    who[3 * idx - 2] = who[3 * idx - 1] = who[3 * idx] = p[1:]
    prev = np.maximum.accumulate(np.r_[t0, b[:-1]])
    lo = np.maximum(a, np.maximum(prev, t0))
    hi = np.minimum(b, t1)
    ns = np.maximum(hi - lo, 0)
    # label: -1 = the node's own category, else LAUNCH_LABEL / UNEXPLAINED_LABEL
    code = np.full(len(a), -1, np.int64)
    code[3 * idx - 2] = np.where(launch, LAUNCH_LABEL, UNEXPLAINED_LABEL)
    code[3 * idx - 1] = UNEXPLAINED_LABEL
    rest = (t1 - t0) - int(ns.sum())
    if rest:  # the part of the window the chain does not reach (shown under no node)
        who, code, ns = np.r_[who, -1], np.r_[code, UNEXPLAINED_LABEL], np.r_[ns, rest]
    keep = ns != 0
    return who[keep], code[keep], ns[keep]


LAUNCH_LABEL, UNEXPLAINED_LABEL = 0, 1
_EDGE_LABELS = ("launch_latency", "unexplained")


def critical_path_table(frames: TraceFrames, edits: Edits | None = None) -> pd.DataFrame:
    """One row per (rank, step, category, op, kernel, src_file, src_line, on_rank) on each
    step's critical path of the (edited) replay, with ``ns``; a step's rows sum to its replayed
    wall."""
    if edits is None or edits.empty:
        return _baseline_paths(frames)[0]
    graph = build_graph(frames)
    rep = replay(graph, edits)
    return _critical_rows(graph, rep, _windows(graph, rep), once=one_time_nodes(graph, frames))


def critical_paths(frames: TraceFrames) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The baseline critical path of every step: ``critical_path_table``'s rows, and its events
    (``rank``, ``step``, ``on_rank``, ``event_id`` of the host or device event each node is,
    ``ns`` on the path), for a timeline to highlight; memoized per trace, the events built
    when first asked for."""
    table, parts = _baseline_paths(frames)
    return table, frames.memo("critical_path_events", lambda: _path_events(build_graph(frames), parts))


def _baseline_paths(frames: TraceFrames) -> tuple[pd.DataFrame, list]:  # type: ignore[type-arg]
    def compute() -> tuple[pd.DataFrame, list]:  # type: ignore[type-arg]

        graph = build_graph(frames)
        rep = baseline(graph, frames)[0]
        parts: list = []  # type: ignore[type-arg]
        return _critical_rows(graph, rep, _windows(graph, rep), parts, one_time_nodes(graph, frames)), parts

    return frames.memo("critical_paths", compute)


def one_time_nodes(graph: Graph, frames: TraceFrames) -> np.ndarray:
    """Per node: True when its event starts inside one-time work (``analyzers.attribution.one_time``: a
    compile, graph-capture or init span, or a warm-up step). Its pieces on a critical path are
    shown as ``one_time``, not as the compute or host time they would be in the steady state."""
    from neuron_explorer.analyzers.attribution.one_time import in_one_time

    nodes = graph.nodes
    real = np.isin(nodes["node_kind"].to_numpy(), (SEGMENT, DEVICE))
    out = np.zeros(len(nodes), bool)
    if not real.any():
        return out
    ev = pd.DataFrame(
        {
            "rank": nodes["rank"].to_numpy(np.int64)[real],
            "start_ns": nodes["start_ns"].to_numpy(np.int64)[real] + int(graph.t0_ns),
        }
    )
    out[real] = in_one_time(frames, ev)
    return out


def _critical_rows(
    graph: Graph,
    rep: Replay,
    win: pd.DataFrame,
    keep: list | None = None,  # type: ignore[type-arg]
    once: np.ndarray | None = None,
) -> pd.DataFrame:
    parts = []
    runs = _run_starts(rep)
    for r, step, s, e, node in zip(win["rank"], win["step"], win["replay_start"], win["replay_end"], win["end_node"]):
        who, code, ns = _composition(graph, rep, _path(rep, runs, int(node), int(s)), int(s), int(e))
        parts.append((np.full(len(ns), int(r)), np.full(len(ns), int(step)), who, code, ns))
    if keep is not None:
        keep.extend(parts)  # (the pieces, for the events on the paths: ``critical_paths``)
    if not parts:
        return pd.DataFrame(
            {
                c: pd.Series(dtype="int64" if c in ("rank", "step", "src_line", "on_rank", "ns") else "object")
                for c in CRITICAL_PATH_COLUMNS
            }
        )
    rank, step, who, code, ns = (np.concatenate([p[i] for p in parts]) for i in range(5))
    # decode the nodes on the paths only; group on integer codes, one per distinct text
    anchor = np.maximum(who, 0)
    codes = node_codes(graph, anchor)
    line = codes.pop("src_line")
    for c in codes:
        codes[c] = np.where(who >= 0, codes[c], -1)  # who == -1: shown under no node
    line = np.where(who >= 0, line, -1)
    text = text_values(graph)
    cat = np.where(who >= 0, graph.nodes["cat"].to_numpy()[anchor], CATEGORIES.index("untraced")).astype(np.int64)
    if once is not None and len(once):  # a node of one-time work: its own pieces are one_time
        cat = np.where((who >= 0) & once[anchor], len(CATEGORIES) + len(_EDGE_LABELS), cat)
    codes["category"] = np.where(code >= 0, len(CATEGORIES) + code, cat)
    text["category"] = np.array(CATEGORIES + _EDGE_LABELS + ("one_time",), dtype=object)
    on_rank = np.where(who >= 0, graph.nodes["rank"].to_numpy()[np.maximum(who, 0)], rank)
    df = pd.DataFrame(
        {"rank": rank, "step": step, **{c: codes[c] for c in codes}, "src_line": line, "on_rank": on_rank, "ns": ns}
    )
    keys = list(CRITICAL_PATH_COLUMNS[:-1])
    out = df.groupby(keys, sort=False)["ns"].sum().reset_index()
    for c in ("category", "op", "kernel", "src_file"):
        out[c] = text[c][out[c].to_numpy()]
    out = out.sort_values(["rank", "step", "ns"], ascending=[True, True, False], kind="stable").reset_index(drop=True)
    return out[list(CRITICAL_PATH_COLUMNS)]


def _path_events(graph: Graph, parts: list) -> pd.DataFrame:  # type: ignore[type-arg]
    """The events of the nodes on the paths (their own pieces only), summed per event."""
    cols = ("rank", "step", "on_rank", "event_id", "ns")
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in cols})
    rank, step, who, code, ns = (np.concatenate([p[i] for p in parts]) for i in range(5))
    own = (who >= 0) & (code < 0)
    rank, step, who, ns = rank[own], step[own], who[own], ns[own]
    nodes = graph.nodes
    hr, dr = nodes["host_row"].to_numpy()[who], nodes["device_row"].to_numpy()[who]
    hid = graph.host["event_id"].to_numpy()
    did = graph.device["event_id"].to_numpy()
    hid = np.r_[hid, -1]  # (index -1 of an empty table reads the padding)
    did = np.r_[did, -1]
    eid = np.where(hr >= 0, hid[hr], np.where(dr >= 0, did[dr], -1))
    df = pd.DataFrame({"rank": rank, "step": step, "on_rank": nodes["rank"].to_numpy()[who], "event_id": eid, "ns": ns})
    df = df[df["event_id"] >= 0]
    return df.groupby(["rank", "step", "on_rank", "event_id"], sort=False)["ns"].sum().reset_index()


def replay_summary(frames: TraceFrames, edits: Edits | None = None) -> dict[str, Any]:
    """Measured, baseline-replayed and (with ``edits``) projected time per step and in total,
    the baseline error and the unexplained share of the critical path (JSON-able)."""
    graph = build_graph(frames)
    base = replay(graph)
    win = _windows(graph, base)
    crit = _critical_rows(graph, base, win)
    edited = replay(graph, edits) if edits is not None and not edits.empty else base
    ewin = _windows(graph, edited) if edited is not base else win
    proj = dict(zip(zip(ewin["rank"], ewin["step"]), ewin["replay_end"] - ewin["replay_start"]))
    unexplained = crit[crit["category"] == "unexplained"].groupby(["rank", "step"])["ns"].sum()
    untraced = crit[crit["category"] == "untraced"].groupby(["rank", "step"])["ns"].sum()
    steps = []
    for r, step, ms, me, rs, re_ in zip(
        win["rank"], win["step"], win["measured_start"], win["measured_end"], win["replay_start"], win["replay_end"]
    ):
        measured, replayed = int(me - ms), int(re_ - rs)
        projected = int(proj.get((r, step), replayed))
        steps.append(
            {
                "rank": int(r),
                "step": int(step),
                "measured_ns": measured,
                "replayed_ns": replayed,
                "baseline_error_pct": _pct(replayed - measured, measured),
                "unexplained_pct": _pct(int(unexplained.get((r, step), 0)), replayed),
                "untraced_pct": _pct(int(untraced.get((r, step), 0)), replayed),
                "projected_ns": projected,
                "saving_ns": replayed - projected,
            }
        )
    tot = {k: sum(s[k] for s in steps) for k in ("measured_ns", "replayed_ns", "projected_ns", "saving_ns")}
    err = _pct(tot["replayed_ns"] - tot["measured_ns"], tot["measured_ns"])
    worst = max((abs(s["baseline_error_pct"]) for s in steps), default=0.0)
    out: dict[str, Any] = {
        **tot,
        "baseline_error_pct": err,
        "max_step_baseline_error_pct": worst,
        "unexplained_pct": _pct(int(unexplained.sum()), tot["replayed_ns"]),
        "untraced_pct": _pct(int(untraced.sum()), tot["replayed_ns"]),
        "saving_pct": _pct(tot["saving_ns"], tot["replayed_ns"]),
        "has_steps": bool(len(win) and (win["step"] != WHOLE_TRACE_STEP).any()),
        "nodes": graph.num_nodes,
        "edges": len(graph.edges),
        "replay_rounds": int(edited.rounds),
        "within_tolerance": worst <= BASELINE_TOLERANCE_PCT,
        "steps": steps,
    }
    if not out["within_tolerance"]:
        out["note"] = (
            f"the baseline replay is off by up to {worst:.1f}% on a step: the graph's ordering"
            " contradicts some recorded times (clock skew between host and device)"
        )
    elif set(frames.device_types) <= {"neuron"} and len(frames.device) and not len(frames.host):
        # A Neuron device profile alone: the engines hand work to each other through
        # semaphores the export does not pair with their signals, so the graph has each queue's
        # order and no edge between queues: its gaps are waits the profile shows, unexplained here.
        out["note"] = (
            "a Neuron device profile alone: the semaphores between its engines and DMA queues are not edges "
            "of the graph, so the gaps between them count as unexplained and an edit moves work only along "
            "its own queue; the kernel window (info, analyze) is the figure to compare"
        )
    return out


def whatif(frames: TraceFrames, edits: Edits | None = None) -> dict[str, Any]:
    """``replay_summary`` with the edits and the critical path of the edited replay."""
    summary = replay_summary(frames, edits)
    summary["edits"] = {
        "scale": [list(s) for s in (edits.scale if edits else ())],
        "remove": list(edits.remove if edits else ()),
        "nonblocking_copies": bool(edits and edits.nonblocking_copies),
        "overlap_comm": bool(edits and edits.overlap_comm),
    }
    return summary


def _pct(part: float, whole: float) -> float:
    return float(100.0 * part / whole) if whole else 0.0


#: the critical path's categories in words (the attribution's, plus the edges')
PATH_LABELS = {
    "compute": "compute",
    "communication": "communication",
    "copy": "copies",
    "host_blocked": "the host blocked on the device",
    "host_launch": "host ops and launches",
    "host_python": "host Python",
    "data_loading": "data loading",
    "untraced": "untraced host time",
    "launch_latency": "launch latency",
    "unexplained": "unexplained waits",
    "one_time": "one-time work",
}


def path_words(table: pd.DataFrame, min_pct: float = 5.0) -> str:
    """What the critical paths of ``table`` (``critical_path_table``) are made of, in one clause:
    ``the critical path is 82% host ops and launches (most: aten::mul_ at train.py:42), 18%
    untraced host time``; the share on other ranks where the path crosses them. One-time work
    is said once and the rest described apart (``the critical path is 90% one-time work;
    outside it, 39% host ops and launches ...``). '' when empty."""
    if not len(table) or table["ns"].sum() <= 0:
        return ""
    once = table["category"] == "one_time"
    lead = "the critical path is "
    if once.any() and not once.all():  # the steady state's path: one-time work said once, apart
        share = 100.0 * float(table.loc[once, "ns"].sum()) / float(table["ns"].sum())
        said = ">99" if share > 99.0 else "<1" if share < 1.0 else f"{share:.0f}"
        lead = f"the critical path is {said}% one-time work; outside it, "
        table = table[~once]
    total = float(table["ns"].sum())
    by = table.groupby("category")["ns"].sum().sort_values(ascending=False)
    parts = []
    for i, (cat, ns) in enumerate(by.items()):
        pct = 100.0 * float(ns) / total
        if i and pct < min_pct:
            break
        words = f"{pct:.0f}% {PATH_LABELS.get(str(cat), str(cat))}"
        if i == 0 and cat not in ("untraced", "unexplained", "launch_latency"):
            words += _most(table[table["category"] == cat])
        parts.append(words)
    text = lead + ", ".join(parts[:3])
    other = table[table["on_rank"] != table["rank"]]
    if len(other):
        ranks = other.groupby("on_rank")["ns"].sum().sort_values(ascending=False)
        text += f"; {100.0 * float(ranks.sum()) / total:.0f}% of it on other ranks (most: rank {int(ranks.index[0])})"
    return text


def _most(rows: pd.DataFrame) -> str:
    """`` (most: <kernel or op> at file:line)`` for the heaviest piece of one category."""
    what = np.where(rows["kernel"].astype(str) != "", rows["kernel"].astype(str), rows["op"].astype(str))
    key = pd.DataFrame({"what": what, "file": rows["src_file"].astype(str), "line": rows["src_line"], "ns": rows["ns"]})
    top = key.groupby(["what", "file", "line"], sort=False)["ns"].sum().sort_values(ascending=False)
    if not len(top):
        return ""
    (name, file, line), _ = next(iter(top.items()))
    if not name:
        return ""
    where = f" at {file.rsplit('/', 1)[-1]}:{int(line)}" if file and int(line) >= 0 else ""
    return f" (most: {name[:60]}{where})"
