"""Everything that makes a ``Trace``: live capture, import of Kineto JSON and Neuron exports.

- ``build/``: the one builder every reader hands its rows to (``RawEvents`` -> ``Trace``), with
  the user-code policy and the source attribution it applies;
- ``lines/``: exact source lines beyond the profiler's own frames (operator syntax from
  bytecode, exact-lines markers, compiled kernels from Inductor's provenance);
- ``kineto/``: Kineto / Chrome trace JSON import (decode, check, spool out of core, run dirs);
- ``neuron/``: Neuron (Trainium / Inferentia) profiles (read, normalize, join);
- ``capture/``: live capture with torch.profiler (``profile()``, conversion, fallback);
- ``load.py``: open any input as a ``Trace``.

Layers, from the ground up: ``build/`` < ``lines/``, ``kineto/``, ``neuron/`` (independent of
each other) < ``capture/`` < ``load.py``. The package imports ``trace/``, ``version``,
``environment`` and ``parallel``, never ``analyzers/`` or anything above
(tests/unit/test_layers.py).
"""
