"""How much op time and device time each source precision covers (``src_precision``).

Counting events says little: a thousand views weigh less than one matmul. Here each top-level
op (a ``cpu_op`` not nested in another op, so nested ops count once) weighs its duration, and
each device event (kernel, memcpy, memset, collective) its duration.

An inherited line is as exact as the line it came from: a backward op (``forward``) carries its
forward op's line, a kernel (``launch``) its launching op's, which may itself be a backward op.
``exact_pct`` follows those links (``fwd_id``, ``op_id``) to the line at their origin and counts
the time whose origin is an exact calling line (``line``). ``info``, the HTML report and the
TUI all show these numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import DEVICE_KINDS, Kind, Precision

_COLUMNS = ("rank", "event_id", "kind", "dur_ns", "parent_id", "fwd_id", "op_id", "src_file", "src_precision")
#: How a missing precision (no source line at all) is named.
NONE = "none"


def _ints(table: pa.Table, name: str, fill: int = -1) -> np.ndarray:
    if name not in table.column_names:
        return np.full(table.num_rows, fill, np.int64)
    return np.asarray(pc.fill_null(table[name].cast(pa.int64()), fill).to_numpy(), np.int64)


def _strings(table: pa.Table, name: str) -> np.ndarray:
    if name not in table.column_names:
        return np.full(table.num_rows, None, object)
    return np.asarray(pc.cast(table[name], pa.string()).to_numpy(zero_copy_only=False), object)


def _rows_of(rank: np.ndarray, event_id: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Row index of (rank, ``target`` event id) per row; -1 where the target is missing."""
    out = np.full(target.size, -1, np.int64)
    if not target.size:
        return out
    key = rank * (1 << 40) + event_id
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    want = rank * (1 << 40) + target
    pos = np.minimum(np.searchsorted(sorted_key, want), sorted_key.size - 1)
    hit = (target >= 0) & (sorted_key[pos] == want)
    out[hit] = order[pos[hit]]
    return out


def line_coverage(trace: Trace) -> dict[str, Any]:
    """Op time and device time by precision (see the module docstring)::

        {"op_time_ns", "op_by_precision_pct": {precision: pct}, "op_exact_pct",
         "op_user_time_ns", "op_user_exact_pct",   # of the op time with a source line
         "device_time_ns", "device_by_precision_pct", "device_exact_pct"}

    Percentages are of the time in question (None where there is none); precisions missing
    from the trace are absent; ``"none"`` is time with no source line."""
    e = trace.events
    t = e.select([c for c in _COLUMNS if c in e.column_names])
    kind = _strings(t, "kind")
    dur = np.maximum(_ints(t, "dur_ns", 0), 0)
    rank, eid = _ints(t, "rank", 0), _ints(t, "event_id")
    if "event_id" not in t.column_names:
        eid = np.arange(t.num_rows, dtype=np.int64)
    prec = _strings(t, "src_precision")
    prec = np.where(prec == None, NONE, prec)  # noqa: E711 (element-wise)
    has_file = _strings(t, "src_file") != None  # noqa: E711

    is_op = kind == Kind.CPU_OP
    parent = _rows_of(rank, eid, _ints(t, "parent_id"))
    top_op = is_op & ~((parent >= 0) & is_op[np.maximum(parent, 0)])
    device = np.isin(kind, list(DEVICE_KINDS))

    # the precision at the origin of each inherited line: launch -> op, forward -> forward op
    origin = prec.copy()
    fwd = _rows_of(rank, eid, _ints(t, "fwd_id"))
    op = _rows_of(rank, eid, _ints(t, "op_id"))
    for _ in range(3):  # kernel -> backward op -> forward op (-> nothing further)
        via_fwd = (origin == Precision.FORWARD) & (fwd >= 0)
        origin = np.where(via_fwd, prec[np.maximum(fwd, 0)], origin)
        fwd = np.where(via_fwd, fwd[np.maximum(fwd, 0)], fwd)
        via_op = (origin == Precision.LAUNCH) & (op >= 0)
        origin = np.where(via_op, origin[np.maximum(op, 0)], origin)
        fwd = np.where(via_op, fwd[np.maximum(op, 0)], fwd)
    exact = origin == Precision.LINE

    out: dict[str, Any] = {}
    for name, rows in (("op", top_op), ("device", device)):
        total = int(dur[rows].sum())
        out[f"{name}_time_ns"] = total
        by: dict[str, float] = {}
        if total:
            p, d = prec[rows], dur[rows]
            for value in sorted(set(p.tolist())):
                by[str(value)] = round(100.0 * float(d[p == value].sum()) / total, 2)
        out[f"{name}_by_precision_pct"] = by
        out[f"{name}_exact_pct"] = round(100.0 * float(dur[rows & exact].sum()) / total, 2) if total else None
        if name == "op":
            user = rows & has_file
            user_total = int(dur[user].sum())
            out["op_user_time_ns"] = user_total
            out["op_user_exact_pct"] = (
                round(100.0 * float(dur[user & exact].sum()) / user_total, 2) if user_total else None
            )
    return out


def coverage_text(cov: dict[str, Any], short: bool = False) -> str:
    """One line: ``"op time 97.1% at an exact line (line 60.2%, forward 36.9%, ...); device time ..."``;
    ``short``: ``"97.1% of op time, 95.0% of device time at an exact line"``."""
    parts = []
    for name, label in (("op", "op time"), ("device", "device time")):
        if not cov.get(f"{name}_time_ns"):
            continue
        if short:
            parts.append(f"{cov[f'{name}_exact_pct']:.1f}% of {label}")
            continue
        by = ", ".join(
            f"{k} {v:.1f}%" for k, v in sorted(cov[f"{name}_by_precision_pct"].items(), key=lambda kv: -kv[1])
        )
        parts.append(f"{label} {cov[f'{name}_exact_pct']:.1f}% at an exact line ({by})")
    if short:
        return ", ".join(parts) + " at an exact line" if parts else ""
    return "; ".join(parts)
