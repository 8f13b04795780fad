"""Memory rules read from the live-set replay (``analyzers.memory_live``): leaks across steps
and a caching allocator holding memory it cannot use (fragmentation)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import WHOLE_TRACE_STEP
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.ledger import HOST_WORK
from neuron_explorer.analyzers.memory_live import LiveMemory, retained_by_line
from neuron_explorer.analyzers.memory_live.fragmentation import fragmentation_pattern
from neuron_explorer.analyzers.memory_live.phases import backward_windows
from neuron_explorer.analyzers.metrics.memory import NO_MEMORY_EVENTS
from neuron_explorer.analyzers.metrics.source_lines import user_mask
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.units import format_quantity


def _live(ctx: RuleContext) -> LiveMemory:
    live = ctx.analysis.live_memory
    if live is None or not len(live.events):
        raise RuleSkipped(f"skipped: needs memory events: {NO_MEMORY_EVENTS}")
    return live


def judged_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps a leak is judged on, per rank: steady (not warm-up), not the rank's first step
    (one-time allocations: optimizer state, workspaces, caches filled once) and not its last
    (what it keeps may be freed by the next step, which the trace does not hold)."""
    st = steps[steps["step"] != WHOLE_TRACE_STEP].sort_values(["rank", "step"])
    if not len(st):
        return st
    pos = st.groupby("rank").cumcount()
    n = st.groupby("rank")["step"].transform("size")
    return st[~st["is_warmup"].to_numpy() & (pos > 0).to_numpy() & (pos < n - 1).to_numpy()]


def _where(dt: str, device: int) -> str:
    return f"{dt}:{device}" if device >= 0 else dt


def _step_list(steps: list[int]) -> str:
    if len(steps) > 2 and steps == list(range(steps[0], steps[-1] + 1)):
        return f"{steps[0]}-{steps[-1]}"
    return ", ".join(str(s) for s in steps)


@rule(
    "memory_leak",
    family="memory",
    title="Memory allocated in each step and never freed",
    thresholds={"min_bytes_per_step": (65_536.0, "bytes/step"), "min_steps": (3.0, "steps")},
    cost_is_time=False,  # the risk of running out of memory, not time spent
)
def memory_leak(ctx: RuleContext) -> list[Finding]:
    """In at least ``min_steps`` steady steps, at least ``min_bytes_per_step`` allocated in the
    step is still alive at the end of the trace (never freed), and the allocated total rises
    over those steps by at least half of it: something keeps a reference to each step's
    tensors. The first, warm-up and last steps are not judged. The lines are those whose
    allocations survive in ``min_steps`` or more of those steps."""
    live = _live(ctx)
    if not ctx.frames.has_steps:
        raise RuleSkipped("skipped: needs ProfilerStep spans (a profiler schedule or prof.step()) to compare steps")
    min_steps = int(ctx.threshold("min_steps"))
    judged = judged_steps(ctx.analysis.steps)
    if len(judged) < min_steps:
        raise RuleSkipped(
            f"skipped: needs {min_steps} steady steps besides the first and the last (the trace has {len(judged)})"
        )
    ms = ctx.analysis.memory_live
    rows = ms.merge(judged[["rank", "step"]], on=["rank", "step"]) if len(ms) else ms
    out: list[Finding] = []
    for (rank, dt, device), dev_rows in rows.groupby(["rank", "device_type", "device"], sort=True):
        dev_rows = dev_rows.sort_values("step")
        leaking = dev_rows[dev_rows["retained_bytes"] >= ctx.threshold("min_bytes_per_step")]
        if len(leaking) < min_steps:
            continue
        growth = int(dev_rows["end_allocated_bytes"].iloc[-1] - dev_rows["start_allocated_bytes"].iloc[0])
        kept = int(dev_rows["retained_bytes"].sum())
        if growth < 0.5 * kept:
            continue  # what stays is made up for by frees of older memory: no growth
        found = _leak_finding(ctx, live, leaking, int(rank), str(dt), int(device), growth, min_steps)
        if found is not None:
            out.append(found)
    return out


