"""The trailing partial step: the span after the last step boundary that is not a step.

``ProfilerStep#N`` spans run from one ``prof.step()`` to the next; the profiler also opens one
after the last call, which lasts until the profiler stops (a loop of 6 iterations gives 7 spans,
the last a fraction of a step: ``neuron-explorer record`` ends a step at every optimizer step,
so the tail after the last one is such a span). Counted as a step it drags every per-step mean
down and is flagged as an outlier step.

The last span is such a tail when every earlier step holds a step marker (an ``Optimizer.step#``
span) and it holds none: it has no step's work, whatever its length (a stalled process can make
a tail of a few hundred microseconds last longer than a short step). On traces without markers,
when it is under half the shortest of at least three earlier steps.
"""

from __future__ import annotations

import re

import numpy as np

#: Events that mark a training step's own work: an optimizer step.
STEP_MARKER = re.compile(r"^Optimizer\.step#")
#: Without markers, a tail is under this share of the shortest full step.
UNMARKED_TAIL_SHARE = 0.5
#: ... and only after this many full steps.
MIN_FULL_STEPS_UNMARKED = 3


def trailing_partial_step(
    numbers: np.ndarray, start: np.ndarray, dur: np.ndarray, marker_start: np.ndarray
) -> int | None:
    """The step number of the trailing partial step among step spans (``numbers``, ``start``,
    ``dur``, one entry per span; a step recorded on two threads has two), or None.
    ``marker_start``: start times of the step-marker events (``STEP_MARKER``)."""
    uniq, inv = np.unique(numbers, return_inverse=True)
    if uniq.size < 2:
        return None
    s0 = np.full(uniq.size, np.iinfo(np.int64).max)
    np.minimum.at(s0, inv, start)
    d = np.zeros(uniq.size, np.int64)
    np.maximum.at(d, inv, dur)
    order = np.argsort(s0, kind="stable")
    s0, d, uniq = s0[order], d[order], uniq[order]
    shortest_full = int(d[:-1].min())
    if marker_start.size:
        idx = np.searchsorted(s0, marker_start, side="right") - 1
        inside = (idx >= 0) & (marker_start < (s0 + d)[np.maximum(idx, 0)])
        counts = np.bincount(idx[inside], minlength=uniq.size)
        if (counts[:-1] > 0).all():
            return int(uniq[-1]) if counts[-1] == 0 else None
    # without markers only a clear outlier among several full steps: with one or two, a short
    # last step is as likely a scheduled cycle's fastest one
    if uniq.size - 1 < MIN_FULL_STEPS_UNMARKED:
        return None
    return int(uniq[-1]) if d[-1] < UNMARKED_TAIL_SHARE * shortest_full else None
