"""Renderers of a ``TraceDiff`` (``neuron-explorer diff``): one module per format.

``view.build`` turns the diff into display rows once; ``text``, ``markdown`` and ``html`` lay
them out, ``json`` writes the documented document (docs/diff.md).

Imports ``analyzers.diff`` (the ``TraceDiff``) and ``reports``' shared helpers; nothing above ``reports/``.
"""
