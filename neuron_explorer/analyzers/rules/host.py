"""Host rules: syncs in the loop, data-loader stalls, host hotspots, tiny ops, Python overhead,
host-bound device."""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import DATALOADER, blocked_by_copies_ns, blocking_calls
from neuron_explorer.analyzers.attribution.one_time import in_one_time
from neuron_explorer.analyzers.attribution.python_time import python_exposed_ns
from neuron_explorer.analyzers.core.columns import name_mask
from neuron_explorer.analyzers.core.intervals import clip_to_windows, merge_windows
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.metrics.source_lines import attributed_files, is_user_frame_file
from neuron_explorer.analyzers.rules import _edits
from neuron_explorer.analyzers.rules._advice import (
    compile_advice,
    compiled_in_trace,
    fused_optimizer_advice,
    python_advice,
)
from neuron_explorer.analyzers.rules._evidence import (
    attributed_wall_ns,
    calls_in_steps,
    category_ns,
    issuing_ops,
    library_symbol,
    lines_from,
    ms,
    num_steps,
    of_wall,
    ranges,
    steady_attribution,
    top_source_lines,
    wall_ns,
    where,
    words,
)
from neuron_explorer.analyzers.rules._evidence import per_step as per_step_txt
from neuron_explorer.analyzers.rules._host_launch import launch_bound_explains, tiny_op_stats, tiny_ops_explain
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.frames import parse_python_frame
from neuron_explorer.trace.schema import Kind


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
    thresholds={"min_per_step": (1.0, "syncs/step"), "min_pct": (1.0, "% of step time")},
)
def sync_in_loop(ctx: RuleContext) -> list[Finding]:
    """The host blocks on the device inside the steps (``.item()``, ``.cpu()``, ``print(loss)``,
    ``torch.cuda.synchronize()``, event syncs, data-dependent shapes like ``nonzero``); each one
    drains the launch queue. Cost: the ``host_blocked`` time of the synchronize calls (blocking
    copies are ``sync_memcpy``'s), inside steps only; syncs outside steps are reported apart."""
    if not len(ctx.frames.host_of(Kind.RUNTIME)) or not len(ctx.frames.device):
        raise RuleSkipped("skipped: needs device runtime events (a GPU/accelerator trace)")
    calls = blocking_calls(ctx.frames)
    syncs = calls[calls["reason"] == "sync"]
    if not len(syncs):
        return []
    # one-time work's syncs (a graph capture's, a warm-up step's) are not the loop's
    inside = calls_in_steps(ctx, syncs) & ~in_one_time(ctx.frames, syncs)
    loop = syncs[inside]
    per_step = len(loop) / num_steps(ctx.analysis)
    wall = attributed_wall_ns(ctx.analysis) or 1
    blocked = max(category_ns(ctx.analysis, "host_blocked") - blocked_by_copies_ns(ctx.frames), 0)
    pct = 100.0 * blocked / wall
    if per_step < ctx.threshold("min_per_step") or pct < ctx.threshold("min_pct"):
        return []
    src = issuing_ops(ctx, loop).assign(dur_ns=loop["dur_ns"].to_numpy())
    top_ops = src["name"].dropna().astype(str).value_counts().head(3).index.tolist()
    outside_ns = int(syncs.loc[~inside, "dur_ns"].sum())
    tr, ids = ranges(loop)
    names = sorted({str(n) for n in loop["name"]})
    return [
        ctx.finding(
            title=f"{per_step:.0f} host-device syncs {per_step_txt(ctx.frames.has_steps)} block the host {pct:.1f}% "
            f"{of_wall(ctx.frames.has_steps)}",
            message=(
                f"{len(loop)} synchronizing calls inside steps ({', '.join(names)[:120]}) held the host while the "
                f"device had nothing to run for {ms(blocked)}"
                + (f"; issued by {', '.join(top_ops)}" if top_ops else "")
                + (
                    f". Outside steps or in one-time work: {int((~inside).sum())} more ({ms(outside_ns)}), not counted."
                    if outside_ns
                    else "."
                )
            ),
            metrics={
                "syncs_per_step": metric(per_step, "syncs/step"),
                "blocked_ns": metric(int(blocked), "ns"),
                "blocked_pct": metric(pct, "%"),
                "sync_call_ns": metric(int(loop["dur_ns"].sum()), "ns"),
                "outside_steps_ns": metric(outside_ns, "ns"),
            },
            cost_ns=int(blocked),
            category="host_blocked",
            edits=_edits.unblock(loop, f"{len(loop)} synchronizing calls in steps wait for nothing"),
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines_from(src, "dur_ns"),
            recommendation=(
                "Keep values on the device inside the loop: "
                + (
                    "accumulate the loss in a device tensor and call .item() every N steps"
                    if ctx.frames.run_kind.training
                    else "keep outputs on the device and copy results to the host once per batch of steps"
                )
                + ", avoid print(tensor)/.cpu()/.tolist() and "
                + (
                    "torch.cuda.synchronize()"
                    if ctx.frames.hardware.torch_device == "cuda"
                    else "device synchronize calls"
                )
                + " in the step, and avoid data-dependent shapes (torch.nonzero, boolean masks) on the hot path."
            ),
        )
    ]


