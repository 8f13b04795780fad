"""Planted: a torch.compile'd step whose body breaks the graph (a print of a tensor value)."""

from __future__ import annotations

from typing import Any

import torch


def body(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    h = model[0](x).relu()
    if h.sum().item() > 1e9:  # PLANTED: data-dependent Python branch = graph break
        print("large activations")
    return model[1](h).square().mean()


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 1))
    # aot_eager: the real dynamo/aot-autograd path, without needing a C++ compiler for inductor
    fn = torch.compile(body, backend="aot_eager")
    return {"model": model, "fn": fn, "x": torch.randn(16, 32)}


def step(s: dict[str, Any]) -> None:
    loss = s["fn"](s["model"], s["x"])
    loss.backward()
