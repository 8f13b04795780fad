"""Display labels for numbers (durations, counts, bytes, percentages): the TUI's only formatting."""

from __future__ import annotations

from typing import Any

from neuron_explorer.tui.snapshots import Column


def fmt_ns(ns: float | int | None) -> str:
    """``1_234_000`` -> ``"1.23 ms"``; three significant digits from ns to s."""
    if ns is None:
        return ""
    ns = float(ns)
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{sign}{_sig(ns / scale)} {unit}"
    return f"{sign}{ns:.0f} ns"


def _sig(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def fmt_bytes(n: float | int | None) -> str:
    if n is None:
        return ""
    n = float(n)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{_sig(n / scale)} {unit}"
    return f"{n:.0f} B"


def fmt_value(column: Column, value: Any, width: int | None = None, root: str | None = None) -> str:
    """A table cell as text, by the column's unit; a source path or location fitted to ``width``."""
    if value is None:
        return ""
    if column.unit == "kernel":  # demangled; shortened so names that differ still read apart
        from neuron_explorer.reports.names import demangle, short_kernel_name

        return short_kernel_name(str(value), width) if width else demangle(str(value))
    if column.unit in ("path", "loc"):
        from neuron_explorer.reports.location import Locations

        where = Locations(root)
        if column.unit == "path":
            return where.format(value, None, width=width)
        return where.format(*value, width=width)
    if column.unit == "ns":
        return fmt_ns(value)
    if column.unit == "bytes":
        return fmt_bytes(value)
    if column.unit == "%":
        return f"{float(value):.1f}%"
    if column.unit == "count" and isinstance(value, (int, float)):
        return f"{int(value):,}"
    if column.unit == "float" and isinstance(value, (int, float)):
        return f"{float(value):.3g}"
    return str(value)


def fmt_metric(m: dict[str, Any]) -> str:
    """A finding's ``{"value": v, "unit": u}`` as text, durations in readable units."""
    value, unit = m.get("value"), m.get("unit") or ""
    if isinstance(value, (int, float)) and unit == "ns":
        return fmt_ns(value)
    if isinstance(value, (int, float)) and unit == "bytes":
        return fmt_bytes(value)
    if isinstance(value, float):
        value = f"{value:,.4g}"
    elif isinstance(value, int):
        value = f"{value:,}"
    return f"{value} {unit}".strip() if unit not in ("%",) else f"{value}%"


#: Eighths of a cell, for bars drawn in text.
EIGHTHS = " ▁▂▃▄▅▆▇█"


def zero_based_bars(values: list[float], width: int, height: int = 1) -> list[str]:
    """Rows (top first) of a bar chart of ``values`` scaled from zero to their maximum: a 210 ms
    and a 216 ms step draw as nearly equal bars, not as empty and full. Values are bucketed to
    ``width`` columns by their maximum (a slow step is never averaged away); a few values get
    bars a few columns wide, a space apart."""
    if not values or width <= 0 or height <= 0:
        return [""] * max(height, 0)
    n = len(values)
    cols = min(width, n)
    buckets = [max(values[i * n // cols : max((i + 1) * n // cols, i * n // cols + 1)]) for i in range(cols)]
    top = max(max(buckets), 0) or 1
    eighths = [round(max(v, 0) / top * height * 8) for v in buckets]
    bar = min(max(width // cols - 1, 1), 6) if cols < width else 1
    gap = " " if bar > 1 else ""
    rows = []
    for level in range(height - 1, -1, -1):
        rows.append(gap.join(EIGHTHS[min(max(e - level * 8, 0), 8)] * bar for e in eighths))
    return rows
