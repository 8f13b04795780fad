"""Exact source lines beyond the profiler's own Python frames.

``operator_lines`` (with ``bytecode_flow`` and ``bytecode_ops``) places the ops that operator
syntax issues (``a @ b``, ``x[i]``) on their line from the function's bytecode;
``exact_lines`` is the run-time marker mode (``record --exact-lines``); ``inductor_provenance``
and ``compiled_lines`` map compiled kernels to the user lines they fuse.

Imports ``collectors/build/`` and the layers below it; never ``kineto/``, ``neuron/`` or
``capture/``, which use it.
"""
