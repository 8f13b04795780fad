"""Memory rules: synchronous/pageable memcpy, small H2D copies, memory near capacity, churn.

Leaks and fragmentation, read from the live-set replay, are in ``memory_live.py``."""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import blocked_by_copies_ns, blocking_calls, exposed_ns
from neuron_explorer.analyzers.attribution.one_time import in_one_time
from neuron_explorer.analyzers.attribution.queued import copy_queue_split
from neuron_explorer.analyzers.core.columns import lookup, name_mask, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.memory_live import activations_by_module, at_peak_view
from neuron_explorer.analyzers.memory_live.fragmentation import fragmentation_pattern
from neuron_explorer.analyzers.memory_live.phases import backward_windows
from neuron_explorer.analyzers.metrics.host_reads import host_reads
from neuron_explorer.analyzers.metrics.memory import NO_MEMORY_EVENTS
from neuron_explorer.analyzers.metrics.source_lines import user_mask
from neuron_explorer.analyzers.rules import _edits
from neuron_explorer.analyzers.rules._evidence import (
    attributed_wall_ns,
    calls_in_steps,
    issuing_ops,
    lines_from,
    ms,
    num_steps,
    ranges,
    step_unit,
    top_source_lines,
)
from neuron_explorer.analyzers.rules._evidence import per_step as per_step_words
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.schema import Kind
from neuron_explorer.trace.units import format_duration, format_quantity


def _memcpys(ctx: RuleContext) -> pd.DataFrame:
    dev = ctx.frames.device
    m = dev[dev["kind"] == Kind.MEMCPY]
    if not len(m):
        raise RuleSkipped("skipped: needs device memcpy events")
    return m


def launched_by(frames: TraceFrames, calls: pd.DataFrame) -> pd.DataFrame:
    """The device work (copies) the runtime calls ``calls`` launched."""
    dev = frames.device
    pos = lookup(
        ukey(calls["rank"].to_numpy(), calls["event_id"].to_numpy()),
        ukey(dev["rank"].to_numpy(), dev["launch_id"].to_numpy()),
    )
    return dev[pos >= 0]


