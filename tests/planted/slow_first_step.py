"""Planted: the first profiled step pays a one-off cost (lazy cache build, autotuning-like work)."""

from __future__ import annotations

import time
from typing import Any

import torch

STEPS = 5


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    return {"model": model, "x": torch.randn(32, 64), "i": 0}


def step(s: dict[str, Any]) -> None:
    s["i"] += 1
    if s["i"] == 3:  # the first recorded step (after one unprofiled and one profiler warm-up step)
        time.sleep(0.3)  # PLANTED: one-off initialisation inside the training loop
    s["model"](s["x"]).square().mean().backward()
    time.sleep(0.01)
