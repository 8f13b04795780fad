"""Optimizer rules: per-parameter (unfused) optimizer steps."""

from __future__ import annotations

import numpy as np

from neuron_explorer.analyzers.context import name_mask
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.intervals import clip_to_windows, merge_windows
from neuron_explorer.analyzers.rules._evidence import lines_from, ms, ranges
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.schema import Kind


@rule(
    "unfused_optimizer",
    family="optimizer",
    title="Unfused optimizer step",
    thresholds={"min_ops_per_step": (50.0, "ops/optimizer step")},
)
def unfused_optimizer(ctx: RuleContext) -> list[Finding]:
    """``optimizer.step()`` runs one small op per parameter tensor (more than ``min_ops_per_step``
    per step and no ``_foreach_``/``_fused_`` op): the for-loop implementation."""
    host = ctx.frames.host
    steps = host[name_mask(host["name"], "^Optimizer\\.step#")]
    if not len(steps):
        raise RuleSkipped("skipped: needs optimizer step annotations (Optimizer.step#...)")
    ops = host[(host["kind"] == Kind.CPU_OP).to_numpy()]
    wr, ws, we = merge_windows(
        steps["rank"].to_numpy(), steps["start_ns"].to_numpy(), (steps["start_ns"] + steps["dur_ns"]).to_numpy()
    )
    rows, _, _, _ = clip_to_windows(
        ops["rank"].to_numpy(), ops["start_ns"].to_numpy(), (ops["start_ns"] + ops["dur_ns"]).to_numpy(), wr, ws, we
    )
    inside = ops.iloc[np.unique(rows)]
    fused = bool(name_mask(inside["name"], "_foreach_|_fused_").any())
    ids = set(inside["event_id"].tolist())
    top = inside[~inside["parent_id"].isin(ids)]
    per_step = len(top) / len(steps)
    if fused or per_step < ctx.threshold("min_ops_per_step"):
        return []
    opt = str(steps["name"].iloc[0]).split("#")[-1]
    opt_ns = float(steps["dur_ns"].sum())
    tr, eids = ranges(steps)
    return [
        ctx.finding(
            title=f"{opt}: {per_step:.0f} per-parameter ops per optimizer step",
            message=(
                f"{len(steps)} optimizer steps took {ms(opt_ns)} ({ms(opt_ns / len(steps))} each), issuing one small "
                f"op per parameter tensor ({', '.join(top['name'].astype(str).value_counts().head(3).index)})."
            ),
            metrics={"ops_per_step": metric(per_step, "ops/step"), "optimizer_ns": metric(int(opt_ns), "ns")},
            cost_ns=int(opt_ns * 0.5),
            time_ranges=tr,
            event_ids=eids,
            source_lines=lines_from(steps, "dur_ns"),
            recommendation=(
                f"Construct the optimizer with foreach=True (multi-tensor) or fused=True (one kernel), "
                f"e.g. torch.optim.{opt}(params, ..., fused=True) on CUDA."
            ),
        )
    ]
