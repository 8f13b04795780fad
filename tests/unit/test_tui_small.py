"""The TUI at 80x24 on real traces, as a new user meets it: help lists every key and fits,
the timeline keeps rows for its event list and names its threads, data loading and Python have
lanes, the roofline keeps its figures, finding titles are whole, and quick ``]`` presses count.

The app runs for real (Textual's Pilot) over bundled traces and the real analyzers; figures the
screens show are recomputed here from the raw events or the analysis tables."""

from __future__ import annotations

import functools
import gzip
import importlib
import inspect
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from textual.binding import Binding

import neuron_explorer as ne
import neuron_explorer.tui as tui_package
from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.trace.model import Trace
from neuron_explorer.tui.app import ExplorerApp
from neuron_explorer.tui.data import TraceSource
from neuron_explorer.tui.help import HELP_CLASSES, HelpScreen, help_sections, key_name
from neuron_explorer.tui.timeline import timeline
from neuron_explorer.tui.timeline_view import TimelineView
from neuron_explorer.tui.views.perf import PerfScreen
from neuron_explorer.tui.views.timeline import TimelinePane
from neuron_explorer.tui.widgets import SnapshotTable
from tests.conftest import KINETO, REPO

from .test_tui_app import screen_text, settle
from .tui_trace import SOURCE_DIR, TINY_THRESHOLDS, tiny_trace

SMALL = (80, 24)
EAGER = KINETO / "h200/eager_train.json.gz"  # H200 training: a main and an autograd thread, 10 steps
SAMPLED = KINETO / "hta/sampled_rank-0.json.gz"  # A100: 7 lanes (two threads, five queues)


@functools.cache
def loaded(path: Path) -> Trace:
    return ne.load(path)


@functools.cache
def analysis_of(path: Path) -> Analysis:
    return analyze(loaded(path))


def app_for(path: Path) -> ExplorerApp:
    return ExplorerApp(TraceSource(loaded(path), name=path.name, analyzer=lambda _t: analysis_of(path)))


def tiny_app() -> ExplorerApp:
    trace = tiny_trace()
    return ExplorerApp(
        TraceSource(trace, name="tiny", analyzer=lambda t: analyze(t, thresholds=TINY_THRESHOLDS)),
        search_dirs=(SOURCE_DIR,),
    )