@rule("dataloader_stall", family="host", title="Data-loader stall", thresholds={"max_pct": (5.0, "% of step time")})
def dataloader_stall(ctx: RuleContext) -> list[Finding]:
    """Waiting for the next batch (``enumerate(DataLoader)...__next__``) takes more than
    ``max_pct`` of step time while the device has nothing to run (TensorBoard plugin threshold:
    5%). Cost: the ``data_loading`` category. Evidence: the frames inside the loader spans that
    hold the time, library frames included (``scipy.ndimage.zoom``, PIL decoding, ...)."""
    host = ctx.frames.host
    span = host[host["kind"].isin([Kind.ANNOTATION, Kind.CPU_OP]).to_numpy() & name_mask(host["name"], DATALOADER)]
    if not len(span):
        raise RuleSkipped("skipped: needs DataLoader events (iterate a torch DataLoader inside the profiled steps)")
    wall = attributed_wall_ns(ctx.analysis) or 1
    load_ns = category_ns(ctx.analysis, "data_loading")
    pct = 100.0 * load_ns / wall
    if pct < ctx.threshold("max_pct"):
        return []
    calls = loader_calls(ctx, span)
    inside, inside_self = calls.inside, calls.inside_self
    real = span[~calls.exhausted]
    batches = int(calls_in_steps(ctx, real).sum()) or len(real) or 1
    held = library_frame(inside, inside_self, int(span["dur_ns"].sum()), host["src_file"].dropna().unique())
    where = ""
    if held is not None and held["share_pct"] >= 50.0:
        caller = f" called from {held['caller']}" if held["caller"] else ""
        where = f"; {held['share_pct']:.0f}% of the loader's time is inside {held['name']} (library){caller}"
    exhausted = int(calls.exhausted.sum())
    tr, ids = ranges(real if len(real) else span)
    return [
        ctx.finding(
            title=f"Waiting for data takes {pct:.0f}% {of_wall(ctx.frames.has_steps)}"
            + (f", inside {held['name']} (library)" if where else ""),
            message=(
                f"The device had nothing to run for {ms(load_ns)} while the loop waited for {batches} batches "
                f"({ms(load_ns / batches)} per batch) in the DataLoader{where}."
                + (
                    " The loader's last call, which found it exhausted (StopIteration), is not counted as a batch."
                    if exhausted
                    else ""
                )
            ),
            metrics={
                "dataloader_pct": metric(pct, "%"),
                "dataloader_ns": metric(int(load_ns), "ns"),
                "per_batch_ns": metric(load_ns / batches, "ns"),
                "batches": metric(batches, "batches"),
                **({"library_share_pct": metric(held["share_pct"], "%")} if where else {}),
            },
            cost_ns=int(load_ns),
            category="data_loading",
            edits=_edits.scaled(real if len(real) else span, 0.0, "the batches are ready when asked for"),
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines_from(inside, inside_self, n=5, user_only=False),
            recommendation=(
                "Load data in parallel: DataLoader(dataset, num_workers=4, "
                + ("pin_memory=True, " if len(ctx.frames.device) else "")  # pinned memory only speeds device copies
                + "persistent_workers=True, prefetch_factor=2); "
                + (
                    f"the time is in {held['name']}, called from {held['caller'] or 'the dataset'}: "
                    "run it in the workers, on whole batches, or once ahead of the loop (cache its output)."
                    if where
                    else "move decoding/augmentation off the hot path or cache preprocessed data."
                )
            ),
        )
    ]


