"""Display helpers shared by the text and markdown renderers (labels live here, not in data)."""

from __future__ import annotations

from typing import Any


def fmt_ns(ns: float | int | None) -> str:
    if ns is None:
        return "-"
    ns = float(ns)
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if abs(ns) >= 1e3:
        return f"{ns / 1e3:.1f} us"
    return f"{ns:.0f} ns"


def fmt_bytes(b: float | int | None) -> str:
    if b is None:
        return "-"
    b = float(b)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(b) < 1024 or unit == "TiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return f"{b:.1f} TiB"


def fmt_value(m: dict[str, Any]) -> str:
    """A finding metric ``{"value", "unit"}`` for people."""
    v, unit = m.get("value"), m.get("unit", "")
    if v is None:
        return "-"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "bytes":
        return fmt_bytes(v)
    if isinstance(v, float):
        v = f"{v:.1f}" if abs(v) < 1e6 else f"{v:.3g}"
    return f"{v} {unit}".strip() if unit not in ("%",) else f"{v}%"


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
