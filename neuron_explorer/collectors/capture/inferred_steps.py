"""Steps for programs that never call ``prof.step()``: from a function's calls or a compiled region's runs.

``record`` ends a profiler step at each ``optimizer.step()``; an inference loop, or a loop of
forward and backward passes with no optimizer, has none, and its trace holds at most the one
``ProfilerStep#0`` span ``record``'s schedule opens around the whole run. Such a capture gets
its steps here, before the events are normalized (in-process captures: the Python calls are
needed), as ``ProfilerStep#N`` spans on the thread that ran them (category
``user_annotation``; ``metadata["steps_from"]`` says where they came from, docs/schema.md):

- ``step_on="train_step"`` (``record --step-on train_step``): each return of that function ends
  a step. Step 0 runs from the first call's start to its return, step k from the previous
  return to this one (so the work between calls, loading the next batch, is in the step that
  uses it). ``FILE:FUNCTION`` names the file too (a suffix of its path). Only outermost calls
  count (a recursive call is inside its caller's step);
- otherwise, when a ``torch.compile`` region (``Torch-Compiled Region: <id>``) ran at least
  twice: each run of the most often run region starts a step, which lasts until the next run;
  the last lasts until the last event that starts after it on that thread ends.

The whole-run ``ProfilerStep#0`` span is then left out (it is ``record``'s own, not the
program's). Captures with real steps (two or more ``ProfilerStep`` numbers) are left alone.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.build.raw_events import RawEvents
from neuron_explorer.trace.arrow import from_numpy, string_array

#: The args of an inferred step span.
INFERRED_ARGS = '{"Inferred step": true}'
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_REGION_PREFIX = "Torch-Compiled Region: "
#: A Python call's name: ``{file}({def line}): {function}``.
_CALL = re.compile(r"^(?P<file>.*)\(\d+\): (?P<func>.*)$", re.DOTALL)


def infer_steps(raw: RawEvents, step_on: str | None = None) -> tuple[RawEvents, dict[str, Any] | None]:
    """``raw`` with inferred step spans (see the module docstring), and the ``steps_from``
    metadata entry (None when nothing was inferred)."""
    names = _plain(raw.name)
    is_step = np.asarray(pc.fill_null(pc.starts_with(names, "ProfilerStep#"), False).to_numpy(zero_copy_only=False))
    step_rows = np.nonzero(is_step)[0]
    numbers = {int(m.group(1)) for m in (_STEP.match(str(names[i])) for i in step_rows.tolist()) if m}
    if len(numbers) > 1:
        return raw, None
    start = np.asarray(raw.start_ns, np.int64)
    end = start + np.maximum(np.asarray(raw.dur_ns, np.int64), 0)
    pid = _ints(raw.pid)
    tid = _ints(raw.tid)
    if step_on:
        rows, info = _function_calls(names, _plain(raw.cat), step_on)
        if rows.size == 0:
            return raw, info
        rows = _outermost(rows, start, end, tid)
        s = np.concatenate([start[rows[:1]], end[rows[:-1]]])
        e = end[rows]
    else:
        rows, region = _region_runs(names)
        if rows.size < 2:
            return raw, None
        rows = _outermost(rows, start, end, tid)
        if rows.size < 2:
            return raw, None
        info = {"compiled_region": region, "runs": int(rows.size)}
        s = start[rows]
        last = (tid == tid[rows[-1]]) & (pid == pid[rows[-1]]) & (start >= s[-1])
        e = np.concatenate([s[1:], [end[last].max()]])
    info["steps"] = int(rows.size)
    keep = np.ones(raw.n, bool)
    keep[step_rows] = False
    base = raw.filter(keep) if step_rows.size else raw
    steps = _step_rows(s, e - s, pid[rows], tid[rows])
    return RawEvents.concat([base, steps]), info


def _plain(arr: Any) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    return arr.cast(pa.string()) if pa.types.is_dictionary(arr.type) else arr


def _ints(arr: Any) -> np.ndarray:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if isinstance(arr, pa.Array):
        return np.asarray(pc.fill_null(arr.cast(pa.int64()), -1).to_numpy(zero_copy_only=False), np.int64)
    return np.asarray(arr, np.int64)


def _function_calls(names: pa.Array, cats: pa.Array, step_on: str) -> tuple[np.ndarray, dict[str, Any]]:
    """Rows of the Python calls of ``step_on`` (``FUNCTION`` or ``FILE:FUNCTION``)."""
    file_part, _, func = step_on.rpartition(":")
    info: dict[str, Any] = {"function": step_on}
    is_py = np.asarray(pc.fill_null(pc.equal(cats, "python_function"), False).to_numpy(zero_copy_only=False))
    candidates = np.nonzero(is_py & _ends_with(names, f": {func}"))[0]
    rows = []
    for i in candidates.tolist():  # one test per call of the function, not per event
        m = _CALL.match(str(names[i]))
        if m and m["func"] == func and (not file_part or m["file"].endswith(file_part)):
            rows.append(i)
    info["calls"] = len(rows)
    return np.asarray(rows, np.int64), info


def _ends_with(names: pa.Array, suffix: str) -> np.ndarray:
    return np.asarray(pc.fill_null(pc.ends_with(names, suffix), False).to_numpy(zero_copy_only=False))


def _region_runs(names: pa.Array) -> tuple[np.ndarray, str | None]:
    """Rows of the runs of the most often run compiled region, and its id."""
    is_region = np.asarray(pc.fill_null(pc.starts_with(names, _REGION_PREFIX), False).to_numpy(zero_copy_only=False))
    rows = np.nonzero(is_region)[0]
    if rows.size < 2:
        return np.zeros(0, np.int64), None
    ids = [str(names[i])[len(_REGION_PREFIX) :] for i in rows.tolist()]
    uniq, inverse, counts = np.unique(ids, return_inverse=True, return_counts=True)
    best = int(np.argmax(counts))
    return rows[inverse.ravel() == best], str(uniq[best])


def _outermost(rows: np.ndarray, start: np.ndarray, end: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """The calls on the thread with most of them, in time order, none inside another."""
    threads, counts = np.unique(tid[rows], return_counts=True)
    rows = rows[tid[rows] == threads[int(np.argmax(counts))]]
    rows = rows[np.argsort(start[rows], kind="stable")]
    reach = np.maximum.accumulate(end[rows])
    inside = np.zeros(rows.size, bool)
    inside[1:] = start[rows[1:]] < reach[:-1]
    return rows[~inside]


def _step_rows(start: np.ndarray, dur: np.ndarray, pid: np.ndarray, tid: np.ndarray) -> RawEvents:
    n = int(start.size)
    return RawEvents(
        n=n,
        ph=string_array(["X"] * n),
        cat=string_array(["user_annotation"] * n),
        name=string_array([f"ProfilerStep#{k}" for k in range(n)]),
        pid=from_numpy(pid, pa.int64()),
        tid=from_numpy(tid, pa.int64()),
        start_ns=np.asarray(start, np.int64),
        dur_ns=np.asarray(dur, np.int64),
        flow_id=pa.nulls(n, pa.int64()),
        args=string_array([INFERRED_ARGS] * n),
        extra=pa.nulls(n, pa.string()),
    )
