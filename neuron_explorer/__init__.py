"""Neuron Explorer: a torch.profiler extension and bottleneck analyzer for every accelerator.

Public API: ``profile()`` (capture, needs torch), ``load()`` (read any trace), ``Trace``.

The face stands above everything it exports: it imports ``collectors/``, ``trace/`` and
``version``, and no module of the package imports it (tests/unit/test_layers.py).
"""

from __future__ import annotations

from neuron_explorer.collectors.load import load
from neuron_explorer.trace import Trace
from neuron_explorer.version import __version__

__all__ = ["Trace", "__version__", "load", "profile"]


def __getattr__(name: str):  # torch is imported only when capture is used
    if name == "profile":
        from neuron_explorer.collectors.capture.torch_profiler import profile

        return profile
    raise AttributeError(name)
