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


def skipped_groups(skipped: list[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """Skipped rules grouped by what they lacked (``"skipped: needs device events (kernels)"``
    -> ``"device events"``), the largest group first."""
    groups: dict[str, list[str]] = {}
    for rule_id, why in skipped:
        text = str(why).removeprefix("skipped: ").strip().removeprefix("needs ")
        for stop in (" (", ";", ":", ","):
            cut = text.find(stop)
            if cut > 0:
                text = text[:cut]
        for article in ("a ", "an "):
            text = text.removeprefix(article)
        groups.setdefault(text, []).append(rule_id)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def skipped_summary(skipped: list[tuple[str, str]]) -> str:
    """``"22 rules did not apply, for lack of: Neuron device profile (7), device events (5), ..."``."""
    n = len(skipped)
    parts = ", ".join(f"{why} ({len(ids)})" for why, ids in skipped_groups(skipped))
    return f"{n} rule{'s' if n != 1 else ''} did not apply, for lack of: {parts}"
