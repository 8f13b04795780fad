"""The cost ledger: every finding's cost is claimed once, by replay where the fix is an edit.

Rules estimate a cost each; on their own, two rules that explain the same idle time (or the
same GEMMs) would both bill it, and the costs could add up to more than the run. After the
rules ran:

1. ``price_by_replay``: a finding whose fix is an edit of the run's graph (``Finding.edits``:
   the syncs it names wait for nothing, its kernels at the efficiency it says they could
   reach, its communication overlapped, ...) gets ``cost_ns`` = the replayed saving of that
   edit alone (``cost_method`` ``"replay"``, ``analyzers/graph/pricing.py``). Two findings never
   bill the same device work: walking the findings from the most specific (``OWNS_FIRST``:
   the rule naming the cause before the rule naming the symptom) and then the most important,
   each owns the kernels its edit changes that no finding before it owns; the others' edits
   leave those kernels alone, and they refer to the owner (``refers_to``). All the edits
   together are one more replay (``"all fixes together"``), which is what the findings' fixes
   would save at once: never the sum of their savings.
2. ``settle_costs``: the other findings keep their attribution cost, each a part of one
   attribution category (``analyzers/attribution/__init__.py``): walking them from the most to the
   least important, each claims at most what is still unclaimed of its category after the
   replay-priced findings of that category took theirs, so no nanosecond is billed twice.

A finding's category is the one it sets, else its rule's entry in ``RULE_CATEGORY``, else (for
step-shaped findings such as outlier steps) the category holding the most time in the step
windows its time ranges cover.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import CATEGORY_NAMES
from neuron_explorer.analyzers.finding import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from neuron_explorer.analyzers.core.context import TraceFrames

#: host work: the device is starved by it on a device trace; it is the compute on a CPU trace
HOST_WORK = "host_work"

RULE_CATEGORY: dict[str, str] = {
    # host
    "sync_in_loop": "host_blocked",
    "sync_memcpy": "host_blocked",
    "dataloader_stall": "data_loading",
    "host_hotspot": "host_python",
    "python_overhead": "host_python",
    "host_bound": "host_launch",
    "launch_bound": "host_launch",
    "tiny_ops": HOST_WORK,
    "unfused_optimizer": HOST_WORK,
    "alloc_churn": HOST_WORK,
    "compile_graph_breaks": HOST_WORK,
    # one-time work: warm-up steps, and compilations after the first step (recompiles)
    "warmup_cost": "one_time",
    # device
    "device_idle": "untraced",
    "tensor_cores": "compute",
    "fp32_amp": "compute",
    # performance models (device time of op groups below their roof)
    "op_below_roofline": "compute",
    "eager_attention": "compute",
    "small_h2d": "copy",
    # distributed
    "exposed_comm": "communication",
    # ranks: the wait a late rank causes shows as the others' exposed communication
    "culprit_rank": "communication",
    "slow_collective": "communication",
    "rank_imbalance": "communication",
    # Trainium
    "neuron_low_mfu": "compute",
    "neuron_engine_bottleneck": "compute",
    "neuron_transpose_matmul": "compute",
    "neuron_dma_bound": "copy",
    "neuron_small_dma": "copy",
    "neuron_spill_reload": "copy",
    "neuron_exposed_collectives": "communication",
}


def budgets(attribution: pd.DataFrame) -> dict[str, int]:
    """Total ns of each category over every (rank, step, device) row."""
    if not len(attribution):
        return dict.fromkeys(CATEGORY_NAMES, 0)
    return {c: int(attribution[f"{c}_ns"].sum()) for c in CATEGORY_NAMES}


def resolve_category(finding: Finding, attribution: pd.DataFrame) -> str | None:
    """The category a finding's cost is a part of (see the module docstring)."""
    category = finding.category or RULE_CATEGORY.get(finding.rule_id)
    if category == HOST_WORK:
        host_only = bool(len(attribution)) and bool((attribution["device"] < 0).all())
        return "compute" if host_only else "host_launch"
    if category is not None or not finding.time_ranges or not len(attribution):
        return category
    return dominant_category(attribution, finding.time_ranges)


def dominant_category(attribution: pd.DataFrame, ranges: Iterable[list[int]]) -> str | None:
    """The category with the most time in the attribution rows whose windows overlap ``ranges``."""
    r = np.asarray(list(ranges), dtype=np.int64).reshape(-1, 2)
    start = attribution["start_ns"].to_numpy()
    end = start + attribution["wall_ns"].to_numpy()
    hit = ((start[:, None] < r[None, :, 1]) & (end[:, None] > r[None, :, 0])).any(axis=1)
    if not hit.any():
        return None
    sums = attribution.loc[hit, [f"{c}_ns" for c in CATEGORY_NAMES]].sum()
    return str(sums.idxmax())[: -len("_ns")]