@rule(
    "sync_memcpy",
    family="memory",
    title="Synchronous or pageable memcpy",
    thresholds={"min_pct": (0.5, "% of step time")},
)
def sync_memcpy(ctx: RuleContext) -> list[Finding]:
    """Copies that block the host: a blocking runtime call (``cudaMemcpy``, ``hipMemcpyWithStream``)
    or an async copy from/to pageable host memory, which the driver makes synchronous (Nsight's
    cuda_memcpy_async / cuda_memcpy_sync). Each call is cut where the work queued before it on
    its copy's stream ends (``queued.copy_queue_split``): before, the call waits for that queue
    (what the queue waits on is ``device_queue_wait``'s); after, for its own transfer. Cost: the
    ``host_blocked`` time under the own-transfer parts (the device running nothing meanwhile),
    inside steps; pinned-memory advice only when that part is at least ``min_pct``. Copies
    that mostly wait for the queue get a finding that says so, priced at their own part."""
    _memcpys(ctx)
    calls = blocking_calls(ctx.frames)
    copies = calls[calls["reason"] == "copy"]
    # one-time work's copies (a compile's autotuning, a warm-up step, a graph capture) are not the loop's
    copies = copies[~in_one_time(ctx.frames, copies)]
    if not len(copies):
        return []
    m = launched_by(ctx.frames, copies)
    pageable = m["memcpy_kind"].astype(str).str.contains("Pageable", case=False).to_numpy()
    blocked = blocked_by_copies_ns(ctx.frames)
    split = copy_queue_split(ctx.frames, copies)
    own_spans = split.assign(start_ns=split["start_ns"] + split["queue_dur_ns"], dur_ns=split["own_dur_ns"])
    own = exposed_ns(ctx.frames, own_spans[own_spans["dur_ns"] > 0])
    queued = exposed_ns(ctx.frames, split.assign(dur_ns=split["queue_dur_ns"])[split["queue_dur_ns"] > 0])
    wall = attributed_wall_ns(ctx.analysis) or 1
    pct, queue_pct = 100.0 * own / wall, 100.0 * queued / wall
    inside = calls_in_steps(ctx, copies)
    loop = copies[inside] if inside.any() else copies
    if max(pct, queue_pct) < ctx.threshold("min_pct"):
        return _serializing_copies(ctx, loop, wall)
    loop_split = split[inside] if inside.any() else split
    ops = issuing_ops(ctx, loop).assign(dur_ns=loop["dur_ns"].to_numpy())
    top_ops = ops["name"].dropna().astype(str).value_counts().head(3).index.tolist()
    kinds = m.loc[pageable, "memcpy_kind"].astype(str).value_counts().head(2).index.tolist()
    waiting = int((loop_split["queue_dur_ns"] > 0).sum())
    blocking = int((loop_split["own_dur_ns"] > 0).sum())
    tr, ids = ranges(loop)
    issued = f"; issued by {', '.join(top_ops)}" if top_ops else ""
    reads = host_reads(ctx.frames, loop, _kinds_of(ctx.frames, loop))
    n_item, n_next = int((reads == "item").sum()), int((reads == "next_op").sum())
    n_read = n_item + n_next
    read_words = (
        f"; {n_read} of them bring back values the host reads at once ("
        + ", ".join(
            w
            for w in (
                f"{n_item} under .item() or a scalar read" if n_item else "",
                f"{n_next} whose copied tensor the next op on the host takes" if n_next else "",
            )
            if w
        )
        + ")"
        if n_read
        else ""
    )
    read_advice = (
        (
            "The host reads what these copies bring back at once"
            if n_read == len(loop)
            else f"The host reads what {n_read} of these copies bring back at once"
        )
        + ", so non_blocking=True alone saves nothing there (the wait moves to the read; the data dependency "
        "stays): keep the value on the device (torch ops instead of .item()/.tolist() and Python on it), read it "
        "back every N steps, or launch the next step's work (or prepare the next batch) before reading it. "
        if n_read
        else ""
    )
    queue_words = (
        f"{ms(queued)} of it, in {waiting} copies, waits for device work queued before them on their stream "
        "(what that work waits on: device_queue_wait), not for the copies"
    )
    metrics = {
        "copies": metric(blocking, "copies"),
        "pageable": metric(int(pageable.sum()), "copies"),
        "blocked_ns": metric(int(blocked), "ns"),
        "own_transfer_ns": metric(int(own), "ns"),
        "queue_wait_ns": metric(int(queued), "ns"),
        "blocked_pct": metric(pct, "%"),
        "copy_call_ns": metric(int(loop["dur_ns"].sum()), "ns"),
        "read_at_once": metric(n_read, "copies"),
    }
    common = {"metrics": metrics, "cost_ns": int(own), "category": "host_blocked", "time_ranges": tr,
              "event_ids": ids, "source_lines": lines_from(ops, "dur_ns")}  # fmt: skip
    if pct < ctx.threshold("min_pct"):  # the copies wait for the queue: pinning them saves nothing
        return [
            ctx.finding(
                # what faster copies would save: their transfers gone, the calls still waiting
                edits=_edits.scaled(
                    launched_by(ctx.frames, loop),
                    0.0,
                    f"the own transfers of {len(loop)} blocking copies take no time (the calls still wait for the "
                    "work queued before them)",
                ),
                title=f"{waiting} blocking copies wait {ms(queued)} for device work queued before them",
                message=(
                    f"{len(copies)} copy calls held the host for {ms(blocked)} with the device running nothing; "
                    f"{queue_words}. Their own transfers cost {ms(own)} ({pct:.2f}% of step time){issued}."
                ),
                recommendation=(
                    "Pinned memory would save nothing here: the copies wait for the work queued before them, so fix "
                    "what that work waits on (the device_queue_wait finding) or read results back less often: keep "
                    "them on the device and call .item()/.cpu() once every N steps."
                ),
                **common,
            )
        ]
    return [
        ctx.finding(
            title=f"{blocking} blocking copies hold the host {pct:.1f}% of step time"
            + (": the host reads their bytes at once" if n_read == len(loop) else ""),
            message=(
                f"{len(copies)} copy calls blocked the host for {ms(loop['dur_ns'].sum())} in steps, {ms(own)} of it "
                "for their own transfers with the device running nothing"
                + (f" ({queue_words})" if queued else "")
                + (
                    f"; {int(pageable.sum())} copies touched pageable memory ({', '.join(kinds)})"
                    if pageable.any()
                    else ""
                )
                + read_words
                + issued
                + "."
            ),
            edits=_edits.unblock(
                loop,
                f"{len(loop)} blocking copies made asynchronous (pinned, non_blocking=True)"
                if not n_read
                else f"the host no longer waits for {len(loop)} blocking copies (values kept on the device)",
            ),
            recommendation=read_advice
            + (
                "Copy through pinned memory without blocking: DataLoader(..., pin_memory=True) or tensor.pin_memory(), "
                "then tensor.to(device, non_blocking=True); keep results on the device instead of .cpu()/.item()/"
                ".numpy() inside the step, and read them back every N steps."
                if n_read < len(loop)
                else ""
            ).strip(),
            **common,
        )
    ]


