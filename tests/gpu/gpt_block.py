"""A GPT-style block in plain PyTorch, trained for a few steps: the GPU checks' workload.

    python tests/gpu/gpt_block.py [--steps N] [--mode eager|compile|graph] [--device cuda|cpu]

Attention is written with operator syntax (``@``, ``*``, ``+``, indexing), so an op on one of
the marked lines (``# LINE:<name>``) has no Python call of its own: the checks read the marks
to know which line each op must carry. ``--mode compile`` trains the block under
``torch.compile`` (steps end at the optimizer step); ``--mode graph`` captures the forward pass
of the block (inference) once into a CUDA graph and replays it each step.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

B, T, C, H = 8, 256, 512, 8


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(C)
        self.qkv = torch.nn.Linear(C, 3 * C)
        self.proj = torch.nn.Linear(C, C)
        self.ln2 = torch.nn.LayerNorm(C)
        self.fc = torch.nn.Linear(C, 4 * C)
        self.out = torch.nn.Linear(4 * C, C)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))  # LINE:scores
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))  # LINE:mask
        att = F.softmax(att, dim=-1)
        y = att @ v  # LINE:context
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))  # LINE:residual1
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))  # LINE:residual2
        return x


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--mode", choices=["eager", "compile", "graph"], default="eager")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    dev = torch.device(args.device)
    block = Block().to(dev)
    x = torch.randn(B, T, C, device=dev)
    if args.mode == "graph":
        block.eval()
        static_x = x.clone()
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):  # warm up on a side stream before capture, as torch's docs ask
                    block(static_x)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_y = block(static_x)  # LINE:capture
            for _ in range(args.steps):
                static_x.copy_(x)
                graph.replay()  # LINE:replay
                float(static_y[0, 0, 0])  # LINE:readback
        return
    model = torch.compile(block) if args.mode == "compile" else block
    opt = torch.optim.AdamW(block.parameters(), lr=1e-4)
    target = torch.randn(B, T, C, device=dev)
    for _ in range(args.steps):
        y = model(x)  # LINE:forward
        loss = F.mse_loss(y, target)
        loss.backward()  # LINE:backward
        opt.step()
        opt.zero_grad(set_to_none=True)
    if dev.type == "cuda":
        torch.cuda.synchronize()


if __name__ == "__main__":
    main()
