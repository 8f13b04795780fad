"""Is the traced run training or inference? Decided once, from the events; every rule's advice
asks it, so a trace of steady inference never gets training advice (fused optimizers,
GradScaler, activation checkpointing, DDP bucketing, ``no_sync()``).

Training shows in the trace as a backward pass (the autograd engine's
``autograd::engine::evaluate_function: ...`` spans, ``*Backward*`` ops, or ops linked to a
forward op by ``fwd_id``) or as an optimizer step (``Optimizer.step#...`` annotations, which
``torch.optim`` records for every step). A trace with neither is inference (or evaluation).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from neuron_explorer.analyzers.core.columns import name_mask
from neuron_explorer.trace.schema import Kind

BACKWARD_OPS = r"^autograd::engine::evaluate_function|Backward\d*\b"
OPTIMIZER_STEP = r"^Optimizer\.step#"


@dataclass(frozen=True)
class RunKind:
    """What the trace shows of training: backward ops and optimizer steps counted."""

    backward_ops: int
    optimizer_steps: int

    @property
    def training(self) -> bool:
        return self.backward_ops > 0 or self.optimizer_steps > 0

    @property
    def label(self) -> str:
        return "training" if self.training else "inference"

    @property
    def evidence(self) -> str:
        """``"no backward pass or optimizer step in the trace"``, or what was seen."""
        if not self.training:
            return "no backward pass or optimizer step in the trace"
        return f"{self.backward_ops} backward ops, {self.optimizer_steps} optimizer step spans"


def run_kind_of(host: pd.DataFrame) -> RunKind:
    """Count the backward ops and optimizer step spans among a trace's host spans
    (``TraceFrames.host``; whole columns)."""
    if not len(host):
        return RunKind(0, 0)
    is_op = (host["kind"] == Kind.CPU_OP).to_numpy()
    fwd = pd.to_numeric(host["fwd_id"], errors="coerce").fillna(-1).to_numpy() if "fwd_id" in host else -1
    backward = is_op & (name_mask(host["name"], BACKWARD_OPS) | (fwd >= 0))
    optimizer = name_mask(host["name"], OPTIMIZER_STEP)
    return RunKind(int(backward.sum()), int(optimizer.sum()))