class LoaderCalls(NamedTuple):
    """The host events inside the DataLoader's ``__next__`` spans, their self time, and which
    spans are the loader's final, exhausted call (it raised StopIteration: no batch)."""

    inside: pd.DataFrame
    inside_self: np.ndarray
    exhausted: np.ndarray  # per row of the spans, in their order


def loader_calls(ctx: RuleContext, span: pd.DataFrame) -> LoaderCalls:
    """Assign each host event to the loader span its start lies in (whole columns). A span is
    the exhausted call when it is its rank's last and fetched nothing: no framework op (the
    collate's ``aten::stack``) and no ``fetch`` frame ran in it."""
    host = ctx.frames.host
    cand = host[(host["kind"] != Kind.STEP).to_numpy() & ~ctx.frames.encloses_step]
    cand = cand[~name_mask(cand["name"], DATALOADER)]
    order = np.lexsort((span["start_ns"].to_numpy(), span["rank"].to_numpy()))
    ws = span["start_ns"].to_numpy()[order]
    wr = span["rank"].to_numpy()[order]
    we = ws + span["dur_ns"].to_numpy()[order]
    s = cand["start_ns"].to_numpy()
    rows, win, _, _ = clip_to_windows(cand["rank"].to_numpy(), s, s + 1, wr, ws, we)
    inside = cand.iloc[rows]
    fetched = (inside["kind"] == Kind.CPU_OP).to_numpy() | name_mask(inside["name"], r"fetch")
    did_fetch = np.zeros(len(span), bool)
    did_fetch[np.unique(win[fetched])] = True
    last = np.r_[wr[1:] != wr[:-1], True]
    exhausted_sorted = last & ~did_fetch
    exhausted = np.zeros(len(span), bool)
    exhausted[order] = exhausted_sorted
    inside_self = ctx.frames.host_self_ns.reindex(inside.index).to_numpy()
    return LoaderCalls(inside, inside_self, exhausted)


def library_frame(
    inside: pd.DataFrame, self_ns: np.ndarray, wait_ns: int, ctx_user_files: Any = None
) -> dict[str, Any] | None:
    """The library Python frame holding the most self time among ``inside`` (data-loading
    machinery of torch.utils.data aside), its share of ``wait_ns``, and the user line that called
    it (the frame's own attribution: the nearest user caller)."""
    py = (inside["kind"] == Kind.PYTHON).to_numpy()
    if not py.any() or wait_ns <= 0:
        return None
    names = inside["name"][py].astype(str)
    own = names.map(parse_python_frame)
    known = attributed_files(ctx_user_files if ctx_user_files is not None else inside["src_file"].dropna().unique())

    def is_library(path: str) -> bool:
        if "torch/utils/data" in path:  # the loader's own machinery: not where the time goes
            return False
        return not is_user_frame_file(path, known)

    lib = own.map(lambda f: f is not None and is_library(f[0])).to_numpy(bool)
    if not lib.any():
        return None
    frame = pd.DataFrame(
        {
            "name": names.to_numpy()[lib],
            "ns": self_ns[py][lib],
            "caller": (
                inside["src_file"][py].astype(object).astype(str).to_numpy()[lib]
                + ":"
                + inside["src_line"][py].astype("Int64").astype(str).to_numpy()[lib]
            ),
        }
    )
    by = frame.groupby("name")["ns"].sum().sort_values(ascending=False)
    top = str(by.index[0])
    callers = frame[frame["name"] == top].groupby("caller")["ns"].sum().sort_values(ascending=False)
    file, _, func = parse_python_frame(top) or ("", 0, "")
    caller = str(callers.index[0]) if len(callers) and not str(callers.index[0]).startswith(("nan", "None")) else ""
    return {
        "name": library_symbol(file, func),
        "ns": int(by.iloc[0]),
        "share_pct": 100.0 * float(by.iloc[0]) / wait_ns,
        "caller": caller,
    }


