"""Distributed rules: exposed (not overlapped) communication."""

from __future__ import annotations

from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.graph.edits import Edits
from neuron_explorer.analyzers.ranks.links import instance_type, peak_for
from neuron_explorer.analyzers.rules._evidence import lines_from, ms, ranges
from neuron_explorer.analyzers.rules.registry import RULES, RuleContext, RuleSkipped, rule


@rule(
    "exposed_comm",
    family="distributed",
    title="Exposed communication",
    thresholds={"max_pct": (10.0, "% of step time")},
)
def exposed_comm(ctx: RuleContext) -> list[Finding]:
    """Communication that no computation overlaps takes more than ``max_pct`` of step time
    (TensorBoard plugin threshold: 10%). When the collectives' kernel time exceeds the compute
    kernels' time, overlap cannot hide it: the advice is then the link's bandwidth (the median bus
    bandwidth against the link table's peak), not overlap. Training fixes (DDP buckets, FSDP
    prefetch, ``no_sync()``) only on a run that trains (``TraceFrames.run_kind``)."""
    cat = ctx.frames.device_category
    if not (cat == "communication").any():
        raise RuleSkipped("skipped: needs communication kernels (NCCL/RCCL collectives)")
    at = ctx.analysis.attribution
    wall = float(at["wall_ns"].sum() - at["one_time_ns"].sum()) or 1.0  # the steady state
    exposed = float(at["communication_ns"].sum())
    pct = 100.0 * exposed / wall
    if pct < ctx.threshold("max_pct"):
        return []
    ov = ctx.analysis.overlap
    overlap_pct = (
        float(100.0 * ov["overlapped_ns"].sum() / ov["comm_ns"].sum()) if len(ov) and ov["comm_ns"].sum() else 0.0
    )
    comm = ctx.frames.device[(cat == "communication").to_numpy()]
    comm_ns = float(ov["comm_ns"].sum()) if len(ov) else exposed
    compute_ns = float(ov["compute_ns"].sum()) if len(ov) else 0.0
    more_comm = comm_ns > compute_ns
    tr, ids = ranges(comm)
    message = (
        f"{ms(exposed)} of collectives ran with no compute alongside; only {overlap_pct:.0f}% of "
        f"communication time overlaps computation."
    )
    if more_comm:
        bw = _bandwidth_evidence(ctx)
        message += (
            f" Communication ({ms(comm_ns)} of collective kernels) exceeds compute ({ms(compute_ns)} of compute "
            f"kernels): overlap can hide at most the compute time, so the link's bandwidth is the question{bw}."
        )
    return [
        ctx.finding(
            title=f"Exposed communication takes {pct:.0f}% of step time",
            message=message,
            metrics={
                "exposed_comm_pct": metric(pct, "%"),
                "exposed_comm_ns": metric(int(exposed), "ns"),
                "overlap_pct": metric(overlap_pct, "%"),
                "comm_ns": metric(int(comm_ns), "ns"),
                "compute_ns": metric(int(compute_ns), "ns"),
            },
            cost_ns=int(exposed),
            category="communication",
            edits=Edits(overlap_comm=True),
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines_from(comm, "dur_ns"),
            recommendation=_advice(more_comm, ctx.frames.run_kind.training),
        )
    ]


def _advice(more_comm: bool, training: bool) -> str:
    """Overlap advice only where compute can hide the communication; training-only fixes (DDP
    buckets, FSDP prefetch, ``no_sync()``) only on a run with a backward pass or optimizer step."""
    if more_comm:
        return (
            "Raise the bandwidth the collectives get, not their overlap: compare their bus bandwidth with the "
            "link's peak (slow_collective), check the transport and topology (NCCL_DEBUG=INFO on CUDA/ROCm), "
            "send fewer, larger messages, or send less (lower-precision communication, a parallelism layout "
            "that keeps the heavy collectives inside a node)."
        )
    if training:
        return (
            "Overlap communication with compute: DDP bucketing (bucket_cap_mb), FSDP prefetch "
            "(forward_prefetch / backward_prefetch), gradient accumulation with no_sync(), larger "
            "batches, or gradient compression."
        )
    return (
        "Overlap communication with compute: issue collectives asynchronously "
        "(torch.distributed.all_reduce(t, async_op=True), then work.wait() where the result is needed) and "
        "compute the next independent work meanwhile; fewer, larger collectives; larger batches."
    )


def _bandwidth_evidence(ctx: RuleContext) -> str:
    """The collectives' median bus bandwidth against the link table's peak, where both are known."""
    c = ctx.analysis.collectives
    if not len(c) or "busbw_gbps" not in c or not c["busbw_gbps"].notna().any():
        return " (the trace records no message sizes, so their bus bandwidth is unknown)"
    # the population slow_collective judges (its min_bytes), so the two rules state one median
    key = "slow_collective.min_bytes"
    min_bytes = float(ctx.overrides.get(key, RULES["slow_collective"].thresholds["min_bytes"][0]))
    sized = c[c["busbw_gbps"].notna() & (c["bytes"] >= min_bytes)]
    if not len(sized):
        return (
            f" (no collective of at least {int(min_bytes):,} bytes with a recorded size: its bus bandwidth is unknown)"
        )
    med = float(sized["busbw_gbps"].median())
    group = sized["group_size"].fillna(sized["num_ranks"])
    link, why = peak_for(ctx.frames.hardware, int(group.max()), instance_type(ctx.frames.metadata))
    if link is None:
        return (
            f": the collectives of at least {int(min_bytes):,} bytes reach a median {med:.1f} GB/s bus bandwidth "
            f"(the link's peak is unknown: {why})"
        )
    return (
        f": the collectives of at least {int(min_bytes):,} bytes reach a median {med:.1f} GB/s bus bandwidth, "
        f"{100 * med / link.busbw_gbps:.0f}% of the "
        f"{link.busbw_gbps:.0f} GB/s {link.link} peak ({why})"
    )
