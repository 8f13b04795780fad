"""``ExplorerApp``: the Textual app over one trace, with six views on number keys.

The app is handed a ``TraceSource`` (so tests inject any trace) and never computes on the UI
thread: the overview, the analysis, drill-downs, source files and timeline steps all come from
thread workers that post immutable snapshots back.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.command import CommandListItem, SimpleCommand
from textual.widgets import Footer, Header, Input, TabbedContent, TabPane

from neuron_explorer.reports.location import Locations
from neuron_explorer.reports.names import short_kernel_name
from neuron_explorer.tui.data import TraceSource
from neuron_explorer.tui.help import HelpScreen, help_sections
from neuron_explorer.tui.snapshots import Overview
from neuron_explorer.tui.views.explore import KernelsPane, OpsPane
from neuron_explorer.tui.views.findings import FindingsPane
from neuron_explorer.tui.views.overview import OverviewPane
from neuron_explorer.tui.views.perf import PerfScreen
from neuron_explorer.tui.views.source import SourceFileScreen, SourcePane
from neuron_explorer.tui.views.timeline import TimelinePane

#: (tab id, title) in key order: key 1 opens the first.
VIEWS: tuple[tuple[str, str], ...] = (
    ("overview", "Overview"),
    ("findings", "Findings"),
    ("ops", "Ops"),
    ("kernels", "Kernels"),
    ("source", "Source"),
    ("timeline", "Timeline"),
)


class ExplorerApp(App[None]):
    """Browse one trace: overview, findings, ops, kernels, source lines and a timeline."""

    CSS_PATH = Path(__file__).with_name("explorer.tcss")  # absolute: subclasses elsewhere keep it
    TITLE = "Neuron Explorer"
    # The screen gets -narrow / -short below these sizes: layouts that give the main table the room
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (110, "-wide")]
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-short"), (34, "-tall")]
    # (the help lists these, their tooltips as the longer text: tui/help.py)
    BINDINGS: ClassVar[list[BindingType]] = [
        *[Binding(str(i + 1), f"view('{tab}')", title, show=False) for i, (tab, title) in enumerate(VIEWS)],
        Binding("tab", "next_view(1)", "Next view", show=False, priority=True),
        Binding("shift+tab", "next_view(-1)", "Previous view", show=False, priority=True),
        # A priority binding runs before the key is forwarded to the focused widget, so keys
        # typed right after "/" already go to the filter it focuses.
        Binding(
            "slash",
            "search",
            "Search",
            priority=True,
            tooltip="filter the current table as you type; on Overview and Timeline, search ops, kernels, "
            "files and findings together",
        ),
        Binding(
            "p",
            "perf",
            "Roofline",
            show=False,
            tooltip="op groups against the device's peaks, over the current view (escape or p closes it)",
        ),
        Binding("question_mark", "help", "Help", tooltip="this list"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, source: TraceSource, search_dirs: tuple[Path, ...] = ()) -> None:
        super().__init__()
        self.source = source
        self.search_dirs = search_dirs
        self.sub_title = source.name
        self.started = time.perf_counter()
        #: perf_counter seconds since construction when the overview (first screen) was painted.
        self.first_paint_s: float | None = None
        self.analysis_s: float | None = None
        self.origin_ns = 0  # the trace start, once the overview is in: offsets in findings are from it
        self.overview: Overview | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(id="views"):
            with TabPane(f"1 {VIEWS[0][1]}", id="overview"):
                yield OverviewPane(id="overview-pane")
            with TabPane(f"2 {VIEWS[1][1]}", id="findings"):
                yield FindingsPane(id="findings-pane")
            with TabPane(f"3 {VIEWS[2][1]}", id="ops"):
                yield OpsPane(id="ops-pane")
            with TabPane(f"4 {VIEWS[3][1]}", id="kernels"):
                yield KernelsPane(id="kernels-pane")
            with TabPane(f"5 {VIEWS[4][1]}", id="source"):
                yield SourcePane(id="source-pane")
            with TabPane(f"6 {VIEWS[5][1]}", id="timeline"):
                yield TimelinePane(id="timeline-pane")
        yield Footer()

    def on_mount(self) -> None:
        # In a worker even when small: measured in a terminal, computing it here delays the
        # first frame more than the worker delays the facts (0.3 s of pyarrow's lazy imports).
        self.load_overview()

    def on_unmount(self) -> None:
        self.source.close()

    # ------------------------------------------------------------------ workers
    @work(thread=True, group="overview")
    def load_overview(self) -> None:
        overview = self.source.overview()
        self.call_from_thread(self._show_overview, overview)

    def _show_overview(self, overview: Overview) -> None:
        self.query_one(OverviewPane).show_overview(overview)
        self.origin_ns = overview.start_ns
        self.overview = overview
        self.call_after_refresh(self._mark_painted)
        # Only now: the analysis would otherwise compete with the first screen for the GIL.
        self.load_analysis()

    def _mark_painted(self) -> None:
        if self.first_paint_s is None:
            self.first_paint_s = time.perf_counter() - self.started

    @work(thread=True, group="analysis")
    def load_analysis(self) -> None:
        t0 = time.perf_counter()
        try:
            analysis = self.source.analysis()
        except Exception as exc:  # an analyzer failing on an odd trace must not take the UI down
            message = str(exc) or type(exc).__name__
            self.call_from_thread(self._show_analysis_error, message)
            return
        self.analysis_s = time.perf_counter() - t0
        self.call_from_thread(self._show_analysis, analysis)

    def _show_analysis(self, analysis: Any) -> None:
        self.query_one(OverviewPane).show_analysis(analysis)
        self.query_one(FindingsPane).show_analysis(analysis, self.origin_ns)
        for pane in (self.query_one(OpsPane), self.query_one(KernelsPane), self.query_one(SourcePane)):
            pane.show_analysis(analysis)

    def _show_analysis_error(self, message: str) -> None:
        for pane in (OverviewPane, FindingsPane, OpsPane, KernelsPane, SourcePane):
            self.query_one(pane).show_analysis_error(message)  # type: ignore[attr-defined]
        self.notify(f"analysis failed: {message}", severity="error", timeout=10)

    # ------------------------------------------------------------------ actions
    def action_view(self, tab: str) -> None:
        if isinstance(self.screen, (SourceFileScreen, HelpScreen)):
            self.pop_screen()
        self.query_one(TabbedContent).active = tab
        self._focus_view(tab)

    def action_next_view(self, delta: int) -> None:
        if self.screen is not self.screen_stack[0]:
            return
        ids = [t for t, _ in VIEWS]
        current = self.query_one(TabbedContent).active
        self.action_view(ids[(ids.index(current) + delta) % len(ids)] if current in ids else ids[0])

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pane_id = event.pane.id
        if pane_id == "timeline":
            self.query_one(TimelinePane).ensure_loaded()
        # Put the keyboard on the view's main widget so arrows and enter work at once (also
        # after a click on the tab); only while that view is still the active one, as moving
        # focus into a hidden pane would switch back to it.
        self._focus_view(pane_id)

    def _focus_view(self, pane_id: str | None) -> None:
        if self.query_one(TabbedContent).active != pane_id:
            return
        focused = self.focused
        if focused is not None and any(a.id == pane_id for a in focused.ancestors):
            return
        targets = {
            "overview": "#overview-pane",
            "findings": "#findings-table",
            "ops": "#ops-pane .main-table",
            "kernels": "#kernels-pane .main-table",
            "source": "#files-table",
            "timeline": "#timeline-view",
        }
        # Synchronously: a deferred focus() would land after the old pane's focused widget was
        # hidden, and Textual would refocus (and so re-activate) the old pane.
        self.screen.set_focus(self.query_one(targets[pane_id]) if pane_id in targets else None)

    def goto_time(self, rank: int | None, start_ns: int, end_ns: int, event_id: int | None = None) -> None:
        """Show the timeline at ``[start_ns, end_ns)`` (the event selected when it is listed)."""
        self.action_view("timeline")
        self.query_one(TimelinePane).goto(rank, start_ns, end_ns, event_id)

    def open_source(self, path: str | None, line: int | None = None) -> None:
        """Open ``path`` in the source view at ``line``."""
        if not path:
            return
        if isinstance(self.screen, SourceFileScreen):
            self.pop_screen()
        self.push_screen(SourceFileScreen(str(path), line))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(help_sections(type(self))))

    def action_perf(self) -> None:
        """The Roofline view over the current one (op groups vs the device's peaks)."""
        if isinstance(self.focused, Input):  # "p" typed in a filter is text
            self.focused.insert_text_at_cursor("p")
            return
        if isinstance(self.screen, PerfScreen) or self.screen is not self.screen_stack[0]:
            return
        analysis = self.source.analysis_ready
        if analysis is None:
            self.notify("the analysis is still running; the roofline opens once it is done")
            return
        self.push_screen(PerfScreen(analysis))

    def action_search(self) -> None:
        if isinstance(self.focused, Input):  # "/" typed in a filter or the search box is text
            self.focused.insert_text_at_cursor("/")
            return
        if isinstance(self.screen, PerfScreen):
            self.screen.action_filter()
            return
        if self.screen is not self.screen_stack[0]:
            return
        active = self.query_one(TabbedContent).active
        pane = {"findings": FindingsPane, "ops": OpsPane, "kernels": KernelsPane, "source": SourcePane}.get(active)
        if pane is not None:
            self.query_one(pane).focus_filter()  # type: ignore[attr-defined]
            return
        self.search_commands(self._search_items(), placeholder="Search ops, kernels, files, findings…")

    def _search_items(self) -> list[CommandListItem]:
        """Everything nameable, for the search palette; empty until the analysis is in."""
        analysis = self.source.analysis_ready
        if analysis is None:
            self.notify("the analysis is still running; search opens once it is done")
            return []
        items: list[CommandListItem] = []
        for f in analysis.findings:
            items.append(SimpleCommand(f"finding: {f.title}", lambda t=f.title: self._jump("findings", t), f.rule_id))
        for pane_id, df, label in (("ops", analysis.ops, "op"), ("kernels", analysis.kernels, "kernel")):
            for name in df["name"].astype(str).head(2000):
                # one line per result: a long kernel name is shortened (demangled) for the list
                shown = short_kernel_name(name, 70) if label == "kernel" else name[:70]
                items.append(SimpleCommand(f"{label}: {shown}", lambda p=pane_id, n=name: self._jump(p, n, drill=True)))
        files = analysis.source_lines["src_file"].astype(str).unique() if len(analysis.source_lines) else []
        where = Locations.for_analysis(analysis)
        for path in list(files)[:2000]:
            items.append(
                SimpleCommand(f"file: {where.format(path, None, width=70)}", lambda p=path: self.open_source(p))
            )
        return items

    def _jump(self, pane_id: str, text: str, drill: bool = False) -> None:
        self.action_view(pane_id)
        pane = self.query_one(f"#{pane_id}-pane")
        pane.query_one(Input).value = text
        if drill:
            pane.choose(text)  # type: ignore[attr-defined]
