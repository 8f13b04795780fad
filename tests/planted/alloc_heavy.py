"""Planted: a step that allocates and frees large temporaries over and over (allocation churn)."""

from __future__ import annotations

from typing import Any

import torch


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256)
    return {"model": model, "x": torch.randn(64, 256)}


def step(s: dict[str, Any]) -> None:
    x = s["x"]
    for _ in range(300):
        tmp = torch.empty(512, 1024)  # PLANTED: a fresh 2 MiB buffer every iteration
        tmp.fill_(1.0)
        x = x + tmp[:64, :256]
    s["model"](x).sum().backward()
