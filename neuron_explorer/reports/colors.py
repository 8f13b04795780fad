"""One colour per category of time, the same in every chart: the HTML report's breakdown,
timeline and bars, and the TUI's breakdown bar and timeline lanes (docs/report.md lists them).

Tableau 10 hues: distinct for colour-blind readers and readable on light and dark backgrounds.
"""

from __future__ import annotations

#: Category -> colour. Device compute is green, communication purple, copies yellow, host blue,
#: Python orange, waiting on syncs red. The step-time attribution's categories
#: (``analyzers.attribution.CATEGORIES``) use the same hues as the event kinds they stand for.
CATEGORY_COLORS: dict[str, str] = {
    "compute": "#59a14f",  # device kernels
    "communication": "#b07aa1",  # collectives (NCCL, RCCL, Neuron CC)
    "memcpy": "#edc948",  # device copies
    "memset": "#9c755f",  # device memsets
    "host": "#4e79a7",  # host ops, and host time the device waited on
    "runtime": "#76b7b2",  # runtime calls (kernel launches)
    "sync": "#e15759",  # synchronizations
    "python": "#f28e2b",  # Python frames
    "annotation": "#ff9da7",  # user annotations and steps
    "device_wait": "#d37295",  # device idle with work queued (a dependency)
    "data_loading": "#b6992d",  # data loading
    "idle": "#bab0ac",  # nothing running, or nothing recorded
    "one_time": "#79706e",  # one-time work: compilation, graph capture, initialization, warm-up
}
#: Event kind (the trace's ``kind`` column) -> its category.
KIND_CATEGORY: dict[str, str] = {
    "cpu_op": "host",
    "kernel": "compute",
    "collective": "communication",
    "memcpy": "memcpy",
    "memset": "memset",
    "runtime": "runtime",
    "sync": "sync",
    "python": "python",
    "annotation": "annotation",
    "step": "annotation",
}
#: Step-time part (``Analysis.attribution`` / ``.breakdown`` column) -> its category.
PART_CATEGORY: dict[str, str] = {
    "one_time_ns": "one_time",
    "compute_ns": "compute",
    "communication_ns": "communication",
    "copy_ns": "memcpy",
    "host_blocked_ns": "sync",
    "device_wait_ns": "device_wait",
    "data_loading_ns": "data_loading",
    "host_launch_ns": "host",
    "host_python_ns": "python",
    "untraced_ns": "idle",
    "memcpy_ns": "memcpy",
    "memset_ns": "memset",
    "host_exposed_ns": "host",
    "idle_ns": "idle",
}


def kind_color(kind: str) -> str:
    return CATEGORY_COLORS[KIND_CATEGORY.get(kind, "idle")]


def part_color(part: str) -> str:
    return CATEGORY_COLORS[PART_CATEGORY.get(part, "idle")]
