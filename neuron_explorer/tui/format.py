"""Display labels for numbers (durations, counts, bytes, percentages): the TUI's only formatting."""

from __future__ import annotations

from typing import Any

from neuron_explorer.trace.units import format_bytes, format_count, format_duration, format_metric
from neuron_explorer.tui.snapshots import Column


def fmt_ns(ns: float | int | None) -> str:
    """``1_234_000`` -> ``"1.23 ms"`` (``trace.units``); empty for a missing value."""
    return "" if ns is None else format_duration(ns)


def fmt_bytes(n: float | int | None) -> str:
    return "" if n is None else format_bytes(n)


def fmt_value(column: Column, value: Any) -> str:
    """A table cell as text, by the column's unit."""
    if value is None:
        return ""
    if column.unit == "ns":
        return fmt_ns(value)
    if column.unit == "bytes":
        return fmt_bytes(value)
    if column.unit == "%":
        return f"{float(value):.1f}%"
    if column.unit == "count" and isinstance(value, (int, float)):
        return format_count(value)
    if column.unit == "float" and isinstance(value, (int, float)):
        return f"{float(value):.3g}"
    return str(value)


def fmt_metric(m: dict[str, Any]) -> str:
    """A finding's ``{"value": v, "unit": u}`` as text, by its unit (``trace.units``)."""
    return format_metric(m)
