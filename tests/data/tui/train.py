"""A tiny training script: the TUI tests' trace attributes its events to these lines."""

import torch


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(1024, 1024)

    def forward(self, x):
        y = self.linear(x)
        return torch.relu(y)


def train_step(model, x):
    loss = model(x).sum()
    loss.backward()
