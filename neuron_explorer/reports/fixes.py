"""How a finding's cost was found, and what all fixes together would save, in words.

One wording for every renderer (text, markdown, HTML, TUI, MCP): a replay-priced finding says
what its fix saves ("fix saves ~12.0 ms (replayed: 12 synchronizing calls wait for nothing)"),
an attribution-priced one what it costs of its category ("costs ~3.1 ms of host_blocked"), and
the findings together get one more replay ("All fixes together: 40.2 ms of 310.0 ms replayed
(13.0%); alone they would sum to 44.5 ms").
"""

from __future__ import annotations

from typing import Any

from neuron_explorer.reports._format import fmt_ns


def cost_phrase(f: Any) -> str:
    """`` (fix saves ~X by replay: edit)`` or `` (costs ~X of category)``; '' without a cost."""
    d = f if isinstance(f, dict) else f.to_dict()
    if d.get("cost_method") == "replay":
        what = f": {d['fix_edit']}" if d.get("fix_edit") else ""
        see = f"; see {d['refers_to']}" if d.get("refers_to") else ""
        if not d.get("cost_ns"):  # the figure in the title is real; other work sets the step time
            return f" (fix saves nothing measurable, replayed{what}: other work sets the step time{see})"
        return f" (fix saves ~{fmt_ns(d.get('cost_ns') or 0)}, replayed{what}{see})"
    if d.get("cost_ns") and d.get("category"):
        return f" (costs ~{fmt_ns(d['cost_ns'])} of {d['category']}, by attribution)"
    return ""


def fixes_line(fixes: dict[str, Any] | None) -> str | None:
    """The all-fixes-together sentence, or None when no finding was priced by replay."""
    if not fixes or not fixes.get("priced"):
        return None
    text = (
        f"All fixes together (one replay of {fixes['priced']} finding(s)' edits): {fmt_ns(fixes['all_fixes_ns'])} "
        f"of {fmt_ns(fixes['replayed_ns'])} ({fixes['all_fixes_pct']:.1f}%); alone they would sum to "
        f"{fmt_ns(fixes['sum_of_findings_ns'])}"
    )
    if not fixes.get("within_tolerance", True):
        text += f" (the baseline replay is off by {fixes['baseline_error_pct']:+.1f}%: take these as estimates)"
    return text + "."
