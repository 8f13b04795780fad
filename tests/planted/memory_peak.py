"""Planted: a step with a known memory peak. Three buffers of known sizes are alive together,
each made on its own line (marked ``PEAK_A``, ``PEAK_B``, ``PEAK_C``), then freed; the tests
compute the live set at the peak, by line, from these shapes."""

from __future__ import annotations

from typing import Any

import torch

#: (rows, columns) of the float32 buffer each marked line allocates
SHAPES = {"PEAK_A": (1024, 256), "PEAK_B": (2048, 256), "PEAK_C": (512, 1024)}
STEPS = 4


def setup() -> dict[str, Any]:
    return {"total": 0.0}


def step(s: dict[str, Any]) -> None:
    a = torch.zeros(1024, 256)  # PEAK_A
    b = torch.zeros(2048, 256)  # PEAK_B
    c = torch.ones(512, 1024)  # PEAK_C
    s["total"] += float(a.sum()) + float(b.sum()) + float(c.sum())
    del a, b, c
