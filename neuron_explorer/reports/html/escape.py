"""Escaping for every trace string the HTML report shows: one place, one rule per context.

Trace strings (kernel names, file paths, module names, args) are attacker-controllable: a trace
can come from anyone. The report puts them in exactly three contexts, each with its own rule:

- JSON inside ``<script type="application/json">``: ``json_for_script`` escapes ``<``, ``>`` and
  ``&`` as ``\\u003c``/``\\u003e``/``\\u0026`` so no ``</script>`` or ``<!--`` can end or alter the
  element, and U+2028/U+2029 so the text stays valid for any JavaScript parser.
- HTML text and attribute values in the template: ``html_text`` (``html.escape`` with quotes).
- Text that Plotly renders (hover text, tick labels, titles): Plotly interprets a small HTML
  subset there (``<b>``, ``<br>``, ``<a href>``...), so ``plotly_text`` turns ``&``, ``<`` and ``>``
  into entities, which Plotly shows literally. The page's JavaScript applies the same rule to
  the timeline's hover text it builds in the browser (``plotlyText`` in report.js).

The page's script only ever writes trace strings with ``textContent``, never ``innerHTML``.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

_SCRIPT_JSON_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}

_PLOTLY_ESCAPES = {ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;"}


def json_for_script(value: Any) -> str:
    """``value`` as JSON text that is safe as the body of a ``<script type="application/json">``.

    Non-finite floats (NaN, inf) are not JSON: they become ``null`` rather than breaking
    ``JSON.parse`` in the page.
    """
    text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_SCRIPT_JSON_ESCAPES)


def html_text(value: Any) -> str:
    """``value`` as escaped HTML text, safe in element content and quoted attribute values."""
    return html.escape("" if value is None else str(value), quote=True)


def plotly_text(value: Any) -> str:
    """``value`` as text Plotly shows literally (its HTML subset neutralized as entities)."""
    return ("" if value is None else str(value)).translate(_PLOTLY_ESCAPES)


def _finite(value: Any) -> Any:
    # Only containers and floats need a look; everything else json handles (or rejects) itself.
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if all(type(v) is int or type(v) is str for v in value):
            return value  # integer and string columns (the bulk of the payload) need no walk
        return [_finite(v) for v in value]
    return value
