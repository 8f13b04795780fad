"""Trainium / Inferentia rules: what holds a NeuronCore back.

They read the Neuron metrics the importer stored (``metadata["neuron"]["devices"][i]["metrics"]``:
the profile's Summary with our units, or the same metrics derived from its events) and the
device events themselves (engine queues 0-4, DMA queues 100+, collective streams 900+; see
docs/neuron.md). A trace without a Neuron device profile skips them all ("needs a Neuron
device profile").
"""

from __future__ import annotations

import numpy as np

from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.metrics.neuron_summary import fmt_pct
from neuron_explorer.analyzers.rules._neuron_common import (
    covered,
    devices,
    kernel_is_nki,
    matmul_dtype_words,
    metric_value,
    neuron_events,
    overlap,
    runs,
    runtime_streams,
    spill_streams,
    top_lines,
    union,
)
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.schema import Kind

FAMILY = "neuron"
ENGINES = ("Tensor", "Vector", "Scalar", "GpSimd", "Sync")


@rule(
    "neuron_low_mfu",
    family=FAMILY,
    title="Low model FLOPs utilization on the Tensor engine",
    thresholds={"min_mfu_pct": (30.0, "%"), "min_share_of_achievable_pct": (50.0, "%")},
    needs="a Neuron device profile with MFU (Summary)",
)
def low_mfu(ctx: RuleContext) -> list[Finding]:
    """MFU (useful matmul FLOPs / Tensor-engine peak over the run) is low. Where the profile
    estimates the highest MFU this workload could reach (``mfu_max_achievable_estimated_percent``),
    MFU is measured against it: the rule fires below ``min_share_of_achievable_pct`` of it.
    Otherwise MFU is compared with the absolute ``min_mfu_pct``."""
    out = []
    for d in devices(ctx):
        mfu, total = metric_value(d, "mfu_estimated_pct"), metric_value(d, "total_time_ns")
        if mfu is None or not total:
            continue
        span_mfu = mfu
        kernel = metric_value(d, "kernel_time_ns")
        over = "over the profiled run"
        if metric_value(d, "mfu_kernel_pct") is not None and kernel:
            # The fixed wait before the kernel is not the kernel's: judge MFU over the kernel window.
            mfu, total, over = metric_value(d, "mfu_kernel_pct") or 0.0, kernel, "over the kernel window"
        achievable = metric_value(d, "mfu_max_achievable_estimated_pct")
        if achievable is not None and achievable > 0:
            limit = achievable * ctx.threshold("min_share_of_achievable_pct") / 100
            against = f"{ctx.threshold('min_share_of_achievable_pct'):.0f}% of the {achievable:.1f}% this workload could reach"
            headroom = max(0.0, 1 - mfu / achievable)
        else:
            limit = ctx.threshold("min_mfu_pct")
            against = f"{limit:.0f}%"
            headroom = max(0.0, 1 - mfu / limit)
        if mfu >= limit:
            continue
        metrics = {
            "mfu_pct": metric(mfu, "%"),
            "mfu_span_pct": metric(span_mfu, "%"),
            "window_ns": metric(int(total), "ns"),
        }
        for key, name in (
            ("hfu_estimated_pct", "hfu_pct"),
            ("mfu_max_achievable_estimated_pct", "mfu_max_achievable_pct"),
            ("dma_active_time_pct", "dma_active_pct"),
            ("tensor_engine_active_time_pct", "tensor_active_pct"),
        ):
            v = metric_value(d, key)
            if v is not None:
                metrics[name] = metric(v, "%")
        dma = metric_value(d, "dma_active_time_pct") or 0.0
        dma = metric_value(d, "kernel_dma_active_pct") or dma
        evidence, cast = matmul_dtype_words(d)
        hint = " ".join(
            x
            for x in (
                "The DMA queues are busy most of the kernel: the matmuls wait for data (see neuron_dma_bound)."
                if dma >= 70
                else "",
                _MFU_SHAPE_NKI if kernel_is_nki(d) else _MFU_SHAPE,
                cast,
                "Compare MFU with the profile's mfu_max_achievable.",
            )
            if x
        )
        out.append(
            ctx.finding(
                title=f"NeuronCore {d['device']}: MFU {fmt_pct(mfu)} (below {against})",
                message=f"The Tensor engine did useful matmul work for {fmt_pct(mfu)} of its peak {over}"
                + (f" ({fmt_pct(span_mfu)} over the whole profile)." if over != "over the profiled run" else ".")
                + (f" {evidence}" if evidence else ""),
                metrics=metrics,
                cost_ns=int(total * headroom),
                recommendation=hint,
            )
        )
    if not out and not any(metric_value(d, "mfu_estimated_pct") is not None for d in devices(ctx)):
        raise RuleSkipped("needs MFU (the profile's Summary table)")
    return out


