"""The performance models in the HTML report, the metrics export and the MCP tool."""

from __future__ import annotations

import json
import warnings
from functools import cache
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.reports.html import build_report_data, render_html
from tests.unit.perf_trace import Op, trace_of

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto" / "tracelens"
PAYLOAD = "</script><img src=x onerror=alert(1)>"


@cache
def qwen():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ne.load(DATA / "qwen_h100.json.gz")
    return t, analyze(t)


def test_roofline_figure_places_each_modelled_group_under_the_device_roofs():
    t, a = qwen()
    fig = build_report_data(t, a)["figures"]["roofline"]
    points = [d for d in fig["data"] if d["mode"] == "markers"]
    roofs = [d for d in fig["data"] if d["mode"] == "lines"]
    modelled = a.op_perf[(a.op_perf["flops_per_byte"] > 0) & (a.op_perf["tflops_per_s"] > 0)]
    assert sum(len(p["x"]) for p in points) == len(modelled)
    gemm = next(p for p in points if p["name"] == "GEMM")
    assert max(gemm["y"]) == round(float(modelled["tflops_per_s"].max()), 6)
    assert any("bf16 matrix roof (989.4 TFLOP/s, 3.35 TB/s)" in r["name"] for r in roofs)
    bf16 = next(r for r in roofs if "bf16" in r["name"])
    assert max(bf16["y"]) <= 989.4  # a roof never exceeds the peak
    assert fig["layout"]["xaxis"]["type"] == "log"


def test_category_bars_and_op_perf_table_match_the_analysis():
    t, a = qwen()
    data = build_report_data(t, a)
    cats = data["figures"]["op_categories"]
    total = [m + n for m, n in zip(cats["data"][0]["x"], cats["data"][1]["x"])]
    assert abs(sum(total) - a.op_categories["kernel_time_us"].sum() / 1e3) < 0.01
    table = data["tables"]["op_perf"]
    assert table["total_rows"] == len(a.op_perf)
    assert table["rows"]["name"][0] == a.op_perf["name"].iloc[0]
    assert table["rows"]["kernel_ns"][0] == int(a.op_perf["kernel_time_us"].iloc[0] * 1e3)


def test_op_names_in_the_roofline_are_escaped():
    t = trace_of([Op("aten::mm", [[256, 256], [256, 256]], ["float", "float"])])
    a = analyze(t)
    # a hand-made op name and source file carrying markup (the models only know real op names)
    a.op_perf.loc[0, ["name", "shapes", "src_file"]] = [f"aten::mm{PAYLOAD}", PAYLOAD, PAYLOAD]
    data = build_report_data(t, a)
    assert data["figures"]["roofline"]["data"][0]["hovertext"][0].count("<img") == 0
    page = render_html(data)
    assert PAYLOAD not in page
    assert "<img src=x" not in page


def test_empty_trace_report_says_why_there_is_no_roofline():
    import pyarrow as pa

    from neuron_explorer.trace.model import Trace, conform
    from neuron_explorer.trace.schema import EVENTS_SCHEMA

    t = Trace(conform(pa.Table.from_pylist([], schema=EVENTS_SCHEMA)), {"rank": 0})
    data = build_report_data(t, analyze(t))
    assert data["figures"]["roofline"] is None
    assert data["tables"]["op_perf"]["total_rows"] == 0


def test_metrics_export_has_op_perf_with_described_fields(tmp_path):
    from neuron_explorer.reports.metrics_parquet import write_metrics

    _, a = qwen()
    out = write_metrics(a, tmp_path / "m")
    op_perf = pq.read_table(out / "op_perf.parquet")
    assert op_perf.num_rows == len(a.op_perf)
    assert {"gflops", "tflops_per_s", "bound", "pct_of_peak", "src_line"} <= set(op_perf.column_names)
    fields = pq.read_table(out / "fields.parquet").to_pylist()
    described = {(f["table"], f["field"]): f for f in fields}
    assert described[("op_perf", "data_moved_mb")]["unit"] == "MiB"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["perf_summary"]["device"]["name"] == "H100-SXM"


