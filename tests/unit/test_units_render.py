"""Every figure of every finding, on every bundled real trace, is shown by its unit in every
output format: text, markdown, JSON, the HTML report's data and the TUI's findings view.

The expected unit of a shown figure is decided here from the metric's unit string alone (a
duration must end in ns/µs/ms/s, a byte figure in B/KiB/..., a count in neither), so a count
rendered as a time or bytes rendered as seconds fails whatever the formatter does.
"""

from __future__ import annotations

import io
import json
import re
import warnings
from functools import cache

import pytest
from rich.console import Console

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.reports import json_report, markdown, text
from neuron_explorer.reports.html.data import finding_view
from neuron_explorer.trace.units import format_line_value, format_metric, format_quantity
from neuron_explorer.tui.views.findings import finding_renderable
from tests.conftest import BUNDLED_TRACES

TIME = re.compile(r"\d (ns|µs|ms|s)(/\w+)?$")
BYTES = re.compile(r"\d (B|KiB|MiB|GiB|TiB)(/\w+)?$")
PERCENT = re.compile(r"^-?[\d,.]+%")


def expected_shape(unit: str) -> str:
    u = unit.strip()
    if u in ("ns", "ns/step"):
        return "time"
    if u.startswith("bytes") or u == "B":
        return "bytes"
    if u.startswith("%"):
        return "percent"
    return "other"


def check_shape(shown: str, unit: str) -> None:
    kind = expected_shape(unit)
    if kind == "time":
        assert TIME.search(shown), (shown, unit)
    elif kind == "bytes":
        assert BYTES.search(shown), (shown, unit)
    elif kind == "percent":
        assert PERCENT.match(shown), (shown, unit)
    else:  # a count, ratio or rate is never shown as a time or a byte size
        assert not TIME.search(shown) and not BYTES.search(shown), (shown, unit)
        if unit and unit not in ("x",):
            assert shown.endswith(unit), (shown, unit)


@cache
def analysis_of(name: str) -> Analysis:
    path = next(p for p in BUNDLED_TRACES if p.name == name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(ne.load(path))


@pytest.mark.parametrize("name", [p.name for p in BUNDLED_TRACES])
def test_every_figure_of_every_finding_is_shown_by_its_unit_everywhere(name: str) -> None:
    a = analysis_of(name)
    out = io.StringIO()
    text.render(a, out=out, width=400)
    as_text = out.getvalue()
    as_markdown = markdown.render(a)
    as_json = json.loads(json_report.render(a))
    for f, jf in zip(a.findings, as_json["findings"]):
        view = finding_view(f)
        console = Console(file=io.StringIO(), width=400, highlight=False)
        console.print(finding_renderable(f))
        as_tui = console.file.getvalue()  # type: ignore[attr-defined]
        for key, m in f.metrics.items():
            shown = format_metric(m)
            check_shape(shown, m["unit"])
            assert f"{key} {shown}" in as_text
            assert f"{key}: **{shown}**" in as_markdown
            assert view["metrics_text"][key] == shown
            assert shown in as_tui
            assert jf["metrics"][key] == m  # JSON keeps the raw value and its unit
        for key, th in f.threshold.items():
            check_shape(format_metric(th), th["unit"])
            assert view["threshold_text"][key] == format_metric(th)
        for sl, vsl in zip(f.source_lines, view["source_lines"]):
            unit = sl.get("unit", "ns")
            assert "value" in sl or "ns" in sl
            check_shape(vsl["value_text"], unit)
            assert vsl["value_text"] == format_line_value(sl)
        assert view["cost_text"] == format_quantity(f.cost_ns, "ns")


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (248_270_000_000, "bytes", "231 GiB"),  # allocation churn: bytes, never seconds
        (12, "ops/step", "12 ops/step"),  # counts, never microseconds
        (10, "events", "10 events"),
        (1_500_000, "ns", "1.5 ms"),
        (42.25, "% of GEMM time", "42.2% of GEMM time"),
        (312e12, "FLOP/s", "312 TFLOP/s"),
        (3_000_000_000, "bytes/s", "2.79 GiB/s"),
        (1_048_576, "bytes/step", "1 MiB/step"),
        (7.5, "x", "7.5x"),
        (None, "ns", "-"),
    ],
)
def test_the_formatter_by_unit(value: float | None, unit: str, shown: str) -> None:
    assert format_quantity(value, unit) == shown
