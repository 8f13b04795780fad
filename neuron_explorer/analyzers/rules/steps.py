"""Step rules: step-time variance and outliers, warm-up cost, stragglers across ranks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import one_time_by_kind
from neuron_explorer.analyzers.attribution.one_time import KIND_LABELS, one_time_spans
from neuron_explorer.analyzers.core.context import WHOLE_TRACE_STEP
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.rules._evidence import ms
from neuron_explorer.analyzers.rules.compile import compile_events
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.units import format_duration


def _real_steps(ctx: RuleContext, minimum: int) -> pd.DataFrame:
    s = ctx.analysis.steps
    s = s[s["step"] != WHOLE_TRACE_STEP]
    if s["step"].nunique() < minimum:
        raise RuleSkipped(f"skipped: needs at least {minimum} profiler steps (ProfilerStep#N; use a schedule)")
    return s


@rule(
    "step_variance",
    family="steps",
    title="Step time variance and outlier steps",
    thresholds={"max_cv_pct": (25.0, "%"), "min_steady_steps": (4, "steps"), "min_spread_ns": (5_000_000, "ns")},
)
def step_variance(ctx: RuleContext) -> list[Finding]:
    """Steady-state step times vary by more than ``max_cv_pct`` (coefficient of variation; warning)
    or some steps are outliers (over 3 robust standard deviations and 25% from the median; info);
    either only when it amounts to at least ``min_spread_ns`` (standard deviation, or the outliers'
    extra time)."""
    s = _real_steps(ctx, 3)
    stats = ctx.analysis.step_stats
    n_steady = int((~s["is_warmup"]).sum())
    if n_steady < ctx.threshold("min_steady_steps"):
        raise RuleSkipped(
            f"skipped: needs at least {int(ctx.threshold('min_steady_steps'))} steady steps, found {n_steady}"
        )
    cv = float(stats.get("cv_pct", 0.0))
    med = float(stats["p50_ns"])
    out = s[s["is_outlier"]]
    extra = float((out["dur_ns"] - med).clip(lower=0).sum())
    # jitter of a few milliseconds is scheduling noise, not something to act on
    varies = cv >= ctx.threshold("max_cv_pct") and float(stats["std_ns"]) >= ctx.threshold("min_spread_ns")
    if not varies and (not len(out) or extra < ctx.threshold("min_spread_ns")):
        return []
    steady = s[~s["is_warmup"]]
    return [
        ctx.finding(
            severity="warning" if varies else "info",
            title=f"Step time varies {cv:.0f}% ({len(out)} outlier step(s))",
            message=(
                f"Steady steps: p50 {ms(med)}, p95 {ms(stats['p95_ns'])}, max {ms(steady['dur_ns'].max())}; "
                f"outliers: {', '.join(f'step {int(r.step)} ({r.dev_from_median_pct:+.0f}%)' for r in out.itertuples()) or 'none'}."
                + (f" The outlier steps took {ms(extra)} more than the median (the cost)." if extra else "")
            ),
            metrics={
                "cv_pct": metric(cv, "%"),
                "p50_ns": metric(med, "ns"),
                "p95_ns": metric(stats["p95_ns"], "ns"),
                "outlier_steps": metric(len(out), "steps"),
            },
            cost_ns=int(extra),
            time_ranges=[[int(r.start_ns), int(r.end_ns)] for r in out.itertuples()],
            event_ids=[int(x) for x in out["event_id"] if x >= 0],
            recommendation=(
                "Compare an outlier step with a median one (neuron-explorer report / tui): look for "
                "garbage collection, checkpointing, logging or data-loading spikes, recompilation or "
                "allocator cache flushes in the slow steps; make periodic work asynchronous."
            ),
        )
    ]


@rule(
    "warmup_cost",
    family="steps",
    title="One-time work: warm-up, compilation, graph capture, initialization",
    thresholds={"min_pct": (5.0, "% of profiled time"), "min_extra_ns": (50_000_000, "ns")},
    severity="info",
)
def warmup_cost(ctx: RuleContext) -> list[Finding]:
    """One-time work (the ``one_time`` category, ``analyzers.attribution.one_time``: compilation, graph
    capture and instantiation, initialization calls, warm-up steps) costs more than ``min_pct``
    of the traced time and ``min_extra_ns``. Cost: that work, less what each warm-up step would
    have taken as a steady step (the steady median): the extra the run pays once."""
    rs = ctx.analysis.rank_steps
    if not len(rs) or "one_time_ns" not in rs:
        raise RuleSkipped("skipped: needs step or trace time windows")
    one = float(rs["one_time_ns"].sum())
    wall = float(rs["wall_ns"].sum()) or 1.0
    steps = ctx.analysis.steps
    warm = steps[steps["is_warmup"] & (steps["step"] != WHOLE_TRACE_STEP)] if len(steps) else steps
    med = float(ctx.analysis.step_stats.get("p50_ns") or 0.0)
    extra = max(one - float(np.minimum(warm["dur_ns"].to_numpy(np.float64), med).sum()), 0.0)
    pct = 100.0 * extra / wall
    if pct < ctx.threshold("min_pct") or extra < ctx.threshold("min_extra_ns"):
        return []
    kinds = _kinds(ctx, one)
    what = ", ".join(f"{KIND_LABELS[k]} {format_duration(v)}" for k, v in kinds.items())
    compiling = compile_events(ctx.frames.host)
    where = "profiled time" if ctx.frames.has_steps else "traced time"
    if len(warm):
        head = (
            f"Step(s) {', '.join(str(int(x)) for x in warm['step'])} took "
            f"{', '.join(format_duration(x) for x in warm['dur_ns'])} against a steady median of {format_duration(med)}; "
        )
    else:
        head = ""
    return [
        ctx.finding(
            title=f"One-time work costs {format_duration(extra)} ({pct:.0f}% of {where}): {what}",
            message=(
                f"{head}one-time work took {format_duration(one)} in all ({what})"
                + (f"; {len(compiling)} compilation(s) ran." if len(compiling) else ".")
                + " It is paid once per process (or per new shape): the steady-state findings leave it out."
            ),
            metrics={
                "warmup_extra_ns": metric(int(extra), "ns"),
                "warmup_pct": metric(pct, "%"),
                "warmup_steps": metric(len(warm), "steps"),
                "one_time_ns": metric(int(one), "ns"),
                **{f"{k}_ns": metric(int(v), "ns") for k, v in kinds.items()},
            },
            cost_ns=int(extra),
            category="one_time",
            time_ranges=[[int(r.start_ns), int(r.end_ns)] for r in warm.itertuples()]
            or [[int(s), int(s + d)] for s, d in _largest_spans(ctx)],
            recommendation=(
                "Exclude one-time work from measurements (torch.profiler.schedule(wait=1, warmup=1, active=3)) and, "
                "for short runs, cut it: cache compiled artifacts (TORCHINDUCTOR_FX_GRAPH_CACHE=1, a persistent "
                "TORCHINDUCTOR_CACHE_DIR), mark dynamic shapes (torch._dynamo.mark_dynamic) so new shapes do not "
                "recompile, capture graphs once and replay them"
                + (
                    # cuDNN (MIOpen on ROCm) autotuning: a device with those libraries only
                    ", set torch.backends.cudnn.benchmark only for fixed shapes."
                    if ctx.frames.hardware.torch_device == "cuda"
                    else "."
                )
            ),
        )
    ]


def _kinds(ctx: RuleContext, one: float) -> dict[str, int]:
    by_kind = one_time_by_kind(ctx.frames)
    total = float(sum(by_kind.values())) or 1.0
    return {k: int(one * v / total) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]) if v > 0}


def _largest_spans(ctx: RuleContext, n: int = 5) -> list[tuple[int, int]]:
    spans = one_time_spans(ctx.frames)
    top = spans.nlargest(n, "dur_ns")
    return list(zip(top["start_ns"].to_numpy(), top["dur_ns"].to_numpy()))


@rule("stragglers", family="steps", title="Straggler ranks", thresholds={"min_slowdown_pct": (10.0, "%")})
def stragglers(ctx: RuleContext) -> list[Finding]:
    """A rank whose busy device time (or step time) per step is more than ``min_slowdown_pct`` above
    the median of all ranks: the others wait for it at every collective."""
    bd = ctx.analysis.breakdown
    if bd["rank"].nunique() < 2:
        raise RuleSkipped("skipped: needs a multi-rank run (two or more ranks)")
    busy = bd.assign(busy_ns=bd["compute_ns"] + bd["memcpy_ns"] + bd["memset_ns"] + bd["host_exposed_ns"])
    per_rank = busy.groupby("rank")["busy_ns"].sum() / busy.groupby("rank")["step"].nunique()
    med = float(per_rank.median())
    slow = per_rank[per_rank > med * (1 + ctx.threshold("min_slowdown_pct") / 100.0)]
    if not len(slow) or med <= 0:
        return []
    worst = int(slow.idxmax())
    pct = 100.0 * (float(slow.max()) - med) / med
    return [
        ctx.finding(
            title=f"Rank {worst} is a straggler: {pct:.0f}% more work per step than the median rank",
            message=(
                f"Ranks {', '.join(str(int(r)) for r in slow.index)} spend more non-communication time per step "
                f"than the median ({ms(med)}); the other ranks wait for them in collectives."
            ),
            metrics={
                "slowdown_pct": metric(pct, "%"),
                "median_busy_ns": metric(med, "ns"),
                "straggler_busy_ns": metric(float(slow.max()), "ns"),
            },
            cost_ns=int((slow - med).sum()),
            rank=worst,
            recommendation=(
                "Balance the work: check data sharding (uneven sequence lengths / batch sizes), host "
                "contention on the slow rank's machine, thermal throttling, or a slower link."
            ),
        )
    ]
