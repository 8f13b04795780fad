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
        return format_count(value)
    if column.unit == "float" and isinstance(value, (int, float)):
        return f"{float(value):.3g}"
    if column.unit == "rate" and isinstance(value, (int, float)):  # TFLOP/s, TB/s: as analyze prints them
        from neuron_explorer.reports.text import rate

        return rate(float(value))
    if column.unit == "roof%" and isinstance(value, (int, float)):  # over 100% of a peak is marked
        from neuron_explorer.reports.text import OVER_PEAK_PCT

        return f"{float(value):.1f}%" + ("!" if value > OVER_PEAK_PCT else "")
    return str(value)


def fmt_metric(m: dict[str, Any]) -> str:
    """A finding's ``{"value": v, "unit": u}`` as text, by its unit (``trace.units``)."""
    return format_metric(m)


def pack_phrases(phrases: list[str] | tuple[str, ...], width: int, sep: str = " · ", head: str = "") -> list[str]:
    """``head`` then ``phrases`` joined by ``sep`` in lines of ``width``, broken only between
    phrases: ``min 1.5 ms`` or ``+9.5 ms…+10.5 ms`` never splits from its unit. A phrase wider
    than the line gets a line of its own."""
    lines: list[str] = []
    current, empty = head, True  # (no phrase on the current line yet)
    for phrase in phrases:
        if not empty and len(current) + len(sep) + len(phrase) > width:
            lines.append(current)
            current = phrase
        else:
            current += ("" if empty else sep) + phrase
        empty = False
    lines.append(current)
    return lines


class Phrases:
    """A rich renderable: ``pack_phrases`` at the width it is drawn in (a bold ``head``)."""

    def __init__(self, phrases: list[str] | tuple[str, ...], sep: str = " · ", head: str = "") -> None:
        self.phrases, self.sep, self.head = tuple(phrases), sep, head

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        for i, line in enumerate(pack_phrases(self.phrases, options.max_width, self.sep, self.head)):
            if i == 0 and self.head and line.startswith(self.head):
                yield Text.assemble((self.head, "bold"), line[len(self.head) :])
            else:
                yield Text(line)


class Prose:
    """A rich renderable: text wrapped at whatever width it is drawn in, never parting a number
    from its unit (``reports.fit.wrap_prose``: rich alone would print "10" and "µs" on two
    lines); for table cells and titles."""

    def __init__(self, text: Any) -> None:
        from rich.text import Text

        self.text = text if isinstance(text, Text) else Text(str(text))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from neuron_explorer.reports.fit import wrap_prose

        for line in wrap_prose(self.text, max(options.max_width, 1)):
            line.end = "\n"
            yield line

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        plain = self.text.plain
        return Measurement(min(len(plain), 12), max(len(plain), 1))


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
