"""A capture on a torch whose in-memory records this reader does not know: torch's own JSON
export, with the exact lines of the in-memory event tree put back.

Seen on torch 2.11 (the H200 machines): ``kineto_results`` has no ``trace_activities()``, so
``capture_convert`` cannot read the records column by column. ``results.save()`` (what
``export_chrome_trace`` writes) still holds every op, runtime call, kernel and flow, but its
Python events carry def lines only, and every one of them (2.46 million on a torch.compile
program). ``experimental_event_tree()`` is older than ``trace_activities()`` and still there, so:

- the tree walk (``capture_tree.walk_tree``, pruning one-time Python as in the normal path)
  maps each op's correlation id to its exact source, and gives the Python calls as rows;
- an op's ``External id`` in the JSON is its correlation id (the same id torch's in-memory
  records carry, checked against torch 2.13 by tests/unit/test_capture_fallback.py), so the
  JSON's ops (and ``[memory]`` events, by start time) take the tree's sources, and
  ``build_trace`` hands them on to kernels (launch) and backward ops (forward) as usual;
- the JSON's own Python events are replaced by the tree's (pruned) ones: they are dropped
  chunk by chunk while the JSON is decoded, so memory follows the other events.

When the tree cannot be read either, the JSON alone gives function-level lines, and the
metadata's ``capture_fallback`` says why.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.build.event_links import _map_keys_first
from neuron_explorer.collectors.build.normalize import build_trace
from neuron_explorer.collectors.build.raw_events import RawEvents, _int_column
from neuron_explorer.collectors.build.source_map import MARKER_PREFIX, UserCode
from neuron_explorer.collectors.capture.capture_tree import FileResolver, TreeSources, walk_tree
from neuron_explorer.collectors.capture.inferred_steps import infer_steps
from neuron_explorer.collectors.capture.tree_columns import _python_rows, _src_columns
from neuron_explorer.trace.model import Trace

_PY_CAT = "python_function"
_OP_CATS = ("cpu_op", "user_annotation")
_INSTANT_CAT = "cpu_instant_event"


def convert_saved(
    path: str,
    results: Any,
    metadata: dict[str, Any],
    cycle: int,
    why: str,
    user_code: UserCode,
    search_path: list[str] | None,
    step_on: str | None = None,
) -> Trace:
    """The trace of the JSON ``results`` were saved to (``path``), with the event tree's
    exact lines where it can be read; ``why``: the reason the normal conversion failed;
    ``step_on``: as in the normal path (``collectors.capture.inferred_steps``), steps inferred from the
    tree's Python calls or the JSON's compiled-region runs.

    The tree is walked first: when it can be read, the JSON's Python events are dropped while
    they are decoded (the tree gives them, pruned), so memory follows the other events."""
    from neuron_explorer.collectors.kineto.kineto_json import read_events

    # the exact-lines mode's markers (record_function ranges) are read by the walk and are no
    # rows of their own, as in the normal path (capture_convert.results_to_raw)
    markers = bool((metadata.get("profiler_options") or {}).get("exact_lines"))
    try:
        tree: TreeSources | None = walk_tree(
            results.experimental_event_tree(), FileResolver(user_code, search_path), markers=markers
        )
    except (AttributeError, ImportError, TypeError) as exc:
        tree = None
        why = f"{why}; event tree unreadable ({type(exc).__name__}: {exc}): function-level lines"
    raw, json_meta = read_events(path, skip_category=_PY_CAT if tree is not None else None)
    if markers and raw.n:
        names = pc.fill_null(pc.cast(raw.name, pa.string()), "")
        is_marker = np.asarray(pc.starts_with(names, MARKER_PREFIX).to_numpy(zero_copy_only=False), bool)
        if is_marker.any():
            raw = raw.filter(~is_marker)
    meta = {k: v for k, v in json_meta.items() if k not in ("source", "path")}
    if tree is not None:
        base = json_meta.get("base_time_ns")
        raw = with_tree_sources(raw, int(base) if isinstance(base, int) else 0, tree)
        meta["pruned"] = tree.pruned_metadata()
    meta.update(metadata, capture_fallback=why)
    raw, steps_from = infer_steps(raw, step_on)
    if steps_from:
        meta["steps_from"] = steps_from
    raw.columns["cycle"] = pa.array(np.full(raw.n, cycle, np.int32))
    return build_trace(raw, meta, user_code=user_code)


def with_tree_sources(raw: RawEvents, base_ns: int, tree: TreeSources) -> RawEvents:
    """``raw`` (a JSON export's events without its Python ones, starts relative to
    ``base_ns``) with the tree's exact sources on its ops and allocations, and the tree's
    Python calls added."""
    n = raw.n
    cat = pc.fill_null(pc.cast(raw.cat, pa.string()), "")
    cats = np.asarray(cat, dtype=object) if n else np.zeros(0, object)
    is_op = np.isin(cats, _OP_CATS)
    ext = _int_column(raw.typed.get("external_id"), n)
    start = np.asarray(raw.start_ns, np.int64)
    tid = _int_column(raw.tid, n)
    pid = _int_column(raw.pid, n)
    # exact sources: ops by External id (= correlation id), allocations by start time
    src = np.zeros(n, np.int64)
    if tree.op_corr:
        by_op = _map_keys_first(ext, np.asarray(tree.op_corr, np.int64), np.asarray(tree.op_src, np.int64))
        src = np.where(is_op, by_op, 0)
    if tree.alloc_start:
        at = _map_keys_first(
            start + base_ns, np.asarray(tree.alloc_start, np.int64), np.asarray(tree.alloc_src, np.int64)
        )
        src = np.where(cats == _INSTANT_CAT, at, src)
    raw.src = _src_columns(tree, np.maximum(src, 0))
    return RawEvents.concat([raw, _python_events(tree, ext[is_op], tid[is_op], pid[is_op], base_ns)])


def _python_events(
    tree: TreeSources, op_corr: np.ndarray, op_tid: np.ndarray, pid: np.ndarray, base_ns: int
) -> RawEvents:
    """The tree's Python calls as rows (``tree_columns._python_rows``, as the normal path)."""
    py = _python_rows(tree, op_corr, op_tid, pid)
    m = py["n"]
    return RawEvents(
        n=m,
        ph=pa.array(["X"] * m, pa.string()),
        cat=pa.array([_PY_CAT] * m, pa.string()),
        name=py["name"],
        pid=pa.array(py["pid"], pa.int64()),
        tid=pa.array(py["tid"], pa.int64()),
        start_ns=py["start"] - base_ns,
        dur_ns=py["dur"],
        flow_id=pa.nulls(m, pa.int64()),
        args=py["args"],
        extra=pa.nulls(m, pa.string()),
        src=_src_columns(tree, py["src"]),
    )
