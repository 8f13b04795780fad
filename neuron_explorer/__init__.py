"""Neuron Explorer: a torch.profiler extension and bottleneck analyzer for every accelerator.

Public API: ``profile()`` (capture, needs torch), ``load()`` (read any trace), ``Trace``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from neuron_explorer.collectors.load import load
from neuron_explorer.trace import Trace

__all__ = ["Trace", "__version__", "load", "profile"]


def __getattr__(name: str):  # torch is imported only when capture is used
    if name == "profile":
        from neuron_explorer.collectors.capture.torch_profiler import profile

        return profile
    raise AttributeError(name)
