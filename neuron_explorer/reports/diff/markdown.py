"""A diff as GitHub-flavoured markdown for a pull-request comment (``diff --format markdown``)."""

from __future__ import annotations

from neuron_explorer.reports.diff.view import DiffView


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def render(view: DiffView) -> str:
    out = [f"## {_cell(view.title)}", "", f"**{_cell(view.headline)}**", ""]
    if view.warnings:
        out += [*(f"- warning: {_cell(w)} (compared anyway)" for w in view.warnings), ""]
    if view.gate:
        icon = "🔴 regression gate failed" if view.gate_failed else "🟢 regression gate passed"
        out += [f"**{icon}**", "", *(f"- `{_cell(g)}`" for g in view.gate), ""]
    if view.answer:
        # answer sentences quote names and lines in backticks; keep them as code spans
        out += ["### What got slower", "", *("- " + a.replace("|", "\\|") for a in view.answer), ""]
    for s in view.sections:
        out += [f"### {_cell(s.title)}", ""]
        if s.note:
            out += [f"_{_cell(s.note)}_", ""]
        out.append("| " + " | ".join(_cell(c) for c in s.columns) + " |")
        out.append("|" + "|".join("---" if i == 0 or c == "from" else "---:" for i, c in enumerate(s.columns)) + "|")
        for r in s.rows:
            cells = [f"`{_cell(v)}`" if (i == 0 or s.columns[i] == "from") and v else _cell(v) for i, v in enumerate(r)]
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    if view.notes:
        out += ["<details><summary>Notes</summary>", "", *(f"- {_cell(n)}" for n in view.notes), "", "</details>", ""]
    return "\n".join(out)