@rule(
    "neuron_engine_bottleneck",
    family=FAMILY,
    title="One NeuronCore engine is the bottleneck while the others idle",
    thresholds={"busy_pct": (70.0, "%"), "others_max_pct": (30.0, "%")},
    needs="a Neuron device profile with engine activity",
)
def engine_bottleneck(ctx: RuleContext) -> list[Finding]:
    """The busiest engine is active above ``busy_pct`` of the run while every other engine is
    active below ``others_max_pct``: work is serialized on one engine."""
    events = neuron_events(ctx)
    out = []
    for d in devices(ctx):
        kernel = metric_value(d, "kernel_time_ns")
        # Over the kernel window when there is one (the wait before it is no engine's).
        key = "kernel_{}_engine_active_pct" if kernel else "{}_engine_active_time_pct"
        pct = {e: metric_value(d, key.format(e.lower())) for e in ENGINES}
        pct = {e: v for e, v in pct.items() if v is not None}
        if len(pct) < 2:
            continue
        top = max(pct, key=lambda e: pct[e])
        others = {e: v for e, v in pct.items() if e != top}
        if pct[top] < ctx.threshold("busy_pct") or max(others.values()) > ctx.threshold("others_max_pct"):
            continue
        total = kernel or metric_value(d, "total_time_ns") or 0
        top_ns = int(total * pct[top] / 100)
        second_ns = int(total * max(others.values()) / 100)
        mine = events[
            (events["device"] == d["device"])
            & (events["local_stream"] == ENGINES.index(top))
            & (events["kind"] == Kind.KERNEL)
        ]
        by_op = mine.groupby("name", observed=True)["dur_ns"].sum().sort_values(ascending=False).head(3)
        ops = ", ".join(f"{n} ({ns / 1e6:.2f} ms)" for n, ns in by_op.items())
        out.append(
            ctx.finding(
                title=f"NeuronCore {d['device']}: {top} engine busy {pct[top]:.0f}% while the others are at most {max(others.values()):.0f}%",
                message=f"The {top} engine runs most of the time and the other engines mostly wait on it. Top instructions: {ops or '-'}.",
                metrics={f"{e.lower()}_active_pct": metric(v, "%") for e, v in pct.items()},
                cost_ns=max(top_ns - second_ns, 0),
                event_ids=mine.nlargest(20, "dur_ns")["event_id"].astype(int).tolist(),
                source_lines=top_lines(mine),
                recommendation=_ENGINE_ADVICE.get(top, "Spread the work across engines."),
            )
        )
    return out


#: Neuron's levers for low MFU (docs/neuron.md cites the AWS pages each comes from); the dtype
#: lever is added only where the profile shows fp32 matmuls (_neuron_common.matmul_dtype_words).
_MFU_SHAPE = (
    "Give the Tensor engine bigger matmuls: shapes that fill its 128x128 PE array (multiples of 128 in the "
    "contraction and output dimensions) and more rows per call (a larger batch or sequence per graph)."
)
_MFU_SHAPE_NKI = (
    "No HLO instruction names this work, so it is the kernel's own (NKI or hand-written): give the Tensor engine "
    "full tiles, 128 partitions on the contraction dimension and a moving free dimension up to 512 "
    "(nl.tile_size.gemm_moving_fmax) per nisa.nc_matmul, and keep the next tile loading while this one multiplies."
)

_ENGINE_ADVICE = {
    "Tensor": "The model is matmul-bound: use bf16/fp8, larger tiles and fewer transposes; more NeuronCores (tensor parallelism) shorten it.",
    "Vector": "Elementwise/reduction work dominates: fuse elementwise ops, move activations to the Scalar engine, avoid fp32 upcasts.",
    "Scalar": "Activation functions dominate: fuse them into matmul epilogues or use cheaper approximations.",
    "GpSimd": "GpSimd (general-purpose) work dominates: an op fell back to the slow path; check for unsupported ops or custom kernels.",
    "Sync": "Synchronization/DMA-trigger instructions dominate: fewer, larger DMAs and fewer semaphores.",
}


