"""Planted: pure-Python preprocessing (a per-element loop) dominating each step."""

from __future__ import annotations

from typing import Any

import torch


def normalize_rows(rows: list[list[float]]) -> list[list[float]]:
    out = []
    for row in rows:  # PLANTED: per-element Python arithmetic instead of tensor ops
        total = 0.0
        for v in row:
            total += v * v
        norm = total ** 0.5 or 1.0
        out.append([v / norm for v in row])
    return out


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    rows = torch.randn(2048, 64).tolist()
    return {"model": model, "opt": opt, "rows": rows}


def step(s: dict[str, Any]) -> None:
    x = torch.tensor(normalize_rows(s["rows"]))
    y = torch.zeros(len(x), dtype=torch.long)
    loss = torch.nn.functional.cross_entropy(s["model"](x), y)
    s["opt"].zero_grad(set_to_none=True)
    loss.backward()
    s["opt"].step()
