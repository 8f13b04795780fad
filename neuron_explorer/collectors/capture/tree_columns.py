"""The event tree's Python calls and sources as trace columns.

torch's event tree (``capture_tree.walk_tree``) yields the Python calls it saw and the source
line of each op; these helpers turn them into the columns a ``RawEvents`` holds: the Python
calls as rows of their own (on the system thread ids the activities carry) and the source
columns (``src_file``, ``src_line``, ...) for any set of rows. The normal conversion
(``capture_convert``) and the fallback through torch's JSON export (``capture_fallback``) both
use them.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.build.event_links import _map_keys_first
from neuron_explorer.collectors.capture.capture_tree import TreeSources


def _thread_ids(values: list[int]) -> np.ndarray:
    """Profiler thread ids as int64. A thread that was running before the profiler started can
    carry an id past int64 (torch reports it as an unsigned 64-bit value), which ``np.asarray(...,
    np.int64)`` refuses (OverflowError, the whole capture lost): such ids keep their 64 bits,
    read as signed, so every thread still has its own id."""
    try:
        return np.asarray(values, np.int64)
    except OverflowError:
        return (np.asarray(values, dtype=object) % (1 << 64)).astype(np.uint64).view(np.int64)


def _python_rows(tree: TreeSources, op_corr: np.ndarray, op_sys_tid: np.ndarray, pid: np.ndarray) -> dict[str, Any]:
    n = len(tree.py_name)
    out: dict[str, Any] = {"n": n}
    # profiler thread id -> system thread id, learned from ops seen both in the tree and as activities
    tree_tid = _thread_ids(tree.op_tid)
    sys_tid = _map_keys_first(np.asarray(tree.op_corr, np.int64), op_corr, op_sys_tid)
    known = sys_tid >= 0
    mapping_keys, first = np.unique(tree_tid[known], return_index=True)
    mapping_vals = sys_tid[known][first]
    py_tid = _thread_ids(tree.py_tid)
    mapped = _map_keys_first(py_tid, mapping_keys, mapping_vals)
    host_pid = int(np.bincount(pid - pid.min()).argmax() + pid.min()) if pid.size else os.getpid()
    out["tid"] = np.where(mapped >= 0, mapped, py_tid)
    out["pid"] = np.full(n, host_pid, np.int64)
    start = np.asarray(tree.py_start, np.int64)
    out["start"] = start
    out["dur"] = np.maximum(np.asarray(tree.py_end, np.int64) - start, 0)
    out["name"] = pa.array(tree.py_name, pa.string())
    parent = (
        pa.array(np.asarray(tree.py_parent, np.int64), mask=np.asarray(tree.py_parent, np.int64) < 0)
        .cast(pa.string())
        .fill_null("null")
    )
    ids = pa.array(np.asarray(tree.py_id, np.int64)).cast(pa.string())
    out["args"] = pc.binary_join_element_wise('{"Python parent id": ', parent, ', "Python id": ', ids, "}", "")
    out["src"] = np.asarray(tree.py_src, np.int64)
    return out


def _src_columns(tree: TreeSources, idx: np.ndarray) -> dict[str, pa.Array]:
    sources = tree.sources
    files = pa.array([s[0] for s in sources], pa.string())
    lines = np.array([s[1] for s in sources], np.int64)
    funcs = pa.array([s[2] for s in sources], pa.string())
    prec = pa.array([s[3] for s in sources], pa.string())
    mods = pa.array([s[4] for s in sources], pa.string())
    take = pa.array(idx)
    line = lines[idx]
    return {
        "src_file": files.take(take),
        "src_line": pa.array(line, pa.int64(), mask=line < 0),
        "src_func": funcs.take(take),
        "src_precision": prec.take(take),
        "src_module": mods.take(take),
    }
