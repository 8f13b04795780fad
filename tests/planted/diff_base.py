"""Planted for ``diff``: a small MLP training loop, the base of a diff pair (run it with
``neuron-explorer record``; each optimizer.step() ends a profiler step). ``diff_item.py`` is
the same program with one line added: a per-sample ``.item()`` in the step."""

from __future__ import annotations

import sys

import torch


def main(steps: int) -> None:
    torch.set_num_threads(1)  # the test machine is shared: intra-op threads only add noise
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 256), torch.randint(0, 10, (256,))
    for _ in range(steps):
        logits = model(x)
        per_sample = torch.nn.functional.cross_entropy(logits, y, reduction="none")
        loss = per_sample.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
