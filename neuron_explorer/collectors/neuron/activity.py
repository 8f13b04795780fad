"""When the NeuronCore engines really worked: semaphore waits against the active-time table.

An engine that waits on a semaphore runs an instruction (``EVENT_SEMAPHORE``) for as long as
it waits: on a mostly idle core those waits cover almost the whole run. The export's own
active-time table (legacy ``active_time``, Parquet ``ActiveTime``) lists each engine's busy
intervals without them; its union per engine is the Summary's engine active time (confirmed on
real files). So engine active time comes from that table when present, and an instruction is a
*wait* when its opcode is a semaphore wait or, where the engine has active intervals, when less
than half of it lies inside them. Waits stay in the trace as annotations on their engine's
queue, never as compute. The active-time table itself is read by ``frames.active_intervals``.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

WAIT_OPCODE = re.compile(r"SEMAPHORE|^WAIT|_WAIT$|^SEM_", re.I)
#: Semaphore instructions that do work rather than wait: ``EVENT_SEMAPHORE_RANGE_CLEAR`` resets
#: a range of semaphores (seen on real files, inside the kernel). Never a wait, even outside the
#: active-time table. (SET/INC/DEC/RESET/SIGNAL are assumed to be the same kind.)
WORK_OPCODE = re.compile(
    r"SEMAPHORE_?RANGE_?CLEAR|_CLEAR$|_RESET$|_SET$|_INC(?:REMENT)?$|_DEC(?:REMENT)?$|SIGNAL", re.I
)
#: An instruction is a wait when less than this share of it lies inside its engine's active time.
MIN_ACTIVE_SHARE = 0.5


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > run_end[:-1]
    idx = np.nonzero(new)[0]
    return s[new], np.maximum.reduceat(run_end, idx)


def _covered_before(us: np.ndarray, ue: np.ndarray, t: np.ndarray) -> np.ndarray:
    lengths = np.concatenate([[0], np.cumsum(ue - us)])
    i = np.searchsorted(us, t, side="right")
    j = np.maximum(i - 1, 0)
    partial = np.clip(t - us[j], 0, (ue - us)[j])
    return np.where(i > 0, lengths[j] + partial, 0)


def mark_waits(ins: pd.DataFrame, active: pd.DataFrame) -> tuple[np.ndarray, bool]:
    """``is_wait`` of every instruction (vectorized per engine), and whether the active-time
    table lines up with the instructions at all.

    A table on another clock (or another run) would make every instruction look like a wait, so
    it is trusted only when at least half of the time of the instructions that are not
    semaphore waits by opcode lies inside it; otherwise waits are found by opcode alone.
    """
    opcode = ins["opcode"].astype(str)
    work_op = opcode.str.contains(WORK_OPCODE, na=False).to_numpy()
    wait = opcode.str.contains(WAIT_OPCODE, na=False).to_numpy() & ~work_op
    if not len(active) or not len(ins):
        return wait, True
    start = ins["start_ns"].to_numpy(np.int64)
    end = start + ins["dur_ns"].to_numpy(np.int64)
    inside = np.zeros(len(ins), np.int64)
    checked = np.zeros(len(ins), bool)
    for (engine, pcore), rows in active.groupby(["engine", "pcore"]):  # a few engines, not events
        mask = (ins["engine"].to_numpy() == engine) & (ins["pcore"].to_numpy() == pcore)
        if not mask.any():
            continue
        a0 = rows["start_ns"].to_numpy(np.int64)
        us, ue = _merged(a0, a0 + rows["dur_ns"].to_numpy(np.int64))
        inside[mask] = _covered_before(us, ue, end[mask]) - _covered_before(us, ue, start[mask])
        checked |= mask
    dur = end - start
    work = checked & ~wait
    if work.any() and inside[work].sum() < 0.5 * dur[work].sum():
        return wait, False
    outside = checked & (dur > 0) & (inside < MIN_ACTIVE_SHARE * dur) & ~work_op
    return wait | outside, True
