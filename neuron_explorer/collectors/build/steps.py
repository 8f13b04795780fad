"""Which training step each event belongs to, from the ``ProfilerStep#N`` spans.

A host event is in the step span that holds its start (the latest started first); device work
is in the step its op (else its launch) was in, not where it ran; a step span has its own
number. The trailing partial step (``step_tail``) is demoted to a plain annotation first and
reported in the trace metadata (``dropped_steps``). Both builds use ``trailing_step`` and
``StepTimes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_explorer.collectors.build.event_columns import _INT32_MAX
from neuron_explorer.collectors.build.event_kinds import _STEP_NAME, _Words
from neuron_explorer.collectors.build.raw_events import K
from neuron_explorer.collectors.build.step_tail import STEP_MARKER, trailing_partial_step
from neuron_explorer.trace.schema import Kind


def _drop_trailing_step(kind: np.ndarray, name: _Words, start: np.ndarray, dur: np.ndarray) -> list[dict[str, Any]]:
    """Demote the trailing partial ``ProfilerStep#N`` span (if any) to an annotation, in place;
    returns what was dropped, for the trace metadata (``dropped_steps``)."""
    step_rows = np.nonzero(kind == K[Kind.STEP])[0]
    markers = np.nonzero(name.test(STEP_MARKER.match))[0]
    tail, dropped = trailing_step(name.values(step_rows), start[step_rows], dur[step_rows], start[markers])
    kind[step_rows[tail]] = K[Kind.ANNOTATION]
    return dropped


def trailing_step(
    names: list[str], start: np.ndarray, dur: np.ndarray, marker_start: np.ndarray
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Of the step spans (``ProfilerStep#N`` names, starts, durations, in event order; the
    start of every step-marker event), which are the trailing partial step (``step_tail``),
    and the ``dropped_steps`` metadata entry for it (both builds use this)."""
    none = np.zeros(len(names), bool)
    if len(names) < 2:
        return none, []
    parsed = [int(_STEP_NAME.match(nm).group(1)) for nm in names]  # type: ignore[union-attr]
    if not all(0 <= x < 2**31 for x in parsed):
        return none, []  # step numbers past int32 are repaired with the step column (see _assign_steps)
    numbers = np.array(parsed, np.int64)
    tail = trailing_partial_step(numbers, start, dur, marker_start)
    if tail is None:
        return none, []
    rows = numbers == tail
    return rows, [{"step": tail, "dur_ns": int(dur[rows].max()), "reason": "trailing partial step"}]


class StepTimes:
    """Which step span (latest start first) holds each instant (``_assign_steps``'s rule)."""

    def __init__(self, start: np.ndarray, dur: np.ndarray, numbers: np.ndarray) -> None:
        self.order = np.argsort(start, kind="stable")
        self.s0, self.s1, self.numbers = start[self.order], (start + dur)[self.order], numbers[self.order]

    def by_time(self, t: np.ndarray) -> np.ndarray:
        if self.s0.size == 0:
            return np.full(len(t), -1, np.int64)
        idx = np.searchsorted(self.s0, t, side="right") - 1
        ok = (idx >= 0) & (t < self.s1[np.maximum(idx, 0)])
        return np.where(ok, self.numbers[np.maximum(idx, 0)], -1)


def _assign_steps(
    kind: np.ndarray,
    name: _Words,
    start: np.ndarray,
    dur: np.ndarray,
    op: np.ndarray,
    launch: np.ndarray,
    on_device: np.ndarray,
) -> np.ndarray:
    n = len(kind)
    step = np.full(n, -1, np.int64)
    step_rows = np.nonzero(kind == K[Kind.STEP])[0]
    if step_rows.size == 0:
        return step
    names = name.values(step_rows)
    # (A step number beyond int64 is kept as -1 here; beyond int32 is nulled by the caller.)
    numbers = np.array([_step_number(nm) for nm in names], np.int64)
    by_time = StepTimes(start[step_rows], dur[step_rows], numbers).by_time(start)
    step = np.where(~on_device, by_time, -1)
    step[step_rows] = numbers
    # Device work belongs to the step its launch (or op) happened in, not where it ran.
    dev_step = np.where(op >= 0, step[np.maximum(op, 0)], -1)
    dev_step = np.where((dev_step < 0) & (launch >= 0), step[np.maximum(launch, 0)], dev_step)
    dev_step = np.where(dev_step < 0, by_time, dev_step)
    step = np.where(on_device, dev_step, step)
    return step


def _step_number(name: str) -> int:
    number = int(_STEP_NAME.match(name).group(1))  # type: ignore[union-attr]
    return number if number <= _INT32_MAX else _INT32_MAX + 1
