"""Distributed rules: exposed (not overlapped) communication."""

from __future__ import annotations

from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.rules._evidence import lines_from, ms, ranges
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule


@rule(
    "exposed_comm",
    family="distributed",
    title="Exposed communication",
    thresholds={"max_pct": (10.0, "% of step time")},
)
def exposed_comm(ctx: RuleContext) -> list[Finding]:
    """Communication that no computation overlaps takes more than ``max_pct`` of step time
    (TensorBoard plugin threshold: 10%)."""
    cat = ctx.frames.device_category
    if not (cat == "communication").any():
        raise RuleSkipped("skipped: needs communication kernels (NCCL/RCCL collectives)")
    at = ctx.analysis.attribution
    wall = float(at["wall_ns"].sum()) or 1.0
    exposed = float(at["communication_ns"].sum())
    pct = 100.0 * exposed / wall
    if pct < ctx.threshold("max_pct"):
        return []
    ov = ctx.analysis.overlap
    overlap_pct = (
        float(100.0 * ov["overlapped_ns"].sum() / ov["comm_ns"].sum()) if len(ov) and ov["comm_ns"].sum() else 0.0
    )
    comm = ctx.frames.device[(cat == "communication").to_numpy()]
    tr, ids = ranges(comm)
    return [
        ctx.finding(
            title=f"Exposed communication takes {pct:.0f}% of step time",
            message=(
                f"{ms(exposed)} of collectives ran with no compute alongside; only {overlap_pct:.0f}% of "
                f"communication time overlaps computation."
            ),
            metrics={
                "exposed_comm_pct": metric(pct, "%"),
                "exposed_comm_ns": metric(int(exposed), "ns"),
                "overlap_pct": metric(overlap_pct, "%"),
            },
            cost_ns=int(exposed),
            category="communication",
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines_from(comm, "dur_ns"),
            recommendation=(
                "Overlap communication with compute: DDP bucketing (bucket_cap_mb), FSDP prefetch "
                "(forward_prefetch / backward_prefetch), gradient accumulation with no_sync(), larger "
                "batches, or gradient compression."
            ),
        )
    ]
