"""Device work replayed from a CUDA/HIP graph -> the launch calls recorded when it was captured.

A graph launch (``cudaGraphLaunch``, ``hipGraphLaunch``) runs many kernels and copies under its
one correlation id, and the op around it (if any) is the ``replay()`` line, not the lines that
made the work. Those lines were recorded at capture: between ``cudaStreamBeginCapture`` and
``cudaStreamEndCapture`` each op's launch calls (``cudaLaunchKernel``, ``cuLaunchKernel``,
``cudaMemcpyAsync``, ...) are in the trace with their op, but run nothing (no device event
carries their correlation). Seen on an H200 (torch 2.11, CUPTI 13,
tests/data/kineto/h200/cuda_graph.json.gz): in execution order, replayed event i is capture call
i (docs/capture.md, "CUDA graphs").

This module pairs them, on whole columns, in two stages shared by both builds
(``normalize.build_trace`` and ``spooled``):

- ``plan_replays``: capture regions (a begin immediately followed by its end on one thread),
  their calls (launch-like runtime calls in the region, on its thread, that ran nothing), in
  start order; each graph launch's device work in start order (across its streams); the
  captures each launch could replay: same process, ended before the launch, the same number of
  events and the same kinds (kernel / copy / memset) position by position; launches whose work
  carries one ``graph id`` share one choice. Most recent capture first.
- ``GraphReplays.resolve``: given the source each capture call hands on (known only once
  source attribution has run), a launch takes its most recent candidate when every candidate
  names the same sources position by position; otherwise it is ambiguous and keeps what it had.
  Nothing is guessed: the reasons a replay is left unmatched are counted (``metadata``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Roles of runtime calls, by name.
NONE, BEGIN, END, GRAPH_LAUNCH, WORK = range(5)
#: Families of work, the same for a capture call and the device event it becomes.
KERNEL, COPY, SET = range(3)

_BEGIN = re.compile(r"^(cuda|cu|hip)StreamBeginCapture")
_END = re.compile(r"^(cuda|cu|hip)StreamEndCapture")
_GRAPH_LAUNCH = re.compile(r"^(cuda|cu|hip)GraphLaunch")
_KERNEL_CALL = re.compile(r"^(cuda|cu|hip)(Ext)?(Module)?Launch(Cooperative)?Kernel")
_COPY_CALL = re.compile(r"^(cuda|cu|hip)Memcpy")
_SET_CALL = re.compile(r"^(cuda|cu|hip)Memset")

#: Why replayed work keeps the lines it had (``metadata['graph_replay']['unmatched_events']``).
CAPTURE_NOT_IN_TRACE = "capture_not_in_trace"
NO_MATCHING_CAPTURE = "no_matching_capture"
AMBIGUOUS = "ambiguous"


def call_roles(names: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(role, work family) of each distinct runtime call name (family -1 unless ``WORK``)."""
    role = np.full(len(names), NONE, np.int8)
    family = np.full(len(names), -1, np.int8)
    for i, nm in enumerate(names):
        if not nm:
            continue
        if _BEGIN.match(nm):
            role[i] = BEGIN
        elif _END.match(nm):
            role[i] = END
        elif _GRAPH_LAUNCH.match(nm):
            role[i] = GRAPH_LAUNCH
        else:
            for fam, pattern in ((KERNEL, _KERNEL_CALL), (COPY, _COPY_CALL), (SET, _SET_CALL)):
                if pattern.match(nm):
                    role[i], family[i] = WORK, fam
                    break
    return role, family