# ------------------------------------------------------------------------------------ help
def _binding_classes() -> set[type]:
    """Every class of the TUI package that defines key bindings of its own."""
    found: set[type] = set()
    for info in pkgutil.walk_packages(tui_package.__path__, "neuron_explorer.tui."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and cls.__dict__.get("BINDINGS"):
                found.add(cls)
    return found


def test_every_class_with_key_bindings_is_in_the_help() -> None:
    from neuron_explorer.tui.views.diff import DiffApp  # the diff's own app: `diff --tui`

    listed = {cls for _, classes in HELP_CLASSES for cls in classes} | {ExplorerApp, HelpScreen, DiffApp}
    missing = _binding_classes() - listed
    assert not missing, f"bindings not in the help (tui/help.py HELP_CLASSES): {missing}"


async def test_help_at_80x24_fits_scrolls_and_lists_every_binding() -> None:
    app = tiny_app()
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help")
        assert box.region.x >= 0 and box.region.right <= 80 and box.region.bottom <= 24  # nothing cut
        seen = screen_text(app)
        for _ in range(12):  # page through it as a user does
            await pilot.press("pagedown")
            await pilot.pause()
            seen += "\n" + screen_text(app)
        assert "The mouse works too" in seen  # the last line was reached
        # every key of every binding the app and its views define is on one of the pages
        for cls in [ExplorerApp, *(c for _, classes in HELP_CLASSES for c in classes)]:
            for binding in Binding.make_bindings(cls.__dict__.get("BINDINGS", ())):
                shown = key_name(binding.key)
                assert re.search(rf"(^|\s){re.escape(shown)}(\s|$)", seen, re.M), (cls.__name__, binding.key)
        for key in ("p", "e", "t", "[", "]", "c", "l", "k", "g", "o", "s", "r"):
            assert re.search(rf"(^|\s){re.escape(key)}(\s|$)", seen, re.M), key
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def test_help_lines_join_the_keys_of_one_action() -> None:
    sections = dict(help_sections(ExplorerApp))
    timeline_lines = {line.keys: line.what for line in sections["Timeline (6)"]}
    assert timeline_lines["[ ]"].startswith("Prev step / Next step")
    everywhere = {line.keys: line.what for line in sections["Everywhere"]}
    assert everywhere["1 2 3 4 5 6"] == "Overview / Findings / Ops / Kernels / Source / Timeline"
    assert everywhere["p"].startswith("Roofline")


# ----------------------------------------------------------------------------- timeline
async def test_timeline_at_80x24_keeps_rows_for_its_events_and_scrolls_the_lanes() -> None:
    app = app_for(SAMPLED)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        view = app.query_one(TimelineView)
        events = app.query_one("#timeline-events", SnapshotTable)
        total = len(view.timeline.lanes)
        assert total == 7
        shown = view.lanes_shown()
        assert 0 < len(shown) < total  # the lanes gave way ...
        assert events.size.height - 1 >= 5  # ... so the list shows at least five events (less its header)
        assert f"lanes 1-{len(shown)} of {total}" in screen_text(app)
        assert view.timeline.lanes[-1].label not in screen_text(app)
        await pilot.press(*["down"] * 10)  # (more presses than lanes: it stops at the last)
        first = total - len(shown)
        assert view.lanes_shown()[0] is view.timeline.lanes[first]
        assert f"lanes {first + 1}-{total} of {total}" in screen_text(app)
        assert view.timeline.lanes[-1].label in screen_text(app)
        await pilot.press(*["up"] * 10)
        assert view.lane_offset == 0


async def test_three_quick_presses_of_right_bracket_move_three_steps() -> None:
    app = app_for(EAGER)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        pane = app.query_one(TimelinePane)
        steps = pane.current.steps
        assert (pane.current.rank, pane.current.step) == steps[0]
        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")  # no wait between
        await settle(pilot)
        assert (pane.current.rank, pane.current.step) == steps[3]
        assert f"({4} of {len(steps)})" in screen_text(app)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await settle(pilot)
        assert (pane.current.rank, pane.current.step) == steps[1]


def _recorded_thread_names(path: Path) -> dict[int, str]:
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    return {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}


def test_threads_are_named_not_numbered(tmp_path) -> None:
    recorded = _recorded_thread_names(EAGER)
    autograd_tid = next(t for t, n in recorded.items() if "pt_autograd_0" in n)
    with gzip.open(EAGER, "rt") as fh:
        raw = json.load(fh)["traceEvents"]
    step_tid = next(e["tid"] for e in raw if str(e.get("name", "")).startswith("ProfilerStep#"))
    for source in (
        TraceSource(loaded(EAGER), name="eager"),  # a JSON trace: the metadata rows are in memory
        TraceSource.open(_converted(EAGER, tmp_path)),  # a Parquet trace: read from the file
    ):
        names = source.thread_names()
        assert names[(0, step_tid)] == "main thread"
        assert names[(0, autograd_tid)] == "autograd thread"
        labels = [lane.label for lane in timeline(source).lanes]
        assert labels[:4] == ["main thread", "main thread · Python", "autograd thread", "device 0 queue 7"]
    # a trace whose threads have raw 32-bit ids (negative in the JSON): none is shown as a number
    for path in (SAMPLED, KINETO / "hta/nccl_data.json.gz"):
        labels = [lane.label for lane in timeline(TraceSource(loaded(path), name=path.name)).lanes]
        assert not any(re.search(r"-?\d{5,}", label) for label in labels), labels


def _converted(src: Path, tmp: Path) -> Path:
    out = tmp / (src.name.split(".")[0] + ".parquet")
    loaded(src).write(out)
    return out


def _union(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Which nanoseconds of [lo, hi) the spans cover, as a boolean array (a different method
    from the app's sorted-interval sweeps)."""
    covered = np.zeros(hi - lo, dtype=bool)
    for s, e in zip(starts.tolist(), ends.tolist()):
        covered[max(s, lo) - lo : max(min(e, hi), lo) - lo] = True
    return covered


def test_python_lane_is_the_threads_python_outside_ops_recomputed_from_the_raw_json() -> None:
    source = TraceSource(loaded(EAGER), name="eager")
    t = timeline(source, 0, None)
    lane = next(lane for lane in t.lanes if lane.label == "main thread · Python")
    with gzip.open(EAGER, "rt") as fh:
        raw = json.load(fh)["traceEvents"]
    base = loaded(EAGER).metadata["base_time_ns"]
    step = next(e for e in raw if e.get("name") == f"ProfilerStep#{t.step}")
    tid = step["tid"]

    def ns(e: dict) -> tuple[int, int]:
        s = round(e["ts"] * 1000) + base
        return s, s + round(e["dur"] * 1000)

    mine = [e for e in raw if e.get("ph") == "X" and e.get("tid") == tid and "dur" in e]
    python = np.array([ns(e) for e in mine if e.get("cat") == "python_function"])
    ops = np.array([ns(e) for e in mine if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver")])
    lo, hi = t.start_ns, t.end_ns
    expected = _union(python[:, 0], python[:, 1], lo, hi) & ~_union(ops[:, 0], ops[:, 1], lo, hi)
    s, e = lane.intervals["python"]
    got = _union(s, e, lo, hi)
    assert expected.sum() > 0
    assert abs(int(got.sum()) - int(expected.sum())) <= 0.01 * expected.sum()  # (the step cut: ns rounding)
    assert (got & ~expected).sum() <= 0.01 * expected.sum()


@pytest.mark.slow
async def test_g_on_waiting_for_data_shows_a_data_loading_lane(tmp_path) -> None:
    """A real capture of a slow DataLoader (tests/planted/slow_loader.py): ``g`` on its finding
    lands on a step whose data-loading lane covers the loader span the raw JSON records."""
    out = tmp_path / "slow_loader.json"
    r = subprocess.run(
        [sys.executable, "-m", "tests.planted._harness", "slow_loader", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    trace = ne.load(out)
    a = analyze(trace)
    assert a.findings[0].rule_id == "dataloader_stall" and "Waiting for data" in a.findings[0].title
    app = ExplorerApp(TraceSource(trace, name="slow_loader", analyzer=lambda _t: a))
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("2", "g")
        await settle(pilot)
        view = app.query_one(TimelineView)
        lane = next(lane for lane in view.timeline.lanes if lane.sub == "data loading")
        assert "└ data loading" in screen_text(app)
        raw = json.loads(out.read_text())["traceEvents"]
        base = trace.metadata["base_time_ns"]
        spans = [
            (round(e["ts"] * 1000) + base, round((e["ts"] + e["dur"]) * 1000) + base)
            for e in raw
            if "DataLoader" in str(e.get("name")) and e.get("ph") == "X"
        ]
        lo, hi = view.timeline.start_ns, view.timeline.end_ns
        inside = [(max(s, lo), min(e, hi)) for s, e in spans if s < hi and e > lo]
        assert inside
        s, e = lane.intervals["data_loading"]
        got = _union(s, e, lo, hi)
        want = _union(np.array([x for x, _ in inside]), np.array([y for _, y in inside]), lo, hi)
        assert abs(int(got.sum()) - int(want.sum())) <= 2_000  # (µs timestamps rounded to ns)


# ----------------------------------------------------------------------- roofline, findings
async def test_roofline_at_80_columns_keeps_every_figure_and_says_what_it_left_out() -> None:
    app = app_for(EAGER)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, PerfScreen)
        table = app.screen.query_one(SnapshotTable)
        labels = [str(c.label) for c in table.ordered_columns]
        assert labels == ["Op", "Shapes", "n", "time", "TF/s", "TB/s", "%roof"]  # Category, Line, Bound gave way
        assert sum(c.get_render_width(table) for c in table.ordered_columns) <= table.size.width - 2
        assert "left out to fit: Category, Line, Bound" in table.border_subtitle
        assert "TF/s = TFLOP/s" in table.border_subtitle
        # the first row's figures are the analysis' op_perf, as analyze prints them
        top = analysis_of(EAGER).op_perf.iloc[0]
        text = screen_text(app)
        first = next(line for line in text.splitlines() if top["name"] in line)
        assert f"{top['tflops_per_s']:.3g}" in first and f"{top['pct_of_peak']:.1f}%" in first
        assert f"{top['count']}" in first


async def test_finding_titles_at_80_columns_are_whole() -> None:
    app = app_for(EAGER)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("2")
        await settle(pilot)
        table = app.query_one("#findings-table", SnapshotTable)
        region = table.region
        lines = screen_text(app).splitlines()[region.y + 2 : region.bottom - 1]
        title_width = table.ordered_columns[0].get_render_width(table)
        column = " ".join(line[region.x + 1 : region.x + 1 + title_width].strip() for line in lines)
        column = re.sub(r"\s+", " ", column)
        shown = [f.title for f in analysis_of(EAGER).findings][: len(table.shown)]
        visible = [t for t in shown if " ".join(t.split()[:3]) in column]  # (the rows on screen)
        assert len(visible) >= 2
        for title in visible:
            assert title in column, title  # wrapped onto two lines, never cut
        assert "…" not in column
        assert "Rule" not in [str(c.label) for c in table.ordered_columns]  # the rule id gave way first


@pytest.mark.parametrize(("size", "view"), [(SMALL, "overview"), ((120, 30), "findings")])
async def test_a_wrapped_title_keeps_its_figure_with_its_unit(size, view) -> None:
    """ "Launch-bound: 60% of kernels are shorter than 10 µs" wraps in the Overview's top findings
    at 80x24 and in the Findings list at 120 columns: "10" and "µs" stay on one line."""
    title = next(f.title for f in analysis_of(EAGER).findings if f.rule_id == "launch_bound")
    figure = re.search(r"\d+ µs", title)
    assert figure is not None
    app = app_for(EAGER)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        if view == "findings":
            await pilot.press("2")
            await settle(pilot)
            region = app.query_one("#findings-table").region
        else:
            region = app.query_one("#overview-findings").region
        lines = screen_text(app).splitlines()[region.y : region.bottom]
        cells = [line[region.x : region.right] for line in lines]
        if view == "overview":  # the table under the verdict
            cells = cells[next(i for i, c in enumerate(cells) if "Severity" in c) :]
        words = " ".join(c.strip(" │╭╮╰╯─") for c in cells)
        assert " ".join(title.split()[:3]) in words  # the title is in the table, wrapped
        assert any(figure.group(0) in c for c in cells), cells  # and its figure on one line