def test_mcp_op_perf_tool_answers_with_the_analysis_rows_and_the_device():
    from neuron_explorer.agents import views
    from neuron_explorer.agents.catalog import TraceCatalog
    from neuron_explorer.agents.views import ToolInputError

    catalog = TraceCatalog.open([DATA / "qwen_mi300.json.gz"])
    served = catalog.get(None)
    answer = views.op_perf(served, limit=3, sort_by="tflops_per_s", category="gemm")
    a = served.analysis()
    gemm = a.op_perf[a.op_perf["category"] == "gemm"]
    assert answer["total_rows"] == len(gemm)
    assert answer["rows"][0]["tflops_per_s"] == gemm["tflops_per_s"].max()
    assert answer["perf_summary"]["device"]["name"] == "MI300X"
    assert {c["category"] for c in answer["categories"]} >= {"gemm", "attention", "elementwise"}
    with pytest.raises(ToolInputError, match="categories here"):
        views.op_perf(served, category="conv")


async def test_tui_roofline_view_lists_op_groups_with_their_share_of_the_roof():
    from textual.widgets import Input

    from neuron_explorer.tui.app import ExplorerApp
    from neuron_explorer.tui.data import TraceSource
    from neuron_explorer.tui.views.perf import PerfScreen
    from neuron_explorer.tui.widgets import SnapshotTable

    t = trace_of(
        [
            Op("aten::mm", [[4096, 4096], [4096, 4096]], ["c10::BFloat16"] * 2, kernel_ns=400_000),
            Op("aten::add", [[4096, 4096], [4096, 4096], []], ["c10::BFloat16"] * 2 + ["Scalar"], kernel_ns=50_000),
        ]
    )
    a = analyze(t)
    app = ExplorerApp(TraceSource(t, name="perf", analyzer=lambda trace: a))
    async with app.run_test(size=(140, 40)) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        await pilot.press("p")
        await pilot.pause()
        assert isinstance(app.screen, PerfScreen)
        text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        assert "H100-SXM" in text and "aten::mm" in text and "compute" in text and "memory" in text
        mm = a.op_perf.set_index("name").loc["aten::mm"]
        assert f"{mm['pct_of_peak']:.1f}%" in text
        table = app.screen.query_one(SnapshotTable)
        assert table.row_count == 2
        await pilot.press("slash", "a", "d", "d")
        await pilot.pause()
        assert app.screen.query_one(Input).value == "add" and table.row_count == 1
        await pilot.press("enter", "escape")  # back to the table, then close the view
        await pilot.pause()
        assert not isinstance(app.screen, PerfScreen)


def test_cli_device_spec_override_by_name_and_toml_and_a_clear_error(tmp_path):
    from tests.conftest import run_cli

    trace = tmp_path / "t.parquet"
    trace_of([Op("aten::mm", [[2048, 2048], [2048, 2048]], ["c10::BFloat16"] * 2, kernel_ns=100_000)]).write(trace)
    spec = tmp_path / "gpu.toml"
    spec.write_text('name = "Lab GPU"\nmem_bw_tb_per_s = 1.0\n[matrix_tflops]\nbf16 = 200\n')
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    for value, name, peak in (("MI325X", "MI325X", 1307.4), (str(spec), "Lab GPU", 200.0)):
        r = run_cli("analyze", str(trace), "--format", "json", "--rules", "perf", "--device-spec", value, env=env)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["perf_summary"]["device"]["name"] == name
        assert doc["tables"]["op_perf"][0]["peak_tflops_per_s"] == peak
    bad = run_cli("analyze", str(trace), "--device-spec", "H900", env=env)
    assert bad.returncode == 3 and "unknown device 'H900'" in bad.stderr and "Traceback" not in bad.stderr


def test_roofline_and_category_figures_name_the_device_and_the_coverage():
    t, a = qwen()
    figs = build_report_data(t, a)["figures"]
    assert figs["roofline"]["layout"]["title"]["text"].startswith("H100-SXM (trace device name")
    cov = figs["op_categories"]["layout"]["title"]["text"]
    assert f"{a.perf_summary['categorized_pct']:.1f}% of device time in a category" in cov
    assert f"{a.perf_summary['modelled_pct']:.1f}% modelled" in cov
