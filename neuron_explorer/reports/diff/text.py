"""A diff as plain text for the terminal (``diff --format text``), its tables fitted to the
width (``reports.fit``: short headers with a legend, names cut in the middle, never numbers)."""

from __future__ import annotations

from neuron_explorer.reports.diff.view import DiffView, Section
from neuron_explorer.reports.fit import PIPE_WIDTH, Column, plain_table, printable

#: Every column a diff table may have: (label, kind, short label, meaning, drop order).
COLUMNS = {
    "item": Column("item", "name"),
    "metric": Column("metric", "text"),
    "base": Column("base"),
    "new": Column("new"),
    "base / step": Column("base / step", short="base", meaning="base per step"),
    "new / step": Column("new / step", short="new", meaning="new per step"),
    "delta": Column("delta"),
    "delta / step": Column("delta / step", short="delta", meaning="delta per step"),
    "delta %": Column("delta %", short="%", meaning="delta % of the item's base"),
    "% of base step": Column("% of base step", short="% step", meaning="delta as % of the base step time"),
    "calls / step": Column("calls / step", short="calls", meaning="calls per step, base -> new", drop=2),
    "95% interval": Column("95% interval", short="95% CI", meaning="95% interval of the delta", drop=3),
    "confidence": Column("confidence", short="conf", meaning="confidence", drop=1),
    "from": Column("from", "shape", short="line", meaning="source line", drop=4),
}


def _table(s: Section, width: int) -> list[str]:
    cols = [COLUMNS.get(c, Column(c, "text")) for c in s.columns]
    return plain_table(cols, s.rows, width)


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(
        printable(text), width=max(width, 40), initial_indent=indent, subsequent_indent=indent + "  "
    ) or [""]


def render(view: DiffView, width: int = PIPE_WIDTH) -> str:
    out = [*_wrap(view.title, width), "", *_wrap(view.headline, width)]
    out += [line for w in view.warnings for line in _wrap(f"warning: {w} (compared anyway)", width)]
    out.append("")
    if view.answer:
        out.append("What got slower:")
        out += [line for a in view.answer for line in _wrap(a, width, "  ")]
    else:
        out.append("No op, kernel or collective got confidently slower.")
    out.append("")
    for s in view.sections:
        out += _wrap(s.title + (f"  ({s.note})" if s.note else ""), width)
        out += _table(s, width)
        out.append("")
    if view.notes:
        out += ["Notes:", *(line for n in view.notes for line in _wrap(f"- {n}", width, "  ")), ""]
    if view.gate:
        out += ["Regression gate:", *(line for g in view.gate for line in _wrap(g, width, "  ")), ""]
    return "\n".join(out)
