"""The TUI driven through Textual's Pilot: every view, sorting, filtering, drill-downs, files.

The app runs for real (headless, 120x40) over a small hand-built trace and the real analyzers;
assertions read what the screen shows.
"""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc
from textual.pilot import Pilot
from textual.widgets import Input, TabbedContent

from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.trace.errors import AnalysisError
from neuron_explorer.tui.app import ExplorerApp, HelpScreen
from neuron_explorer.tui.data import TraceSource
from neuron_explorer.tui.timeline_view import TimelineView
from neuron_explorer.tui.views.findings import FindingsPane
from neuron_explorer.tui.views.source import SourceFileScreen
from neuron_explorer.tui.widgets import SnapshotTable, SortChooser

from .tui_trace import SOURCE_DIR, TINY_THRESHOLDS, tiny_trace

SIZE = (120, 40)


@functools.cache
def tiny_analysis() -> Analysis:
    """The real analysis of the tiny trace, computed once for the whole module (it is pure)."""
    return analyze(tiny_trace(), thresholds=TINY_THRESHOLDS)


def make_app(**kw) -> ExplorerApp:
    kw.setdefault("analyzer", lambda trace: tiny_analysis())
    return ExplorerApp(TraceSource(tiny_trace(), name="tiny", **kw), search_dirs=(SOURCE_DIR,))