@rule(
    "neuron_dma_bound",
    family=FAMILY,
    title="DMA-bound phases: data movement while the engines wait",
    thresholds={
        "dma_busy_pct": (80.0, "%"),
        "engine_max_pct": (40.0, "%"),
        "min_share_pct": (20.0, "%"),
        "bins": (200, "bins"),
    },
    needs="a Neuron device profile with DMA and engine activity",
)
def dma_bound(ctx: RuleContext) -> list[Finding]:
    """Time bins where DMA queues are busy above ``dma_busy_pct`` while the busiest engine is
    below ``engine_max_pct``; reported when they cover ``min_share_pct`` of the run."""
    events = neuron_events(ctx)
    devices(ctx)
    out = []
    for device, ev in events.groupby("device"):
        dma = ev[(ev["kind"] == Kind.MEMCPY)]
        eng = ev[(ev["kind"] == Kind.KERNEL) & (ev["local_stream"] < len(ENGINES))]
        if not len(dma) or not len(eng):
            continue
        t0 = int(min(dma["start_ns"].min(), eng["start_ns"].min()))
        t1 = int(max((dma["start_ns"] + dma["dur_ns"]).max(), (eng["start_ns"] + eng["dur_ns"]).max()))
        nb = int(ctx.threshold("bins"))
        edges = np.linspace(t0, t1, nb + 1).astype(np.int64)
        width = np.diff(edges).astype(np.float64)
        du = union(dma["start_ns"].to_numpy(), (dma["start_ns"] + dma["dur_ns"]).to_numpy())
        dma_busy = np.diff(covered(*du, edges)) / np.maximum(width, 1)
        eng_busy = np.zeros(nb)
        for code in range(len(ENGINES)):
            rows = eng[eng["local_stream"] == code]
            if len(rows):
                u = union(rows["start_ns"].to_numpy(), (rows["start_ns"] + rows["dur_ns"]).to_numpy())
                eng_busy = np.maximum(eng_busy, np.diff(covered(*u, edges)) / np.maximum(width, 1))
        bound = (dma_busy * 100 >= ctx.threshold("dma_busy_pct")) & (eng_busy * 100 <= ctx.threshold("engine_max_pct"))
        share = 100.0 * width[bound].sum() / max(width.sum(), 1)
        if share < ctx.threshold("min_share_pct"):
            continue
        ranges = runs(edges, bound)
        lost = int(np.sum(width[bound] * (1 - eng_busy[bound])))
        out.append(
            ctx.finding(
                title=f"NeuronCore {int(device)}: DMA-bound for {share:.0f}% of the kernel",
                message=(
                    f"In {len(ranges)} phase(s) covering {share:.0f}% of the device timeline the DMA queues are busy "
                    f"(mean {100 * dma_busy[bound].mean():.0f}%) while the busiest engine averages {100 * eng_busy[bound].mean():.0f}%."
                ),
                metrics={
                    "dma_bound_share_pct": metric(share, "%"),
                    "dma_busy_pct": metric(100 * float(dma_busy[bound].mean()), "%"),
                    "engine_busy_pct": metric(100 * float(eng_busy[bound].mean()), "%"),
                    "dma_bytes": metric(int(dma["bytes"].clip(lower=0).sum()), "bytes"),
                },
                cost_ns=lost,
                time_ranges=ranges[:20],
                event_ids=dma.nlargest(20, "dur_ns")["event_id"].astype(int).tolist(),
                recommendation=(
                    "Move less data, in larger transfers: keep weights and activations resident in SBUF (larger tiles, "
                    "fused ops), move more bytes per partition in each DMA, avoid spills, use bf16/fp8 "
                    "(neuronx-cc --auto-cast), and overlap loads with compute (prefetch the next tile)."
                ),
            )
        )
    return out


