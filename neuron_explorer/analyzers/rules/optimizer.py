"""Optimizer rules: per-parameter (unfused) optimizer steps."""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import exposed_ns
from neuron_explorer.analyzers.core.columns import name_mask, ukey
from neuron_explorer.analyzers.core.hardware import FOREACH_OPTIMIZERS, FUSED_OPTIMIZERS, Hardware
from neuron_explorer.analyzers.core.intervals import clip_to_windows, merge_windows
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.rules._evidence import lines_from, ms, threshold_of
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.schema import Kind

#: Ops and kernels of multi-tensor (foreach) and fused optimizer implementations: torch's
#: ``_foreach_*`` / ``_fused_adam_`` ops and their ``multi_tensor_apply_kernel`` kernels, apex /
#: DeepSpeed ``multi_tensor_adam`` / ``FusedAdam`` kernels.
FUSED_OPTIMIZER_WORK = r"_foreach_|_fused_|multi_tensor|[Ff]used_?[Aa]dam|[Ff]used_?[Ss][Gg][Dd]|fused_adam|fused_sgd"
_STEP = re.compile(r"^Optimizer\.step#(?P<cls>[^.]+)\.step$")


class UnfusedSteps(NamedTuple):
    """What ``unfused_optimizer`` found: the optimizer steps (their union as windows), the ops
    counted per step, and the time the device had nothing to run while they ran."""

    windows: tuple[np.ndarray, np.ndarray, np.ndarray]  # rank, start, end of each (merged) step
    counted: pd.DataFrame
    per_step: float
    what: str
    spans: pd.DataFrame
    exposed_ns: int


def unfused_steps(ctx: RuleContext, min_ops_per_step: float | None = None) -> UnfusedSteps | None:
    """The optimizer steps when they run one small op per parameter (the for-loop implementation),
    else None; ``exposed_ns``: inside steps, the time the device ran nothing while a step ran (on
    a CPU trace, the steps' own time): what the unfused optimizer costs, and what ``host_bound``
    and ``launch_bound`` leave to it. Raises RuleSkipped without optimizer annotations."""
    host = ctx.frames.host
    spans = host[name_mask(host["name"], "^Optimizer\\.step#")]
    if not len(spans):
        raise RuleSkipped("skipped: needs optimizer step annotations (Optimizer.step#...)")
    # Nested optimizer spans (a wrapper's step calling the inner optimizer's) are one step: union.
    wr, ws, we = merge_windows(
        spans["rank"].to_numpy(), spans["start_ns"].to_numpy(), (spans["start_ns"] + spans["dur_ns"]).to_numpy()
    )
    ops = host[(host["kind"] == Kind.CPU_OP).to_numpy()]
    rows, _, _, _ = clip_to_windows(
        ops["rank"].to_numpy(), ops["start_ns"].to_numpy(), (ops["start_ns"] + ops["dur_ns"]).to_numpy(), wr, ws, we
    )
    inside = ops.iloc[np.unique(rows)]
    dev = ctx.frames.device
    inside_keys = ukey(inside["rank"].to_numpy(), inside["event_id"].to_numpy())
    dev_op = ukey(dev["rank"].to_numpy(), dev["op_id"].fillna(-1).to_numpy(np.int64))
    launched = dev[(dev_op >= 0) & pd.Index(dev_op).isin(inside_keys)]
    fused_class = bool(name_mask(spans["name"], r"^Optimizer\.step#\w*[Ff]used").any())  # apex/DeepSpeed FusedAdam
    if (
        fused_class
        or bool(name_mask(inside["name"], FUSED_OPTIMIZER_WORK).any())
        or bool(name_mask(launched["name"], FUSED_OPTIMIZER_WORK).any())
    ):
        return None
    if len(dev):
        # a device trace: the per-parameter ops that cost something are those launching kernels
        launching = ukey(launched["rank"].to_numpy(), launched["op_id"].to_numpy(np.int64))
        counted = inside[pd.Index(inside_keys).isin(launching)]
        what = "device-launching ops"
    else:
        parent_keys = ukey(inside["rank"].to_numpy(), inside["parent_id"].fillna(-1).to_numpy(np.int64))
        counted = inside[~pd.Index(parent_keys).isin(inside_keys)]
        what = "top-level ops"
    per_step = len(counted) / len(ws)
    if per_step < (min_ops_per_step if min_ops_per_step is not None else threshold_of(ctx, RULE, "min_ops_per_step")):
        return None
    merged = pd.DataFrame({"rank": wr, "start_ns": ws, "dur_ns": we - ws})
    return UnfusedSteps((wr, ws, we), counted, per_step, what, spans, exposed_ns(ctx.frames, merged))