def _kinds_of(frames: TraceFrames, calls: pd.DataFrame) -> pd.Series:
    """The ``memcpy_kind`` of the copy each runtime call of ``calls`` launched ("" when none)."""
    dev = frames.device
    pos = lookup(
        ukey(dev["rank"].to_numpy(), dev["launch_id"].to_numpy()),
        ukey(calls["rank"].to_numpy(), calls["event_id"].to_numpy()),
    )
    kind = dev["memcpy_kind"].astype(object).to_numpy()
    return pd.Series(np.where(pos >= 0, kind[np.maximum(pos, 0)], ""), index=calls.index)


def _serializing_copies(ctx: RuleContext, loop: pd.DataFrame, wall: int) -> list[Finding]:
    """Blocking copies that leave the device no idle time to bill (the host waits while the
    device runs the work queued before them) but hold back the host work after them: the host
    can only start it once the queue has drained, and then the device waits for the host.
    Nothing of it is host_blocked with an idle device, so the attribution has no cost for it;
    the replay of the copies made asynchronous has (the fix's saving is the finding's cost, at
    least ``min_pct`` of step time). Seen on an H200: a 4 KiB pageable ``.cpu()`` after four
    large matmuls, then ~1.4 ms of host work: 1.35 ms a step measured, 1.33 ms replayed."""
    if not ctx.frames.has_steps or not len(loop) or not len(ctx.frames.device):
        return []
    from neuron_explorer.analyzers.graph.pricing import price
    from neuron_explorer.trace.errors import AnalysisError

    edit = _edits.unblock(loop, f"{len(loop)} blocking copies made asynchronous (pinned, non_blocking=True)")
    try:
        saving = price(ctx.frames, [edit]).savings[0]
    except AnalysisError:
        return []
    saving_pct = 100.0 * saving / wall
    if saving_pct < ctx.threshold("min_pct"):
        return []
    ops = issuing_ops(ctx, loop).assign(dur_ns=loop["dur_ns"].to_numpy())
    top_ops = ops["name"].dropna().astype(str).value_counts().head(3).index.tolist()
    tr, ids = ranges(loop)
    return [
        ctx.finding(
            title=(
                f"{len(loop)} blocking copies hold back the host work after them: making them asynchronous saves "
                f"{saving_pct:.1f}% of step time"
            ),
            message=(
                f"{len(loop)} copy calls in steps blocked the host for {ms(loop['dur_ns'].sum())} while the device ran "
                "the work queued before them, so the host work after each copy could not overlap that work and the "
                f"device then waited for the host. Replayed with the copies asynchronous, the steps take "
                f"{ms(saving)} less ({ms(saving / len(loop))} per copy)"
                + (f"; issued by {', '.join(top_ops)}" if top_ops else "")
                + "."
            ),
            edits=edit,
            recommendation=(
                "Copy into pinned memory without blocking (tensor.to('cpu', non_blocking=True) into a pinned buffer, "
                "or tensor.pin_memory()), and read the value only when the host needs it (after the next step's "
                "launches, or every N steps); keep results on the device instead of .cpu()/.item() inside the step."
            ),
            metrics={
                "copies": metric(len(loop), "copies"),
                "copy_call_ns": metric(int(loop["dur_ns"].sum()), "ns"),
                "replayed_saving_ns": metric(int(saving), "ns"),
                "replayed_saving_pct": metric(saving_pct, "%"),
            },
            cost_ns=int(saving),
            category="host_blocked",
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines_from(ops, "dur_ns"),
        )
    ]


