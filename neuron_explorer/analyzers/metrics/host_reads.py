"""Which blocking copies bring back bytes the host reads at once (issue 40 item 3).

``non_blocking=True`` only moves a device-to-host copy's wait to the first read of its bytes;
when the host reads them at once, the wait stays, and the remedy is to not need them there
(keep the value on the device, read it every N steps, or do the next batch's independent host
work before the read). The trace shows two kinds of evidence, and a copy is counted as read at
once only with one of them:

- ``item``: an op above the copy is ``aten::item`` or ``aten::_local_scalar_dense``: the value
  goes to Python (``.item()``, ``int(t)``, ``if t:``), which reads it as the copy returns;
- ``next_op``: a device-to-host copy whose destination shape and dtype (the issuing
  ``aten::copy_``'s first argument) is an input of one of the next two framework ops the same
  thread runs after it: host math on what was just copied (CPU softmax/topk on the logits).

A copy for which neither holds (the bytes may be read later, or never) is left as it was:
making it asynchronous can save its wait.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.analyzers.core.columns import lookup, name_mask, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.trace.schema import Kind

_SCALAR_READ = r"^aten::(item|_local_scalar_dense)$"
_DEPTH = 8  # op nesting levels searched above a copy call
_NEXT = 2  # framework ops after the copy searched for its bytes


def host_reads(frames: TraceFrames, calls: pd.DataFrame, kinds: pd.Series) -> np.ndarray:
    """Per row of ``calls`` (blocking copy runtime calls) the evidence that the host reads the
    copied bytes at once: ``"item"``, ``"next_op"`` or ``""`` (see the module docstring).
    ``kinds``: each call's ``memcpy_kind`` (``DtoH``, ``DtoH (Pageable)``, ...)."""
    out = np.full(len(calls), "", dtype=object)
    host = frames.host
    if not len(calls) or not len(host):
        return out
    hk = ukey(host["rank"].to_numpy(), host["event_id"].to_numpy())
    parent = lookup(hk, ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy()))
    pos = lookup(hk, ukey(calls["rank"].to_numpy(), calls["event_id"].to_numpy()))
    is_op = (host["kind"] == Kind.CPU_OP).to_numpy()
    scalar = name_mask(host["name"], _SCALAR_READ) & is_op
    # walk up: the scalar read above the call, the issuing copy_ op and the outermost op
    item = np.zeros(len(calls), bool)
    copy_op = np.full(len(calls), -1, np.int64)
    outer = np.where(pos >= 0, pos, -1)
    cur = pos.copy()
    names = host["name"].astype(str).to_numpy()
    for _ in range(_DEPTH):
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
        ok = cur >= 0
        if not ok.any():
            break
        c = np.maximum(cur, 0)
        item |= ok & scalar[c]
        first_copy = ok & (copy_op < 0) & is_op[c] & (names[c] == "aten::copy_")
        copy_op[first_copy] = cur[first_copy]
        outer = np.where(ok & is_op[c], cur, outer)
    out[item] = "item"
    dtoh = kinds.astype(str).str.startswith("DtoH").to_numpy() & ~item & (copy_op >= 0) & (outer >= 0)
    if dtoh.any():
        out[np.flatnonzero(dtoh)[_next_op_reads(frames, copy_op[dtoh], outer[dtoh])]] = "next_op"
    return out


def _next_op_reads(frames: TraceFrames, copy_op: np.ndarray, outer: np.ndarray) -> np.ndarray:
    """Per copy: True when one of the next ``_NEXT`` framework ops its thread runs after the
    copy's outermost op takes a tensor of the copy's destination shape and dtype."""
    host = frames.host
    op_pos = np.flatnonzero((host["kind"] == Kind.CPU_OP).to_numpy())
    ops = host.iloc[op_pos]
    shapes, types = _args(frames, host, np.concatenate([copy_op, op_pos]))
    dst = [_first(s, t) for s, t in zip(shapes[: len(copy_op)], types[: len(copy_op)])]
    op_shapes, op_types = shapes[len(copy_op) :], types[len(copy_op) :]
    # the ops of each thread by start, and where each copy's outermost op ends among them
    key = ukey(ops["rank"].to_numpy(), ops["tid"].to_numpy())
    order = np.lexsort((ops["start_ns"].to_numpy(), key))
    okey, ostart = key[order], ops["start_ns"].to_numpy()[order]
    end = (host["start_ns"].to_numpy() + host["dur_ns"].to_numpy())[outer]
    ckey = ukey(host["rank"].to_numpy()[outer], host["tid"].to_numpy()[outer])
    # position of (ckey, end) in the (key, start) order
    at = np.searchsorted(okey, ckey, side="left")
    hi = np.searchsorted(okey, ckey, side="right")
    found = np.zeros(len(copy_op), bool)
    for i in range(len(copy_op)):  # one bisection per blocking copy in the loop (a handful per step)
        if dst[i] is None:
            continue
        j = at[i] + np.searchsorted(ostart[at[i] : hi[i]], end[i], side="left")
        for k in order[j : min(j + _NEXT, hi[i])]:
            if _takes(op_shapes[k], op_types[k], dst[i]):
                found[i] = True
                break
    return found


def _args(frames: TraceFrames, host: pd.DataFrame, rows: np.ndarray) -> tuple[list, list]:
    """``input_shapes`` and ``input_types`` JSON of the given host rows (None when not recorded)."""
    ev = frames.trace.events
    if "input_shapes" not in ev.column_names or not len(rows):
        return [None] * len(rows), [None] * len(rows)
    keys = pa.array(ukey(host["rank"].to_numpy()[rows], host["event_id"].to_numpy()[rows]), pa.int64())
    at = lookup(
        ukey(ev["rank"].to_numpy(zero_copy_only=False), ev["event_id"].to_numpy(zero_copy_only=False)),
        keys.to_numpy(),
    )
    take = pa.array(np.maximum(at, 0), pa.int64())
    shapes = pc.take(ev["input_shapes"], take).to_pylist()
    types = pc.take(ev["input_types"], take).to_pylist() if "input_types" in ev.column_names else [None] * len(rows)
    missing = at < 0
    return [None if m else s for s, m in zip(shapes, missing)], [None if m else t for t, m in zip(types, missing)]


def _first(shapes: str | None, types: str | None) -> tuple[str, str] | None:
    try:
        s, t = json.loads(shapes or "null"), json.loads(types or "null")
    except ValueError:
        return None
    if not isinstance(s, list) or not isinstance(t, list) or not s or not t or not isinstance(s[0], list) or not s[0]:
        return None
    return json.dumps(s[0]), str(t[0])


def _takes(shapes: str | None, types: str | None, want: tuple[str, str]) -> bool:
    try:
        s, t = json.loads(shapes or "null"), json.loads(types or "null")
    except ValueError:
        return False
    if not isinstance(s, list) or not isinstance(t, list):
        return False
    return any(isinstance(x, list) and json.dumps(x) == want[0] and str(y) == want[1] for x, y in zip(s, t))
