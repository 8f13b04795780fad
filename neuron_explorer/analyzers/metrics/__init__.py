"""Metric tables, one module per family: steps, kernels, ops, launches, overlap, breakdown,
idle, memory, source lines and the Neuron summary.

Each is a pure function of ``TraceFrames`` (``analyzers.core``) to a DataFrame or a dict,
whole columns, no Python per event. They read ``core/``, ``trace/`` and ``environment`` (and
the Neuron model's table columns, ``collectors.neuron.model``), and each other where one
table is built on another; never ``perf/`` or ``memory_live/`` (their siblings of the same
layer), never the attribution, the graph or a rule, which read them.
"""
