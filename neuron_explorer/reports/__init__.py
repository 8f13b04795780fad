"""Renderers of an analysis: text, markdown, JSON, Parquet metrics, Chrome trace and HTML.

One module per format (``text``, ``markdown``, ``json_report``, ``metrics_parquet``,
``chrome_trace``, ``html/``, ``diff/``), with what they share: ``fit`` (text that fits its
width), ``location`` (source lines as people read them), ``names`` (kernel names), ``fixes``,
``colors``. Renderers build their data first and render second; they compute nothing the
analyzers own.

Imports ``analyzers/``, ``collectors/`` and ``trace/``; never ``tui/``, ``agents/`` or
``cli/``, which present what it renders.
"""
