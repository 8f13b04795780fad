"""Host rules: syncs in the loop, data-loader stalls, host hotspots, tiny ops, Python overhead,
host-bound device."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.context import name_mask
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.intervals import clip_to_windows, merge_windows, union_length
from neuron_explorer.analyzers.rules._evidence import lines_from, ms, num_steps, ranges, top_source_lines, wall_ns
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.schema import Kind

SYNC_RUNTIME = re.compile(
    r"^(?:cuda|hip)(?:DeviceSynchronize|StreamSynchronize|EventSynchronize|Memcpy|MemcpyDtoH|MemcpyHtoD|Memcpy2D)$"
    r"|Synchronize|^nrt_.*wait",
    re.I,
)
SYNC_OPS = (
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::nonzero",
    "aten::is_nonzero",
    "aten::equal",
    "aten::masked_select",
    "aten::unique",
    "aten::_unique2",
)
#: the profiler's own span around fetching a batch: "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
DATALOADER = re.compile(r"^enumerate\(DataLoader\)|DataLoaderIter.*__next__")


def _host_window_pieces(ctx: RuleContext, inner: pd.DataFrame, outer: pd.DataFrame) -> pd.DataFrame:
    """Rows of ``inner`` (host events) that lie inside ``outer`` spans of the same rank."""
    wr, ws, we = merge_windows(
        outer["rank"].to_numpy(), outer["start_ns"].to_numpy(), (outer["start_ns"] + outer["dur_ns"]).to_numpy()
    )
    rows, _, _, _ = clip_to_windows(
        inner["rank"].to_numpy(),
        inner["start_ns"].to_numpy(),
        (inner["start_ns"] + inner["dur_ns"]).to_numpy(),
        wr,
        ws,
        we,
    )
    return inner.iloc[np.unique(rows)]


@rule(
    "sync_in_loop",
    family="host",
    title="Host-device synchronization in the loop",
    thresholds={"min_per_step": (1.0, "syncs/step"), "min_pct": (1.0, "% of wall")},
)
def sync_in_loop(ctx: RuleContext) -> list[Finding]:
    """The host blocks on the device inside the loop (``.item()``, ``.cpu()``, ``print(loss)``,
    ``torch.cuda.synchronize()``, blocking ``cudaMemcpy``, data-dependent shapes like ``nonzero``);
    each one drains the launch queue. Evidence: the sync calls and the lines that made them."""
    host = ctx.frames.host
    runtime = host[host["kind"] == Kind.RUNTIME]
    if not len(runtime) or not len(ctx.frames.device):
        raise RuleSkipped("skipped: needs device runtime events (a GPU/accelerator trace)")
    is_sync = name_mask(runtime["name"], SYNC_RUNTIME)
    syncs = pd.concat([runtime[is_sync], host[host["kind"] == Kind.SYNC]])
    if not len(syncs):
        return []
    per_step = len(syncs) / num_steps(ctx.analysis)
    wall = wall_ns(ctx.analysis) or 1
    sync_ns = float(syncs["dur_ns"].sum())
    pct = 100.0 * sync_ns / wall
    if per_step < ctx.threshold("min_per_step") or pct < ctx.threshold("min_pct"):
        return []
    # the framework op that issued each sync (aten::item, aten::to, ...) carries the user line
    ops = host[host["kind"] == Kind.CPU_OP].set_index(["rank", "event_id"])
    key = pd.MultiIndex.from_arrays([syncs["rank"].to_numpy(), syncs["op_id"].to_numpy()])
    issuing = ops.reindex(key)
    src = pd.DataFrame(
        {
            "src_file": issuing["src_file"].to_numpy(),
            "src_line": issuing["src_line"].fillna(-1).to_numpy(),
            "src_func": issuing["src_func"].to_numpy(),
            "dur_ns": syncs["dur_ns"].to_numpy(),
        }
    )
    src["src_file"] = src["src_file"].where(src["src_file"].notna(), syncs["src_file"].astype(object).to_numpy())
    top_ops = issuing["name"].dropna().astype(str).value_counts().head(3).index.tolist()
    tr, ids = ranges(syncs)
    return [
        ctx.finding(
            title=f"{per_step:.0f} host-device syncs per step ({pct:.1f}% of wall time)",
            message=(
                f"{len(syncs)} synchronizing calls ({', '.join(sorted(set(runtime['name'][is_sync].astype(str))))[:120]}) blocked the host "
                f"for {ms(sync_ns)}" + (f", issued by {', '.join(top_ops)}" if top_ops else "") + "."
            ),
            metrics={
                "syncs_per_step": metric(per_step, "syncs/step"),
                "sync_ns": metric(int(sync_ns), "ns"),
                "sync_pct": metric(pct, "%"),
            },
            cost_ns=int(sync_ns),
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines_from(src, "dur_ns"),
            recommendation=(
                "Keep values on the device inside the loop: log losses every N steps (or accumulate a "
                "device tensor), avoid .item()/.cpu()/print on device tensors and torch.cuda.synchronize(); "
                "use non_blocking=True copies from pinned memory."
            ),
        )
    ]


@rule("dataloader_stall", family="host", title="Data-loader stall", thresholds={"max_pct": (5.0, "% of step time")})
def dataloader_stall(ctx: RuleContext) -> list[Finding]:
    """Waiting for the next batch (``enumerate(DataLoader)...__next__``) takes more than
    ``max_pct`` of step time (TensorBoard plugin threshold: 5%)."""
    host = ctx.frames.host
    span = host[host["kind"].isin([Kind.ANNOTATION, Kind.CPU_OP]).to_numpy() & name_mask(host["name"], DATALOADER)]
    if not len(span):
        raise RuleSkipped("skipped: needs DataLoader events (iterate a torch DataLoader inside the profiled steps)")
    # union inside the step windows: nested loader spans (annotation + op) count once
    wall = float(ctx.frames.step_windows["dur_ns"].sum()) or 1.0
    load_ns = float(_covered(ctx, span).sum())
    pct = 100.0 * load_ns / wall
    if pct < ctx.threshold("max_pct"):
        return []
    candidates = host[(host["kind"] != Kind.STEP).to_numpy() & ~ctx.frames.encloses_step]
    inside = _host_window_pieces(ctx, candidates, span)
    inside_self = ctx.frames.host_self_ns.reindex(inside.index).to_numpy()
    lines = lines_from(inside, inside_self)
    tr, ids = ranges(span)
    return [
        ctx.finding(
            title=f"Waiting for data takes {pct:.0f}% of step time",
            message=(
                f"The training loop waited {ms(load_ns)} for {len(span)} batches "
                f"({ms(load_ns / len(span))} per batch) in the DataLoader."
            ),
            metrics={
                "dataloader_pct": metric(pct, "%"),
                "dataloader_ns": metric(int(load_ns), "ns"),
                "per_batch_ns": metric(load_ns / len(span), "ns"),
            },
            cost_ns=int(load_ns),
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines[:5],
            recommendation=(
                "Load data in parallel: DataLoader(num_workers>0, pin_memory=True, persistent_workers=True, "
                "prefetch_factor>=2); move decoding/augmentation off the hot path or cache preprocessed data."
            ),
        )
    ]


@rule("host_hotspot", family="host", title="Host hotspot by source line", thresholds={"min_pct": (10.0, "% of wall")})
def host_hotspot(ctx: RuleContext) -> list[Finding]:
    """A user source line whose own Python time (self time of the user's frames, outside framework
    ops and library code) exceeds ``min_pct`` of wall time: per-element loops or preprocessing on
    the training thread."""
    sl = ctx.analysis.source_lines
    if not len(sl):
        raise RuleSkipped("skipped: needs source attribution (profile with with_stack=True)")
    wall = wall_ns(ctx.analysis) or 1
    lines = top_source_lines(ctx.analysis, "python_ns", n=3, min_value=ctx.threshold("min_pct") / 100.0 * wall)
    if not lines:
        return []
    top = lines[0]
    pct = 100.0 * top["python_ns"] / wall
    return [
        ctx.finding(
            title=f"{top['file']}:{top['line']} ({top['func']}) spends {pct:.0f}% of wall time in its own Python",
            message=(
                f"{len(lines)} line(s) of your code each spend over {ctx.threshold('min_pct'):.0f}% of wall time "
                f"in their own Python (not in framework ops or library code); the top one {ms(top['python_ns'])}."
            ),
            metrics={"host_pct": metric(pct, "%"), "python_ns": metric(top["python_ns"], "ns")},
            cost_ns=int(sum(x["python_ns"] for x in lines)),
            source_lines=lines,
            recommendation=(
                "Vectorize the Python loop with tensor operations, move preprocessing into DataLoader "
                "workers or do it once ahead of training."
            ),
        )
    ]


@rule(
    "tiny_ops",
    family="host",
    title="Thousands of tiny ops (dispatch-bound)",
    thresholds={"min_ops_per_step": (1000.0, "ops/step"), "max_mean_op_ns": (50_000, "ns")},
)
def tiny_ops(ctx: RuleContext) -> list[Finding]:
    """Each step issues more than ``min_ops_per_step`` top-level framework ops averaging under
    ``max_mean_op_ns``: time goes to per-op dispatch overhead rather than to work."""
    host = ctx.frames.host
    ops = host[host["kind"] == Kind.CPU_OP]
    if not len(ops):
        raise RuleSkipped("skipped: needs framework op events")
    op_ids = pd.MultiIndex.from_arrays([ops["rank"].to_numpy(), ops["event_id"].to_numpy()])
    parent = pd.MultiIndex.from_arrays([ops["rank"].to_numpy(), ops["parent_id"].to_numpy()])
    top = ops[~parent.isin(op_ids)]
    per_step = len(top) / num_steps(ctx.analysis)
    mean_ns = float(top["dur_ns"].mean())
    if per_step < ctx.threshold("min_ops_per_step") or mean_ns > ctx.threshold("max_mean_op_ns"):
        return []
    ops_ns = float(top["dur_ns"].sum())
    top = top.assign(one=1)
    common = top["name"].astype(str).value_counts().head(3)
    return [
        ctx.finding(
            title=f"{per_step:.0f} framework ops per step averaging {ms(mean_ns)}",
            message=(
                f"{len(top)} top-level ops ({', '.join(f'{n} x{c}' for n, c in common.items())}) took {ms(ops_ns)}; "
                f"at this size dispatch overhead, not compute, sets the step time."
            ),
            metrics={
                "ops_per_step": metric(per_step, "ops/step"),
                "mean_op_ns": metric(mean_ns, "ns"),
                "ops_ns": metric(int(ops_ns), "ns"),
            },
            cost_ns=int(ops_ns * 0.5),
            event_ids=[int(x) for x in top["event_id"].head(5)],
            source_lines=lines_from(top, "one"),
            recommendation=(
                "Batch the work: replace per-element loops with one vectorized op (matmul, index_add, "
                "scatter), use _foreach ops, or torch.compile the loop so ops are fused."
            ),
        )
    ]


def _covered(ctx: RuleContext, spans: pd.DataFrame) -> np.ndarray:
    w = ctx.frames.step_windows.reset_index(drop=True)
    _rows, wi, ps, pe = clip_to_windows(
        spans["rank"].to_numpy(),
        spans["start_ns"].to_numpy(),
        (spans["start_ns"] + spans["dur_ns"]).to_numpy(),
        w["rank"].to_numpy(),
        w["start_ns"].to_numpy(),
        w["end_ns"].to_numpy(),
    )
    return union_length(wi, ps, pe, len(w))


@rule(
    "python_overhead",
    family="host",
    title="Framework (Python) overhead",
    thresholds={"max_pct": (40.0, "% of step time")},
)
def python_overhead(ctx: RuleContext) -> list[Finding]:
    """More than ``max_pct`` of step time passes on the host outside any framework op or data
    loading: Python code between ops (bookkeeping, logging, preprocessing, framework glue)."""
    host = ctx.frames.host
    busy = host[
        host["kind"].isin([Kind.CPU_OP, Kind.RUNTIME, Kind.SYNC]).to_numpy()
        | (host["kind"].isin([Kind.ANNOTATION]).to_numpy() & name_mask(host["name"], DATALOADER))
    ]
    if not len(busy):
        raise RuleSkipped("skipped: needs framework op events")
    w = ctx.frames.step_windows
    covered = _covered(ctx, busy)
    wall = float(w["dur_ns"].sum()) or 1.0
    outside = wall - float(covered.sum())
    pct = 100.0 * outside / wall
    if pct < ctx.threshold("max_pct"):
        return []
    py = host[(host["kind"] == Kind.PYTHON).to_numpy() & ~ctx.frames.encloses_step]
    py_self = ctx.frames.host_self_ns.reindex(py.index).to_numpy()
    return [
        ctx.finding(
            title=f"{pct:.0f}% of step time is Python outside framework ops",
            message=f"The host spent {ms(outside)} of {ms(wall)} outside any op, runtime call or data loading.",
            metrics={"outside_ops_pct": metric(pct, "%"), "outside_ops_ns": metric(int(outside), "ns")},
            cost_ns=int(outside),
            source_lines=lines_from(py, py_self),
            recommendation=(
                "Profile the Python between ops (the source lines listed); vectorize or cache that work, "
                "and consider torch.compile to remove framework glue from the loop."
            ),
        )
    ]


@rule("host_bound", family="host", title="Device waits on host work", thresholds={"max_pct": (20.0, "% of step time")})
def host_bound(ctx: RuleContext) -> list[Finding]:
    """The device is idle while the host runs framework ops or runtime calls for more than
    ``max_pct`` of step time (exposed host time in the temporal breakdown)."""
    bd = ctx.analysis.breakdown
    bd = bd[bd["device"] >= 0]
    if not len(bd):
        raise RuleSkipped("skipped: needs device events (kernels); this trace is host-only")
    wall = float(bd["wall_ns"].sum()) or 1.0
    exposed = float(bd["host_exposed_ns"].sum())
    pct = 100.0 * exposed / wall
    if pct < ctx.threshold("max_pct"):
        return []
    ops = ctx.analysis.ops
    heavy = ops[ops["device_ns"] < ops["host_self_ns"]].head(3)["name"].tolist()
    return [
        ctx.finding(
            title=f"Device waits on host ops {pct:.0f}% of step time",
            message=(
                f"For {ms(exposed)} the host ran ops or runtime calls while the device had nothing to do; "
                f"host-heavy ops: {', '.join(heavy) or 'n/a'}."
            ),
            metrics={"host_exposed_pct": metric(pct, "%"), "host_exposed_ns": metric(int(exposed), "ns")},
            cost_ns=int(exposed),
            source_lines=top_source_lines(ctx.analysis, "host_ns"),
            recommendation=(
                "Reduce host work per step: torch.compile / CUDA graphs, fewer and larger ops, "
                "DataLoader workers for input work, and no per-step Python bookkeeping."
            ),
        )
    ]