def runtime_roles(words: list[Any], runtime_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``call_roles`` of the words at ``runtime_codes`` (the names runtime calls have), as
    tables over every word plus a last entry for a null name (code -1): other names are
    ``NONE`` without being matched."""
    role = np.full(len(words) + 1, NONE, np.int8)
    family = np.full(len(words) + 1, -1, np.int8)
    codes = runtime_codes[(runtime_codes >= 0) & (runtime_codes < len(words))]
    role[codes], family[codes] = call_roles([words[c] for c in codes.tolist()])
    return role, family


@dataclass
class GraphReplays:
    """The replayed device events, the capture calls and each launch group's candidates."""

    #: capture index -> its calls' rows, in start order
    captures: list[np.ndarray]
    #: per launch group: its replayed rows (launch after launch, each in start order), its
    #: launches' count, its candidate captures (most recent first), and whether no capture
    #: region at all ended before its first launch in its process
    groups: list[tuple[np.ndarray, int, list[int], bool]]
    regions: int
    #: graph launch calls in the trace (those whose work is not in it included)
    launches: int
    #: set by ``resolve``: matched replayed rows and the capture call each replays
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    calls: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    metadata: dict[str, Any] = field(default_factory=dict)

    def resolve(self, source_key: Callable[[np.ndarray], np.ndarray]) -> None:
        """Choose each group's capture. ``source_key(call_rows)``: a 2-D int array, one row per
        call, identifying the source the call hands on (file, line, function, module codes)."""
        keys = [source_key(c) if c.size else np.zeros((0, 1), np.int64) for c in self.captures]
        rows, calls = [], []
        unmatched: dict[str, int] = {}
        events = 0
        for replayed, n_launches, cands, nothing_before in self.groups:
            events += replayed.size
            if not cands:
                why = CAPTURE_NOT_IN_TRACE if nothing_before else NO_MATCHING_CAPTURE
            elif all(np.array_equal(keys[cands[0]], keys[c]) for c in cands[1:]):
                cap = self.captures[cands[0]]
                rows.append(replayed)
                calls.append(np.tile(cap, n_launches))
                continue
            else:
                why = AMBIGUOUS
            unmatched[why] = unmatched.get(why, 0) + int(replayed.size)
        self.rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        self.calls = np.concatenate(calls) if calls else np.zeros(0, np.int64)
        order = np.argsort(self.rows, kind="stable")
        self.rows, self.calls = self.rows[order], self.calls[order]
        self.metadata = {
            "graph_launches": self.launches,
            "captures": self.regions,
            "replayed_events": events,
            "matched_events": int(self.rows.size),
            "unmatched_events": dict(sorted(unmatched.items())),
        }


def plan_replays(
    call_row: np.ndarray,
    call_role: np.ndarray,
    call_family: np.ndarray,
    call_pid: np.ndarray,
    call_tid: np.ndarray,
    call_start: np.ndarray,
    call_ran: np.ndarray,
    dev_row: np.ndarray,
    dev_launch: np.ndarray,
    dev_family: np.ndarray,
    dev_start: np.ndarray,
    dev_graph_id: np.ndarray,
) -> GraphReplays | None:
    """The replay plan, or None when the trace has no graph launch and no capture.

    ``call_*``: the runtime calls whose role is not ``NONE`` (rows, role, work family, process,
    thread, start, whether some device event names it as its launch); ``dev_*``: device work
    (kernel, collective, copy, memset) with a launch call: rows, launch row, family, start,
    ``graph id`` (-1 if none). Rows are event ids (event order: start, longer first)."""
    call_family, dev_family = call_family.astype(np.int8), dev_family.astype(np.int8)  # (compared as bytes)
    by_row = np.argsort(call_row, kind="stable")
    call_row, call_role, call_family = call_row[by_row], call_role[by_row], call_family[by_row]
    call_pid, call_tid, call_start, call_ran = call_pid[by_row], call_tid[by_row], call_start[by_row], call_ran[by_row]
    launch_idx = np.nonzero(call_role == GRAPH_LAUNCH)[0]
    if launch_idx.size == 0 and not (call_role == BEGIN).any():
        return None
    launch_rows = call_row[launch_idx]
    l_pid, l_start = call_pid[launch_idx], call_start[launch_idx]
    regions = _capture_regions(call_row, call_role, call_pid, call_tid, call_start)
    captures = _capture_calls(regions, call_row, call_role, call_family, call_pid, call_tid, call_start, call_ran)
    # each graph launch's replayed work, in start order (event order is start order)
    pos = np.searchsorted(launch_rows, dev_launch)
    hit = (pos < launch_rows.size) & (launch_rows[np.minimum(pos, max(launch_rows.size - 1, 0))] == dev_launch)
    r_row, r_launch, r_fam, r_gid = dev_row[hit], pos[hit], dev_family[hit], dev_graph_id[hit]
    order = np.lexsort((r_row, r_launch))
    r_row, r_launch, r_fam, r_gid = r_row[order], r_launch[order], r_fam[order], r_gid[order]
    bounds = np.searchsorted(r_launch, np.arange(launch_rows.size + 1))

    cap_sig = [call_family[np.searchsorted(call_row, c)].tobytes() for c in captures["calls"]]
    cap_end, cap_pid = captures["end"].tolist(), captures["pid"].tolist()
    by_sig: dict[tuple[int, bytes], list[int]] = {}  # most recent capture first
    for k in sorted(range(len(cap_sig)), key=lambda k: -cap_end[k]):
        by_sig.setdefault((cap_pid[k], cap_sig[k]), []).append(k)
    first_end: dict[int, int] = {}
    for pid_, end in zip(cap_pid, cap_end):
        first_end[pid_] = min(end, first_end.get(pid_, end))
    l_pid_list, l_start_list = l_pid.tolist(), l_start.tolist()

    def candidates(lo: int, hi: int, launch: int) -> tuple[list[int], bool]:
        pid, t = l_pid_list[launch], l_start_list[launch]
        before = [k for k in by_sig.get((pid, r_fam[lo:hi].tobytes()), ()) if cap_end[k] < t]
        return before, not (pid in first_end and first_end[pid] < t)

    # launches whose work carries one graph id replay one graph: one choice for them all
    groups: list[tuple[np.ndarray, int, list[int], bool]] = []
    by_graph: dict[tuple[int, int], list[int]] = {}
    singles: list[int] = []
    with_work = np.nonzero(bounds[1:] > bounds[:-1])[0]
    one_gid = np.zeros(launch_rows.size, bool)
    gid = np.full(launch_rows.size, -1, np.int64)
    if with_work.size:
        gid_max = np.maximum.reduceat(r_gid, bounds[with_work])
        gid_min = np.minimum.reduceat(r_gid, bounds[with_work])
        one_gid[with_work] = (gid_max == gid_min) & (gid_min >= 0)
        gid[with_work] = gid_min
    for j in with_work.tolist():
        if one_gid[j]:
            by_graph.setdefault((int(l_pid[j]), int(gid[j])), []).append(j)
        else:
            singles.append(j)
    for j in singles:
        lo, hi = int(bounds[j]), int(bounds[j + 1])
        cands, nothing = candidates(lo, hi, j)
        groups.append((r_row[lo:hi], 1, cands, nothing))
    for js in by_graph.values():
        per = [candidates(int(bounds[j]), int(bounds[j + 1]), j) for j in js]
        common = [k for k in per[0][0] if all(k in p[0] for p in per[1:])]
        rows = np.concatenate([r_row[int(bounds[j]) : int(bounds[j + 1])] for j in js])
        if len({int(bounds[j + 1] - bounds[j]) for j in js}) != 1:
            common = []  # one graph replayed with different work: no one capture fits every launch
        groups.append((rows, len(js), common, per[0][1]))
    return GraphReplays(captures["calls"], groups, int(captures["pid"].size), int(launch_rows.size))


def _thread_codes(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    if pid.size == 0:
        return np.zeros(0, np.int64)
    # two 1-D factorizations (np.unique(axis=0) is slower and imports numpy.ma)
    _, p = np.unique(pid, return_inverse=True)
    tu, t = np.unique(tid, return_inverse=True)
    return p.ravel().astype(np.int64) * max(len(tu), 1) + t.ravel()


def _capture_regions(
    row: np.ndarray, role: np.ndarray, pid: np.ndarray, tid: np.ndarray, start: np.ndarray
) -> dict[str, np.ndarray]:
    """Capture regions: a begin immediately followed, on its thread, by an end (a begin inside
    another open capture on the thread, or an end without its begin, makes no region)."""
    marks = np.nonzero((role == BEGIN) | (role == END))[0]
    thread = _thread_codes(pid, tid)
    marks = marks[np.lexsort((row[marks], start[marks], thread[marks]))]
    th, rl = thread[marks], role[marks]
    same = th[1:] == th[:-1]
    pair = same & (rl[:-1] == BEGIN) & (rl[1:] == END)
    nested = np.zeros(pair.size, bool)
    nested[1:] = same[:-1] & (rl[:-2] == BEGIN)  # an open begin before this one on the thread
    k = np.nonzero(pair & ~nested)[0]
    b, e = marks[k], marks[k + 1]
    return {"thread": th[k], "pid": pid[b], "begin": start[b], "end": start[e]}


def _capture_calls(
    regions: dict[str, np.ndarray],
    row: np.ndarray,
    role: np.ndarray,
    family: np.ndarray,
    pid: np.ndarray,
    tid: np.ndarray,
    start: np.ndarray,
    ran: np.ndarray,
) -> dict[str, Any]:
    """Each region's captured calls (work calls on its thread, inside it, that ran nothing), in
    start order; regions with no call are kept (a graph of no work replays nothing)."""
    thread = _thread_codes(pid, tid)
    r_order = np.lexsort((regions["begin"], regions["thread"]))
    reg = {k: v[r_order] for k, v in regions.items()}
    n_reg = reg["thread"].size
    work = np.nonzero((role == WORK) & ~ran)[0]
    calls: list[np.ndarray] = [np.zeros(0, np.int64)] * n_reg
    if n_reg and work.size:
        # merge region begins and calls by (thread, start), begins first at equal starts: the
        # running maximum of region numbers is the last region begun before each call
        t = np.concatenate([reg["thread"], thread[work]])
        s = np.concatenate([reg["begin"], start[work]])
        is_call = np.concatenate([np.zeros(n_reg, bool), np.ones(work.size, bool)])
        order = np.lexsort((is_call, s, t))
        idx = np.concatenate([np.arange(n_reg), np.full(work.size, -1)])[order]
        last = np.maximum.accumulate(idx)
        at_call = is_call[order]
        region = last[at_call]
        call = work[(order[at_call] - n_reg)]
        r = np.maximum(region, 0)
        inside = (region >= 0) & (reg["thread"][r] == thread[call]) & (start[call] <= reg["end"][r])
        region, call = region[inside], call[inside]
        order = np.lexsort((row[call], region))
        region, call = region[order], row[call[order]]
        cuts = np.searchsorted(region, np.arange(n_reg + 1))
        calls = [call[cuts[i] : cuts[i + 1]] for i in range(n_reg)]
    return {"calls": calls, "pid": reg["pid"], "end": reg["end"]}
