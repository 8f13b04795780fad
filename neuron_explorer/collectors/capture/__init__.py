"""Live capture with torch.profiler: ``profile()`` and what turns its results into a trace.

``torch_profiler`` holds ``profile()`` (what ``neuron_explorer.profile`` and ``record`` run);
``capture_convert`` converts the results in memory (``capture_fallback`` through torch's JSON
export where the records cannot be read column by column); ``capture_tree`` walks torch's
event tree for the exact lines and ``tree_columns`` makes columns of it; ``capture_output``
writes the files; ``compile_watch`` keeps torch.compile's own work out of the call tree;
``inferred_steps`` finds steps in a run without ``prof.step()``.

The top of ``collectors/`` below ``load.py``: it may import ``build/``, ``lines/`` and
``kineto/``, and torch only inside functions (plain analysis never needs torch).
"""
