"""Analyzers: pure functions from a ``Trace`` to metric tables and ``Finding``s.

``analyze(trace)`` computes every metric family (one module each: steps, breakdown, idle,
kernels, ops, source_lines, memory, launches, overlap) and runs every rule (``rules/``, one
module per family) once; the ``Analysis`` it returns is what every report and interface shows.
"""

from neuron_explorer.analyzers.analysis import ANALYSIS_SCHEMA_VERSION, Analysis, analyze
from neuron_explorer.analyzers.finding import SEVERITIES, Finding

__all__ = ["ANALYSIS_SCHEMA_VERSION", "SEVERITIES", "Analysis", "Finding", "analyze"]
