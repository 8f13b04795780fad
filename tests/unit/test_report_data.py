"""The data handed to the HTML page: the analysis' numbers, laid out for the figures and tables.

These tests assert on ``build_report_data`` (what the page receives), not on pixels: the
browser test checks the drawing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.reports.html import build_report_data
from neuron_explorer.reports.html import timeline as tl
from neuron_explorer.reports.html import timeline_events as tle
from neuron_explorer.reports.html.data import TABLE_ROWS, read_source_line, table
from neuron_explorer.reports.html.figures import BREAKDOWN_PARTS, downsample_max
from neuron_explorer.reports.location import Locations
from neuron_explorer.trace.model import Trace, conform
from tests.conftest import KINETO

GPU_TRACE = KINETO / "hta" / "sampled_rank-0.json.gz"
CPU_TRACE = KINETO / "local" / "example_cpu_small.json"


@pytest.fixture(scope="module")
def gpu() -> tuple[Trace, object, dict]:
    trace = ne.load(GPU_TRACE)
    analysis = analyze(trace)
    return trace, analysis, build_report_data(trace, analysis)


def test_header_shows_the_analysis_summary_and_verdict(gpu) -> None:
    trace, analysis, data = gpu
    h = data["header"]
    assert h["verdict"] == analysis.summary["verdict"] and h["verdict"].endswith(".")
    assert h["wall_ns"] == analysis.summary["wall_ns"] > 0
    assert h["num_steps"] == analysis.summary["num_steps"]
    assert h["ranks"] == analysis.summary["ranks"]
    assert h["devices"] == analysis.summary["devices"]
    assert h["events"] == trace.num_events
    assert h["workload"] == "sampled_rank-0"
    assert h["source"].endswith("sampled_rank-0.json.gz") and h["original"] is None  # imported, not converted


def test_findings_keep_the_analysis_order_and_cost(gpu) -> None:
    _, analysis, data = gpu
    assert [f["rule_id"] for f in data["findings"]] == [f.rule_id for f in analysis.findings]
    assert [f["cost_ns"] for f in data["findings"]] == [f.cost_ns for f in analysis.findings]
    for f in data["findings"]:
        assert f["title"] and f["recommendation"]
    assert [s["rule_id"] for s in data["skipped"]] == [r for r, _ in analysis.skipped]


def test_breakdown_bars_stack_to_each_steps_wall_time(gpu) -> None:
    _, analysis, data = gpu
    fig = data["figures"]["breakdown"]
    # every attribution category with time in the trace, in priority order
    present = [name for col, name in BREAKDOWN_PARTS if analysis.attribution[col].sum() > 0]
    assert [t["name"] for t in fig["data"]] == present and len(present) >= 4
    stacked = np.sum([t["y"] for t in fig["data"]], axis=0)
    wall_ms = analysis.attribution.sort_values(["rank", "step", "device"])["wall_ns"].to_numpy() / 1e6
    np.testing.assert_allclose(stacked, wall_ms, rtol=1e-6, atol=1e-3)
    assert fig["layout"]["barmode"] == "stack"


def test_kernel_table_and_bars_show_the_analysis_kernels(gpu) -> None:
    _, analysis, data = gpu
    rows = data["tables"]["kernels"]["rows"]
    assert rows["name"] == [str(n) for n in analysis.kernels["name"].head(TABLE_ROWS)]
    assert rows["total_ns"] == [int(v) for v in analysis.kernels["total_ns"].head(TABLE_ROWS)]
    bars = data["figures"]["kernels"]["data"][0]
    assert bars["x"][0] == pytest.approx(analysis.kernels["total_ns"].max() / 1e6, abs=1e-4)
    assert bars["x"] == sorted(bars["x"], reverse=True)


def test_timeline_has_every_event_of_each_step_in_nested_host_and_device_lanes(gpu) -> None:
    _, analysis, data = gpu
    timeline = data["timeline"]
    steps = sorted(int(s) for s in analysis.steps["step"])
    assert [s["step"] for s in timeline["steps"]] == steps
    assert len(timeline["colors"]) == len(timeline["kinds"])  # one colour per kind, from reports/colors
    for step in timeline["steps"]:
        rows = step["rows"]
        assert any(r.startswith("host · thread") for r in rows)
        assert any(r.startswith("cuda:0 · stream") for r in rows)
        assert any(" ·" in r.split("thread")[-1] for r in rows)  # nested rows under the outermost
        ev = step["ev"]
        n = len(ev["row"])
        assert all(len(v) == n for v in ev.values())
        assert n == step["kept"] == step["events"]  # every event, none merged
        kinds = {timeline["kinds"][k] for k in ev["kind"]}
        assert {"cpu_op", "runtime", "kernel"} <= kinds
        names = [data["strings"][i] for i in ev["name"]]
        assert all(names)
        # a kernel links to the runtime call that launched it, which starts before it
        linked = [j for j in range(n) if ev["link"][j] >= 0]
        assert linked
        for j in linked:
            launch = ev["link"][j]
            assert timeline["kinds"][ev["kind"][launch]] == "runtime"
            assert ev["start"][launch] <= ev["start"][j]


def test_nesting_depth_follows_parent_links_and_stops_at_missing_parents() -> None:
    # events 10 <- 11 <- 12 nest; 13's parent (99) is not among them; 14 has none
    keys = np.array([10, 11, 12, 13, 14])
    parents = np.array([-1, 10, 11, 99, -1])
    assert tle.nesting_depth(keys, parents).tolist() == [0, 1, 2, 0, 0]


def test_a_step_over_its_budget_keeps_its_longest_events_and_says_so(tmp_path: Path) -> None:
    trace = synthetic_trace(tmp_path / "t.parquet", 3)
    ev = trace.to_pandas()
    ev = ev[(ev["step"] == 0) & (ev["kind"].astype(str) != "step")]
    ev = ev.assign(kind_code=[tl.TIMELINE_KINDS.index(k) for k in ev["kind"].astype(str)], depth=0)
    entry = tle.step_entry(ev, 0, 0, 900_000, 1, tl.StringTable(), Locations(), tl.TIMELINE_KINDS)
    assert entry["kept"] == 1 and entry["events"] == 2 and entry["downsampled"]
    assert entry["ev"]["dur"] == [5000]  # the kernel, the longer of the two


def test_cpu_trace_report_has_source_lines_with_code_and_no_kernel_figure() -> None:
    trace = ne.load(CPU_TRACE)
    analysis = analyze(trace)
    data = build_report_data(trace, analysis)
    assert data["figures"]["kernels"] is None
    lines = data["tables"]["lines"]["rows"]
    # the imported trace knows def lines only: the location says so, as every output does
    assert "exp1c_small_example.py:6 (def, function-level)" in lines["location"]
    assert any("neuron-explorer record" in note for note in data["notes"])
    cost = [h + d for h, d in zip(lines["host_ns"], lines["device_ns"])]
    assert cost == sorted(cost, reverse=True)  # most costly line first
    assert data["figures"]["lines"]["data"][0]["x"][0] > 0
    assert data["figures"]["memory"] is not None
    assert data["tables"]["memory"]["rows"]["device"] == ["host"]


def test_empty_trace_gives_a_page_with_nothing_to_draw() -> None:
    trace = Trace(conform(pa.table({"event_id": pa.array([], pa.int64())})), {"source_file": "empty.json"})
    data = build_report_data(trace, analyze(trace))
    assert data["timeline"]["steps"] == []
    assert all(fig is None for fig in data["figures"].values())
    assert data["tables"]["kernels"]["shown_rows"] == 0
    assert data["header"]["workload"] == "empty"


def test_read_source_line_reads_python_files_only(tmp_path: Path) -> None:
    py = tmp_path / "train.py"
    py.write_text("import torch\n    loss = model(x)\n")
    secret = tmp_path / "secrets.txt"
    secret.write_text("password=hunter2\n")
    assert read_source_line(str(py), 2) == "    loss = model(x)"
    assert read_source_line(str(py), 99) is None
    assert read_source_line(str(secret), 1) is None
    assert read_source_line(str(tmp_path / "missing.py"), 1) is None
    assert read_source_line(None, 1) is None and read_source_line(str(py), None) is None


def test_table_keeps_the_top_rows_and_says_how_many_there_were() -> None:
    df = pd.DataFrame({"name": [f"k{i}" for i in range(TABLE_ROWS + 5)], "total_ns": np.arange(TABLE_ROWS + 5)})
    t = table(df, (("name", "Kernel", "text"), ("total_ns", "Total", "ns"), ("absent", "Gone", "int")))
    assert [c["key"] for c in t["columns"]] == ["name", "total_ns"]
    assert t["total_rows"] == TABLE_ROWS + 5 and t["shown_rows"] == TABLE_ROWS
    assert len(t["rows"]["name"]) == TABLE_ROWS and t["rows"]["total_ns"][:3] == [0, 1, 2]


def test_choose_steps_keeps_slowest_fastest_and_median() -> None:
    steps = np.arange(100)
    durations = np.full(100, 10)
    durations[42], durations[7] = 99, 1
    chosen = tl.choose_steps(steps, durations, limit=10)
    assert len(chosen) == 10 and chosen == sorted(chosen)
    assert {42, 7} <= set(chosen)
    assert tl.choose_steps(steps[:5], durations[:5], limit=10) == [0, 1, 2, 3, 4]


def test_downsample_max_keeps_the_peak_and_the_last_point() -> None:
    x = np.arange(100_000)
    y = np.zeros(100_000)
    y[31_337] = 7.0
    y[-1] = 2.0
    dx, dy = downsample_max(x, y, 1_000)
    assert len(dx) <= 1_001
    assert 7.0 in dy and dx[-1] == 99_999 and dy[-1] == 2.0


def synthetic_trace(path: Path, steps: int, src_file: str | None = None) -> Trace:
    """``steps`` profiler steps, each with one op (at ``src_file``:2 when given) and its kernel."""
    rows = []
    for s in range(steps):
        t0 = s * 1_000_000
        rows += [
            dict(event_id=3 * s, kind="step", name=f"ProfilerStep#{s}", start_ns=t0, dur_ns=900_000, step=s, tid=1),
            dict(event_id=3 * s + 1, kind="cpu_op", name="aten::mm", start_ns=t0 + 10, dur_ns=1000, step=s, tid=1,
                 parent_id=3 * s, src_file=src_file, src_line=2, src_func="train", src_precision="line"),
            dict(event_id=3 * s + 2, kind="kernel", name="gemm", start_ns=t0 + 2000, dur_ns=5000, step=s,
                 device_type="cuda", device=0, stream=7, op_id=3 * s + 1, src_file=src_file, src_line=2,
                 src_func="train", src_precision="launch"),
        ]  # fmt: skip
    df = pd.DataFrame(rows).assign(rank=0)
    df.loc[df["kind"] != "kernel", "device_type"] = "cpu"
    if src_file is None:
        df = df.drop(columns=["src_file", "src_line", "src_func", "src_precision"])
    trace = Trace(pa.Table.from_pandas(df, preserve_index=False), {"source_file": "steps.json"})
    return Trace.read(trace.write(path))


def test_many_steps_are_capped_and_the_page_says_so(tmp_path: Path) -> None:
    # Given a trace of 40 steps, each with one op and one kernel
    trace = synthetic_trace(tmp_path / "steps.parquet", 40)
    data = build_report_data(trace, analyze(trace))
    timeline = data["timeline"]
    assert timeline["total_steps"] == 40
    assert len(timeline["steps"]) == tl.MAX_STEPS
    assert any(f"{tl.MAX_STEPS} of 40 steps" in note for note in data["notes"])


def test_line_profile_shows_the_code_of_a_readable_source_file(tmp_path: Path) -> None:
    # Given a trace whose op and kernel come from line 2 of a script that exists here
    script = tmp_path / "train.py"
    script.write_text("import torch\ny = torch.mm(a, b)  # the hot line\n")
    trace = synthetic_trace(tmp_path / "t.parquet", 3, src_file=str(script))
    data = build_report_data(trace, analyze(trace))
    rows = data["tables"]["lines"]["rows"]
    # Then the line-level table shows file:line (relative to the trace's user files, as every
    # output shows it), its code and the kernel time it launched
    i = rows["location"].index("train.py:2")
    assert rows["path"][i] == f"{script}:2"
    assert rows["code"][i] == "y = torch.mm(a, b)  # the hot line"
    assert rows["device_ns"][i] == 3 * 5000
    # and the timeline's hover knows the source line
    ev = data["timeline"]["steps"][0]["ev"]
    assert "train.py:2" in [data["strings"][k] for k in ev["src"] if k >= 0]


def test_multi_rank_run_gets_per_rank_bars_and_lanes(tmp_path: Path) -> None:
    # Given a run directory with two ranks of one job
    run = tmp_path / "job"
    for rank, name in ((0, "sampled_rank-0"), (1, "sampled_rank-1")):
        ne.load(KINETO / "hta" / f"{name}.json.gz").write(run / f"rank={rank}" / "trace.parquet")
    trace = ne.load(run)
    data = build_report_data(trace, analyze(trace))
    # Then the header names the run, each step has a bar per rank and lanes of both ranks
    assert data["header"]["workload"] == "job" and data["header"]["ranks"] == [0, 1]
    labels = data["figures"]["breakdown"]["data"][0]["x"]
    assert {label.split(" · ")[0] for label in labels} == {"rank 0", "rank 1"}
    lanes = data["timeline"]["steps"][0]["lanes"]
    assert any(lane.startswith("rank 0 · cuda:0") for lane in lanes)
    assert any(lane.startswith("rank 1 · cuda:1") for lane in lanes)
