"""Rendering the report's data into one self-contained HTML file, written atomically.

The page is the template with four things filled in: the CSS, the report data (JSON in a
``<script type="application/json">``, escaped by ``json_for_script``), Plotly's own minified
JavaScript from the installed ``plotly`` package (so the file works offline, from a file URL or
an e-mail attachment), and the page's script that draws everything from the data.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from neuron_explorer.reports.html.escape import html_text, json_for_script
from neuron_explorer.trace.atomic import atomic_path
from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.version import __version__

_SLOT = re.compile(r"<!--@(\w+)@-->")
_SCRIPT_END = re.compile(r"</script|<!--", re.IGNORECASE)


class ReportError(NeuronExplorerError):
    """The report could not be written (bad output path, disk full, no permission)."""


def render_html(data: dict[str, Any]) -> str:
    """The complete HTML page for ``data`` (from ``build_report_data``)."""
    plotly_js, plotly_version = plotly_bundle()
    slots = {
        "title": html_text(data["header"]["workload"]),
        "version": html_text(__version__),
        "plotly_version": html_text(plotly_version),
        "css": _template("report.css"),
        "data": json_for_script(data),
        "plotly": plotly_js,
        "js": _template("report.js"),
    }
    # One pass: text filled into a slot is never scanned again for slots.
    return _SLOT.sub(lambda m: slots[m.group(1)], _template("report.html"))


def write_html(html: str, path: str | Path) -> Path:
    """Write ``html`` to ``path`` atomically: a temporary file beside it, then a rename."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(html, encoding="utf-8")
    return path


@lru_cache(maxsize=1)
def plotly_bundle() -> tuple[str, str]:
    """Plotly.js as shipped inside the ``plotly`` package, and its version."""
    from plotly.offline import get_plotlyjs, get_plotlyjs_version

    js = get_plotlyjs()
    # The bundle goes into a plain <script>; it must not be able to close or comment it out.
    if _SCRIPT_END.search(js):
        js = _SCRIPT_END.sub(lambda m: m.group(0).replace("<", "\\x3C"), js)
    return js, get_plotlyjs_version()


@cache
def _template(name: str) -> str:
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")  # (this package's data)