@rule(
    "small_h2d",
    family="memory",
    title="Many small host-to-device copies",
    thresholds={"max_bytes": (65_536, "bytes"), "min_per_step": (10.0, "copies/step")},
)
def small_h2d(ctx: RuleContext) -> list[Finding]:
    """More than ``min_per_step`` host-to-device copies of at most ``max_bytes`` per step: each
    pays a fixed launch and DMA setup cost (Nsight skips copies <= 64 KB for the same reason)."""
    m = _memcpys(ctx)
    if m["bytes"].le(0).all():
        raise RuleSkipped("skipped: needs memcpy byte counts")
    h2d = m[m["memcpy_kind"].astype(str).str.contains("HtoD", case=False).to_numpy()]
    small = h2d[(h2d["bytes"] >= 0) & (h2d["bytes"] <= ctx.threshold("max_bytes"))]
    if ctx.frames.has_steps:  # "per step" counts the copies in steps, not those before or after them
        small = small[calls_in_steps(ctx, small)]
    per_step = len(small) / num_steps(ctx.analysis)
    if per_step < ctx.threshold("min_per_step"):
        return []
    ev = ctx.frames.launch_events
    mine = pd.Index(ukey(ev["rank"].to_numpy(), ev["event_id"].to_numpy())).isin(
        ukey(small["rank"].to_numpy(), small["event_id"].to_numpy())
    )  # event ids are per rank
    launch_ns = float(ev.loc[mine, "launch_dur_ns"].sum())
    tr, ids = ranges(small)
    return [
        ctx.finding(
            title=f"{per_step:.0f} small host-to-device copies {per_step_words(ctx.frames.has_steps)}",
            message=(
                f"{len(small)} H2D copies of <= {int(ctx.threshold('max_bytes'))} bytes (mean "
                f"{small['bytes'].mean():.0f} B) cost {ms(small['dur_ns'].sum())} on the device and {ms(launch_ns)} to launch"
                f" ({format_duration(small['dur_ns'].sum() + launch_ns)} in all: the cost)."
            ),
            metrics={
                "copies_per_step": metric(per_step, step_unit("copies", ctx.frames.has_steps)),
                "mean_bytes": metric(float(small["bytes"].mean()), "bytes"),
                "device_ns": metric(int(small["dur_ns"].sum()), "ns"),
            },
            cost_ns=int(small["dur_ns"].sum() + launch_ns),
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines_from(small, "dur_ns"),
            recommendation=(
                "Batch the inputs into one tensor (collate on the host, one .to(device) per batch), keep "
                "constants on the device, and create small tensors directly on the device."
            ),
        )
    ]


