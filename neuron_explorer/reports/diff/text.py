"""A diff as plain text for the terminal (``diff --format text``)."""

from __future__ import annotations

from neuron_explorer.reports.diff.view import DiffView, Section


def _table(s: Section) -> list[str]:
    widths = [max(len(c), *(len(r[i]) for r in s.rows)) for i, c in enumerate(s.columns)]

    def line(cells: list[str]) -> str:
        # first column left-aligned (names), numbers right-aligned, the source line left
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            out.append(c.ljust(w) if i == 0 or s.columns[i] == "from" else c.rjust(w))
        return "  " + "  ".join(out).rstrip()

    return [line(s.columns), *(line(r) for r in s.rows)]


def render(view: DiffView) -> str:
    out = [view.title, "", view.headline, ""]
    if view.answer:
        out.append("What got slower:")
        out += [f"  {a}" for a in view.answer]
    else:
        out.append("No op, kernel or collective got confidently slower.")
    out.append("")
    for s in view.sections:
        out.append(s.title + (f"  ({s.note})" if s.note else ""))
        out += _table(s)
        out.append("")
    if view.notes:
        out += ["Notes:", *(f"  - {n}" for n in view.notes), ""]
    if view.gate:
        out += ["Regression gate:", *(f"  {g}" for g in view.gate), ""]
    return "\n".join(out)
