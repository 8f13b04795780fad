"""The report's timeline, tables and colours in a real headless Chromium (see test_report_browser).

What a user does: zoom into the timeline until each event is drawn, click a kernel to read its
details and see the flow from the call that launched it, type in a table's filter box, compare
a category's colour across charts. Skips without Chromium, like test_report_browser.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_explorer.reports.colors import CATEGORY_COLORS, kind_color
from tests.conftest import KINETO
from tests.integration.test_report_browser import Chromium, assert_page_is_clean, find_chromium, write_report

QWEN = KINETO / "tracelens" / "qwen_h100.json.gz"  # 12k events in one step, Python frames, cuBLAS


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Chromium, Path]]:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium found: install it (Debian: apt-get install -y chromium) or set $CHROMIUM")
    out = write_report(QWEN, tmp_path_factory.mktemp("tl") / "qwen.html")
    browser = Chromium(binary)
    try:
        browser.open(out)
        yield browser, out
    finally:
        browser.close()


def info(browser: Chromium) -> str:
    return browser.evaluate("document.getElementById('timeline-info').textContent")


def drawn(browser: Chromium) -> dict:
    """What the timeline figure holds now: bars, their tooltips, and the events they stand for."""
    return browser.evaluate(
        """(function () {
             var gd = document.querySelector('[data-figure=timeline]'), bars = 0, hovers = [], idx = [];
             gd.data.forEach(function (t) {
               if (t.name === 'selected' || t.name === 'critical path') return;  // overlays, not events
               bars += t.x.length; hovers = hovers.concat(t.hovertext); idx = idx.concat(t.customdata);
             });
             return {bars: bars, hovers: hovers, idx: idx, range: gd.layout.xaxis.range,
                     annotations: (gd.layout.annotations || []).length};
           })()"""
    )


def test_zoomed_out_bars_say_they_merge_and_zoomed_in_every_event_is_drawn_with_its_own_tooltip(page) -> None:
    browser, _ = page
    # Given the whole step in view: 12k events, drawn as merged bars that say so
    assert "merged at this zoom" in info(browser)
    whole = drawn(browser)
    assert any("events merged at this zoom" in h for h in whole["hovers"])
    # When the user zooms to 1 ms (as a drag does, through Plotly's relayout)
    browser.evaluate(
        "void Plotly.relayout(document.querySelector('[data-figure=timeline]'), {'xaxis.range': [14.4, 15.4]})"
    )
    browser.pump(0.5)
    # Then every event in view is its own bar whose tooltip names it (no stale "merged" text)
    now = drawn(browser)
    assert now["range"] == [14.4, 15.4]
    assert "each drawn" in info(browser)
    assert 0 < now["bars"] == int(info(browser).split(" of ")[0].replace(",", ""))
    assert not any("merged" in h for h in now["hovers"])
    assert all(i >= 0 for i in now["idx"])
    # And double-click (autorange) goes back to the whole step, merged again
    browser.evaluate(
        "void Plotly.relayout(document.querySelector('[data-figure=timeline]'), {'xaxis.autorange': true})"
    )
    browser.pump(0.5)
    assert "merged at this zoom" in info(browser)


def test_host_lanes_nest_python_frames_ops_and_runtime_calls(page) -> None:
    browser, _ = page
    rows = browser.evaluate("document.querySelector('[data-figure=timeline]').layout.yaxis.ticktext")
    host_rows = [r for r in rows if r.startswith("host")]
    assert len(host_rows) > 3 and any(r.endswith(" ·1") for r in host_rows)
    assert any(r.startswith("cuda:0 · stream") for r in rows)
    legend = browser.evaluate("document.querySelector('[data-figure=timeline]').data.map(t => t.name)")
    assert {"Python", "host op", "runtime call", "kernel"} <= set(legend)


def test_clicking_a_kernel_shows_its_details_and_the_flow_from_its_launch(page) -> None:
    browser, _ = page
    # Given a kernel in view that a runtime call launched
    j = browser.evaluate(
        """(function () {
             var d = JSON.parse(document.getElementById('report-data').textContent);
             var s = d.timeline.steps[d.timeline.steps.length - 1], e = s.ev;
             for (var k = 0; k < e.link.length; k++)
               if (e.link[k] >= 0 && d.timeline.kinds[e.kind[k]] === 'kernel' && e.start[k] > 14.5e6) return k;
             return -1;
           })()"""
    )
    assert j >= 0
    browser.evaluate(
        "void Plotly.relayout(document.querySelector('[data-figure=timeline]'), {'xaxis.range': [14.5, 15.1]})"
    )
    browser.pump(0.3)
    # When the user clicks it (Plotly's click event for that bar)
    browser.evaluate(
        f"""(function () {{
             var gd = document.querySelector('[data-figure=timeline]');
             gd.emit('plotly_click', {{points: [{{customdata: {j}}}]}});
           }})()"""
    )
    browser.pump(0.3)
    # Then its details show, with the call that launched it, and an arrow draws the flow
    details = browser.evaluate("document.getElementById('timeline-details').textContent")
    assert not browser.evaluate("document.getElementById('timeline-details').hidden")
    assert "Kind" in details and "kernel" in details and "Launched by" in details and "cudaLaunchKernel" in details
    assert "Duration" in details and "Source" in details
    assert drawn(browser)["annotations"] >= 1
    assert browser.console_errors() == []


def test_every_table_has_a_filter_box_and_rows_stay_one_line(page) -> None:
    browser, _ = page
    tables = browser.evaluate("Array.from(document.querySelectorAll('[data-table]')).map(t => t.dataset.table)")
    filters = browser.evaluate("Array.from(document.querySelectorAll('[data-filter]')).map(f => f.dataset.filter)")
    assert tables and set(tables) == set(filters)
    before = browser.evaluate("document.querySelectorAll('[data-table=kernels] tbody tr').length")
    browser.evaluate(
        """(function () {
             var f = document.querySelector('[data-filter=kernels]');
             f.value = 'gemm'; f.dispatchEvent(new Event('input'));
           })()"""
    )
    names = browser.evaluate(
        "Array.from(document.querySelectorAll('[data-table=kernels] tbody tr td:first-child')).map(td => td.textContent)"
    )
    assert 0 < len(names) < before and all("gemm" in n.lower() for n in names)
    assert "rows match" in browser.evaluate("document.querySelector('[data-filter=kernels]').nextSibling.textContent")
    # no row is taller than a line or two, however long its kernel name
    tallest = browser.evaluate(
        "Math.max.apply(null, Array.from(document.querySelectorAll('tbody tr')).map(r => r.getBoundingClientRect().height))"
    )
    assert tallest < 48


def test_a_category_has_one_colour_in_every_chart(page) -> None:
    browser, _ = page
    colours = browser.evaluate(
        """(function () {
             function q(n) { return document.querySelector('[data-figure=' + n + ']').data; }
             var bd = {}; q('breakdown').forEach(function (t) { bd[t.meta.part] = t.marker.color; });
             var tl = {}; q('timeline').forEach(function (t) {
               if (t.name !== 'selected' && t.name !== 'critical path') tl[t.name] = t.marker.color;  // (overlays)
             });
             return {breakdown: bd, timeline: tl, kernels: q('kernels')[0].marker.color};
           })()"""
    )
    compute = CATEGORY_COLORS["compute"]
    assert colours["breakdown"]["compute_ns"] == compute == colours["timeline"]["kernel"] == colours["kernels"]
    assert colours["timeline"]["host op"] == kind_color("cpu_op") == colours["breakdown"]["host_launch_ns"]
    assert len(set(json.dumps(v) for v in colours["timeline"].values())) == len(colours["timeline"])


def test_kernel_labels_are_demangled_and_distinct(page) -> None:
    browser, _ = page
    labels = browser.evaluate("document.querySelector('[data-figure=kernels]').data[0].y")
    stripped = [label.split(". ", 1)[1] for label in labels]
    assert len(set(stripped)) == len(stripped)
    assert not any(s.startswith("_Z") for s in stripped)
    assert_page_is_clean(browser)
