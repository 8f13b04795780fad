"""The dependency graph of a run, its replay, the critical path of each step, and what-if edits.

This package owns the causal model of a trace (DESIGN.md, "How analyzers reason"): which event
could not start before which other one finished. Rules and reports read it; it never reads a
rule.

- ``build``: the graph of one trace, per rank: host threads as chains of segments (the
  innermost event at each instant, untraced gaps included), device streams as chains of their
  work, launch -> device work, device work -> the synchronizing call that waits for it, and
  cross-stream waits (``cudaStreamWaitEvent`` after ``cudaEventRecord``, from Kineto's
  ``cuda_sync`` records). Every edge carries a delay: its modelled latency plus, on the edge
  that bound its target, the measured gap nothing recorded explains (``unexplained_ns``), so
  replaying the unmodified graph reproduces the run.
- ``replay``: node start = max over predecessors (predecessor end + edge delay), durations as
  measured or edited (``Edits``: scale or remove events by name).
- ``critical``: per step (or per rank without steps) the chain that sets its end, its
  composition by category / op / kernel / source line, and the replay summary (baseline error,
  unexplained share, projected time).

Imports ``ranks/``, ``attribution/`` and ``core/``; inside, ``nodes`` (what a
node is) is below every other module. The Finding, the ledger and the rules read it (they
price by replay); it never reads them.
"""

from __future__ import annotations

from neuron_explorer.analyzers.graph.build import Graph, build_graph
from neuron_explorer.analyzers.graph.critical import critical_path_table, replay_summary, whatif
from neuron_explorer.analyzers.graph.edits import Edits, EventEdit
from neuron_explorer.analyzers.graph.replay import Replay, replay

__all__ = [
    "Edits",
    "EventEdit",
    "Graph",
    "Replay",
    "build_graph",
    "critical_path_table",
    "replay",
    "replay_summary",
    "whatif",
]
