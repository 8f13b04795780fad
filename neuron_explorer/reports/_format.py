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


def skipped_summary(skipped: list[tuple[str, str]], device_profile_only: bool = False) -> str:
    """``"22 rules did not apply, for lack of: Neuron device profile (7), device events (5), ..."``.

    On a Neuron device profile alone, the rules of other families read what only a framework
    trace holds (ops, steps, launches, DataLoader, NCCL, CUDA memory): they are one group, named
    for what they need, so no GPU word reaches a Trainium user's summary."""
    n = len(skipped)
    head = f"{n} rule{'s' if n != 1 else ''} did not apply"
    if device_profile_only:
        from neuron_explorer.analyzers.rules.registry import RULES

        framework = [(r, w) for r, w in skipped if getattr(RULES.get(r), "family", "") != "neuron"]
        own = [(r, w) for r, w in skipped if (r, w) not in framework]
        parts = [f"{why} ({len(ids)})" for why, ids in skipped_groups(own)]
        if framework:
            parts.append(
                f"a framework trace beside the device profile ({len(framework)}: they read ops, steps and launches "
                "from torch.profiler; neuron-explorer record, or a joined trace, has them)"
            )
        return f"{head}, for lack of: {', '.join(parts)}"
    parts_text = ", ".join(f"{why} ({len(ids)})" for why, ids in skipped_groups(skipped))
    return f"{head}, for lack of: {parts_text}"


def skipped_details(skipped: list[tuple[str, str]], device_profile_only: bool = False) -> list[tuple[str, str]]:
    """(rule id, reason) for the verbose list: on a Neuron device profile alone, the rules of
    other families share one reason (they read framework events), not each its GPU wording."""
    if not device_profile_only:
        return list(skipped)
    from neuron_explorer.analyzers.rules.registry import RULES

    reason = "skipped: reads framework (torch.profiler) events, which a Neuron device profile alone does not have"
    return [(r, w if getattr(RULES.get(r), "family", "") == "neuron" else reason) for r, w in skipped]
