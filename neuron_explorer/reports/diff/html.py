"""A diff as one self-contained HTML page (``diff --format html -o diff.html``).

No script and nothing fetched: the page is the diff view's sections as tables, with a bar per
row showing the size of each change against the largest one of its table, so it opens
anywhere, offline, and can be attached to a CI run. Every trace string (kernel names, paths,
code) goes through ``html_text``; the view is also embedded as JSON (``json_for_script``) for
tools that read the page.
"""

from __future__ import annotations

from neuron_explorer.reports.diff.view import DiffView, doc
from neuron_explorer.reports.html.escape import html_text, json_for_script

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1280px; color: #1d232a; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
.headline { font-size: 16px; font-weight: 600; }
.answer li { margin: 4px 0; } code { background: #f2f4f7; padding: 1px 4px; border-radius: 3px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { padding: 4px 8px; border-bottom: 1px solid #e3e7ec; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, .from { text-align: left; white-space: normal; word-break: break-all; }
th { background: #f7f8fa; position: sticky; top: 0; }
td.bar { width: 120px; } .bar span { display: inline-block; height: 10px; border-radius: 2px; }
.slower { background: #d9534f; } .faster { background: #3c9d5d; }
.note { color: #5b6673; font-size: 12px; } .fail { color: #b42318; font-weight: 600; } .ok { color: #2b7a3d; }
"""


def _bar(cell: str, scale: float) -> str:
    """A bar for a signed time cell ("+1.2 ms"), relative to ``scale`` (the table's largest)."""
    value = _parse_ns(cell)
    if not value or not scale:
        return '<td class="bar"></td>'
    width = max(1, round(100 * abs(value) / scale))
    cls = "slower" if value > 0 else "faster"
    return f'<td class="bar"><span class="{cls}" style="width:{width}px"></span></td>'


def _parse_ns(cell: str) -> float | None:
    units = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
    parts = cell.replace("+", "").split()
    if len(parts) != 2 or parts[1] not in units:
        return None
    try:
        return float(parts[0]) * units[parts[1]]
    except ValueError:
        return None


def render(view: DiffView) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html_text(view.title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{html_text(view.title)}</h1>",
        f'<p class="headline">{html_text(view.headline)}</p>',
        *(f'<p class="warning">warning: {html_text(w)} (compared anyway)</p>' for w in view.warnings),
    ]
    if view.gate:
        cls = "fail" if view.gate_failed else "ok"
        verdict = "Regression gate failed" if view.gate_failed else "Regression gate passed"
        out.append(f'<p class="{cls}">{verdict}</p><ul>')
        out += [f"<li><code>{html_text(g)}</code></li>" for g in view.gate]
        out.append("</ul>")
    out.append("<h2>What got slower</h2>")
    if view.answer:
        out.append('<ul class="answer">')
        out += [f"<li>{html_text(a)}</li>" for a in view.answer]
        out.append("</ul>")
    else:
        out.append("<p>No op, kernel or collective got confidently slower.</p>")
    for s in view.sections:
        out.append(f"<h2>{html_text(s.title)}</h2>")
        if s.note:
            out.append(f'<p class="note">{html_text(s.note)}</p>')
        delta_col = next((i for i, c in enumerate(s.columns) if c.startswith("delta")), None)
        scale = max((abs(_parse_ns(r[delta_col]) or 0) for r in s.rows), default=0) if delta_col is not None else 0
        out.append("<table><thead><tr>")
        out += [
            f'<th class="from">{html_text(c)}</th>' if c == "from" else f"<th>{html_text(c)}</th>" for c in s.columns
        ]
        out.append("<th></th></tr></thead><tbody>")
        for r in s.rows:
            cells = [
                f'<td class="from">{html_text(v)}</td>' if s.columns[i] == "from" else f"<td>{html_text(v)}</td>"
                for i, v in enumerate(r)
            ]
            bar = _bar(r[delta_col], scale) if delta_col is not None else "<td></td>"
            out.append("<tr>" + "".join(cells) + bar + "</tr>")
        out.append("</tbody></table>")
    if view.notes:
        out.append("<h2>Notes</h2><ul>")
        out += [f'<li class="note">{html_text(n)}</li>' for n in view.notes]
        out.append("</ul>")
    out.append(f'<script type="application/json" id="diff-data">{json_for_script(doc(view))}</script>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"