@rule(
    "neuron_small_dma",
    family=FAMILY,
    title="Many small DMA transfers",
    thresholds={
        "small_bytes": (4096, "bytes"),
        "min_share_pct": (25.0, "%"),
        "min_average_bytes": (4096, "bytes"),
        "semaphore_bytes": (8, "bytes"),
    },
    needs="a Neuron device profile with DMA transfers",
)
def small_dma(ctx: RuleContext) -> list[Finding]:
    """DMA transfers (not their packets) are too small to use the DMA engines well: at least
    ``min_share_pct`` of them move fewer than ``small_bytes`` bytes, or their average is below
    ``min_average_bytes``. AWS's guidance (NKI DMA bandwidth guide, Neuron Explorer's
    inefficient-DMA guide): payloads under 4 KiB cannot saturate HBM bandwidth, and each
    transfer pays a fixed descriptor and semaphore cost, so look at the average transfer size.
    The runtime's own traffic is not the user's: queues whose rows say ``queue_type``
    instruction (the instruction fetch) and semaphore writes (``semaphore_bytes`` or fewer)
    are left out. The cost is half the small transfers' busy time (the union of their
    intervals, so overlapping queues are not counted twice), the share coalescing typically
    saves (assumed)."""
    events = neuron_events(ctx)
    devices(ctx)
    dma = events[(events["kind"] == Kind.MEMCPY) & (events["bytes"] >= 0)]
    out = []
    for device, ev in dma.groupby("device"):
        runtime = runtime_streams(ctx, int(device))
        sem = ev["bytes"] <= ctx.threshold("semaphore_bytes")
        left_out = int((ev["stream"].isin(runtime) | sem).sum())
        ev = ev[~ev["stream"].isin(runtime).to_numpy() & ~sem.to_numpy()]
        if not len(ev):
            continue
        small = ev[ev["bytes"] < ctx.threshold("small_bytes")]
        share = 100.0 * len(small) / len(ev)
        mean = float(ev["bytes"].mean())
        if share < ctx.threshold("min_share_pct") and mean >= ctx.threshold("min_average_bytes"):
            continue
        shown = small if len(small) else ev
        queues = shown.groupby("name", observed=True).size().sort_values(ascending=False).head(3)
        us, ue = union(shown["start_ns"].to_numpy(), (shown["start_ns"] + shown["dur_ns"]).to_numpy())
        busy = int((ue - us).sum())
        out.append(
            ctx.finding(
                title=f"NeuronCore {int(device)}: {share:.0f}% of DMA transfers are under {int(ctx.threshold('small_bytes')):,} bytes "
                f"(average {mean:,.0f} bytes)",
                message=f"{len(small):,} of {len(ev):,} transfers are small (median {int(shown['bytes'].median()):,} bytes), "
                f"busy {busy / 1e3:,.2f} us in all; busiest: "
                + ", ".join(f"{q} ({n})" for q, n in queues.items())
                + (
                    f". Left out as the runtime's: {left_out:,} instruction-fetch and semaphore transfers."
                    if left_out
                    else "."
                ),
                metrics={
                    "small_transfer_share_pct": metric(share, "%"),
                    "small_transfers": metric(len(small)),
                    "median_small_bytes": metric(int(shown["bytes"].median()), "bytes"),
                    "mean_transfer_bytes": metric(mean, "bytes"),
                    "small_busy_ns": metric(busy, "ns"),
                    "runtime_transfers_left_out": metric(left_out),
                },
                cost_ns=busy // 2,
                event_ids=shown.nlargest(20, "dur_ns")["event_id"].astype(int).tolist(),
                recommendation="Coalesce transfers: use contiguous layouts and larger tiles so each DMA moves at least 4 KiB "
                "per partition (ideally tens of KiB).",
            )
        )
    return out


@rule(
    "neuron_spill_reload",
    family=FAMILY,
    title="SBUF spill/reload traffic above 25% of HBM reads",
    thresholds={"max_reload_share_pct": (25.0, "%")},
    needs="spill_reload_bytes and hbm_read_bytes (Summary or Instruction table)",
)
def spill_reload(ctx: RuleContext) -> list[Finding]:
    """Reloads of spilled tensors exceed ``max_reload_share_pct`` of all bytes read from HBM."""
    events = neuron_events(ctx)
    out, seen = [], False
    for d in devices(ctx):
        reload, reads = metric_value(d, "spill_reload_bytes"), metric_value(d, "hbm_read_bytes")
        if reload is None or not reads:
            continue
        seen = True
        share = 100.0 * reload / reads
        if share <= ctx.threshold("max_reload_share_pct"):
            continue
        mine = events[(events["device"] == d["device"]) & (events["kind"] == Kind.MEMCPY)]
        spill_ev = mine[mine["stream"].isin(spill_streams(ctx, d["device"]))]
        cost = (
            int(spill_ev["dur_ns"].sum())
            if len(spill_ev)
            else int((metric_value(d, "dma_active_time_ns") or 0) * share / 100)
        )
        out.append(
            ctx.finding(
                title=f"NeuronCore {d['device']}: spill reloads are {share:.0f}% of HBM reads",
                message=f"{int(reload):,} bytes of spilled intermediates were reloaded into SBUF, out of {int(reads):,} bytes read from HBM.",
                metrics={
                    "spill_reload_share_pct": metric(share, "%"),
                    "spill_reload_bytes": metric(int(reload), "bytes"),
                    "hbm_read_bytes": metric(int(reads), "bytes"),
                    "spill_save_bytes": metric(int(metric_value(d, "spill_save_bytes") or 0), "bytes"),
                },
                cost_ns=cost,
                event_ids=spill_ev.nlargest(20, "dur_ns")["event_id"].astype(int).tolist(),
                recommendation="The working set does not fit in SBUF: use smaller tiles or micro-batches, recompute instead of storing "
                "activations, or split the layer so intermediates stay on chip.",
            )
        )
    if not seen:
        raise RuleSkipped("needs spill_reload_bytes and hbm_read_bytes")
    return out


