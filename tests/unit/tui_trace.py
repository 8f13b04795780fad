"""A tiny, hand-built trace for the TUI tests: two steps, host ops, kernels on two queues.

Its source lines point at ``tests/data/tui/train.py`` (recorded as the relative ``train.py``),
so the Source view can show the file with its time gutter. Every number is fixed, so screens
drawn from it are the same on every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from neuron_explorer.trace.model import Trace, conform

SOURCE_DIR = Path(__file__).resolve().parents[1] / "data" / "tui"
BASE_NS = 1_700_000_000_000_000_000
MS = 1_000_000
#: thresholds under which the tiny trace (72% busy, 15% of host-bound time) yields two findings
TINY_THRESHOLDS = {"host_bound.max_pct": 10.0, "device_idle.min_busy_pct": 80.0}


def _events() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(**kw: Any) -> int:
        kw.setdefault("rank", 0)
        kw.setdefault("ph", "X")
        event_id = len(rows)
        rows.append({"event_id": event_id, **kw})
        return event_id

    host = {"device_type": "cpu", "pid": 10, "tid": 100}
    for k, step in enumerate((1, 2)):
        o = BASE_NS + k * 10 * MS
        st = add(
            kind="step",
            category="user_annotation",
            name=f"ProfilerStep#{step}",
            start_ns=o,
            dur_ns=10 * MS,
            step=step,
            **host,
        )
        src12 = {"src_file": "train.py", "src_line": 12, "src_func": "forward", "src_precision": "line"}
        src13 = {"src_file": "train.py", "src_line": 13, "src_func": "forward", "src_precision": "line"}
        linear = add(
            kind="cpu_op",
            category="cpu_op",
            name="aten::linear",
            start_ns=o + 1 * MS,
            dur_ns=4 * MS,
            parent_id=st,
            step=step,
            **host,
            **src12,
        )
        addmm = add(
            kind="cpu_op",
            category="cpu_op",
            name="aten::addmm",
            start_ns=o + 3 * MS // 2,
            dur_ns=3 * MS,
            parent_id=linear,
            step=step,
            **host,
            **src12,
        )
        launch1 = add(
            kind="runtime",
            category="cuda_runtime",
            name="cudaLaunchKernel",
            start_ns=o + 2 * MS,
            dur_ns=MS // 2,
            parent_id=addmm,
            op_id=addmm,
            step=step,
            correlation_id=10 + k,
            **host,
        )
        relu = add(
            kind="cpu_op",
            category="cpu_op",
            name="aten::relu",
            start_ns=o + 6 * MS,
            dur_ns=MS,
            parent_id=st,
            step=step,
            **host,
            **src13,
        )
        launch2 = add(
            kind="runtime",
            category="cuda_runtime",
            name="cudaLaunchKernel",
            start_ns=o + 6 * MS + MS // 5,
            dur_ns=MS // 5,
            parent_id=relu,
            op_id=relu,
            step=step,
            correlation_id=20 + k,
            **host,
        )
        dev = {"device_type": "cuda", "device": 0, "pid": 0}
        add(
            kind="memcpy",
            category="gpu_memcpy",
            name="Memcpy HtoD (Pageable -> Device)",
            start_ns=o + MS // 2,
            dur_ns=2 * MS // 5,
            stream=7,
            tid=7,
            step=step,
            bytes=1 << 20,
            memcpy_kind="HtoD (Pageable)",
            **dev,
        )
        add(
            kind="kernel",
            category="kernel",
            name="sm90_xmma_gemm_bf16bf16_bf16f32",
            start_ns=o + 26 * MS // 10,
            dur_ns=5 * MS,
            stream=7,
            tid=7,
            step=step,
            launch_id=launch1,
            op_id=addmm,
            correlation_id=10 + k,
            **dev,
            **{**src12, "src_precision": "launch"},
        )
        add(
            kind="kernel",
            category="kernel",
            name="vectorized_elementwise_kernel<relu>",
            start_ns=o + 77 * MS // 10,
            dur_ns=MS,
            stream=7,
            tid=7,
            step=step,
            launch_id=launch2,
            op_id=relu,
            correlation_id=20 + k,
            **dev,
            **{**src13, "src_precision": "launch"},
        )
        add(
            kind="collective",
            category="kernel",
            name="ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            start_ns=o + 8 * MS,
            dur_ns=3 * MS // 2,
            stream=20,
            tid=20,
            step=step,
            **dev,
        )
    return rows


def tiny_trace() -> Trace:
    """The trace, built in memory (no file)."""
    rows = _events()
    columns = sorted({k for r in rows for k in r})
    table = pa.table({c: [r.get(c) for r in rows] for c in columns})
    strings = {"kind", "category", "ph", "name", "device_type", "src_file", "src_func", "src_precision", "memcpy_kind"}
    table = pa.table({c: (table[c].cast(pa.string()) if c in strings else table[c]) for c in columns})
    metadata = {"collector": "test_factory", "rank": 0, "world_size": 1, "device_types": ["cuda"]}
    return Trace(conform(table), metadata)


def write_tiny_trace(path: Path) -> Path:
    """The trace as a Parquet file at ``path``, as ``neuron-explorer convert`` would write it."""
    return tiny_trace().write(path)
