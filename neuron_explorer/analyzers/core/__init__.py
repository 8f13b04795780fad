"""The core every analyzer reads: ``TraceFrames`` (``context``) and everything it caches.

``context`` extracts the column views of a trace once (device events, host spans, steps,
memory) and caches what several analyzers derive from them: the launch join, host self time,
kernel categories, the run kind. Beside it: ``columns`` (keys, codes, look-ups, name masks),
``intervals`` (unions and clipping to step windows), ``hardware`` (what the trace says of the
device), ``run_kind`` (training or inference) and ``kernel_names`` (what a kernel's name says).

The ground floor of ``analyzers/``: it imports ``trace/`` only, never another package of
``analyzers/`` (tests/unit/test_layers.py).
"""
