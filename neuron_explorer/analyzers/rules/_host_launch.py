"""Which rule explains the ``host_launch`` category (the device starved while the host works).

Three rules could bill that time; exactly one does, the most specific that applies:
``tiny_ops`` (thousands of tiny framework ops per step), else ``launch_bound`` (most kernels
short), else ``host_bound``. The checks use each rule's thresholds as this run sets them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, name_mask, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.rules._evidence import num_steps, threshold_of
from neuron_explorer.analyzers.rules.registry import RuleContext
from neuron_explorer.trace.schema import Kind


def tiny_op_stats(ctx: RuleContext) -> tuple[pd.DataFrame, float, float] | None:
    """Top-level framework ops (no op parent), their count per step and mean duration."""

    def compute() -> tuple[pd.DataFrame, float, float] | None:
        ops = ctx.frames.host_of(Kind.CPU_OP)
        if not len(ops):
            return None
        op_ids = ukey(ops["rank"].to_numpy(), ops["event_id"].to_numpy())
        parent = ukey(ops["rank"].to_numpy(), ops["parent_id"].to_numpy())
        top = ops[~np.isin(parent, op_ids)]
        return top, len(top) / num_steps(ctx.analysis), float(top["dur_ns"].mean())

    return ctx.frames.memo("tiny_op_stats", compute)


def tiny_ops_explain(ctx: RuleContext) -> bool:
    """True when ``tiny_ops`` explains the host time: many top-level ops per step, each tiny."""
    stats = tiny_op_stats(ctx)
    return stats is not None and (
        stats[1] >= threshold_of(ctx, "tiny_ops", "min_ops_per_step")
        and stats[2] <= threshold_of(ctx, "tiny_ops", "max_mean_op_ns")
    )


def short_kernel_pct(ctx: RuleContext) -> float | None:
    """Share (%) of the device events launched one call each (a graph launch's are left out)
    shorter than ``launch_bound.short_kernel_ns``."""
    ev = ctx.frames.launch_events
    ev = ev[~graph_launched(ctx.frames)]
    if not len(ev):
        return None
    return 100.0 * float((ev["dur_ns"] < threshold_of(ctx, "launch_bound", "short_kernel_ns")).mean())


def launch_bound_explains(ctx: RuleContext) -> bool:
    """True when most launched kernels are short (``launch_bound``'s condition) and
    ``tiny_ops`` does not apply."""
    pct = short_kernel_pct(ctx)
    return pct is not None and pct >= threshold_of(ctx, "launch_bound", "min_short_pct") and not tiny_ops_explain(ctx)


#: a CUDA/HIP graph's launch call (its kernels come from the graph, not one call each)
GRAPH_LAUNCH = r"^(?:cuda|cu|hip)GraphLaunch"


def graph_launched(frames: TraceFrames) -> np.ndarray:
    """Per row of ``frames.launch_events``: True when a graph launch call launched it
    (memoized per trace)."""

    def compute() -> np.ndarray:
        ev, dev, host = frames.launch_events, frames.device, frames.host
        graph = host[name_mask(host["name"], GRAPH_LAUNCH)] if len(host) else host
        if not len(ev) or not len(graph):
            return np.zeros(len(ev), bool)
        pos = lookup(
            ukey(dev["rank"].to_numpy(), dev["event_id"].to_numpy()),
            ukey(ev["rank"].to_numpy(), ev["event_id"].to_numpy()),
        )
        launch_id = np.where(pos >= 0, dev["launch_id"].to_numpy()[np.maximum(pos, 0)], -1)
        hit = lookup(
            ukey(graph["rank"].to_numpy(), graph["event_id"].to_numpy()), ukey(ev["rank"].to_numpy(), launch_id)
        )
        return (hit >= 0) & (launch_id >= 0)

    return frames.memo("graph_launched", compute)