@rule(
    "memory_capacity",
    family="memory",
    title="Device memory near capacity",
    thresholds={"max_peak_pct": (90.0, "% of device memory")},
    cost_is_time=False,  # the risk of running out of memory, not time spent
)
def memory_capacity(ctx: RuleContext) -> list[Finding]:
    """Peak reserved or allocated memory above ``max_peak_pct`` of the device's capacity
    (TensorBoard plugin threshold): one larger batch or fragmentation away from OOM. The
    evidence names the lines holding the most at the peak (the live-set replay), what the peak
    is made of (activations, gradients, parameters and state, temporaries), and what
    activation checkpointing of the module holding the most saved activations would free."""
    ms_ = ctx.analysis.memory_summary
    if not ms_.get("has_memory_events"):
        raise RuleSkipped(f"skipped: needs memory events: {NO_MEMORY_EVENTS}")
    devs = [d for d in ms_.get("devices", []) if d.get("device_type") != "cpu"]
    if not devs:
        raise RuleSkipped("skipped: needs device memory events (profile_memory=True on a device)")
    with_cap = [d for d in devs if d.get("capacity_bytes")]
    if not with_cap:
        raise RuleSkipped("skipped: needs device capacity (deviceProperties totalGlobalMem)")
    worst = max(with_cap, key=lambda d: d["peak_pct"])
    if worst["peak_pct"] < ctx.threshold("max_peak_pct"):
        return []
    live = ctx.analysis.live_memory
    rank, dt, device = int(worst["rank"]), str(worst["device_type"]), int(worst["device"])
    lines: list[dict] = []
    made_of = ""
    ckpt = ""
    fix_ckpt = (
        "activation checkpointing (torch.utils.checkpoint.checkpoint(module, x, use_reentrant=False) around the "
        "blocks holding the most saved activations)"
    )
    if live is not None and len(live.at_peak):
        by_line = at_peak_view(live, "line")
        by_line = by_line[(by_line["rank"] == rank) & (by_line["device_type"] == dt) & (by_line["device"] == device)]
        by_line = by_line[by_line["src_file"].notna() & (by_line["src_line"] >= 0)]
        user = by_line[user_mask(by_line["src_file"])] if len(by_line) else by_line
        lines = [
            {
                "file": str(r.src_file),
                "line": int(r.src_line),
                "func": None if pd.isna(r.src_func) else str(r.src_func),
                "value": int(r.live_bytes),
                "unit": "bytes",
                "count": int(r.blocks),
            }
            for r in (user if len(user) else by_line).head(3).itertuples()
        ]
        phases = at_peak_view(live, "phase")
        phases = phases[(phases["rank"] == rank) & (phases["device_type"] == dt) & (phases["device"] == device)]
        made_of = ", ".join(
            f"{r.phase.replace('_', ' ')} {format_quantity(int(r.live_bytes), 'bytes')}"
            for r in phases.head(4).itertuples()
            if r.live_bytes > 0
        )
        mods = activations_by_module(live, rank, dt, device)
        if len(mods):
            top = mods.iloc[0]
            ckpt = (
                f" Checkpointing {top['module']} would free up to {format_quantity(int(top['live_bytes']), 'bytes')} "
                f"at the peak (its activations saved for backward)"
                + (
                    f"; all {int(top['class_modules'])} {top['module_class']} modules hold "
                    f"{format_quantity(int(top['class_bytes']), 'bytes')}"
                    if top["class_modules"] > 1
                    else ""
                )
                + "."
            )
            fix_ckpt = (
                f"activation checkpointing of {top['module_class']}: in its parent's forward, "
                f"x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)"
            )
    frag = ctx.analysis.memory_fragmentation
    frag = (
        frag[(frag["rank"] == rank) & (frag["device_type"] == dt) & (frag["device"] == device)] if len(frag) else frag
    )
    # the same pattern memory_fragmentation names (a gap alone is a cache being reused)
    fragmented = any(fragmentation_pattern(r) for r in frag.itertuples())
    if len(backward_windows(ctx.frames)):
        fixes = [fix_ckpt, "autocast to bf16/fp16", "smaller micro-batches with gradient accumulation"]
    else:  # no backward pass: nothing is saved for backward, no gradients to accumulate
        fixes = [
            "a smaller batch or sequence length",
            "weights and activations in bf16/fp16 (model.to(torch.bfloat16) or torch.autocast)",
            "torch.inference_mode() so no graph or saved tensors are kept",
        ]
    if fragmented and dt == "cuda":
        fixes.append("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against the reserved-but-free gap")
    return [
        ctx.finding(
            title=f"Device {worst['device']} peaked at {worst['peak_pct']:.0f}% of its memory",
            message=(
                f"Peak reserved {format_quantity(worst['peak_reserved_bytes'], 'bytes')}, allocated "
                f"{format_quantity(worst['peak_allocated_bytes'], 'bytes')} of "
                f"{format_quantity(worst['capacity_bytes'], 'bytes')}."
                + (f" Alive at the peak: {made_of}." if made_of else "")
                + ckpt
            ),
            metrics={
                "peak_pct": metric(worst["peak_pct"], "%"),
                "peak_reserved_bytes": metric(worst["peak_reserved_bytes"], "bytes"),
                "capacity_bytes": metric(worst["capacity_bytes"], "bytes"),
            },
            source_lines=lines or top_source_lines(ctx.analysis, "alloc_bytes"),
            rank=rank,
            recommendation="Lower peak memory: " + "; ".join(fixes) + ".",
        )
    ]


