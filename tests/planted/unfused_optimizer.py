"""Planted: a deep model trained with the per-parameter for-loop optimizer (foreach=False)."""

from __future__ import annotations

from typing import Any

import torch


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 16) for _ in range(40)]
    model = torch.nn.Sequential(*layers)
    # PLANTED: the for-loop implementation issues several small ops per parameter tensor
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return {"model": model, "opt": opt, "x": torch.randn(8, 16)}


def step(s: dict[str, Any]) -> None:
    loss = s["model"](s["x"]).square().mean()
    s["opt"].zero_grad(set_to_none=True)
    loss.backward()
    s["opt"].step()
