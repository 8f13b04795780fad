"""Planted: every fourth step does slow periodic work (a blocking "checkpoint" write)."""

from __future__ import annotations

import time
from typing import Any

import torch


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    return {"model": model, "opt": opt, "x": torch.randn(32, 64), "i": 0}


def step(s: dict[str, Any]) -> None:
    s["i"] += 1
    loss = s["model"](s["x"]).square().mean()
    s["opt"].zero_grad(set_to_none=True)
    loss.backward()
    s["opt"].step()
    time.sleep(0.01)  # the steady part of the step
    if s["i"] % 4 == 0:
        time.sleep(0.15)  # PLANTED: a synchronous checkpoint every 4th step
STEPS = 6
