"""Display helpers shared by the text and markdown renderers (labels live here, not in data);
numbers go through ``trace.units``, the one formatter of every output."""

from __future__ import annotations

from typing import Any

from neuron_explorer.trace.units import format_metric, format_quantity


def fmt_ns(ns: float | int | None) -> str:
    return format_quantity(ns, "ns")


def fmt_bytes(b: float | int | None) -> str:
    return format_quantity(b, "bytes")


def fmt_value(m: dict[str, Any]) -> str:
    """A finding metric ``{"value", "unit"}`` for people (``trace.units``, shared by every output)."""
    return format_metric(m)


def fmt_line(src: dict[str, Any]) -> str:
    func = f" ({src['func']})" if src.get("func") else ""
    return f"{src['file']}:{src['line']}{func}"


def short(name: str, width: int = 70) -> str:
    name = str(name)
    return name if len(name) <= width else name[: width - 3] + "..."
