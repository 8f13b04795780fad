"""Planted-bottleneck workloads: small CPU training loops, each with one known problem."""