@rule(
    "neuron_exposed_collectives",
    family=FAMILY,
    title="Collectives not overlapped with compute",
    thresholds={"min_exposed_pct": (10.0, "%")},
    needs="collective events in a Neuron device profile",
)
def exposed_collectives(ctx: RuleContext) -> list[Finding]:
    """Collective time during which no engine computes, above ``min_exposed_pct`` of the run."""
    events = neuron_events(ctx)
    devices(ctx)
    cc_all = events[events["kind"] == Kind.COLLECTIVE]
    if not len(cc_all):
        raise RuleSkipped("needs collective operations (this profile has none)")
    out = []
    for device, ev in events.groupby("device"):
        cc = ev[ev["kind"] == Kind.COLLECTIVE]
        eng = ev[(ev["kind"] == Kind.KERNEL)]
        if not len(cc):
            continue
        cu = union(cc["start_ns"].to_numpy(), (cc["start_ns"] + cc["dur_ns"]).to_numpy())
        eu = union(eng["start_ns"].to_numpy(), (eng["start_ns"] + eng["dur_ns"]).to_numpy())
        cc_ns = int(np.sum(cu[1] - cu[0]))
        exposed = cc_ns - overlap(cu, eu)
        span = int((ev["start_ns"] + ev["dur_ns"]).max() - ev["start_ns"].min())
        pct = 100.0 * exposed / max(span, 1)
        if pct < ctx.threshold("min_exposed_pct"):
            continue
        out.append(
            ctx.finding(
                title=f"NeuronCore {int(device)}: {exposed / 1e6:.2f} ms of collectives with no compute running ({pct:.0f}% of the run)",
                message=f"{len(cc)} collective operations took {cc_ns / 1e6:.2f} ms; {exposed / 1e6:.2f} ms of it overlapped no engine work.",
                metrics={
                    "exposed_ns": metric(exposed, "ns"),
                    "collective_ns": metric(cc_ns, "ns"),
                    "exposed_pct": metric(pct, "%"),
                },
                cost_ns=exposed,
                time_ranges=[[int(s), int(e)] for s, e in zip(*cu)][:20],
                event_ids=cc.nlargest(20, "dur_ns")["event_id"].astype(int).tolist(),
                recommendation="Overlap communication with compute: bucket gradients, start all-reduces as soon as a layer's "
                "gradients are ready, or use sequence/tensor parallel layouts that need fewer blocking collectives.",
            )
        )
    return out


@rule(
    "neuron_transpose_matmul",
    family=FAMILY,
    title="Tensor engine spends its FLOPs on transposes",
    thresholds={"max_transpose_share_pct": (10.0, "%")},
    needs="transpose_flops and hardware_flops (Summary or Instruction table)",
)
def transpose_matmul(ctx: RuleContext) -> list[Finding]:
    """Transposes (matmuls the compiler inserts to fix layouts) exceed ``max_transpose_share_pct``
    (AWS's 10%) of the Tensor engine's FLOPs; the cost is that share of the Tensor engine's
    active time."""
    out, seen = [], False
    for d in devices(ctx):
        tr, hw = metric_value(d, "transpose_flops"), metric_value(d, "hardware_flops")
        if tr is None or not hw:
            continue
        seen = True
        share = 100.0 * tr / hw
        if share <= ctx.threshold("max_transpose_share_pct"):
            continue
        tensor_ns = metric_value(d, "tensor_engine_active_time_ns") or 0
        out.append(
            ctx.finding(
                title=f"NeuronCore {d['device']}: {share:.0f}% of Tensor-engine FLOPs are transposes",
                message=f"{int(tr):,} of {int(hw):,} Tensor-engine FLOPs move data between layouts instead of computing.",
                metrics={
                    "transpose_share_pct": metric(share, "%"),
                    "transpose_flops": metric(int(tr), "flop"),
                    "hardware_flops": metric(int(hw), "flop"),
                },
                cost_ns=int(tensor_ns * share / 100),
                recommendation=_TRANSPOSE_NKI if kernel_is_nki(d) else _TRANSPOSE_HLO,
            )
        )
    if not seen:
        raise RuleSkipped("needs transpose_flops and hardware_flops")
    return out


