"""Text tables of a NeuronCore device profile (``info``, ``analyze``): the per-engine and
DMA-queue table, fitted to the terminal like every other table (``reports.fit``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from neuron_explorer.analyzers.metrics.neuron_summary import fmt_pct, fmt_time
from neuron_explorer.reports.fit import Column, print_table, printable

ENGINE_COLUMNS = [
    Column("core", short="nc", meaning="NeuronCore"),
    Column("phys", short="pc", meaning="physical core of the logical NeuronCore", drop=3),
    Column("engine / queue", "name"),
    Column("instructions", short="instr", meaning="instructions"),
    Column("waits", drop=2),
    Column("bytes", drop=1),
    Column("active"),
    Column("% of kernel", short="%kern", meaning="% of the kernel window"),
    Column("% of span", short="%span", meaning="% of the profile's span"),
]


def _finite(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and v == v else None


def _int(v: Any) -> str:
    f = _finite(v)
    return "-" if f is None else f"{int(f):,}"


def render_engine_table(console: Any, engines: pd.DataFrame, title: str = "NeuronCore engines and DMA queues") -> None:
    """One row per engine and DMA queue: instructions, waits, bytes, active time, and its
    share of the kernel window and of the span."""
    if not len(engines):
        return
    rows = [
        [
            str(r["device"]),
            _int(r.get("core")),
            printable(("DMA " if r["type"] == "dma" else "") + str(r["unit"])),
            _int(r.get("instructions")),
            _int(r.get("waits")),
            _int(r.get("bytes")),
            fmt_time(r.get("active_ns")),
            fmt_pct(_finite(r.get("kernel_util_pct"))),
            fmt_pct(_finite(r.get("span_util_pct"))),
        ]
        for r in engines.to_dict(orient="records")
    ]
    print_table(console, title, ENGINE_COLUMNS, rows)
