"""Every trace string in the HTML report is escaped for the context it lands in.

``poisoned_trace`` plants script and image payloads in kernel and op names, file paths,
function and module names, args and the trace's metadata of a real trace; the browser test
(tests/integration/test_report_browser.py) opens the same page in Chromium.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.reports.html import build_report_data, render_html
from neuron_explorer.reports.html.escape import html_text, json_for_script, plotly_text
from neuron_explorer.reports.html.render import plotly_bundle
from neuron_explorer.trace.model import Trace
from tests.conftest import KINETO

SCRIPT_PAYLOAD = "</script><script>window.__neuronExplorerXss=1;alert(1)</script>"
IMG_PAYLOAD = '<img src=x onerror="window.__neuronExplorerXss=2;alert(2)">'
COMMENT_PAYLOAD = "<!--<script>window.__neuronExplorerXss=3</script>"
SEPARATORS = "line\u2028para\u2029end"
PAYLOADS = (SCRIPT_PAYLOAD, IMG_PAYLOAD, COMMENT_PAYLOAD)


def poisoned_trace(out: Path, source: Path = KINETO / "hta" / "sampled_rank-0.json.gz") -> Path:
    """A real GPU trace whose op and device event names, source files, functions, modules and
    args all carry the payloads; written as Parquet to ``out``."""
    trace = ne.load(source)
    df = trace.to_pandas()
    kind = df["kind"].astype(str)
    target = kind.isin(["cpu_op", "kernel", "collective", "memcpy", "memset"]).to_numpy()
    names = df["name"].astype("object")
    df["name"] = names.where(~target, IMG_PAYLOAD + names.astype(str) + SCRIPT_PAYLOAD)
    df["src_file"] = pd.Series([f"/home/{IMG_PAYLOAD}/{SCRIPT_PAYLOAD}/train.py" if t else None for t in target])
    df["src_line"] = pd.array([7 if t else None for t in target], dtype="Int32")
    df["src_func"] = pd.Series([COMMENT_PAYLOAD + SEPARATORS if t else None for t in target])
    df["src_module"] = pd.Series([f"Model.{IMG_PAYLOAD}.{SCRIPT_PAYLOAD}" if t else None for t in target])
    df["src_precision"] = pd.Series(["line" if t else None for t in target])
    df["args"] = pd.Series([json.dumps({"note": SCRIPT_PAYLOAD + IMG_PAYLOAD}) if t else None for t in target])
    metadata = dict(trace.metadata, source_file=f"/data/{SCRIPT_PAYLOAD}{IMG_PAYLOAD}.json")
    metadata["trace_metadata"] = {**(metadata.get("trace_metadata") or {}), "traceName": SCRIPT_PAYLOAD}
    return Trace(pa.Table.from_pandas(df, preserve_index=False), metadata).write(out)


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, dict, str]:
    trace = Trace.read(poisoned_trace(tmp_path_factory.mktemp("xss") / "poisoned.parquet"))
    data = build_report_data(trace, analyze(trace))
    return trace, data, render_html(data)


def script_bodies(page: str) -> list[str]:
    return re.findall(r"<script[^>]*>(.*?)</script>", page, flags=re.DOTALL | re.IGNORECASE)


def test_json_for_script_escapes_markup_and_line_separators_yet_round_trips() -> None:
    value = {"name": SCRIPT_PAYLOAD, "file": IMG_PAYLOAD, "other": COMMENT_PAYLOAD + " & " + SEPARATORS}
    text = json_for_script(value)
    for raw in ("<", ">", "&", "\u2028", "\u2029"):
        assert raw not in text
    assert json.loads(text) == value


def test_json_for_script_writes_non_finite_numbers_as_null() -> None:
    assert json.loads(json_for_script({"a": float("nan"), "b": [1.5, float("inf")], "c": [1, 2]})) == {
        "a": None,
        "b": [1.5, None],
        "c": [1, 2],
    }


def test_html_and_plotly_text_neutralize_markup() -> None:
    assert html_text(IMG_PAYLOAD) == "&lt;img src=x onerror=&quot;window.__neuronExplorerXss=2;alert(2)&quot;&gt;"
    assert plotly_text("<b>a</b> & <br>") == "&lt;b&gt;a&lt;/b&gt; &amp; &lt;br&gt;"
    assert html_text(None) == plotly_text(None) == ""


def test_poisoned_trace_page_has_only_its_own_scripts_and_no_markup_from_the_trace(poisoned) -> None:
    _, _, page = poisoned
    plotly_js, _ = plotly_bundle()
    outside_plotly = page.replace(plotly_js, "")
    # the three script elements of the template, nothing more: no payload closed or opened one
    assert len(re.findall(r"<script", outside_plotly, re.IGNORECASE)) == 3
    assert len(re.findall(r"</script", outside_plotly, re.IGNORECASE)) == 3
    for payload in PAYLOADS:
        assert payload not in outside_plotly
    assert "<img" not in outside_plotly.lower()


def test_poisoned_strings_reach_the_page_data_intact(poisoned) -> None:
    # Escaping must not lose information: the page's data decodes to the original strings.
    _, data, page = poisoned
    body = script_bodies(page)[0]
    decoded = json.loads(body)
    assert decoded == json.loads(json.dumps(data))
    strings = "\n".join(decoded["strings"])
    assert SCRIPT_PAYLOAD in strings and IMG_PAYLOAD in strings
    kernels = decoded["tables"]["kernels"]["rows"]["name"]
    assert any(n.startswith(IMG_PAYLOAD) and n.endswith(SCRIPT_PAYLOAD) for n in kernels)
    # the location reads relative to the files' root; the full path (the tooltip) keeps the payload
    assert any(SCRIPT_PAYLOAD in p for p in decoded["tables"]["lines"]["rows"]["path"])
    assert SCRIPT_PAYLOAD in decoded["header"]["original"]


def test_poisoned_strings_in_figures_are_plotly_entities(poisoned) -> None:
    _, data, _ = poisoned
    figs = data["figures"]
    shown = [*figs["kernels"]["data"][0]["y"], *figs["kernels"]["data"][0]["hovertext"]]
    shown += [t for trace in figs["ops"]["data"] for t in trace["hovertext"]]
    shown += [t for trace in figs["lines"]["data"] for t in trace["hovertext"]]
    assert shown
    for text in shown:
        assert "<" not in text and ">" not in text
    assert any("&lt;img src=x" in t for t in shown)


def test_title_from_the_command_line_is_escaped_in_the_head(tmp_path: Path) -> None:
    trace = ne.load(KINETO / "hta" / "triton_example.json.gz")
    page = render_html(build_report_data(trace, analyze(trace), title=SCRIPT_PAYLOAD))
    head = page.split("<style>")[0]
    assert f"<title>{html_text(SCRIPT_PAYLOAD)}</title>" in head
    assert SCRIPT_PAYLOAD not in page.replace(plotly_bundle()[0], "")