_TRANSPOSE_HLO = (
    "Keep tensors in the layout the matmul wants: avoid .t()/permute before matmuls, pre-transpose weights once, "
    "and check the compiler's layout choices (HLO transposes around dot ops)."
)
_TRANSPOSE_NKI = (
    "No HLO instruction names this work, so the transposes are the kernel's own: PE transposes, matmuls against an "
    "identity matrix (nisa.nc_transpose, or nisa.nc_matmul(..., is_transpose=True)). Load the operand already "
    "transposed (nl.load_transpose2d, a DMA transpose) or lay it out in HBM the way the matmul reads it (contraction "
    "dimension on the partitions), and transpose an operand that is reused once, outside the loop."
)


@rule(
    "neuron_fixed_wait",
    family=FAMILY,
    title="The kernel is a sliver of the profile: a fixed wait comes first",
    thresholds={"min_wait_share_pct": (50.0, "%")},
    needs="a Neuron device profile with instructions",
)
def fixed_wait(ctx: RuleContext) -> list[Finding]:
    """The profile's fixed wait (the longest stretch in which only semaphore waits run: every
    engine parked, no DMA; collectors/neuron/window.py) holds at least ``min_wait_share_pct`` of
    the span (1.85-1.87 ms of ~1.87 ms on the real inf2/trn1 matmul exports). It is reported as
    information, at no cost: the same shapes timed on the host take 0.27-0.33 ms per call, less
    than the wait, so it is not paid per execution in a timed loop (most likely the capture's
    own set-up, reference neuron-formats.md), and no change to the model removes it. What it
    changes is how to read the profile: per-span figures are diluted by it."""
    out = []
    for d in devices(ctx):
        wait, total = metric_value(d, "fixed_wait_ns"), metric_value(d, "total_time_ns")
        kernel = metric_value(d, "kernel_time_ns") or 0.0
        if not wait or not total or 100.0 * wait / total < ctx.threshold("min_wait_share_pct"):
            continue
        ws, we = int(metric_value(d, "wait_start_ns") or 0), int(metric_value(d, "wait_end_ns") or 0)
        pre = metric_value(d, "preamble_ns") or 0.0
        out.append(
            ctx.finding(
                severity="info",
                title=(
                    f"NeuronCore {d['device']}: a {wait / 1e6:,.3f} ms fixed wait holds {fmt_pct(100.0 * wait / total)} "
                    f"of the profile; the kernel ran {kernel / 1e3:,.1f} us"
                ),
                message=(
                    f"From {ws / 1e3:,.2f} us to {we / 1e3:,.2f} us every engine waits on a semaphore and no DMA runs, "
                    f"after a {pre / 1e3:,.2f} us preamble of set-up work. A wait this long is not paid per execution "
                    "in a timed loop (on the reference matmul exports the same shapes take 0.27-0.33 ms per call on the "
                    "host against a 1.86 ms wait): most likely the capture's set-up. Read the kernel by its window "
                    "(the verdict, MFU/MBU over the kernel and diff --metric kernel use it), not by the span."
                ),
                metrics={
                    "fixed_wait_ns": metric(int(wait), "ns"),
                    "preamble_ns": metric(int(pre), "ns"),
                    "kernel_time_ns": metric(int(kernel), "ns"),
                    "total_time_ns": metric(int(total), "ns"),
                },
                cost_ns=0,
                time_ranges=[[ws, we]],
                recommendation=(
                    "Nothing in the model to change for it. To see what an execution costs, time many calls after a "
                    "warm-up (time.perf_counter() around N calls of the compiled model, divided by N) and compare "
                    "with the kernel window."
                ),
            )
        )
    if not out and not any(metric_value(d, "kernel_time_ns") for d in devices(ctx)):
        raise RuleSkipped("needs instructions (a kernel window)")
    return out