@rule(
    "host_hotspot",
    family="host",
    title="Host hotspot by source line",
    thresholds={"min_pct": (10.0, "% of profiled time")},
)
def host_hotspot(ctx: RuleContext) -> list[Finding]:
    """A user source line whose own Python time (self time of the user's frames, outside framework
    ops and library code) exceeds ``min_pct`` of the profiled time (every step window, warm-up
    included): per-element loops or preprocessing on
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
            title=f"{top['file']}:{top['line']} ({top['func']}) spends {pct:.0f}% of the profiled time in its own Python",
            message=(
                f"{len(lines)} line(s) of your code each spend over {ctx.threshold('min_pct'):.0f}% of the profiled "
                f"time in their own Python (not in framework ops or library code); the top one {ms(top['python_ns'])}, "
                f"all of them {ms(sum(x['python_ns'] for x in lines))}."
            ),
            metrics={"host_pct": metric(pct, "%"), "python_ns": metric(top["python_ns"], "ns")},
            cost_ns=int(sum(x["python_ns"] for x in lines)),
            edits=_edits.self_time(_python_at(ctx, lines), 0.0, f"the own Python of {len(lines)} line(s) removed"),
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
    thresholds={"min_ops_per_step": (1000.0, "ops/step"), "max_mean_op_ns": (50_000, "ns"), "min_pct": (10.0, "%")},
)
def tiny_ops(ctx: RuleContext) -> list[Finding]:
    """Each step issues more than ``min_ops_per_step`` top-level framework ops averaging under
    ``max_mean_op_ns``, and the time they hold is at least ``min_pct`` of step time: per-op
    dispatch overhead sets the step time. Cost: on a device trace the ``host_launch`` time (the
    device starved while the host dispatched), on a CPU trace the ops' own (``compute``) time."""
    stats = tiny_op_stats(ctx)
    if stats is None:
        raise RuleSkipped("skipped: needs framework op events")
    top, per_step, mean_ns = stats
    if per_step < ctx.threshold("min_ops_per_step") or mean_ns > ctx.threshold("max_mean_op_ns"):
        return []
    host_only = not len(ctx.frames.device)
    category = "compute" if host_only else "host_launch"
    held = category_ns(ctx.analysis, category)
    pct = 100.0 * held / (attributed_wall_ns(ctx.analysis) or 1)
    if pct < ctx.threshold("min_pct"):
        return []
    common = top["name"].astype(str).value_counts().head(3)
    what = "ran framework ops" if host_only else "dispatched ops while the device had nothing to run"
    return [
        ctx.finding(
            title=f"{per_step:.0f} framework ops {per_step_txt(ctx.frames.has_steps)} averaging {ms(mean_ns)}",
            message=(
                f"{len(top)} top-level ops ({', '.join(f'{n} x{c}' for n, c in common.items())}); the host {what} "
                f"for {ms(held)} ({pct:.0f}% {of_wall(ctx.frames.has_steps)}): at this size dispatch overhead, not "
                "compute, sets the time."
            ),
            metrics={
                "ops_per_step": metric(per_step, "ops/step"),
                "mean_op_ns": metric(mean_ns, "ns"),
                f"{category}_ns": metric(int(held), "ns"),
                f"{category}_pct": metric(pct, "%"),
            },
            cost_ns=int(held),
            category=category,
            event_ids=[int(x) for x in top["event_id"].head(5)],
            source_lines=lines_from(top.assign(one=1), "one"),
            recommendation=(
                "Batch the work: replace per-element loops with one vectorized op (torch.matmul, index_add_, "
                "scatter_add_), use torch._foreach_* ops for lists of tensors, or torch.compile the loop so ops are fused."
            ),
        )
    ]


