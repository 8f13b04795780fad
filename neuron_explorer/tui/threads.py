"""Names for the host threads of a trace, as the timeline's lanes show them.

A raw thread id (``-1220540864`` in old traces: a 32-bit pthread id) says nothing, so each host
thread of a rank gets the first of these that applies:

1. ``autograd thread``: the trace's ``thread_name`` metadata (an ``M`` event) calls it
   ``pt_autograd_N`` (PyTorch's backward threads, one per device);
2. ``main thread``: it holds the rank's ``ProfilerStep`` annotations (the training loop); in a
   trace without steps, its id is its process id, or it runs the script's ``<module>`` frame,
   or it is the one thread that runs framework ops;
3. ``DataLoader worker N`` / ``pin-memory thread``: its Python frames run
   ``torch.utils.data``'s ``_worker_loop`` / ``_pin_memory_loop``;
4. ``autograd thread``: another thread that runs ``autograd::engine::evaluate_function`` ops;
5. the name the trace's ``thread_name`` metadata records, when it is not just the process name
   (Kineto writes ``thread 1149 (python3)``: the part in brackets);
6. ``thread N``, numbered by first event after the named ones.

Names that would repeat get `` 2``, `` 3``... The raw id stays in the event details line.
"""

from __future__ import annotations

import json
import re
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import Kind

AUTOGRAD_NAME = re.compile(r"pt_autograd_\d+")
WORKER_FRAME = "_worker_loop"
PIN_FRAME = "_pin_memory_loop"
BACKWARD_OP = "autograd::engine::evaluate_function"
#: Kineto's thread_name value: "thread <tid> (<name>)"
RECORDED = re.compile(r"^thread\s+-?\d+\s+\((.*)\)\s*$")
_HOST_KINDS = (Kind.CPU_OP, Kind.RUNTIME, Kind.SYNC, Kind.PYTHON, Kind.STEP, Kind.ANNOTATION)


class ThreadSource(Protocol):
    """What the thread names are read from: the trace, and the names its file recorded where
    the events table holds no ``args`` (``tui.data.TraceSource`` is one)."""

    trace: Trace

    def recorded_thread_names(self) -> dict[tuple[int, int, int], str]: ...


def recorded_names(source: ThreadSource) -> dict[tuple[int, int, int], str]:
    """(rank, pid, tid) -> name from the trace's ``thread_name`` metadata events; empty when
    the trace has none (an in-process capture)."""
    e = source.trace.events
    if "args" not in e.column_names:
        return source.recorded_thread_names()
    mask = pc.and_(pc.equal(pc.cast(e["kind"], pa.string()), Kind.METADATA), pc.equal(e["name"], "thread_name"))
    rows = e.filter(mask).select(["rank", "pid", "tid", "args"])
    return parse_recorded(rows)


def parse_recorded(rows: pa.Table) -> dict[tuple[int, int, int], str]:
    """The metadata rows (rank, pid, tid, args) as (rank, pid, tid) -> name; the last wins
    (Kineto writes a thread's generic name first, then the one the thread set)."""
    out: dict[tuple[int, int, int], str] = {}
    for rank, pid, tid, args in zip(*(rows[c].to_pylist() for c in ("rank", "pid", "tid", "args"))):
        try:
            name = json.loads(args or "{}").get("name")
        except (ValueError, AttributeError):
            continue
        if isinstance(name, str) and tid is not None:
            out[(int(rank or 0), int(pid) if pid is not None else -1, int(tid))] = name
    return out


def thread_names(source: ThreadSource) -> dict[tuple[int, int], str]:
    """(rank, tid) -> the lane name of every host thread of the trace (see the module doc)."""
    host = source.trace.select(_HOST_KINDS, ["rank", "pid", "tid", "kind", "name", "start_ns", "device"])
    host = host.filter(pc.less(pc.fill_null(host["device"], -1), 0))  # (device-side syncs are not threads)
    if not host.num_rows:
        return {}
    rank = pc.fill_null(host["rank"], 0).to_numpy().astype(np.int64)
    pid = pc.fill_null(host["pid"], -1).to_numpy().astype(np.int64)
    tid = pc.fill_null(host["tid"], -1).to_numpy().astype(np.int64)
    kind = pc.cast(host["kind"], pa.string())
    name = pc.cast(host["name"], pa.string())
    start = pc.fill_null(host["start_ns"], 0).to_numpy().astype(np.int64)
    keys, which = np.unique(np.stack([rank, tid], axis=1), axis=0, return_inverse=True)
    which = which.ravel()
    first = np.full(len(keys), np.iinfo(np.int64).max)
    np.minimum.at(first, which, start)
    pid_of = np.full(len(keys), -1)
    pid_of[which] = pid  # (a thread has one process)
    ops = np.bincount(which[pc.equal(kind, Kind.CPU_OP).to_numpy(zero_copy_only=False)], minlength=len(keys))

    def holds(mask: pa.ChunkedArray | pa.Array) -> np.ndarray:
        m = pc.fill_null(mask, False).to_numpy(zero_copy_only=False)
        return np.bincount(which[m], minlength=len(keys)) > 0

    is_python = pc.equal(kind, Kind.PYTHON)
    steps = holds(pc.equal(kind, Kind.STEP))
    script = holds(pc.and_(is_python, pc.match_substring(name, ": <module>")))
    workers = holds(pc.and_(is_python, pc.match_substring(name, WORKER_FRAME)))
    pins = holds(pc.and_(is_python, pc.match_substring(name, PIN_FRAME)))
    backward = holds(pc.and_(pc.equal(kind, Kind.CPU_OP), pc.starts_with(name, BACKWARD_OP)))
    recorded = recorded_names(source)

    names: dict[tuple[int, int], str] = {}
    for r in np.unique(keys[:, 0]).tolist():
        mine = np.flatnonzero(keys[:, 0] == r)
        mine = mine[np.argsort(first[mine], kind="stable")]
        busy = [i for i in mine if ops[i]]
        main = (
            [i for i in mine if steps[i]]
            or [i for i in mine if pid_of[i] == keys[i, 1]]
            or [i for i in mine if script[i]]
            or (busy if len(busy) == 1 else [])
        )
        label: dict[int, str] = {}
        for i in mine:
            t = int(keys[i, 1])
            given = recorded.get((r, int(pid_of[i]), t), "")
            inner = m.group(1) if (m := RECORDED.match(given)) else given
            if AUTOGRAD_NAME.search(given):
                label[i] = "autograd thread"
            elif main and i == main[0]:
                label[i] = "main thread"
            elif workers[i]:
                label[i] = "DataLoader worker"
            elif pins[i]:
                label[i] = "pin-memory thread"
            elif backward[i]:
                label[i] = "autograd thread"
            elif inner and not _process_name(inner):
                label[i] = inner
        numbered = 1 + (1 if main else 0)
        seen: dict[str, int] = {}
        for i in mine:
            text = label.get(i)
            if text is None:
                text, numbered = f"thread {numbered}", numbered + 1
            elif text == "DataLoader worker":
                seen[text] = seen.get(text, 0) + 1
                text = f"{text} {seen[text]}"
            else:
                seen[text] = seen.get(text, 0) + 1
                text = text if seen[text] == 1 else f"{text} {seen[text]}"
            names[(r, int(keys[i, 1]))] = text
    return names


def _process_name(name: str) -> bool:
    """A thread name that is only the program's (``python3``, ``python``): it names no thread."""
    return bool(re.fullmatch(r"python[\d.]*|pt_main_thread|", name.strip()))
