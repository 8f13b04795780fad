"""The cost ledger: every finding's cost is a part of one attribution category, claimed once.

Rules estimate a cost each; on their own, two rules that explain the same idle time (or the
same GEMMs) would both bill it, and the costs could add up to more than the run. After the
rules ran, ``settle_costs`` walks the findings from the most to the least important and lets
each claim at most what is still unclaimed of its category (``analyzers/attribution.py``), so
the costs of all findings add up to at most the wall time and no nanosecond is billed twice.

A finding's category is the one it sets, else its rule's entry in ``RULE_CATEGORY``, else (for
step-shaped findings such as outlier steps) the category holding the most time in the step
windows its time ranges cover.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import CATEGORY_NAMES
from neuron_explorer.analyzers.finding import SEVERITY_RANK, Finding

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


def settle_costs(findings: list[Finding], attribution: pd.DataFrame) -> list[Finding]:
    """Cap each finding's cost at what is left of its category, most important first (a cause
    in ``CLAIMS_FIRST`` before the symptom); returns the findings re-ranked (severity, then
    settled cost)."""
    left = budgets(attribution)
    order = sorted(
        findings, key=lambda f: (f.rule_id not in CLAIMS_FIRST, -SEVERITY_RANK[f.severity], -f.cost_ns, f.rule_id)
    )
    for f in order:
        f.category = resolve_category(f, attribution)
        if f.category is None:
            f.cost_ns = 0  # a claim on no category is a claim on no time
            continue
        claimed = min(max(int(f.cost_ns), 0), left.get(f.category, 0))
        left[f.category] = left.get(f.category, 0) - claimed
        f.cost_ns = claimed
    return sorted(findings, key=lambda f: (-SEVERITY_RANK[f.severity], -f.cost_ns, f.rule_id))