@rule(
    "python_overhead",
    family="host",
    title="Framework (Python) overhead",
    thresholds={"max_pct": (40.0, "% of step time")},
)
def python_overhead(ctx: RuleContext) -> list[Finding]:
    """More than ``max_pct`` of step time passes in Python frames outside any framework op, data
    loading or blocking call while the device has nothing to run (the ``host_python``
    category). Needs Python events (``with_stack=True``): time with no host events at all is
    ``untraced``, never called Python. Measured over the steady steps: the warm-up steps' one-time
    Python (lazy initialization, first calls) is ``warmup_cost``'s."""
    host = ctx.frames.host
    if not (host["kind"] == Kind.PYTHON).any():
        raise RuleSkipped("skipped: needs Python events (profile with with_stack=True)")
    at = steady_attribution(ctx.analysis)
    wall = float(at["wall_ns"].sum() - at["one_time_ns"].sum()) or 1.0
    python_ns = int(at["host_python_ns"].sum())
    pct = 100.0 * python_ns / wall
    if pct < ctx.threshold("max_pct"):
        return []
    # each frame's own time at the host_python instants: where the priced time is
    own = python_exposed_ns(ctx.frames)
    held = own > 0
    py = host[held]
    weight = own[held].astype(np.float64)
    top, families = where(py["name"], weight, float(weight.sum()))
    # the user lines the time sits under, by weight (not split by module inside a harness line:
    # the time is mostly not in modules)
    lines = lines_from(py.drop(columns=["src_module"], errors="ignore"), weight)
    line_share = 100.0 * sum(x["ns"] for x in lines) / max(float(weight.sum()), 1.0)
    hw = ctx.frames.hardware
    compiled = compiled_in_trace(ctx.frames)
    compile_words = None if compiled and hw.device_type not in ("cuda", "hip") else compile_advice(hw, compiled)
    named = (
        f" The time is in {words(top)}"
        + (
            f"; the lines named are where your code calls into it ({line_share:.0f}% of the time is under them)"
            if lines and top and top[0]["family"] != "user"
            else ""
        )
        + "."
        if top
        else ""
    )
    return [
        ctx.finding(
            title=f"{pct:.0f}% {of_wall(ctx.frames.has_steps)} is Python outside framework ops"
            + (f", most in {top[0]['symbol']}" if top and top[0]["share_pct"] >= 50 else ""),
            message=(
                f"For {ms(python_ns)} the host ran Python frames outside any op, runtime call or data loading while "
                f"the device had nothing to run.{named}"
            ),
            metrics={
                "python_pct": metric(pct, "%"),
                "python_ns": metric(int(python_ns), "ns"),
                **{f"{f}_pct": metric(v, "%") for f, v in sorted(families.items())},
            },
            cost_ns=int(python_ns),
            category="host_python",
            edits=_edits.self_time(py, 0.0, "Python outside framework ops removed"),
            source_lines=lines,
            recommendation=python_advice(families, compile_words, _optimizer_words(ctx, py)),
        )
    ]


def _optimizer_words(ctx: RuleContext, py: pd.DataFrame) -> str | None:
    """The optimizer advice: fused where the device has it, naming a multi-tensor optimizer the
    trace already runs (``_multi_tensor_adam``), so the advice is not what the run does."""
    words = fused_optimizer_advice(ctx.frames.hardware, ctx.frames.run_kind)
    multi = py["name"].astype(str).str.extract(r"(_multi_tensor_\w+)", expand=False).dropna()
    if words and len(multi) and ctx.frames.hardware.fused_optimizer:
        return (
            f"the run already uses the multi-tensor (foreach) optimizer ({multi.iloc[0]}); the fused one does the "
            "whole step in a few kernels: torch.optim.AdamW(model.parameters(), lr=..., fused=True)"
        )
    return words