#: The allocator's calls into the driver (what a cache miss of the caching allocator costs).
ALLOCATOR_CALLS = r"^(?:cuda|hip)(?:Malloc\w*|Free\w*|ExtMallocWithFlags)$|^cuMem(?:Alloc|Free)\w*$"


@rule(
    "alloc_churn",
    family="memory",
    title="Allocation churn",
    thresholds={"min_allocs_per_step": (500.0, "allocs/step"), "min_churn_ratio": (5.0, "x peak per step")},
)
def alloc_churn(ctx: RuleContext) -> list[Finding]:
    """A step allocates more than ``min_allocs_per_step`` blocks totalling over ``min_churn_ratio``
    times the peak footprint: temporaries created and freed again and again."""
    ms_ = ctx.analysis.memory_summary
    devs = ms_.get("devices", [])
    if not devs:
        raise RuleSkipped(f"skipped: needs memory events: {NO_MEMORY_EVENTS}")
    bad = [
        d
        for d in devs
        if d["allocs_per_step"] >= ctx.threshold("min_allocs_per_step")
        and (d.get("churn_ratio") or 0) >= ctx.threshold("min_churn_ratio")
    ]
    if not bad:
        return []
    worst = max(bad, key=lambda d: d["alloc_bytes_per_step"])
    mem = ctx.frames.memory
    allocs = mem[(mem["bytes"] > 0).to_numpy() & (mem["device"] == worst["device"]).to_numpy()]
    where = f"{worst['device_type']}:{worst['device']}" if worst["device"] >= 0 else worst["device_type"]
    steps = ctx.frames.has_steps
    # Cost: the allocator's own time, never the ops around it: its calls into the driver
    # (cudaMalloc/cudaFree, hipMalloc/hipFree, cuMemAlloc) inside steps while the device had
    # nothing to run. The caching allocator's [memory] records are instants: a block served from
    # its cache leaves no time in the trace to bill.
    host = ctx.frames.host
    calls = host[(host["kind"] == Kind.RUNTIME).to_numpy() & name_mask(host["name"], ALLOCATOR_CALLS)]
    billed = exposed_ns(ctx.frames, calls) if len(calls) else 0
    in_steps = int(calls_in_steps(ctx, calls).sum()) if len(calls) else 0
    return [
        ctx.finding(
            title=(
                f"{worst['allocs_per_step']:.0f} allocations {per_step_words(steps)} on {where} "
                f"({worst['churn_ratio']:.0f}x the peak)"
            ),
            message=(
                f"{'Each step allocates' if steps else 'The trace allocates'} "
                f"{format_quantity(worst['alloc_bytes_per_step'], 'bytes')} in {worst['allocs_per_step']:.0f} "
                f"blocks while the peak footprint is {format_quantity(worst['peak_allocated_bytes'], 'bytes')}. "
                + (
                    f"{in_steps} allocator call(s) into the driver in the steps left the device idle for "
                    f"{format_quantity(billed, 'ns')}: that is what the churn costs here."
                    if billed
                    else "The caching allocator served them from its cache (no driver allocation left the device "
                    "idle in the steps): the churn costs its bookkeeping, which the trace does not time."
                )
            ),
            metrics={
                "allocs_per_step": metric(worst["allocs_per_step"], step_unit("allocs", steps)),
                "alloc_bytes_per_step": metric(worst["alloc_bytes_per_step"], step_unit("bytes", steps)),
                "churn_ratio": metric(worst["churn_ratio"], "x"),
                "allocator_ns": metric(int(billed), "ns"),
            },
            cost_ns=int(billed),
            event_ids=[int(x) for x in allocs.nlargest(5, "bytes")["event_id"]],
            source_lines=lines_from(allocs, allocs["bytes"].to_numpy(np.int64), unit="bytes"),
            recommendation=(
                "Reuse buffers: preallocate outside the loop and write into them (out=, in-place ops), "
                "hoist constant tensors, and avoid creating temporaries per iteration."
            ),
        )
    ]