#: Rules that name the cause of time a generic rule would also bill: they claim it first (the
#: rank whose late arrival makes the others wait, before "exposed communication" as such; an
#: unfused optimizer's own host time, before "host-bound" or "launch-bound" as such).
CLAIMS_FIRST = frozenset({"culprit_rank", "unfused_optimizer"})
#: Rules whose edits own the device work they change before a more generic rule's edit on the
#: same work, most specific first (fused attention names why its softmax and bmm kernels are
#: slow; a GEMM without tensor cores names why it is below its roof).
OWNS_FIRST = ("eager_attention", "fp32_amp", "tensor_cores", "op_below_roofline")


def price_by_replay(findings: list[Finding], frames: TraceFrames | None) -> dict[str, Any]:
    """Price every finding that carries an edit by replaying it (module docstring, step 1);
    returns the summary of all fixes together (``{}`` when nothing was priced)."""
    from neuron_explorer.analyzers.graph.pricing import device_work, price
    from neuron_explorer.trace.errors import AnalysisError

    todo = [f for f in findings if f.edits is not None and not f.edits.empty]
    if frames is None or not todo:
        return {}
    order = sorted(
        todo,
        key=lambda f: (
            OWNS_FIRST.index(f.rule_id) if f.rule_id in OWNS_FIRST else len(OWNS_FIRST),
            -SEVERITY_RANK[f.severity],
            -f.cost_ns,
            f.rule_id,
        ),
    )
    try:
        owner: dict[int, Finding] = {}
        for f in order:
            assert f.edits is not None
            work = device_work(frames, f.edits)
            taken = [k for k in work.tolist() if k in owner]
            if taken:
                first = owner[taken[0]]
                f.edits = f.edits.sparing(np.asarray(taken, np.int64))
                f.refers_to = first.rule_id
                f.message = (
                    f"{f.message} ({len(taken)} of its {len(work)} device events are {first.rule_id}'s "
                    f"finding's, priced there: {first.title}.)"
                )
            owner.update((k, f) for k in work.tolist() if k not in owner)
        prices = price(frames, [f.edits for f in order if f.edits is not None])
    except AnalysisError:  # nothing to build a graph from: every cost stays an attribution
        return {}
    for f, saving in zip(order, prices.savings):
        f.cost_ns = int(saving)
        f.cost_method = "replay"
        f.fix_edit = f.edits.describe() if f.edits is not None else ""
    return {
        "priced": len(order),
        "all_fixes_ns": int(prices.together_ns),
        "sum_of_findings_ns": int(sum(prices.savings)),
        "replayed_ns": int(prices.baseline_ns),
        "all_fixes_pct": 100.0 * prices.together_ns / prices.baseline_ns if prices.baseline_ns else 0.0,
        "baseline_error_pct": float(prices.baseline_error_pct),
        "within_tolerance": bool(prices.within_tolerance),
    }


def _ms(ns: float) -> str:
    from neuron_explorer.trace.units import format_duration

    return format_duration(ns)


def settle_costs(findings: list[Finding], attribution: pd.DataFrame) -> list[Finding]:
    """Cap each attribution-priced finding's cost at what is left of its category after the
    replay-priced findings of that category took theirs, most important first (a cause in
    ``CLAIMS_FIRST`` before the symptom); returns the findings re-ranked (severity, then cost)."""
    left = budgets(attribution)
    claimants: dict[str, list[str]] = {}  # category -> the rules that claimed some of it, in order
    for f in findings:
        if f.cost_method == "replay":
            f.category = resolve_category(f, attribution)
            if f.category is not None:
                left[f.category] = max(left.get(f.category, 0) - int(f.cost_ns), 0)
                claimants.setdefault(f.category, []).append(f.rule_id)
    order = sorted(
        (f for f in findings if f.cost_method != "replay"),
        key=lambda f: (f.rule_id not in CLAIMS_FIRST, -SEVERITY_RANK[f.severity], -f.cost_ns, f.rule_id),
    )
    for f in order:
        f.category = resolve_category(f, attribution)
        if f.category is None:
            f.cost_ns = 0  # a claim on no category is a claim on no time
            continue
        named = max(int(f.cost_ns), 0)
        claimed = min(named, left.get(f.category, 0))
        left[f.category] = left.get(f.category, 0) - claimed
        if claimed < named and named - claimed >= 0.05 * named:  # the text says why the cost is less
            others = list(dict.fromkeys(r for r in claimants.get(f.category, []) if r != f.rule_id))
            why = (
                f"the rest of that {f.category} time is already claimed by {', '.join(others)}"
                if others
                else f"all the {f.category} time the steps hold"
            )
            f.message = f"{f.message} (Of the {_ms(named)} it names, {_ms(claimed)} is its cost: {why}.)"
        if claimed:
            claimants.setdefault(f.category, []).append(f.rule_id)
        f.cost_ns = claimed
    return sorted(findings, key=lambda f: (-SEVERITY_RANK[f.severity], -f.cost_ns, f.rule_id))