def _leak_lines(lines: pd.DataFrame, n_steps: int, min_steps: int) -> pd.DataFrame:
    keys = ["src_file", "src_line", "src_func", "src_module", "op"]
    g = (
        lines.groupby(keys, dropna=False, sort=False, observed=True)
        .agg(bytes=("retained_bytes", "sum"), steps=("step", "nunique"), blocks=("blocks", "sum"))
        .reset_index()
    )
    g = g[g["steps"] >= min_steps]
    g["bytes_per_step"] = g["bytes"] / n_steps
    # per line: the module and op that made most of it
    g = g.sort_values("bytes", ascending=False)
    by_line = g.groupby(["src_file", "src_line"], dropna=False, sort=False, observed=True).agg(
        src_func=("src_func", "first"),
        src_module=("src_module", "first"),
        op=("op", "first"),
        bytes=("bytes", "sum"),
        bytes_per_step=("bytes_per_step", "sum"),
        steps=("steps", "max"),
        blocks=("blocks", "sum"),
    )
    return by_line.reset_index().sort_values("bytes", ascending=False)


def _leak_finding(
    ctx: RuleContext,
    live: LiveMemory,
    leaking: pd.DataFrame,
    rank: int,
    dt: str,
    device: int,
    growth: int,
    min_steps: int,
) -> Finding | None:
    lines = retained_by_line(live, leaking[["rank", "step"]])
    lines = lines[(lines["rank"] == rank) & (lines["device_type"].astype(str) == dt) & (lines["device"] == device)]
    if not len(lines):
        return None
    steps = [int(s) for s in leaking["step"]]
    per_line = _leak_lines(lines, len(steps), min_steps)
    known = per_line[per_line["src_file"].notna() & (per_line["src_line"] >= 0)]
    user = known[user_mask(known["src_file"])] if len(known) else known
    shown = (user if len(user) else known).head(3)
    per_step = float(np.median(leaking["retained_bytes"].to_numpy()))
    where = _where(dt, device)
    src: list[dict[str, Any]] = [
        {
            "file": str(r.src_file),
            "line": int(r.src_line),
            "func": None if pd.isna(r.src_func) else str(r.src_func),
            "value": round(float(r.bytes_per_step)),
            "unit": "bytes",
            "bytes_per_step": round(float(r.bytes_per_step)),
            "steps": int(r.steps),
            "count": int(r.blocks),
            "op": None if pd.isna(r.op) else str(r.op),
            "module": None if pd.isna(r.src_module) else str(r.src_module),
        }
        for r in shown.itertuples()
    ]
    made_at = "; ".join(
        f"{format_quantity(s['bytes_per_step'], 'bytes')} per step at {s['file']}:{s['line']}"
        + (f" ({s['op']}" + (f" in {s['module']}" if s["module"] else "") + ")" if s["op"] else "")
        for s in src
    )
    b = live.blocks
    made = b[(b["free_row"] < 0) & (b["alloc_row"] >= 0) & b["step"].isin(steps) & (b["rank"] == rank)]
    mean_block = float(made["size_bytes"].mean()) if len(made) else 0.0
    bw = backward_windows(ctx.frames)
    w = ctx.analysis.steps
    sw = w[(w["rank"] == rank) & w["step"].isin(steps)]
    has_backward = bool(len(bw)) and bool(
        ((bw["rank"] == rank) & (bw["start_ns"] >= sw["start_ns"].min()) & (bw["end_ns"] <= sw["end_ns"].max())).any()
    )
    causes = []
    if mean_block <= 64:
        causes.append(
            "a running total kept as a tensor (`total_loss += loss` keeps every step's loss and, without a "
            "backward pass, its graph): accumulate `loss.item()` or `loss.detach()`"
        )
    causes.append(
        "a list or dict that gets each step's tensors (outputs, activations, losses for logging): store "
        "`t.detach().cpu()` or a Python number (`.item()`), or keep only the last N"
    )
    if not has_backward:
        causes.append(
            "no backward pass runs in these steps: if this is evaluation, each kept output holds its whole autograd "
            "graph; run it under `torch.no_grad()` or `torch.inference_mode()`"
        )
    causes.append(
        "forward/backward hooks, caches (a dict keyed by step, functools.lru_cache on tensors) or closures holding "
        "references; `retain_graph=True` keeps the graph's saved tensors"
    )
    return ctx.finding(
        title=(
            f"{format_quantity(per_step, 'bytes')} per step allocated on {where} and never freed "
            f"(steps {_step_list(steps)})"
        ),
        message=(
            f"In steps {_step_list(steps)}, each step left {format_quantity(per_step, 'bytes')} (median) alive that "
            f"the trace never frees; allocated memory rose by {format_quantity(growth, 'bytes')} over those steps. "
            + (f"It was allocated {made_at}." if made_at else "The lines that allocated it are not in the trace.")
            + " The first, warm-up and last steps are not judged."
        ),
        metrics={
            "bytes_per_step": metric(per_step, "bytes/step"),
            "steps": metric(len(steps), "steps"),
            "growth_bytes": metric(growth, "bytes"),
            "retained_bytes": metric(int(leaking["retained_bytes"].sum()), "bytes"),
        },
        time_ranges=[[int(s), int(e)] for s, e in zip(sw["start_ns"], sw["end_ns"])],
        event_ids=[int(x) for x in made.nlargest(5, "size_bytes")["alloc_event_id"]],
        source_lines=src,
        rank=rank,
        recommendation="Find what keeps these tensors after the step. Common causes: " + "; ".join(causes) + ".",
    )