RULE = "unfused_optimizer"


def unfused_optimizer_exposed_ns(ctx: RuleContext) -> int:
    """The device-idle time inside steps that an unfused optimizer's own host work holds
    (``unfused_steps``), 0 when the optimizer is fused, foreach or absent: the generic host rules
    leave it to ``unfused_optimizer`` (the specific cause wins)."""

    def compute() -> int:
        try:
            found = unfused_steps(ctx)
        except RuleSkipped:
            return 0
        return found.exposed_ns if found is not None else 0

    return int(ctx.frames.memo(f"unfused_optimizer_exposed:{threshold_of(ctx, RULE, 'min_ops_per_step')}", compute))


@rule(
    "unfused_optimizer",
    family="optimizer",
    title="Unfused optimizer step",
    thresholds={"min_ops_per_step": (50.0, "ops/optimizer step")},
)
def unfused_optimizer(ctx: RuleContext) -> list[Finding]:
    """``optimizer.step()`` runs one small op per parameter tensor (more than ``min_ops_per_step``
    per step): the for-loop implementation. Not when the step already runs foreach / fused work
    (``_foreach_``/``_fused_`` ops, ``multi_tensor_apply`` kernels), and, on a device trace, only
    ops that launch device work count (bookkeeping ops on host scalars cost no kernel). Cost: the
    time inside steps the device had nothing to run while the optimizer stepped (its own host
    time starving the device; on a CPU trace its own time): that time is this finding's, claimed
    before ``host_bound`` and ``launch_bound``, which leave it out."""
    found = unfused_steps(ctx, ctx.threshold("min_ops_per_step"))
    if found is None:
        return []
    _wr, ws, we = found.windows
    spans, counted, per_step = found.spans, found.counted, found.per_step
    n_steps, opt_ns = len(ws), int((we - ws).sum())
    classes = spans["name"].astype(str).str.extract(_STEP)["cls"].dropna()
    opt = str(classes.iloc[0]) if len(classes) else str(spans["name"].iloc[0]).split("#")[-1]
    top_names = ", ".join(counted["name"].astype(str).value_counts().head(3).index)
    tr = [[int(s), int(e)] for s, e in zip(ws[:5], we[:5])]
    idle = "the device had nothing to run" if len(ctx.frames.device) else "they ran"
    return [
        ctx.finding(
            title=f"{opt}: {per_step:.0f} per-parameter ops per optimizer step",
            message=(
                f"{n_steps} optimizer step(s) took {ms(opt_ns)} in all ({ms(opt_ns / n_steps)} each; nested "
                f"optimizer spans counted once), each issuing {per_step:.0f} {found.what}, one per parameter tensor "
                f"({top_names}), and no foreach or fused op; for {ms(found.exposed_ns)} of it inside steps {idle} "
                "while the host stepped the optimizer."
            ),
            metrics={
                "ops_per_step": metric(per_step, "ops/step"),
                "optimizer_steps": metric(n_steps, "steps"),
                "optimizer_ns": metric(opt_ns, "ns"),
                "exposed_ns": metric(found.exposed_ns, "ns"),
            },
            cost_ns=int(found.exposed_ns),
            time_ranges=tr,
            event_ids=[int(i) for i in spans.nlargest(5, "dur_ns")["event_id"]],
            source_lines=lines_from(spans, "dur_ns"),
            recommendation=optimizer_advice(opt, ctx.frames.hardware),
        )
    ]


def optimizer_advice(opt: str, hw: Hardware) -> str:
    """The fix, naming the constructor arguments as they are called (``fused``/``foreach`` are
    arguments of the optimizer's constructor, not of ``step()``), only where this optimizer class
    and this device have them."""
    fused = opt in FUSED_OPTIMIZERS and hw.fused_optimizer
    if fused:
        return (
            f"Construct the optimizer with its fused implementation, torch.optim.{opt}(model.parameters(), "
            f"lr=..., fused=True) (one kernel for all parameters on {hw.platform}), or the multi-tensor one, "
            f"torch.optim.{opt}(model.parameters(), lr=..., foreach=True)."
        )
    if opt in FOREACH_OPTIMIZERS:
        return (
            f"Construct the optimizer with its multi-tensor implementation: torch.optim.{opt}(model.parameters(), "
            f"lr=..., foreach=True) (a few ops for all parameters instead of one per parameter)."
        )
    return (
        f"{opt} updates one parameter at a time. Use an optimizer with a multi-tensor or fused implementation, "
        f"e.g. torch.optim.AdamW(model.parameters(), lr=..., "
        f"{'fused=True' if hw.fused_optimizer else 'foreach=True'}), or {opt}'s own multi-tensor option if it has one."
    )
