"""Queue rules: the device idle while launched work waits on a dependency (``analyzers/attribution/queued.py``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import blocking_calls
from neuron_explorer.analyzers.attribution.queued import (
    WAIT_LABELS,
    clock_skewed_ranks,
    queue_wait_totals,
    queue_waits,
    under_spans_ns,
)
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.rules._evidence import attributed_wall_ns, ms
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule

#: what to do, per class of what the queued work waits on (real APIs, as they are called)
ADVICE = {
    "graph": (
        "The gaps are inside CUDA/HIP graph replays: the graph's kernels wait on dependencies captured in the "
        "graph (event waits between capture streams, host or memcpy nodes), not on the host. Dump the graph "
        "to see them: g = torch.cuda.CUDAGraph(); g.enable_debug_mode(); capture; g.debug_dump('graph.dot'). "
        "Calls that block after the replay (.item(), .cpu(), copies) wait for it: pinning their memory saves nothing."
    ),
    "cross_stream": (
        "The queued work waits on another stream's event (torch.cuda.Stream.wait_stream / Event.wait, i.e. "
        "cudaStreamWaitEvent): the waited stream's work sets the pace; record the event right after the work "
        "that is really needed, or start that work earlier."
    ),
    "collective": (
        "The queued collective waits for its peers: analyze the run directory (all ranks) to see which rank "
        "arrives last (culprit_rank, slow_collective)."
    ),
    "before_trace": (
        "The device starts the window busy with work launched before the trace began: start profiling after "
        "warm-up on a drained queue, e.g. torch.profiler.schedule(wait=1, warmup=1, active=3)."
    ),
    "unrecorded": (
        "The queued work waits on something the trace does not record (a host-staged copy, an event recorded "
        "outside the trace): look at the work that ends each gap (event ids)."
    ),
}


@rule(
    "device_queue_wait",
    family="device",
    title="Device idle with launched work queued",
    thresholds={"min_pct": (5.0, "% of step time")},
    needs="device events with their launches",
)
def device_queue_wait(ctx: RuleContext) -> list[Finding]:
    """The device runs nothing while work launched on it waits to start, for at least ``min_pct``
    of step time, whatever the host does meanwhile (a host blocked in a copy or sync that waits
    for this queue is counted: the host is not what the device waits for). The evidence names
    what the queued work waits on (``queued.WAIT_CLASSES``) and the work ending each gap. When
    every launched event of a rank starts implausibly late after its launch, the clocks or the
    window are off: one info note, no cost."""
    if not len(ctx.frames.launch_events):
        raise RuleSkipped("skipped: needs device events linked to their launches")
    pieces = queue_waits(ctx.frames)
    findings: list[Finding] = []
    wall = attributed_wall_ns(ctx.analysis, device_only=True) or 1
    skew = clock_skewed_ranks(ctx.frames)
    if len(skew):
        findings.append(_clock_note(ctx, skew, pieces))
    real = pieces[pieces["wait_class"] != "clock"]
    totals = queue_wait_totals(real)
    total = sum(totals.values())
    pct = 100.0 * total / wall
    if not total or pct < ctx.threshold("min_pct"):
        return findings
    top = max((c for c in totals if c != "clock"), key=lambda c: totals[c])
    calls = blocking_calls(ctx.frames)
    under = under_spans_ns(ctx.frames, real, calls)
    category = "host_blocked" if 2 * under > total else "device_wait"
    dur = real["end_ns"] - real["start_ns"]
    by_work = real.assign(dur_ns=dur).groupby("name", observed=True)["dur_ns"].agg(["sum", "size"])
    by_work = by_work.sort_values("sum", ascending=False).head(3)
    worst = real.assign(dur_ns=dur).sort_values("dur_ns", ascending=False).head(5)
    parts = [f"{ms(totals[c])} on {WAIT_LABELS[c]}" for c in totals if totals[c] and c != "clock"]
    blocked = calls[_overlaps(calls, real)]
    ids = [int(i) for i in worst["event_id"]] + [int(i) for i in blocked.nlargest(5, "dur_ns")["event_id"]]
    main = ctx.finding(
        title=f"Device idle {pct:.1f}% of step time with launched work queued, waiting on {WAIT_LABELS[top]}",
        message=(
            f"In {len(real)} gaps the device ran nothing for {ms(total)} while launched work waited to start: "
            + "; ".join(parts)
            + f". {ms(under)} of it with the host blocked in a copy or sync that waits for this queue"
            + (
                f" (that part is the cost: the host waits too), the rest {ms(total - under)} without."
                if category == "host_blocked"
                else f" (the host is not what the device waits for); the cost is the other {ms(total - under)}."
            )
            + " Work that ended the longest waits: "
            + ", ".join(f"{n} ({ms(s)} over {k} gaps)" for n, (s, k) in by_work.iterrows())
            + "."
        ),
        metrics={
            "queued_idle_ns": metric(int(total), "ns"),
            "queued_idle_pct": metric(pct, "%"),
            "under_blocking_ns": metric(int(under), "ns"),
            "gaps": metric(len(real), "gaps"),
            **{f"{c}_ns": metric(int(v), "ns") for c, v in totals.items() if c != "clock"},
        },
        # the part in its attribution category (the ledger bills one category per finding)
        cost_ns=int(under if category == "host_blocked" else total - under),
        category=category,
        time_ranges=[[int(s), int(e)] for s, e in zip(worst["start_ns"], worst["end_ns"])],
        event_ids=ids,
        recommendation=ADVICE[top],
    )
    return [main, *findings]


def _overlaps(calls: pd.DataFrame, pieces: pd.DataFrame) -> pd.Series:
    """Calls that overlap a queued idle piece of their rank (a sorted search per call)."""
    hit = np.zeros(len(calls), bool)
    cs = calls["start_ns"].to_numpy()
    ce = cs + calls["dur_ns"].to_numpy()
    cr = calls["rank"].to_numpy()
    for r in np.unique(pieces["rank"].to_numpy()):  # one pass per rank
        p = pieces[pieces["rank"] == r].sort_values("start_ns")
        ps, pe = p["start_ns"].to_numpy(), np.maximum.accumulate(p["end_ns"].to_numpy())
        i = np.searchsorted(ps, ce, side="left") - 1  # last piece starting before the call ends
        hit |= (cr == r) & (i >= 0) & (pe[np.maximum(i, 0)] > cs)
    return pd.Series(hit, index=calls.index)


def _clock_note(ctx: RuleContext, skew: pd.DataFrame, pieces: pd.DataFrame) -> Finding:
    worst = skew.sort_values("min_delay_ns").iloc[0]
    clocked = pieces[pieces["wait_class"] == "clock"]
    total = int((clocked["end_ns"] - clocked["start_ns"]).sum())
    return ctx.finding(
        severity="info",
        title="Every kernel starts implausibly long after its launch: host and device clocks disagree",
        message=(
            f"On rank(s) {', '.join(str(int(r)) for r in skew['rank'])}, each of {int(worst['events'])} launched device "
            f"events starts at least {ms(worst['min_delay_ns'])} after its launch call began (median "
            f"{ms(worst['median_delay_ns'])}); a launch takes microseconds. The {ms(total)} of device time that looks "
            "queued is a clock or trace-window artifact, not a bottleneck, and launch delays and queue depths of "
            "these ranks are not to be trusted."
        ),
        metrics={
            "min_launch_delay_ns": metric(int(worst["min_delay_ns"]), "ns"),
            "median_launch_delay_ns": metric(int(worst["median_delay_ns"]), "ns"),
            "apparent_queued_ns": metric(total, "ns"),
        },
        cost_ns=0,
        category="device_wait",
        recommendation=(
            "Record host and device on one clock: a current torch (Kineto aligns CUPTI timestamps to the host "
            "clock), one capture per process; when importing a trace, use the one the profiler wrote."
        ),
    )
