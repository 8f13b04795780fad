"""What each block is for, from when it was allocated and freed: the phase of a training step.

The windows come from the host spans: the backward pass is the union of the autograd engine's
spans (``autograd::engine::evaluate_function: ...`` and every op linked to a forward op by
``fwd_id``), with the gaps between them closed when no other op starts in the gap; the
optimizer is the ``Optimizer.step#...`` annotations; the first step starts at the first
``ProfilerStep#N`` span. A block is then

- ``before_trace``: allocated before the trace began (its free is in the trace, or the offset);
- ``before_first_step``: allocated in the trace before the first step (parameters, buffers,
  optimizer state created up front, the input batch);
- ``gradients``: allocated in the backward pass and alive after that pass ended;
- ``optimizer_state``: allocated in the optimizer step and alive after it (momentum, Adam's
  moments on their first step);
- ``activations``: allocated outside the backward pass and freed inside a later one (saved for
  backward);
- ``temporaries``: freed in the phase (backward, optimizer) or, elsewhere, in the step that made
  them, before any backward pass;
- ``retained``: allocated in a step outside backward and optimizer, and alive after its step
  (kept by the program: outputs, inputs for the next step, caches, leaks).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import name_mask
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.intervals import merge_windows
from neuron_explorer.trace.schema import Kind

PHASES = (
    "before_trace",
    "before_first_step",
    "gradients",
    "optimizer_state",
    "activations",
    "temporaries",
    "retained",
)
_BACKWARD = "autograd::engine::evaluate_function"
_OPTIMIZER = "Optimizer.step#"


def backward_windows(frames: TraceFrames) -> pd.DataFrame:
    """rank, start_ns, end_ns of each backward pass."""
    host = frames.host
    is_op = (host["kind"] == Kind.CPU_OP).to_numpy()
    if not is_op.any():
        return _empty()
    # whole columns, no copy of the host frame: the engine's spans among the ops
    bwd = is_op & (
        name_mask(host["name"], predicate=lambda v: v.startswith(_BACKWARD)) | (host["fwd_id"].to_numpy() >= 0)
    )
    if not bwd.any():
        return _empty()
    rank_all = host["rank"].to_numpy(np.int64)
    start_all = host["start_ns"].to_numpy(np.int64)
    start = start_all[bwd]
    r, s, e = merge_windows(rank_all[bwd], start, start + host["dur_ns"].to_numpy(np.int64)[bwd])
    # close the gaps between engine spans in which no other op starts (the engine's own work)
    other = is_op & ~bwd
    keys_r, keys_t = rank_all[other], start_all[other]
    order = np.lexsort((keys_t, keys_r))
    keys_r, keys_t = keys_r[order], keys_t[order]
    same = r[1:] == r[:-1]
    lo = _search(keys_r, keys_t, r[:-1], e[:-1], "right")
    hi = _search(keys_r, keys_t, r[1:], s[1:], "left")
    join = same & (hi <= lo)
    new = np.r_[True, ~join]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.full(len(out_s), np.iinfo(np.int64).min, np.int64)  # (times may be negative: relative traces)
    np.maximum.at(out_e, group, e)
    return pd.DataFrame({"rank": r[new], "start_ns": out_s, "end_ns": out_e})


def optimizer_windows(frames: TraceFrames) -> pd.DataFrame:
    """rank, start_ns, end_ns of each ``Optimizer.step#`` span."""
    host = frames.host
    ann = host[(host["kind"] == Kind.ANNOTATION).to_numpy()]
    if not len(ann):
        return _empty()
    m = name_mask(ann["name"], predicate=lambda v: v.startswith(_OPTIMIZER))
    a = ann[m]
    if not len(a):
        return _empty()
    start = a["start_ns"].to_numpy(np.int64)
    r, s, e = merge_windows(a["rank"].to_numpy(np.int64), start, start + a["dur_ns"].to_numpy(np.int64))
    return pd.DataFrame({"rank": r, "start_ns": s, "end_ns": e})


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="int64") for c in ("rank", "start_ns", "end_ns")})