@rule("host_bound", family="host", title="Device waits on host work", thresholds={"max_pct": (20.0, "% of step time")})
def host_bound(ctx: RuleContext) -> list[Finding]:
    """The device has nothing queued and nothing to run while the host runs framework ops or
    runtime calls (the ``host_launch`` category) for more than ``max_pct`` of step time. When
    the ops are tiny (``tiny_ops``) or the kernels short (``launch_bound``), that rule names the
    cause instead, and an unfused optimizer's own host time is ``unfused_optimizer``'s; a host
    that runs ahead of a busy queue is never host-bound."""
    if not len(ctx.frames.device):
        raise RuleSkipped("skipped: needs device events (kernels); this trace is host-only")
    from neuron_explorer.analyzers.rules.optimizer import unfused_optimizer_exposed_ns

    wall = attributed_wall_ns(ctx.analysis, device_only=True) or 1
    # an unfused optimizer's own host time is that finding's (the specific cause wins)
    exposed = max(category_ns(ctx.analysis, "host_launch") - unfused_optimizer_exposed_ns(ctx), 0)
    pct = 100.0 * exposed / wall
    if pct < ctx.threshold("max_pct") or tiny_ops_explain(ctx) or launch_bound_explains(ctx):
        return []
    heavy, steady_ops = _steady_host_heavy_ops(ctx)
    return [
        ctx.finding(
            title=f"Device starved by host work {pct:.0f}% {of_wall(ctx.frames.has_steps)}",
            message=(
                f"For {ms(exposed)} the host ran ops or runtime calls while the device had nothing queued or "
                f"running; host-heavy ops: {', '.join(heavy) or 'n/a'}."
            ),
            metrics={"host_launch_pct": metric(pct, "%"), "host_launch_ns": metric(int(exposed), "ns")},
            cost_ns=int(exposed),
            category="host_launch",
            source_lines=lines_from(steady_ops, "self_ns"),
            recommendation=(
                f"Reduce host work per step: {compile_advice(ctx.frames.hardware, compiled_in_trace(ctx.frames))}, "
                "fewer and larger ops, DataLoader workers for input work, and no per-step Python bookkeeping."
            ),
        )
    ]


def _steady_host_heavy_ops(ctx: RuleContext, n: int = 3) -> tuple[list[str], pd.DataFrame]:
    """The ``n`` op names with the most host self time outside one-time work (a compile's
    ``dynamo_timed`` spans are not what starves the steady state) among those whose ops run
    less device time than host self time; and every op outside one-time work (with
    ``self_ns``), whose lines are where the steady state's host time goes."""
    host = ctx.frames.host
    m = (host["kind"] == Kind.CPU_OP).to_numpy()
    ops = host[m].assign(self_ns=ctx.frames.host_self_ns.to_numpy()[m])
    ops = ops[~in_one_time(ctx.frames, ops)]
    whole = ctx.analysis.ops
    light = set(whole.loc[whole["device_ns"] < whole["host_self_ns"], "name"].astype(str))
    heavy = ops[ops["name"].astype(str).isin(light).to_numpy()]
    by_name = heavy.groupby(heavy["name"].astype(str).to_numpy())["self_ns"].sum().sort_values(ascending=False)
    return by_name.head(n).index.tolist(), ops


def _python_at(ctx: RuleContext, lines: list[dict[str, Any]]) -> pd.DataFrame:
    """The Python frame events at the given user source lines (their own time is the line's)."""
    host = ctx.frames.host
    py = host[(host["kind"] == Kind.PYTHON).to_numpy()]
    want = {(str(x["file"]), int(x["line"])) for x in lines}
    at = [(str(f), int(n)) in want for f, n in zip(py["src_file"].astype(object), py["src_line"].fillna(-1))]
    return py[np.asarray(at, bool)]
