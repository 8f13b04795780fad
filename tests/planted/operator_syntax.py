"""Planted: operator syntax in every shape the bytecode matcher must handle (or must refuse).

Each ``# LINE:<name>`` marks a line whose ops come from operator syntax only (no Python call
of their own). Straight-line code, loops, branches, comprehensions, generators, subscript
stores, in-place operators, tensor truthiness, calls of types (``float(t)``), ``try``: the tests
record this twice, plainly and in the exact-lines mode, and check that every op the bytecode
places on a line is on the line the exact mode names.
"""

from __future__ import annotations

from typing import Any

import torch


def setup() -> dict[str, Any]:
    torch.manual_seed(0)
    return {
        "a": torch.randn(16, 16),
        "b": torch.randn(16, 16),
        "v": torch.randn(16),
        "w": [torch.randn(16) for _ in range(4)],
        "flag": True,
    }


def straight(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    s = (a @ b.transpose(0, 1)) * 0.25  # LINE:straight_matmul
    s = s.softmax(dim=-1)
    y = s @ b  # LINE:straight_context
    return a + y  # LINE:straight_residual


def loop(a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(16)
    for i in range(8):
        acc = acc + a[i] * v  # LINE:loop_body
    return acc * 0.5  # LINE:loop_after


def branches(a: torch.Tensor, b: torch.Tensor, flag: bool) -> torch.Tensor:
    if flag:  # noqa: SIM108 (two statements on two lines: the matcher must not guess between them)
        y = a * b
    else:
        y = a - b
    y = -y  # LINE:negate
    if (y > 0).any():  # a C call, then a truthiness test of its result
        y = y + 1
    return y


def stores(a: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    x = a.clone()
    x[0] = 1.0  # LINE:store_row
    x[:, 1] += v  # LINE:store_column
    x *= 2  # LINE:inplace
    m = x > 0  # LINE:compare
    return x[~m]  # LINE:mask


def comprehension(w: list[torch.Tensor], v: torch.Tensor) -> list[torch.Tensor]:
    return [t * v for t in w]  # LINE:comprehension


def generator(w: list[torch.Tensor]) -> Any:
    for t in w:
        yield t + 1  # LINE:generator


def scalars(a: torch.Tensor) -> float:
    total = float(a[0, 0])  # LINE:float_call
    n = int(a.shape[0])
    while total < 3.0 and n > 0:
        total += float(a[n - 1, 0].abs())
        n -= 1
    return total


def guarded(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    try:
        y = a.T @ b  # LINE:transpose_matmul
    except RuntimeError:
        y = a
    return y


def step(s: dict[str, Any]) -> None:
    a, b, v = s["a"], s["b"], s["v"]
    y = straight(a, b)
    y = y + loop(a, v)[None, :]  # LINE:broadcast_add
    y = branches(y, b, s["flag"])
    y = stores(y, v)
    parts = comprehension(s["w"], v)
    parts += list(generator(s["w"]))
    total = scalars(a) + float(sum(p.sum() for p in parts))
    guarded(a, b)
    s["total"] = total
