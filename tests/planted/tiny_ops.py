"""Planted: a loop of thousands of tiny tensor ops per step (dispatch-bound, unvectorized)."""

from __future__ import annotations

from typing import Any

import torch


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    return {"w": torch.randn(8, requires_grad=False), "x": torch.randn(1200, 8)}


def step(s: dict[str, Any]) -> None:
    acc = torch.zeros(8)
    for i in range(1200):  # PLANTED: one tiny op per row instead of one matmul
        acc = acc + s["x"][i] * s["w"]  # LINE:tiny_ops (operator syntax only)
    s["w"] = s["w"] - 1e-6 * acc
