"""The six views of the TUI, one module per view (Ops and Kernels share ``explore``)."""
