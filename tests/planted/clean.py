"""A clean small MLP training loop: no planted bottleneck (the control every rule must pass)."""

from __future__ import annotations

from typing import Any

import torch


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    # big enough that each step is tens of milliseconds of real op work, so scheduler noise on a
    # shared machine cannot move its shares across a threshold
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    data = [(torch.randn(512, 512), torch.randint(0, 10, (512,))) for _ in range(4)]
    return {"model": model, "opt": opt, "data": data, "i": 0}


def step(s: dict[str, Any]) -> None:
    x, y = s["data"][s["i"] % len(s["data"])]
    s["i"] += 1
    loss = torch.nn.functional.cross_entropy(s["model"](x), y)
    s["opt"].zero_grad(set_to_none=True)
    loss.backward()
    s["opt"].step()
