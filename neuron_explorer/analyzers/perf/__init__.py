"""Performance models: FLOPs and bytes per op from its recorded shapes, against the device's peaks.

``perf_tables(frames, device_spec)`` is what ``analyze`` calls: the op_perf table (one row per
op group: name + shapes + dtypes), the category table (device time per op category and how much
of it the models cover) and a summary (the device spec used, coverage, Neuron MFU/HFU/MBU).
Modules: ``shapes`` (argument parsing, dtypes), ``models_dense`` / ``models_memory`` (the FLOP
and byte formulas), ``models`` (dispatch, categories), ``devices`` (the peak table),
``op_perf`` (the vectorized table), ``summary``.

Imports ``core/`` only; ``metrics/`` and ``memory_live/`` are its independent siblings.
"""

from __future__ import annotations

from neuron_explorer.analyzers.perf.devices import DEVICES, DeviceSpec, detect, load_spec
from neuron_explorer.analyzers.perf.summary import perf_tables

__all__ = ["DEVICES", "DeviceSpec", "detect", "load_spec", "perf_tables"]
