"""How much op time and device time each source precision covers (``src_precision``).

Counting events says little: a thousand views weigh less than one matmul. Here each top-level
op (a ``cpu_op`` not nested in another op, so nested ops count once) weighs its duration, and
each device event (kernel, memcpy, memset, collective) its duration.

An inherited line is as exact as the line it came from: a backward op (``forward``) carries its
forward op's line, a kernel (``launch``) its launching op's, which may itself be a backward op,
and work replayed from a CUDA graph (``graph_capture``) the capture-time op's.
``exact_pct`` follows those links (``fwd_id``, ``op_id``, ``capture_op_id``) to the line at their origin and counts
the time whose origin is an exact calling line (``line``) or the lines a compiled kernel fuses
(``compiled``, Inductor's provenance). ``info``, the HTML report and the
TUI all show these numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from neuron_explorer.trace.arrow import dict_parts, to_numpy
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import DEVICE_KINDS, Kind, Precision

_COLUMNS = (
    "rank",
    "event_id",
    "kind",
    "dur_ns",
    "parent_id",
    "fwd_id",
    "op_id",
    "capture_op_id",
    "src_file",
    "src_precision",
)
#: How a missing precision (no source line at all) is named.
NONE = "none"


def _ints(table: pa.Table, name: str, fill: int = -1) -> np.ndarray:
    """An integer column as int64, nulls ``fill`` (buffer-based: the TUI's first screen reads
    this and must not import pandas, which pyarrow's own ``to_numpy`` does)."""
    if name not in table.column_names:
        return np.full(table.num_rows, fill, np.int64)
    col = table[name]
    if col.type != pa.int64():
        col = col.cast(pa.int64())
    return to_numpy(col, fill=fill).astype(np.int64, copy=False)


def _codes(table: pa.Table, name: str, words: list[Any]) -> np.ndarray:
    """Row codes of a string column against ``words`` (its index there; -1 for other values and
    null; with no ``words``, -1 for values and -2 for null): read through the column's
    dictionary, so no per-row string is built."""
    if name not in table.column_names:
        return np.full(table.num_rows, -1 if words else -2, np.int64)
    vocab, codes = dict_parts(table[name])
    lookup = np.array([words.index(w) if w in words else -1 for w in vocab] + [-2], np.int64)
    out = lookup[np.where(codes < 0, len(vocab), codes)]
    return np.maximum(out, -1) if words else out


class _Rows:
    """Row index of an event id (per rank), for id columns: one sort, shared by every lookup."""

    def __init__(self, rank: np.ndarray, event_id: np.ndarray) -> None:
        self.rank = rank
        # one rank's file: event ids are the row numbers, and a link is its own row index
        self.identity = bool(rank.size == 0 or (rank == rank[0]).all()) and np.array_equal(
            event_id, np.arange(event_id.size)
        )
        if not self.identity:
            key = rank * (1 << 40) + event_id
            self.order = np.argsort(key, kind="stable")
            self.sorted = key[self.order]

    def of(self, target: np.ndarray) -> np.ndarray:
        out = np.full(target.size, -1, np.int64)
        if not target.size:
            return out
        if self.identity:
            return np.where((target >= 0) & (target < target.size), target, -1)
        want = self.rank * (1 << 40) + target
        pos = np.minimum(np.searchsorted(self.sorted, want), self.sorted.size - 1)
        hit = (target >= 0) & (self.sorted[pos] == want)
        out[hit] = self.order[pos[hit]]
        return out


#: The precisions in code order (``_codes``); anything else counts under its own name.
_WORDS: list[Any] = [
    Precision.LINE,
    Precision.FUNCTION,
    Precision.FORWARD,
    Precision.LAUNCH,
    Precision.GENERATED,
    Precision.GRAPH_CAPTURE,
    Precision.COMPILED,
]
_LINE, _FORWARD, _LAUNCH, _CAPTURE, _COMPILED = 0, 2, 3, 5, 6


def line_coverage(trace: Trace) -> dict[str, Any]:
    """Op time and device time by precision (see the module docstring)::

        {"op_time_ns", "op_by_precision_pct": {precision: pct}, "op_exact_pct",
         "op_user_time_ns", "op_user_exact_pct",   # of the op time with a source line
         "device_time_ns", "device_by_precision_pct", "device_exact_pct"}

    Percentages are of the time in question (None where there is none); precisions missing
    from the trace are absent; ``"none"`` is time with no source line. Whole columns: codes
    through the dictionaries, one sort for the id links."""
    e = trace.events
    t = e.select([c for c in _COLUMNS if c in e.column_names])
    n = t.num_rows
    kind = _codes(t, "kind", [Kind.CPU_OP, *DEVICE_KINDS])
    is_op, device = kind == 0, kind > 0
    dur = np.maximum(_ints(t, "dur_ns", 0), 0)
    rank = _ints(t, "rank", 0)
    eid = _ints(t, "event_id") if "event_id" in t.column_names else np.arange(n, dtype=np.int64)
    words = list(_WORDS)
    if "src_precision" in t.column_names:  # (other values, from other collectors, keep their names)
        words += [w for w in dict_parts(t["src_precision"])[0] if w not in words]
    prec = _codes(t, "src_precision", words)  # -1: none
    has_file = _codes(t, "src_file", []) == -1  # (no word matches: -1 everywhere, -2 where null)

    rows = _Rows(rank, eid)
    parent = rows.of(_ints(t, "parent_id"))
    top_op = is_op & ~((parent >= 0) & is_op[np.maximum(parent, 0)])
    # the precision at the origin of each inherited line: launch -> op, forward -> forward op
    origin = prec.copy()
    fwd = rows.of(_ints(t, "fwd_id"))
    op = rows.of(_ints(t, "op_id"))
    # graph-replayed work: its line is the capture-time op's (``capture_op_id``), exact when that is
    cap = rows.of(_ints(t, "capture_op_id"))
    via_cap = (origin == _CAPTURE) & (cap >= 0)
    origin = np.where(via_cap, prec[np.maximum(cap, 0)], origin)
    fwd = np.where(via_cap, fwd[np.maximum(cap, 0)], fwd)
    for _ in range(3):  # kernel -> backward op -> forward op (-> nothing further)
        via_fwd = (origin == _FORWARD) & (fwd >= 0)
        origin = np.where(via_fwd, prec[np.maximum(fwd, 0)], origin)
        fwd = np.where(via_fwd, fwd[np.maximum(fwd, 0)], fwd)
        via_op = (origin == _LAUNCH) & (op >= 0)
        origin = np.where(via_op, origin[np.maximum(op, 0)], origin)
        fwd = np.where(via_op, fwd[np.maximum(op, 0)], fwd)
    exact = (origin == _LINE) | (origin == _COMPILED)  # (a compiled kernel's lines are the lines it fuses)

    out: dict[str, Any] = {}
    names = [str(w) for w in words] + [NONE]  # (code -1 -> the last name)
    for name, sel in (("op", top_op), ("device", device)):
        total = int(dur[sel].sum())
        out[f"{name}_time_ns"] = total
        by: dict[str, float] = {}
        if total:
            sums = np.bincount(np.where(prec[sel] < 0, len(words), prec[sel]), weights=dur[sel], minlength=len(names))
            by = {names[i]: round(100.0 * float(v) / total, 2) for i, v in enumerate(sums) if v > 0}
            by = dict(sorted(by.items()))
        out[f"{name}_by_precision_pct"] = by
        out[f"{name}_exact_pct"] = round(100.0 * float(dur[sel & exact].sum()) / total, 2) if total else None
        if name == "op":
            user = sel & has_file
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
    timed = [n for n in ("op", "device") if cov.get(f"{n}_time_ns")]
    if timed and all((cov.get(f"{n}_by_precision_pct") or {}).get("none", 0.0) >= 99.95 for n in timed):
        # a stackless trace: say what is missing, not "none 100.0%"
        return (
            "no source lines (no Python stacks recorded)"
            if short
            else "no source lines: the trace was recorded without Python stacks (torch.profiler.profile("
            "with_stack=True), or neuron-explorer record, adds them)"
        )
    for name, label in (("op", "op time"), ("device", "device time")):
        if not cov.get(f"{name}_time_ns"):
            continue
        if short:
            parts.append(f"{cov[f'{name}_exact_pct']:.1f}% of {label}")
            continue
        by = ", ".join(
            f"{'no line' if k == 'none' else k} {v:.1f}%"
            for k, v in sorted(cov[f"{name}_by_precision_pct"].items(), key=lambda kv: -kv[1])
        )
        parts.append(f"{label} {cov[f'{name}_exact_pct']:.1f}% at an exact line ({by})")
    if short:
        return ", ".join(parts) + " at an exact line" if parts else ""
    return "; ".join(parts)
