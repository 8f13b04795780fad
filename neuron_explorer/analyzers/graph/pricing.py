"""Price edits by replay: the time each would save, alone and all together.

The saving of an edit is the summed wall time of every step window (every rank's window on a
trace without steps) in the baseline replay minus the same in the edited replay: what the
fix would take off the run, with everything that depends on the edited events moved (a
shorter kernel that nothing waits for saves nothing). The baseline replay reproduces the run
(``critical.replay_summary`` reports how well), so its error cancels out of the saving.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph.build import Graph, build_graph
from neuron_explorer.analyzers.graph.critical import BASELINE_TOLERANCE_PCT, _windows, baseline
from neuron_explorer.analyzers.graph.edits import Edits
from neuron_explorer.analyzers.graph.replay import Replay, edited_device_rows, replay


@dataclass
class Prices:
    """Savings (ns, summed over the step windows) of each edit alone and of all together."""

    savings: list[int]
    together_ns: int
    baseline_ns: int
    measured_ns: int
    baseline_error_pct: float
    rounds: list[int] = field(default_factory=list)

    @property
    def within_tolerance(self) -> bool:
        return abs(self.baseline_error_pct) <= BASELINE_TOLERANCE_PCT


def window_total(graph: Graph, rep: Replay) -> int:
    w = _windows(graph, rep)
    return int((w["replay_end"] - w["replay_start"]).sum())


def price(frames: TraceFrames, edits: list[Edits]) -> Prices:
    """The saving of each of ``edits`` alone and of their sum (raises ``AnalysisError`` when the
    trace has nothing to build a graph from)."""
    graph = build_graph(frames)
    _, base, measured = baseline(graph, frames)
    savings, rounds = [], []
    for e in edits:
        rep = replay(graph, e)
        savings.append(max(base - window_total(graph, rep), 0))
        rounds.append(rep.rounds)
    together = 0
    if edits:
        union = edits[0]
        for e in edits[1:]:
            union = union + e
        together = max(base - window_total(graph, replay(graph, union)), 0)
    error = 100.0 * (base - measured) / measured if measured else 0.0
    return Prices(savings, together, base, measured, error, rounds)


def device_work(frames: TraceFrames, edits: Edits) -> np.ndarray:
    """(rank, event id) keys of the device work whose duration ``edits`` change."""
    graph = build_graph(frames)
    rows = edited_device_rows(graph, edits)
    return graph.device_keys.to_numpy()[rows]
