"""A small MLP training loop on whatever device ``torch.accelerator`` finds (else the CPU).

The bundled example for ``neuron-explorer record``: a few seconds on a laptop CPU, the same
code on CUDA, ROCm, XPU or Trainium (TorchNeuron registers ``neuron`` as the accelerator)::

    neuron-explorer record -o mlp.parquet -m neuron_explorer.examples.train_mlp --steps 8
    neuron-explorer info mlp.parquet

Every step is written as calls (modules, ``torch.nn.functional``, optimizer methods), each op
mapping to its exact line (operator expressions such as ``a @ b`` get theirs from the bytecode).
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F
from torch import nn


def pick_device() -> torch.device:
    """The current accelerator when there is one, else the CPU."""
    acc = getattr(torch, "accelerator", None)
    if acc is not None and acc.is_available():
        return acc.current_accelerator()
    return torch.device("cpu")


def make_model(width: int, depth: int, classes: int) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers.append(nn.Linear(width, width))
        layers.append(nn.GELU())
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


def make_batch(batch: int, width: int, classes: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    inputs = torch.randn(batch, width, device=device)
    targets = torch.randint(0, classes, (batch,), device=device)
    return inputs, targets


def train(steps: int, batch: int, width: int, depth: int, classes: int, device: torch.device) -> float:
    torch.manual_seed(0)
    model = make_model(width, depth, classes).to(device)
    # foreach=True: a few multi-tensor ops per step instead of ~11 per parameter tensor (the
    # default only on CUDA); fused=True is faster still where the device has it.
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    loss_value = float("nan")
    for _ in range(steps):
        inputs, targets = make_batch(batch, width, classes, device)
        logits = model(inputs)
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        loss_value = loss.item()
    return loss_value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--classes", type=int, default=10)
    args = parser.parse_args(argv)
    device = pick_device()
    loss = train(args.steps, args.batch, args.width, args.depth, args.classes, device)
    # a status line, so on stderr: `neuron-explorer demo | head` reads only the analysis
    print(f"trained {args.steps} steps on {device}: loss {loss:.4f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
