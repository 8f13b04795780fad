"""One meaning per number (docs/rules.md "Words for numbers"), checked on the bundled traces as
every output prints them.

For each finding of ``analyze --format json`` (the real CLI): every figure in its title matches
one of its metrics or its cost; its cost is stated in words where it differs from the title's
figure; a share "of step time" / "of the traced time" is the finding's own time over the step
windows recomputed from the raw JSON (per device, less the one-time work); and text, markdown, the HTML
report's data, the MCP ``findings`` tool and the TUI's Findings view state the same title and
cost."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from neuron_explorer.reports.fixes import cost_phrase
from neuron_explorer.trace.units import format_duration
from tests.conftest import KINETO, run_cli

#: Real traces with findings of every kind of figure (shares of step and traced time, of
#: device, GEMM and op time, counts, durations, costs by attribution and by replay).
TRACES = {
    "h200_eager": KINETO / "h200/eager_train.json.gz",
    "h200_compiled": KINETO / "h200/compiled_train.json.gz",
    "h200_graph": KINETO / "h200/cuda_graph.json.gz",
    "a100_sampled": KINETO / "hta/sampled_rank-0.json.gz",
    "a100_nccl": KINETO / "hta/nccl_data.json.gz",
    "a100_alexnet": KINETO / "hta/alexnet_a100.json.gz",
    "mi250": KINETO / "hta/amd_mi250.json.gz",
    "compare_base": KINETO / "hta/trace_compare_base.json.gz",
    "h100_qwen": KINETO / "tracelens/qwen_h100.json.gz",
    "b200": KINETO / "tracelens/b200_eager.json.gz",
    "cpu_small": KINETO / "local/example_cpu_small.json",
    "cpu_attention": KINETO / "local/eager_attention_cpu.json.gz",
}
DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s)\b")
NS_PER = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def _raw(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


@pytest.fixture(scope="module")
def outputs() -> dict[str, dict[str, Any]]:
    out = {}
    for key, path in TRACES.items():
        r = run_cli("analyze", str(path), "--format", "json")
        assert r.returncode == 0, r.stderr
        out[key] = json.loads(r.stdout)
    return out


def _findings(outputs: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    found = [(key, f) for key, data in outputs.items() for f in data["findings"]]
    assert len(found) >= 40  # (the traces above hold that many)
    return found


def _pct_values(f: dict[str, Any]) -> list[float]:
    """The finding's percentages: its % metrics and thresholds, and the ratio of any two of its
    metrics in one unit ("5.8 GB/s ..., 2% of the 300 GB/s peak")."""
    quantities = [*f["metrics"].values(), *f["threshold"].values()]
    values = [m["value"] for m in quantities if "%" in str(m.get("unit"))]
    ratios = [
        100.0 * a["value"] / b["value"]
        for a in quantities
        for b in quantities
        if a is not b and a.get("unit") == b.get("unit") and "%" not in str(a.get("unit")) and b["value"]
    ]
    return values + ratios


def _ns_values(f: dict[str, Any]) -> list[float]:
    values = [m["value"] for m in (*f["metrics"].values(), *f["threshold"].values()) if m.get("unit") == "ns"]
    return [*values, f["cost_ns"]]


def _title_figures(title: str) -> str:
    """The title without what names things rather than measuring them: shapes, op names and
    file:line locations (their digits are not figures)."""
    title = re.sub(r"\[[^\]]*\]", " ", title)  # shapes
    title = re.sub(r"\S+\.py:\d+", " ", title)  # a source line
    return re.sub(r"\b\w*::\w+", " ", title)  # op names


def test_every_figure_in_a_title_is_one_of_its_metrics(outputs) -> None:
    for key, f in _findings(outputs):
        text = _title_figures(f["title"])
        for number in re.findall(r"(\d+(?:\.\d+)?)%", text):
            decimals = len(number.split(".")[1]) if "." in number else 0
            half = 0.5 * 10**-decimals + 1e-9
            assert any(abs(v - float(number)) <= half for v in _pct_values(f)), (key, f["title"], f["metrics"])
        for number, unit in DURATION.findall(text):
            ns = float(number) * NS_PER[unit]
            assert any(abs(v - ns) <= 0.05 * ns + 1 for v in _ns_values(f)), (key, f["title"])
        for number, x in re.findall(r"(\d+(?:\.\d+)?)(x)\b", text):
            assert any(abs(m["value"] - float(number)) <= 0.5 for m in f["metrics"].values() if m["unit"] == x), (
                key,
                f["title"],
            )


def test_a_cost_below_the_title_figure_is_explained(outputs) -> None:
    """A cost priced by attribution is stated in the text (the ledger says so when it is less
    than what the finding names); one priced by replay names its edit (the cost phrase)."""
    for key, f in _findings(outputs):
        if not f["cost_ns"]:
            continue
        said = f"{f['title']} {f['message']}"
        if f.get("cost_method") == "replay":
            assert f.get("fix_edit"), (key, f["title"])
            continue
        stated = [float(n) * NS_PER[u] for n, u in DURATION.findall(said)]
        cost = f["cost_ns"]
        assert any(abs(v - cost) <= max(0.05 * cost, 50_000 if cost >= 1e6 else 50) for v in stated), (
            key,
            f["rule_id"],
            format_duration(cost),
            f["message"],
        )


def _step_windows(events: list[dict[str, Any]]) -> tuple[float, bool]:
    """The profiled time of a one-rank trace from its raw events, in ns: the ProfilerStep
    windows, or the whole trace window without steps; times the devices with device work."""
    steps = {}
    for e in events:
        name = str(e.get("name", ""))
        if e.get("ph") == "X" and name.startswith("ProfilerStep#") and e.get("dur", 0) > 0:
            n = int(name.split("#")[1])
            steps[n] = max(steps.get(n, 0.0), float(e["dur"]))  # a step recorded twice keeps its longest
    device_cats = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}
    devices = {e.get("pid") for e in events if e.get("ph") == "X" and e.get("cat") in device_cats} or {None}
    if steps:
        return sum(steps.values()) * 1000 * len(devices), True
    timed = [e for e in events if e.get("ph") == "X" and "dur" in e and e.get("cat") not in ("Trace", None)]
    lo = min(float(e["ts"]) for e in timed)
    hi = max(float(e["ts"]) + float(e["dur"]) for e in timed)
    return (hi - lo) * 1000 * len(devices), False


def test_shares_of_step_time_are_of_the_step_windows_in_the_raw_json_less_one_time_work(outputs) -> None:
    checked = 0
    for key, path in TRACES.items():
        profiled, has_steps = _step_windows(_raw(path))
        # step time is the profiled time less its one-time work (warm-up steps, compilation, graph
        # capture: test_one_time.py checks that share against the raw JSON)
        windows = profiled * (1 - outputs[key]["summary"].get("one_time_pct", 0.0) / 100.0)
        for f in outputs[key]["findings"]:
            m = re.search(r"(\d+(?:\.\d+)?)% (of step time|of the traced time)", f["title"])
            if not m:
                continue
            assert (m.group(2) == "of step time") == has_steps, (key, f["title"])  # the word fits the trace
            shown = float(m.group(1))
            parts = [v for v in _ns_values(f)[:-1] if v > 0]
            if f["rule_id"] == "device_idle":  # the busy share: the step time less the idle parts
                idle = sum(v["value"] for k, v in f["metrics"].items() if k.endswith("_ns") and k != "largest_gap_ns")
                parts.append(windows - idle)
            recomputed = [100.0 * v / windows for v in parts]
            assert any(abs(r - shown) <= 1.0 for r in recomputed), (key, f["title"], shown, recomputed)
            checked += 1
    assert checked >= 12


@pytest.fixture(scope="module")
def text_outputs() -> dict[str, tuple[str, str]]:
    out = {}
    for key in ("h200_eager", "a100_nccl", "h100_qwen", "cpu_small"):
        text = run_cli("analyze", str(TRACES[key]), env={"COLUMNS": "80"})
        md = run_cli("analyze", str(TRACES[key]), "--format", "markdown")
        assert text.returncode == 0 and md.returncode == 0, text.stderr + md.stderr
        out[key] = (" ".join(text.stdout.split()), " ".join(md.stdout.split()))
    return out


def test_text_and_markdown_state_the_same_title_and_cost(outputs, text_outputs) -> None:
    for key, (text, md) in text_outputs.items():
        for f in outputs[key]["findings"]:
            title = " ".join(f["title"].split())
            said = " ".join((title + cost_phrase(f)).split())
            assert said in text, (key, said)  # at 80 columns: wrapped, joined back here
            assert title in md, (key, title)
            if f["cost_ns"]:
                assert format_duration(f["cost_ns"]) in md, (key, title)


def test_the_report_mcp_and_tui_state_the_same_title_and_cost(outputs, tmp_path) -> None:
    import asyncio

    from tests.integration.mcp_client import McpServer

    key = "h200_eager"
    expected = [(f["title"], f["cost_ns"]) for f in outputs[key]["findings"]]
    page = tmp_path / "r.html"
    r = run_cli("report", str(TRACES[key]), "-o", str(page))
    assert r.returncode == 0, r.stderr
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page.read_text(), re.S)
    assert data is not None
    report = json.loads(data.group(1))
    assert [(f["title"], f["cost_ns"]) for f in report["findings"]] == expected
    with McpServer(TRACES[key]) as server:
        answer = server.data("findings", {"limit": 50, "max_chars": 200_000})  # every finding, untruncated
    assert [(f["title"], f["cost_ns"]) for f in answer["findings"]] == expected

    from neuron_explorer import load
    from neuron_explorer.analyzers import analyze
    from neuron_explorer.tui.app import ExplorerApp
    from neuron_explorer.tui.data import TraceSource
    from neuron_explorer.tui.widgets import SnapshotTable

    trace = load(TRACES[key])
    analysis = analyze(trace)

    async def rows() -> list[tuple[str, int]]:
        app = ExplorerApp(TraceSource(trace, name=key, analyzer=lambda _t: analysis))
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.press("2")
            await pilot.pause()
            table = app.query_one("#findings-table", SnapshotTable)
            return [(row[0], row[2]) for row in (table.row_values(i) for i in table.shown)]

    assert asyncio.run(rows()) == expected
