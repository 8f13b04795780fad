"""Cross-rank rules: the culprit rank of the collectives, slow collectives, load imbalance.

They read the cross-rank tables of ``analyzers/ranks/__init__.py`` (``Analysis.collectives``,
``collective_ranks``, ``rank_steps``) and ``analyzers/ranks/culprit.py``; see docs/rules.md, "Ranks".
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.ranks.culprit import late_work, matched, wait_by_rank
from neuron_explorer.analyzers.ranks.links import instance_type, peak_for
from neuron_explorer.analyzers.rules import _edits
from neuron_explorer.analyzers.rules._evidence import ms
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule


def _matched_or_skip(ctx: RuleContext) -> pd.DataFrame:
    arrivals = ctx.analysis.collective_ranks
    rs = ctx.analysis.rank_steps
    if not len(rs) or rs["rank"].nunique() < 2:
        raise RuleSkipped("skipped: needs a multi-rank run (two or more ranks)")
    if not len(arrivals) or not len(matched(arrivals)):
        raise RuleSkipped("skipped: needs collective kernels matched across two or more ranks")
    return arrivals


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + ms(abs(ns))


def _where(line: dict[str, Any]) -> str:
    if line.get("file"):
        return f"{line['file']}:{line['line']}" + (f" ({line['op']})" if line.get("op") else "")
    return str(line.get("op") or "?")


@rule(
    "culprit_rank",
    family="ranks",
    title="A rank delays the collectives (the others wait for it)",
    thresholds={"min_wait_pct": (5.0, "% of the other ranks' step time"), "min_share_pct": (50.0, "% of all waits")},
)
def culprit_rank(ctx: RuleContext) -> list[Finding]:
    """One rank arrives last at the collectives and causes at least ``min_share_pct`` of all the
    waiting at them, a wait of at least ``min_wait_pct`` of the other ranks' summed step time.
    Names the rank, the extra work it did before those collectives against the median rank
    (device compute, copies, other: host or idle) and the source line (else op) behind it."""
    arrivals = _matched_or_skip(ctx)
    by_rank = wait_by_rank(arrivals)
    total = float(by_rank["caused_wait_ns"].sum())
    top = by_rank.iloc[0]
    culprit, caused = int(top["rank"]), float(top["caused_wait_ns"])
    rs = ctx.analysis.rank_steps
    others_wall = float(rs.loc[rs["rank"] != culprit, "wall_ns"].sum()) or 1.0
    share = 100.0 * caused / total if total else 0.0
    wait_pct = 100.0 * caused / others_wall
    if share < ctx.threshold("min_share_pct") or wait_pct < ctx.threshold("min_wait_pct"):
        return []
    late = late_work(ctx.frames, arrivals, culprit)
    extra = late["extra_ns"]
    lines = late["lines"]
    cause = max(extra, key=lambda c: extra[c])
    where = f"; most of it at {_where(lines[0])} (+{ms(lines[0]['ns'])} of device time)" if lines else ""
    coll = ctx.analysis.collective_ranks
    ids = coll.loc[coll["rank"] == culprit, "event_id"].head(50).tolist()
    return [
        ctx.finding(
            title=f"Rank {culprit} delays the collectives: the others wait {ms(caused)} for it"
            + (f" ({_where(lines[0])})" if lines else ""),
            message=(
                f"Rank {culprit} arrived last at {int(top['times_last'])} of {int(top['instances'])} collectives "
                f"and caused {share:.0f}% of all waiting ({wait_pct:.1f}% of the other ranks' step time). Before "
                f"those collectives, against the median rank: compute {_signed(extra['compute'])}, copies "
                f"{_signed(extra['copy'])}, other (host work or idle) {_signed(extra['other'])}; mostly {cause}{where}."
            ),
            metrics={
                "culprit_rank": metric(culprit, "rank"),
                "caused_wait_ns": metric(int(caused), "ns"),
                "wait_share_pct": metric(share, "%"),
                "wait_pct": metric(wait_pct, "%"),
                "times_last": metric(int(top["times_last"]), "collectives"),
                **{f"extra_{c}_ns": metric(int(v), "ns") for c, v in extra.items()},
            },
            cost_ns=int(caused),
            category="communication",
            rank=culprit,
            time_ranges=[[int(a), int(b)] for a, b in late.get("windows", [])[:50]],
            event_ids=[int(x) for x in ids],
            source_lines=[
                {"file": ln["file"], "line": ln["line"], "func": ln["func"], "ns": ln["ns"], "op": ln["op"]}
                for ln in lines
                if ln.get("file")
            ],
            recommendation=(
                f"Make rank {culprit} do no more than the others before the collective: balance the work of the "
                "line named (uneven data shards, sequence lengths, extra logging/metrics or checkpointing on one "
                "rank), or move rank-specific work after the collective or off the critical path."
            ),
        )
    ]


@rule(
    "slow_collective",
    family="ranks",
    title="Collectives far below the link's bus bandwidth",
    thresholds={
        "peak_busbw_gbps": (0.0, "GB/s (0: from the link table)"),
        "max_pct_of_peak": (25.0, "%"),
        "min_bytes": (1 << 20, "bytes"),
    },
)
def slow_collective(ctx: RuleContext) -> list[Finding]:
    """Collectives of at least ``min_bytes`` whose bus bandwidth (NCCL's convention, on the last
    rank to arrive: a transfer with no waiting) is below ``max_pct_of_peak`` of the link's peak
    ``peak_busbw_gbps``. Without that threshold the peak comes from the link table
    (``analyzers/ranks/links.py``): the intra-node link of the device model when the group fits in one
    node, else the network's (from the instance type); skipped when neither is known."""
    peak = ctx.threshold("peak_busbw_gbps")
    c = ctx.analysis.collectives
    if not len(c):
        raise RuleSkipped("skipped: needs collective kernels")
    sized = c[(c["bytes"] >= ctx.threshold("min_bytes")) & c["busbw_gbps"].notna()]
    link_name, peak_from = "the given", "--threshold slow_collective.peak_busbw_gbps"
    if peak <= 0:
        group = sized["group_size"].fillna(sized["num_ranks"]) if len(sized) else c["num_ranks"]
        n = int(group.max()) if len(group) and group.notna().any() else int(ctx.frames.hardware.world_size or 1)
        link, why = peak_for(ctx.frames.hardware, n, instance_type(ctx.frames.metadata))
        if link is None:
            raise RuleSkipped(
                f"skipped: needs the link's peak bus bandwidth: {why} (--threshold slow_collective.peak_busbw_gbps=N)"
            )
        peak, link_name, peak_from = link.busbw_gbps, link.link, f"{why}; {link.source}"
    if not len(sized):
        raise RuleSkipped("skipped: needs collectives with a recorded message size (In/Out msg nelems, dtype)")
    slow = sized[sized["busbw_gbps"] < peak * ctx.threshold("max_pct_of_peak") / 100.0]
    if not len(slow):
        return []
    # the time lost: each slow transfer's duration minus what it would take at the peak bus bandwidth
    ideal = slow["bytes"] * slow["busbw_gbps"] / slow["algbw_gbps"] / peak
    lost = float((slow["xfer_ns"] - ideal).clip(lower=0).sum())
    # the median of every collective judged (the figure exposed_comm states too); the slow ones' apart
    med_all = float(sized["busbw_gbps"].median())
    med = float(slow["busbw_gbps"].median())
    kernels = _instance_kernels(ctx, slow)
    edit = _edits.reaching(kernels, lost, f"{len(slow)} slow collectives at the link's peak bus bandwidth")
    one_rank = int(slow["num_ranks"].max()) <= 1
    peer = (
        " One rank's trace cannot tell a slow link from a slow peer: a collective's kernel also holds the time it "
        "waits for the last peer to arrive, so record every rank to see which it is."
        if one_rank
        else ""
    )
    named = slow["algorithm"].notna() if "algorithm" in slow else pd.Series(False, index=slow.index)
    chose = ""
    if named.any():
        mix = (slow.loc[named, "algorithm"] + "/" + slow.loc[named, "protocol"]).value_counts()
        chose = " NCCL chose " + ", ".join(f"{k} for {v}" for k, v in mix.items()) + "."
    if ctx.frames.hardware.device_type in ("cuda", "hip"):  # NCCL, or RCCL, which reads the same variables
        advice = (
            "Check the transport NCCL chose (NCCL_DEBUG=INFO: NVLink/IB vs sockets), NCCL_ALGO/NCCL_PROTO, "
            "the topology (ranks of one group spread over nodes), and message sizes: small messages never "
            "reach the link's bandwidth"
            + (
                " (larger buckets: DistributedDataParallel(model, bucket_cap_mb=...))."
                if ctx.frames.run_kind.training
                else "; fewer, larger collectives do."
            )
        )
    else:
        advice = (
            "Check the topology (ranks of one group spread over nodes) and the message sizes: small messages "
            "never reach the link's bandwidth; fewer, larger collectives do."
        )
    return [
        ctx.finding(
            title=f"{len(slow)} collective(s) run at {med:.1f} GB/s bus bandwidth, {100 * med / peak:.0f}% of the "
            f"{peak:.0f} GB/s peak",
            message=(
                f"{len(slow)} of {len(sized)} collectives of at least {int(ctx.threshold('min_bytes')):,} bytes reach a "
                f"median {med:.1f} GB/s"
                + (f" (all {len(sized)}: {med_all:.1f} GB/s)" if len(slow) < len(sized) else "")
                + f"; at peak their kernels would take {ms(lost)} less (transfer time, "
                "whether or not compute overlaps it; the finding's cost is what the steps would save, "
                f"replayed).{chose} Peak: {peak:.0f} GB/s per rank and direction "
                f"({link_name} link; {peak_from}).{peer}"
            ),
            metrics={
                "slow_collectives": metric(len(slow), "collectives"),
                "median_busbw_gbps": metric(med, "GB/s"),
                "peak_busbw_gbps": metric(peak, "GB/s"),
                "lost_ns": metric(int(lost), "ns"),
            },
            cost_ns=int(lost),
            category="communication",
            edits=edit,
            time_ranges=[[int(a), int(a + d)] for a, d in zip(slow["last_arrival_ns"], slow["xfer_ns"])][:50],
            recommendation=advice,
        )
    ]


