"""The TUI's data source: opening traces, drill-down queries, timeline lanes, formatting."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.trace.errors import AnalysisError, TraceFormatError, TraceNotFoundError
from neuron_explorer.trace.model import Trace
from neuron_explorer.tui.data import VIEW_COLUMNS, TraceSource
from neuron_explorer.tui.format import fmt_bytes, fmt_ns, fmt_value, zero_based_bars
from neuron_explorer.tui.queries import kernel_detail, op_detail
from neuron_explorer.tui.snapshots import Column, TableSnapshot
from neuron_explorer.tui.tables import files_table, ops_table, source_file
from neuron_explorer.tui.timeline import covered, merge_intervals, render_cells, step_of, timeline

from .tui_trace import MS, SOURCE_DIR, tiny_trace, write_tiny_trace


@pytest.fixture(scope="module")
def source() -> TraceSource:
    return TraceSource(tiny_trace(), name="tiny")


def test_opening_a_parquet_trace_reads_only_the_view_columns(tmp_path) -> None:
    source = TraceSource.open(write_tiny_trace(tmp_path / "t.parquet"))
    assert tuple(source.trace.events.column_names) == VIEW_COLUMNS
    assert source.overview().num_events == 20


def test_opening_a_missing_or_corrupt_file_raises_a_typed_error_naming_it(tmp_path) -> None:
    with pytest.raises(TraceNotFoundError, match=r"nope\.parquet"):
        TraceSource.open(tmp_path / "nope.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(TraceFormatError, match=r"bad\.parquet"):
        TraceSource.open(bad)


def test_a_parquet_trace_is_analyzed_in_a_child_process_with_the_same_result(tmp_path) -> None:
    path = write_tiny_trace(tmp_path / "t.parquet")
    source = TraceSource.open(path)
    in_child = source.analysis()
    here = analyze(Trace.read(path))
    assert [f.title for f in in_child.findings] == [f.title for f in here.findings]
    assert in_child.ops.equals(here.ops)
    assert source.analysis() is in_child  # computed once


def test_a_failing_child_analysis_becomes_an_analysis_error(tmp_path) -> None:
    path = write_tiny_trace(tmp_path / "t.parquet")
    source = TraceSource.open(path)
    path.write_bytes(b"corrupted after opening")
    with pytest.raises(AnalysisError, match=r"t\.parquet"):
        source.analysis()


def test_overview_counts_devices_queues_and_steps(source: TraceSource) -> None:
    ov = source.overview()
    assert ov.ranks == (0,)
    assert [(d.device_type, d.device, d.queues, d.events) for d in ov.devices] == [("cuda", 0, 2, 8)]
    assert [(s.step, s.dur_ns) for s in ov.steps] == [(1, 10 * MS), (2, 10 * MS)]
    assert ov.span_ns == 20 * MS


def test_op_drilldown_finds_kernels_launched_by_nested_ops(source: TraceSource) -> None:
    detail = op_detail(source, "aten::linear")
    assert len(detail.calls.rows) == 2
    assert detail.source_lines.rows == ((("train.py", 12, "forward", "line"), 2, 8 * MS),)
    assert detail.related.rows == (("sm90_xmma_gemm_bf16bf16_bf16f32", 2, 10 * MS),)


def test_kernel_drilldown_names_the_launching_op(source: TraceSource) -> None:
    detail = kernel_detail(source, "vectorized_elementwise_kernel<relu>")
    assert detail.related.rows == (("aten::relu", 2, 2 * MS),)
    assert {row[2] for row in detail.calls.rows} == {"dev 0 q 7"}


def test_drilldown_of_an_unknown_name_is_empty_not_an_error(source: TraceSource) -> None:
    detail = op_detail(source, "aten::nothing")
    assert detail.calls.rows == () and detail.related.rows == ()


def test_files_are_ranked_and_a_readable_file_comes_with_its_text(source: TraceSource) -> None:
    analysis = analyze(source.trace)
    assert [r[0] for r in files_table(analysis).rows] == ["train.py"]
    sf = source_file(analysis, "train.py", (SOURCE_DIR,))
    assert sf.resolved is not None and "y = self.linear(x)" in sf.text_lines[11]
    assert [row[0] for row in sf.lines.rows] == [12, 13]
    assert source_file(analysis, "train.py", (SOURCE_DIR.parent,)).resolved is None  # not there: the line table only
    assert ops_table(analysis).rows[0][0] == "aten::addmm"


def test_merge_intervals_collapses_nested_and_overlapping_spans() -> None:
    s, e = merge_intervals(np.array([0, 1, 10, 12, 30]), np.array([5, 3, 15, 20, 31]))
    assert s.tolist() == [0, 10, 30] and e.tolist() == [5, 20, 31]


def test_covered_splits_busy_time_between_bins() -> None:
    s, e = np.array([0, 10]), np.array([5, 20])
    assert covered(s, e, np.array([0, 4, 8, 12, 16, 20])).tolist() == [4, 1, 2, 4, 4]


def test_timeline_has_a_lane_per_thread_and_queue_and_zooms_without_the_trace(source: TraceSource) -> None:
    t = timeline(source)
    assert (t.rank, t.step, t.steps) == (0, 1, ((0, 1), (0, 2)))
    assert [lane.label for lane in t.lanes] == ["main thread", "device 0 queue 7", "device 0 queue 20"]
    queue7 = t.lanes[1]
    cells = render_cells(queue7, t.start_ns, t.end_ns, 20)
    assert len(cells) == 20
    assert {kind for _, kind in cells} >= {"kernel", "memcpy"}
    # every event of the step is listed, by start, with the line behind it
    assert [e.start_ns for e in t.events] == sorted(e.start_ns for e in t.events)
    assert len(t.events) == t.total_events
    gemm = max(t.events, key=lambda e: e.dur_ns)
    assert gemm.name == "sm90_xmma_gemm_bf16bf16_bf16f32" and gemm.lane == "device 0 queue 7"
    assert gemm.source == ("train.py", 12, "forward", "launch") and gemm.event_id >= 0
    step2 = timeline(source, 0, 2)
    assert step2.start_ns == t.start_ns + 10 * MS


def test_step_of_finds_the_step_holding_a_time_or_the_nearest() -> None:
    steps = ((0, 1, 100, 10), (0, 2, 110, 10), (1, 1, 100, 20))
    assert step_of(steps, 0, 105) == 1 and step_of(steps, 0, 112) == 2
    assert step_of(steps, 0, 500) == 2 and step_of(steps, 1, 0) == 1
    assert step_of(steps, 3, 105) is None


def test_step_bars_start_from_zero() -> None:
    # 210 ms and 216 ms steps draw as nearly equal bars, not as empty and full
    top, bottom = zero_based_bars([210, 216], width=2, height=2)
    assert bottom == "██" and set(top) <= set("▇█")
    assert zero_based_bars([50, 100], width=2, height=2) == [" █", "██"]
    assert zero_based_bars([0, 100], width=2) == [" █"]
    assert zero_based_bars([5] * 100, width=10) == ["█" * 10]


def test_durations_and_sizes_read_naturally() -> None:
    assert [fmt_ns(v) for v in (0, 999, 1_500, 2_340_000, 3_000_000_000)] == [
        "0 ns",
        "999 ns",
        "1.5 µs",
        "2.34 ms",
        "3 s",
    ]
    assert fmt_bytes(3 << 20) == "3 MiB"


def test_a_run_directory_shows_every_rank_and_its_devices(tmp_path) -> None:
    import pyarrow.compute as pc

    base = tiny_trace()
    write_tiny_trace(tmp_path / "rank=0" / "trace.parquet")
    events = base.events.set_column(1, "rank", pc.add(base.events["rank"], 1).cast("int32"))
    events = events.set_column(
        events.schema.get_field_index("device"), "device", pc.add(events["device"], 1).cast("int32")
    )
    Trace(events, {**base.metadata, "rank": 1}).write(tmp_path / "rank=1" / "trace.parquet")
    source = TraceSource.open(tmp_path)
    ov = source.overview()
    assert ov.ranks == (0, 1)
    assert [(d.rank, d.device) for d in ov.devices] == [(0, 0), (1, 1)]
    t = timeline(source)
    assert t.steps == ((0, 1), (0, 2), (1, 1), (1, 2))
    assert [lane.label for lane in timeline(source, 1, 2).lanes][1] == "device 1 queue 7"


def test_kernel_cells_read_demangled_and_a_filter_matches_either_name() -> None:
    col = Column("name", "Kernel", "kernel", width=30)
    snap = TableSnapshot((col,), (("_Z3fooPKc",), ("aten_kernel",)))
    assert fmt_value(col, "_Z3fooPKc") == "foo(char const*)"
    assert "foo(char const*)" in snap.text_of(col, "_Z3fooPKc") and "_Z3fooPKc" in snap.text_of(col, "_Z3fooPKc")
    assert snap.text_of(col, "aten_kernel") == "aten_kernel"
    long = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::Foo>(int)>(int, int)"
    assert len(fmt_value(col, long, width=30)) <= 30
