"""Analyzers: pure functions from a ``Trace`` to metric tables and ``Finding``s.

``analyze(trace)`` computes every metric family (one module each: steps, breakdown, idle,
kernels, ops, source_lines, memory, launches, overlap) and runs every rule (``rules/``, one
module per family) once; the ``Analysis`` it returns is what every report and interface shows.

Inside, from the ground up: ``core/`` < ``metrics/``, ``perf/``, ``memory_live/`` <
``attribution/`` < ``ranks/`` < ``graph/`` < ``finding`` < ``result``, ``ledger``, ``verdict`` <
``rules/`` < ``analysis`` < ``diff/``, ``sweep``; ``fields`` imports nothing. A module imports
only from its own layer's unit or below it (docs/architecture.md, tests/unit/test_layers.py),
and no module here imports this face.
"""

from neuron_explorer.analyzers.analysis import analyze
from neuron_explorer.analyzers.finding import SEVERITIES, Finding
from neuron_explorer.analyzers.result import ANALYSIS_SCHEMA_VERSION, Analysis

__all__ = ["ANALYSIS_SCHEMA_VERSION", "SEVERITIES", "Analysis", "Finding", "analyze"]
