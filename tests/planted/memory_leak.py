"""Planted: a training step that keeps each step's activations in a list (a memory leak).

``kept`` grows by one ``BATCH x HIDDEN`` float32 tensor per step: the ReLU output of the first
layer, which the list holds after the step is over. Tests compute the leak from these sizes.
"""

from __future__ import annotations

from typing import Any

import torch

BATCH = 256
HIDDEN = 1024
IN_FEATURES = 512
STEPS = 6
#: Bytes the planted line leaves alive per step (float32).
LEAK_BYTES_PER_STEP = BATCH * HIDDEN * 4


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    fc1 = torch.nn.Linear(IN_FEATURES, HIDDEN)
    fc2 = torch.nn.Linear(HIDDEN, 10)
    params = [*fc1.parameters(), *fc2.parameters()]
    opt = torch.optim.SGD(params, lr=0.01)
    x = torch.randn(BATCH, IN_FEATURES)
    y = torch.randint(0, 10, (BATCH,))
    return {"fc1": fc1, "fc2": fc2, "opt": opt, "x": x, "y": y, "kept": []}


def step(s: dict[str, Any]) -> None:
    s["kept"].append(torch.relu(s["fc1"](s["x"])))  # PLANTED: the list keeps every step's activations
    loss = torch.nn.functional.cross_entropy(s["fc2"](s["kept"][-1]), s["y"])
    s["opt"].zero_grad(set_to_none=True)
    loss.backward()
    s["opt"].step()