def _search(keys_r: np.ndarray, keys_t: np.ndarray, r: np.ndarray, t: np.ndarray, side: str) -> np.ndarray:
    """searchsorted on (rank, time) pairs sorted lexicographically."""
    if not len(keys_r):
        return np.zeros(len(t), np.int64)
    base = np.searchsorted(keys_r, r, "left")
    top = np.searchsorted(keys_r, r, "right")
    out = np.empty(len(t), np.int64)
    # ranks are a handful: one searchsorted per rank
    for rank in np.unique(r):
        m = r == rank
        b, tp = int(base[m][0]), int(top[m][0])
        out[m] = b + np.searchsorted(keys_t[b:tp], t[m], side)  # type: ignore[call-overload]
    return out


def _inside(windows: pd.DataFrame, rank: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index into ``windows`` of the window holding each (rank, t), -1 when none."""
    out = np.full(len(t), -1, np.int64)
    if not len(windows) or not len(t):
        return out
    wr = windows["rank"].to_numpy(np.int64)
    ws = windows["start_ns"].to_numpy(np.int64)
    we = windows["end_ns"].to_numpy(np.int64)
    order = np.lexsort((ws, wr))
    wr, ws, we = wr[order], ws[order], we[order]
    i = _search(wr, ws, rank, t, "right") - 1
    ok = (i >= 0) & (wr[np.maximum(i, 0)] == rank)
    ok &= (t >= ws[np.maximum(i, 0)]) & (t <= we[np.maximum(i, 0)])
    out[ok] = order[i[ok]]
    return out


def classify(blocks: pd.DataFrame, frames: TraceFrames) -> np.ndarray:
    """The phase (an index into ``PHASES``) of every block of ``pair_blocks``."""
    n = len(blocks)
    phase = np.full(n, PHASES.index("temporaries"), np.int8)
    if not n:
        return phase
    rank = blocks["rank"].to_numpy(np.int64)
    a = blocks["alloc_ns"].to_numpy(np.int64)
    f = blocks["free_ns"].to_numpy(np.int64)
    never = blocks["free_row"].to_numpy() < 0
    bw = frames.memo("memory_live.backward", lambda: backward_windows(frames))
    opt = frames.memo("memory_live.optimizer", lambda: optimizer_windows(frames))
    w = frames.step_windows
    has_steps = frames.has_steps
    a_bwd = _inside(bw, rank, a)
    f_bwd = _inside(bw, rank, np.where(never, a, f))
    a_opt = _inside(opt, rank, a)
    bw_s, bw_e = bw["start_ns"].to_numpy(np.int64), bw["end_ns"].to_numpy(np.int64)
    op_e = opt["end_ns"].to_numpy(np.int64)

    # the end of the allocating step (the trace's end without steps)
    step_end = np.full(n, np.iinfo(np.int64).max, np.int64)
    first_start = np.full(n, np.iinfo(np.int64).min, np.int64)
    if has_steps and len(w):
        idx = _inside(w, rank, a)
        step_end = np.where(idx >= 0, w["end_ns"].to_numpy(np.int64)[np.maximum(idx, 0)], step_end)
        firsts = w.groupby("rank")["start_ns"].min()
        first_start = pd.Series(rank).map(firsts).fillna(np.iinfo(np.int64).min).to_numpy(np.int64)

    activ = ~never & (f_bwd >= 0) & (a_bwd < 0) & (bw_s[np.maximum(f_bwd, 0)] >= a) if len(bw) else np.zeros(n, bool)
    outlives_step = never | (f > step_end)
    phase[outlives_step] = PHASES.index("retained")
    phase[activ] = PHASES.index("activations")
    if len(opt):
        in_opt = a_opt >= 0
        kept = never[in_opt] | (f[in_opt] > op_e[a_opt[in_opt]])
        phase[in_opt] = np.where(kept, PHASES.index("optimizer_state"), PHASES.index("temporaries"))
    if len(bw):
        in_bwd = a_bwd >= 0
        kept = never[in_bwd] | (f[in_bwd] > bw_e[a_bwd[in_bwd]])
        phase[in_bwd] = np.where(kept, PHASES.index("gradients"), PHASES.index("temporaries"))
    phase[a < first_start] = PHASES.index("before_first_step")
    phase[blocks["alloc_row"].to_numpy() < 0] = PHASES.index("before_trace")
    return phase