@rule(
    "memory_fragmentation",
    family="memory",
    title="Caching allocator holds memory it cannot use",
    thresholds={"min_gap_pct": (30.0, "% of reserved"), "min_gap_bytes": (1 << 30, "bytes")},
)
def memory_fragmentation(ctx: RuleContext) -> list[Finding]:
    """On a device with a caching allocator, at its reserved peak at least ``min_gap_pct`` of the
    reserved memory (and ``min_gap_bytes``) is not allocated, while the steady steps still grow
    the reservation or call the driver (``cudaMalloc``/``hipMalloc``, or ``cudaFree``/``hipFree``:
    the allocator releasing its cache to retry an allocation that did not fit). Either alone
    is not fragmentation: a large gap with a flat reservation is a cache that is reused, and
    driver calls with no gap are growth."""
    _live(ctx)
    fr = ctx.analysis.memory_fragmentation
    fr = fr[fr["device_type"] != "cpu"] if len(fr) else fr
    if not len(fr):
        raise RuleSkipped("skipped: needs device memory events with Total Reserved (a caching allocator)")
    out = []
    for r in fr.itertuples():
        if not fragmentation_pattern(r, ctx.threshold("min_gap_pct"), ctx.threshold("min_gap_bytes")):
            continue
        gap_pct = 100.0 * r.reserved_gap_at_peak_bytes / max(r.peak_reserved_bytes, 1)
        retries = r.free_calls_in_steps > 0
        where = _where(r.device_type, r.device)
        evidence = []
        if r.reserved_growth_steady_bytes > 0:
            evidence.append(
                f"the reservation grew by {format_quantity(r.reserved_growth_steady_bytes, 'bytes')} over "
                f"{r.steady_steps} steady steps"
            )
        if r.malloc_calls_in_steps:
            evidence.append(f"{r.malloc_calls_in_steps} driver allocations inside steady steps")
        if retries:
            evidence.append(
                f"{r.free_calls_in_steps} driver frees inside steady steps (the allocator released its cache to retry "
                "an allocation, or empty_cache() was called)"
            )
        if r.device_type == "cuda":
            fix = (
                "Set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True before the first CUDA call (segments then grow "
                "in place instead of leaving gaps between fixed-size ones); keep shapes steady (pad variable "
                "sequence lengths to a few buckets) and do not call torch.cuda.empty_cache() inside the loop."
            )
        else:
            fix = (
                "Keep shapes steady (pad variable sequence lengths to a few buckets), allocate the largest "
                "buffers first and reuse them, and do not empty the allocator's cache inside the loop."
            )
        out.append(
            ctx.finding(
                title=(
                    f"{where}: {format_quantity(r.reserved_gap_at_peak_bytes, 'bytes')} reserved but not allocated "
                    f"at the reserved peak ({gap_pct:.0f}%)"
                ),
                message=(
                    f"At the reserved peak {format_quantity(r.peak_reserved_bytes, 'bytes')} was reserved and "
                    f"{format_quantity(r.allocated_at_reserved_peak_bytes, 'bytes')} allocated; the largest gap was "
                    f"{format_quantity(r.largest_gap_bytes, 'bytes')}. Meanwhile " + "; ".join(evidence) + "."
                ),
                metrics={
                    "gap_bytes": metric(int(r.reserved_gap_at_peak_bytes), "bytes"),
                    "gap_pct": metric(gap_pct, "%"),
                    "largest_gap_bytes": metric(int(r.largest_gap_bytes), "bytes"),
                    "reserved_growth_bytes": metric(int(r.reserved_growth_steady_bytes), "bytes"),
                    "driver_allocs": metric(int(r.malloc_calls_in_steps), "calls"),
                    "driver_frees": metric(int(r.free_calls_in_steps), "calls"),
                },
                cost_ns=int(r.allocator_call_ns_in_steps),
                category=HOST_WORK,
                event_ids=[int(r.largest_gap_event_id)],
                rank=int(r.rank),
                recommendation=fix,
            )
        )
    return out