def _instance_kernels(ctx: RuleContext, instances: pd.DataFrame) -> pd.DataFrame:
    """The collective kernels (rank, event_id, dur_ns) of the last rank to arrive at each of
    ``instances``: the transfers the bus bandwidth was measured on."""
    arr = ctx.analysis.collective_ranks
    if not len(arr) or not len(instances):
        return pd.DataFrame({"rank": [], "event_id": [], "dur_ns": []})
    key = instances[["pg", "step", "seq", "last_rank"]].rename(columns={"last_rank": "rank"})
    return arr.merge(key, on=["pg", "step", "seq", "rank"])[["rank", "event_id", "dur_ns"]]


@rule(
    "rank_imbalance",
    family="ranks",
    title="Load imbalance across ranks",
    thresholds={"max_imbalance_pct": (10.0, "%"), "min_lost_pct": (5.0, "% of step time")},
)
def rank_imbalance(ctx: RuleContext) -> list[Finding]:
    """In the median step, the busiest rank's device work (compute + copies) exceeds the mean
    rank's by more than ``max_imbalance_pct``, and the time the other ranks lose waiting for the
    busiest rank (busiest minus theirs, summed) is at least ``min_lost_pct`` of their step time."""
    rs = ctx.analysis.rank_steps
    if not len(rs) or rs["rank"].nunique() < 2:
        raise RuleSkipped("skipped: needs a multi-rank run (two or more ranks)")
    g = rs.groupby("step")["busy_ns"]
    per_step = pd.DataFrame(
        {"max": g.max(), "mean": g.mean(), "n": g.size(), "wall": rs.groupby("step")["wall_ns"].sum()}
    )
    per_step = per_step[(per_step["n"] >= 2) & (per_step["mean"] > 0)]
    if not len(per_step):
        raise RuleSkipped("skipped: needs steps recorded on two or more ranks")
    per_step["imbalance_pct"] = 100.0 * (per_step["max"] - per_step["mean"]) / per_step["mean"]
    per_step["lost_ns"] = (per_step["max"] - per_step["mean"]) * per_step["n"]
    imbalance = float(per_step["imbalance_pct"].median())
    lost = float(per_step["lost_ns"].sum())
    lost_pct = 100.0 * lost / float(per_step["wall"].sum())
    if imbalance < ctx.threshold("max_imbalance_pct") or lost_pct < ctx.threshold("min_lost_pct"):
        return []
    busiest = rs.loc[rs.groupby("step")["busy_ns"].idxmax(), "rank"].value_counts()
    worst = int(busiest.index[0])
    return [
        ctx.finding(
            title=f"Ranks are imbalanced: the busiest does {imbalance:.0f}% more device work than the mean",
            message=(
                f"In the median step the busiest rank's compute + copies exceed the mean rank's by {imbalance:.0f}%; "
                f"the others lose {ms(lost)} ({lost_pct:.0f}% of step time) waiting. Rank {worst} is the busiest in "
                f"{int(busiest.iloc[0])} of {len(per_step)} steps."
            ),
            metrics={
                "imbalance_pct": metric(imbalance, "%"),
                "lost_ns": metric(int(lost), "ns"),
                "lost_pct": metric(lost_pct, "%"),
                "busiest_rank": metric(worst, "rank"),
            },
            cost_ns=int(lost),
            category="communication",
            rank=worst,
            recommendation=(
                "Even out the work per rank: balance data shards (sequence-length bucketing, equal tokens per "
                "rank), pipeline stage sizes or expert routing (MoE), and rank-specific extras (logging, eval)."
            ),
        )
    ]