async def settle(pilot: Pilot) -> None:
    """Wait until every worker has posted its snapshot and the screen is redrawn."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def screen_text(app: ExplorerApp) -> str:
    # The composited screen as plain text: what a user would read in the terminal.
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def active(app: ExplorerApp) -> str:
    return app.query_one(TabbedContent).active


async def test_overview_shows_trace_facts_breakdown_and_top_findings() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "Events" in text and "20" in text
        assert "2 steps · mean 10 ms" in text
        assert "cuda:0" in text
        assert "compute 60%" in text  # the analysis' breakdown legend
        assert "Mostly device computing" in text  # the verdict
        assert "Device busy only 72%" in text  # the top finding
        assert app.first_paint_s is not None


async def test_overview_shows_how_much_time_has_an_exact_line() -> None:
    from neuron_explorer.trace.line_coverage import coverage_text, line_coverage

    cov = tiny_analysis().summary["line_coverage"]
    assert cov == line_coverage(tiny_trace())  # the figures info prints
    want = coverage_text(cov, short=True)
    assert want.endswith("at an exact line")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = " ".join(screen_text(app).split())
        assert "Source lines" in text and want.split(" of op time")[0] in text


async def test_number_keys_and_tab_visit_every_view_and_focus_its_table() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for key, view in zip("234561", ("findings", "ops", "kernels", "source", "timeline", "overview")):
            await pilot.press(key)
            await settle(pilot)
            assert active(app) == view
        await pilot.press("tab")
        assert active(app) == "findings"
        assert app.focused is not None and app.focused.id == "findings-table"
        await pilot.press("shift+tab", "shift+tab")
        assert active(app) == "timeline"
        assert isinstance(app.focused, TimelineView)


def header_labels(table: SnapshotTable) -> list[str]:
    return [str(c.label) for c in table.ordered_columns]


async def test_ops_table_sorts_by_a_chosen_column_and_by_header_click_shown_in_the_header() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3")
        table = app.query_one("#ops-pane .main-table", SnapshotTable)
        names = lambda: [table.row_values(i)[0] for i in table.shown]  # noqa: E731
        await pilot.press("s")  # the chooser opens on the first column: op name, A to Z
        assert isinstance(app.screen, SortChooser)
        await pilot.press("enter")
        await pilot.pause()
        assert names() == ["aten::addmm", "aten::linear", "aten::relu"]
        assert "sorted by Op ▲" in table.border_subtitle
        assert header_labels(table)[0] == "Op ▲"
        await pilot.press("s", "down", "down", "enter")  # host total, largest first
        await pilot.pause()
        assert names() == ["aten::linear", "aten::addmm", "aten::relu"]
        assert "Host total ▼" in header_labels(table) and "Op" in header_labels(table)
        await pilot.press("r")
        assert names() == ["aten::relu", "aten::addmm", "aten::linear"]
        columns = table.ordered_columns
        device_x = 1 + sum(c.get_render_width(table) for c in columns[: table.get_column_index("device_ns")])
        await pilot.click("#ops-pane .main-table", offset=(device_x + 2, 1))  # the "Device" header
        await pilot.pause()
        assert "sorted by Device" in table.border_subtitle
        assert names()[0] == "aten::addmm"


async def test_slash_then_typing_filters_the_table_as_you_type() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4", "slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"relu")
        table = app.query_one("#kernels-pane .main-table", SnapshotTable)
        assert [table.row_values(i)[0] for i in table.shown] == ["vectorized_elementwise_kernel<relu>"]
        assert "1 of 4" in table.border_subtitle
        assert "sm90_xmma_gemm" not in screen_text(app)
        await pilot.press("backspace", "backspace", "backspace", "backspace")
        assert len(table.shown) == 4


async def test_choosing_an_op_shows_its_calls_source_lines_and_child_kernels() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("3", "slash", *"linear", "enter", "enter")
        await settle(pilot)
        text = screen_text(app)
        pane = "#ops-pane"
        calls = app.query_one(f"{pane} .calls", SnapshotTable)
        assert len(calls.shown) == 2 and "2 calls" in calls.border_subtitle
        assert "train.py:12" in text
        # aten::linear launches its GEMM through its aten::addmm child: it still shows.
        related = app.query_one(f"{pane} .related", SnapshotTable)
        assert [related.row_values(i)[0] for i in related.shown] == ["sm90_xmma_gemm_bf16bf16_bf16f32"]


async def test_choosing_a_kernel_shows_its_launches_and_launching_op() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4", "enter")  # the first row: the costliest kernel
        await settle(pilot)
        related = app.query_one("#kernels-pane .related", SnapshotTable)
        assert related.row_values(related.shown[0])[:2] == ("aten::addmm", 2)
        assert "dev 0 q 7" in screen_text(app)


async def test_opening_a_finding_shows_its_evidence_and_fix() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("2", "down")
        await settle(pilot)
        text = screen_text(app)
        finding = app.source.analysis().findings[1]
        assert finding.title[:30] in text
        assert "Evidence" in text
        app.query_one("#findings-detail").scroll_end(animate=False)  # (the wheel, as a user would)
        await pilot.pause()
        text = screen_text(app)
        assert "Fix" in text and finding.recommendation.split()[0] in text


async def test_opening_a_readable_source_file_shows_code_with_time_gutter() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("5", "enter")
        await settle(pilot)
        assert isinstance(app.screen, SourceFileScreen)
        text = screen_text(app)
        assert "y = self.linear(x)" in text
        line12 = next(row for row in text.splitlines() if "y = self.linear(x)" in row)
        assert "ms" in line12  # host and device time in the gutter of the hot line
        await pilot.press("escape")
        assert not isinstance(app.screen, SourceFileScreen)


async def test_a_source_file_not_on_this_machine_shows_its_line_table(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    app = ExplorerApp(
        TraceSource(tiny_trace(), name="tiny", analyzer=lambda t: tiny_analysis()), search_dirs=(tmp_path,)
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("5", "enter")
        await settle(pilot)
        text = screen_text(app)
        assert "not readable on this machine" in text
        assert "forward" in text and "12" in text


async def test_timeline_moves_between_steps_and_zooms_and_pans() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        text = screen_text(app)
        assert "rank 0 · step 1 (1 of 2)" in text
        assert "main thread" in text and "device 0 queue 7" in text and "device 0 queue 20" in text
        view = app.query_one(TimelineView)
        await pilot.press("plus", "right")
        assert view.zoom == 2 and view.center == 0.625  # a pan moves a quarter of the visible window
        assert "zoom ×2" in screen_text(app)
        await pilot.press("0", "right_square_bracket")
        await settle(pilot)
        assert "rank 0 · step 2 (2 of 2)" in screen_text(app)
        assert view.zoom == 1


async def test_help_opens_with_question_mark_and_closes_with_escape() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "Overview / Findings / Ops / Kernels / Source / Timeline" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_search_on_the_overview_jumps_to_a_kernel_and_drills_down() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        await pilot.pause()
        await pilot.press(*"kernel: vectorized")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert active(app) == "kernels"
        assert app.query_one("#kernels-pane Input", Input).value == "vectorized_elementwise_kernel<relu>"
        assert "aten::relu" in screen_text(app)  # the launching op in the drill-down


async def test_a_failing_analysis_is_reported_in_the_views_not_a_crash() -> None:
    def broken(trace):
        raise AnalysisError("rules could not run on this trace")

    app = make_app(analyzer=broken)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "analysis unavailable: rules could not run" in screen_text(app)
        await pilot.press("3")
        assert "analysis unavailable" in screen_text(app)
        await pilot.press("6")  # trace-only views still work
        await settle(pilot)
        assert "main thread" in screen_text(app)


async def test_q_quits() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_an_empty_trace_does_not_crash_any_view() -> None:
    trace = tiny_trace()
    empty = trace.events.slice(0, 0)
    app = ExplorerApp(TraceSource(type(trace)(empty, trace.metadata), name="empty"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for view in "123456":
            await pilot.press(view, "enter")
            await settle(pilot)
            assert "Neuron Explorer" in screen_text(app)
        await pilot.press("1")
        assert "host only: no device events" in screen_text(app)


# ---------------------------------------------------------------- 80x24: as usable as 120x40
SMALL = (80, 24)


def table_rows_on_screen(app: ExplorerApp, table: SnapshotTable) -> int:
    # data rows the table draws: its height less the border (2) and header (1)
    return min(len(table.shown), table.size.height - 3)


async def test_at_80x24_every_kernel_row_and_number_column_shows_and_name_columns_give_way() -> None:
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        table = app.query_one("#kernels-pane .main-table", SnapshotTable)
        labels = header_labels(table)
        assert {"n", "Total", "%"} <= set(labels)  # the numbers stay (short headers, a legend says)
        assert "n = Count" in table.border_subtitle
        assert "Device" not in labels  # the lowest-priority column gave way
        assert table_rows_on_screen(app, table) == 4  # every kernel visible before choosing one
        assert sum(c.get_render_width(table) for c in table.ordered_columns) <= table.size.width
        text = screen_text(app)
        assert "63.3%" in text and "Calls" not in text  # no empty drill-down before a choice


async def test_at_80x24_a_chosen_op_shows_one_drilldown_table_whole_and_c_l_k_move_between_them() -> None:
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("3", "enter")
        await settle(pilot)
        pane = app.query_one("#ops-pane")
        calls = pane.query_one(".calls", SnapshotTable)
        assert calls.display and not pane.query_one(".lines").display  # narrow: one at a time
        assert {"Start", "Duration", "Source"} <= set(header_labels(calls))
        assert "train.py:12 (forward)" in screen_text(app)
        await pilot.press("l")
        assert app.focused is pane.query_one(".lines") and not calls.display
        await pilot.press("k")
        assert app.focused is pane.query_one(".related")
        assert "sm90_xmma_gemm" in screen_text(app)
        await pilot.press("escape")
        assert app.focused is pane.query_one(".main-table")


async def test_an_empty_drilldown_table_is_hidden_and_says_why() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("4", "slash", *"Memcpy", "enter", "enter")
        await settle(pilot)
        related = app.query_one("#kernels-pane .related", SnapshotTable)
        assert not related.row_values(0) and not related.display
        assert "Launching ops: none" in screen_text(app)


async def test_g_on_a_call_shows_it_selected_in_the_timeline_and_o_opens_its_line() -> None:
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("3", "slash", *"linear", "enter", "enter")
        await settle(pilot)
        await pilot.press("c", "g")
        await settle(pilot)
        assert active(app) == "timeline"
        view = app.query_one(TimelineView)
        assert view.selected is not None and view.selected.name == "aten::linear"
        lo, hi = view.window()
        assert lo <= view.selected.start_ns and view.selected.end_ns <= hi
        text = screen_text(app)
        assert "aten::linear  cpu_op · main thread (tid 100) · +1 ms · 4 ms" in text
        assert "train.py:12 (forward)" in text  # (on a second line at 80 columns)
        await pilot.press("o")
        await settle(pilot)
        assert isinstance(app.screen, SourceFileScreen) and app.screen.line == 12
        lines = app.screen.query_one("#file-lines")
        assert lines.cursor_row == 11  # the cursor is on line 12


async def test_g_on_a_kernel_row_goes_to_its_longest_launch() -> None:
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("4", "g")
        await settle(pilot)
        assert active(app) == "timeline"
        selected = app.query_one(TimelineView).selected
        assert selected is not None and selected.name == "sm90_xmma_gemm_bf16bf16_bf16f32"


async def test_g_on_a_finding_frames_its_time_range_in_the_timeline() -> None:
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        findings = app.query_one(FindingsPane)
        with_time = next(i for i, f in enumerate(findings.findings) if f.time_ranges)
        for _ in range(with_time):
            await pilot.press("down")
        await pilot.press("g")
        await settle(pilot)
        assert active(app) == "timeline"
        start, end = findings.findings[with_time].time_ranges[0]
        lo, hi = app.query_one(TimelineView).window()
        assert lo <= start and end <= hi


async def test_timeline_events_in_view_follow_the_zoom_and_enter_selects_one() -> None:
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        events = app.query_one("#timeline-events", SnapshotTable)
        everything = len(events.shown)
        await pilot.press("plus", "plus", "plus")
        await pilot.pause()
        assert 0 < len(events.shown) < everything  # only the events in the zoomed window
        await pilot.press("0", "e")
        assert app.focused is events
        await pilot.press("down", "enter")
        view = app.query_one(TimelineView)
        assert view.selected is not None and view.selected.name == "aten::linear"
        assert "train.py:12 (forward)" in screen_text(app)


async def test_cpu_only_breakdown_names_the_host_not_device_minus_one() -> None:
    import pandas as pd
    from rich.console import Console

    from neuron_explorer.tui.views.overview import breakdown_renderable

    bd = pd.DataFrame(
        {"rank": [0], "device": [-1], "device_type": ["cpu"], "wall_ns": [10], "compute_ns": [0], "idle_ns": [10]}
    )
    console = Console(width=100, record=True)
    console.print(breakdown_renderable(bd))
    text = console.export_text()
    assert "rank 0 · host" in text and "-1" not in text


async def test_a_host_only_trace_says_it_has_no_kernels() -> None:
    from neuron_explorer.trace.model import Trace, conform

    trace = tiny_trace()
    cpu = trace.events.filter(pc.equal(pc.cast(trace.events["device_type"], pa.string()), "cpu"))
    app = ExplorerApp(TraceSource(Trace(conform(cpu), trace.metadata), name="cpu"), search_dirs=(SOURCE_DIR,))
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        assert "no kernels in this trace (host only" in screen_text(app)


async def test_overview_of_a_two_rank_run_lists_the_ranks_and_one_rank_hides_them(tmp_path) -> None:
    import io
    import shutil

    from rich.console import Console

    from tests.conftest import KINETO

    run = tmp_path / "run"
    run.mkdir()
    for name in ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz"):
        shutil.copy(KINETO / "hta" / name, run / name)
    app = ExplorerApp(TraceSource.open(run))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = app.query_one("#overview-ranks")
        assert panel.display
        out = io.StringIO()
        Console(file=out, width=120).print(panel.content)
        rows = [ln.split() for ln in out.getvalue().splitlines()[1:] if ln.strip()]
        assert sorted(r[0] for r in rows) == ["0", "1"]
        # "last" is times-last / collectives joined: 10 matched collectives, each with one last rank
        lasts = [r[-3] for r in rows]
        assert all(x.endswith("/10") for x in lasts) and sum(int(x.split("/")[0]) for x in lasts) == 10
    one = make_app()
    async with one.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert not one.query_one("#overview-ranks").display


async def test_a_neuron_profile_shows_its_engines_and_operator_table() -> None:
    """A real trn2 export in the real app: the engine table and the Operator Table, its rows
    recounted from the raw JSON (non-wait instructions by layer and HLO name)."""
    import gzip
    import json
    import warnings

    from neuron_explorer.collectors.neuron import import_neuron_profile
    from tests.conftest import TRN2

    path = TRN2 / "fused_bf16_s512.json.gz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_neuron_profile(path)
        analysis = analyze(trace)
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    work = [r for r in doc["instruction"] if r["opcode"] != "EVENT_SEMAPHORE"]
    unknown = sum(1 for r in work if r["layer"] == "Unknown" and not r["hlo_name"])
    app = ExplorerApp(TraceSource(trace, name=path.name, analyzer=lambda t: analysis))
    async with app.run_test(size=(160, 80)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "NeuronCore engines and DMA queues" in text
        assert "Operator Table" in text
        row = next(line for line in text.splitlines() if "Unknown" in line and "(no HLO op)" in line)
        assert f"{unknown:,}" in row  # its instruction count, semaphore waits excluded
        assert "waits, idle" in text and "untraced" not in text  # the profile records its waits
