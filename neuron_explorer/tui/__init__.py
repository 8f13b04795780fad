"""The terminal UI: a Textual app over one trace and its analysis.

``TraceSource`` (``tui.data``) is the injected data source; ``ExplorerApp`` (``tui.app``) the
app; the views live in ``tui.views``, styling in ``explorer.tcss``. Import ``ExplorerApp`` from
``neuron_explorer.tui.app`` (Textual loads only when the TUI is used).

Imports ``reports/``, ``analyzers/``, ``collectors/`` and ``trace/``; never ``agents/`` or
``cli/``.
"""
