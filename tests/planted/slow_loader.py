"""Planted: a data loader that sleeps (I/O-bound input pipeline) in front of a small model."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(0.01)  # PLANTED: slow storage / decoding
        return torch.randn(64), torch.tensor(i % 10)


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    loader = iter(DataLoader(SlowDataset(), batch_size=4, num_workers=0))
    return {"model": model, "opt": opt, "loader": loader}


def step(s: dict[str, Any]) -> None:
    x, y = next(s["loader"])  # the loader is the bottleneck
    loss = torch.nn.functional.cross_entropy(s["model"](x), y)
    s["opt"].zero_grad(set_to_none=True)
    loss.backward()
    s["opt"].step()
