"""The six views of the TUI, one module per view (Ops and Kernels share ``explore``).

Each view reads ``tui.data`` and ``tui.tables``; the app (``tui.app``) imports the views, never the reverse.
"""
