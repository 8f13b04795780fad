"""The Ops and Kernels views: a sortable, filterable table; choosing a row drills down.

The table is the analysis' (``Analysis.ops`` / ``.kernels``); the drill-down (calls, source
lines, kernels or launching ops) is a trace query run in a worker, the latest choice winning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Static

from neuron_explorer.tui.snapshots import Detail, TableSnapshot
from neuron_explorer.tui.tables import kernels_table, ops_table
from neuron_explorer.tui.widgets import SnapshotTable

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis
    from neuron_explorer.tui.data import TraceSource


#: The drill-down tables, the key that focuses each, and its title.
DETAIL_TABLES: tuple[tuple[str, str], ...] = (("calls", "c"), ("lines", "l"), ("related", "k"))


class ExplorePane(Vertical):
    """One name-keyed analysis table with its drill-down below it.

    The drill-down appears once a row is chosen; ``c``, ``l`` and ``k`` put the keyboard in its
    calls, source lines and related tables (on a narrow terminal only that one is shown, so
    its columns fit), escape goes back to the main table. A drill-down table with no rows is
    hidden and its note shown in the title line instead.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave_filter", "Back to the table", show=False, tooltip="from the filter"),
        Binding("c", "focus_detail('calls')", "Calls", show=False),
        Binding("l", "focus_detail('lines')", "Source lines", show=False),
        Binding(
            "k",
            "focus_detail('related')",
            "Related",
            show=False,
            tooltip="the chosen row's drill-down tables (an op's kernels, a kernel's ops)",
        ),
        Binding("g", "jump('time')", "Go to time", tooltip="the row's longest call, selected in the timeline"),
        Binding("o", "jump('source')", "Open line", tooltip="the source line of the row's longest call"),
    ]

    noun = "ops"
    related_title = "Kernels"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="explore")
        self.then: str | None = None  # "time" or "source": where to jump once the drill-down is in

    def table_of(self, analysis: Analysis) -> TableSnapshot:
        raise NotImplementedError

    def detail_of(self) -> Callable[[TraceSource, str], Detail]:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        yield Input(placeholder=f"filter {self.noun} by name  ( / )", classes="filter", compact=True)
        yield SnapshotTable(classes="main-table")
        yield Static(f"analyzing… then choose one of the {self.noun} (enter) to see its calls", classes="detail-title")
        with Horizontal(classes="detail"):
            yield SnapshotTable(classes="calls -current")
            yield SnapshotTable(classes="lines")
            yield SnapshotTable(classes="related")

    def on_mount(self) -> None:
        self.query_one(".main-table").border_title = self.noun.capitalize()
        self.query_one(".calls").border_title = "Calls"
        self.query_one(".lines").border_title = "Source lines"
        self.query_one(".related").border_title = self.related_title

    def show_analysis(self, analysis: Analysis) -> None:
        table = self.table_of(analysis)
        self.query_one(".main-table", SnapshotTable).show(table)
        hint = f"choose one of the {self.noun} (enter or click) to see its calls"
        if not table.rows:
            hint = f"no {self.noun} in this trace" + (
                " (host only: it recorded no device work)" if self.noun == "kernels" else ""
            )
        self.query_one(".detail-title", Static).update(hint)

    def show_analysis_error(self, message: str) -> None:
        self.query_one(".detail-title", Static).update(f"analysis unavailable: {message}")

    def action_leave_filter(self) -> None:
        self.screen.set_focus(self.query_one(".main-table", SnapshotTable))

    def focus_filter(self) -> None:
        self.screen.set_focus(self.query_one(Input))  # now: the next keys are typed into it

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one(".main-table", SnapshotTable).set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(".main-table", SnapshotTable).focus()

    def on_snapshot_table_chosen(self, event: SnapshotTable.Chosen) -> None:
        if event.table.has_class("main-table"):
            self.choose(str(event.row[0]))

    def choose(self, name: str) -> None:
        self.query_one(".detail-title", Static).update(Text.assemble((name, "bold"), "  loading…"))
        self.load_detail(name)

    @work(thread=True, exclusive=True, group="detail")
    def load_detail(self, name: str) -> None:
        detail = self.detail_of()(self.app.source, name)  # type: ignore[attr-defined]
        self.app.call_from_thread(self.show_detail, detail)

    def show_detail(self, detail: Detail) -> None:
        self.add_class("-chosen")
        then, self.then = self.then, None
        from neuron_explorer.reports.names import short_kernel_name

        title = Text.assemble((short_kernel_name(detail.name, 40), "bold"))
        for (cls, key), snap in zip(DETAIL_TABLES, (detail.calls, detail.source_lines, detail.related)):
            table = self.query_one(f".{cls}", SnapshotTable)
            table.show(snap)
            table.set_class(not snap.rows, "-empty")
            label = str(table.border_title)
            if snap.rows:
                title.append(f"  {key} ", style="bold")
                title.append(f"{label} ({len(snap.rows):,})", style="dim")
            else:
                title.append(f"  {label}: none", style="dim")
        self.query_one(".detail-title", Static).update(title)
        if self.query_one(".-current", SnapshotTable).has_class("-empty"):
            shown = [t for t in self.query(".detail SnapshotTable") if not t.has_class("-empty")]
            if shown:
                self._make_current(shown[0])  # type: ignore[arg-type]
        if then is not None and detail.calls.rows:
            self._jump_to(then, detail.calls.rows[0])  # the longest call

    def action_jump(self, to: str) -> None:
        """``g``: the chosen call's (or the row's longest call's) time in the timeline; ``o``: its
        source line (or the chosen source line's) in the source view."""
        focused = self.screen.focused
        if isinstance(focused, SnapshotTable) and focused.has_class("main-table"):
            row = focused.current_row
            if row is not None:
                self.then = to
                self.choose(str(row[0]))
            return
        if isinstance(focused, SnapshotTable) and focused.has_class("calls") and focused.current_row:
            self._jump_to(to, focused.current_row)
        elif isinstance(focused, SnapshotTable) and focused.has_class("lines") and focused.current_row:
            loc = focused.current_row[0]
            if to == "source" and loc:
                self.app.open_source(loc[0], loc[1])  # type: ignore[attr-defined]

    def _jump_to(self, to: str, call: tuple) -> None:
        rank, _, _, _, dur, loc, event_id, start = call
        if to == "time":
            self.app.goto_time(rank, start, start + dur, event_id)  # type: ignore[attr-defined]
        elif loc:
            self.app.open_source(loc[0], loc[1])  # type: ignore[attr-defined]
        else:
            self.app.notify("this call has no source line")

    def action_focus_detail(self, cls: str) -> None:
        table = self.query_one(f".{cls}", SnapshotTable)
        if not self.has_class("-chosen") or table.has_class("-empty"):
            return
        self._make_current(table)
        self.screen.set_focus(table)

    def _make_current(self, table: SnapshotTable) -> None:
        for other in self.query(".detail SnapshotTable"):
            other.remove_class("-current")
        table.add_class("-current")


class OpsPane(ExplorePane):
    noun = "ops"
    related_title = "Kernels"

    def table_of(self, analysis: Analysis) -> TableSnapshot:
        return ops_table(analysis)

    def detail_of(self) -> Callable[[TraceSource, str], Detail]:
        from neuron_explorer.tui.queries import op_detail  # pandas: loaded after the first paint

        return op_detail


class KernelsPane(ExplorePane):
    noun = "kernels"
    related_title = "Launching ops"

    def table_of(self, analysis: Analysis) -> TableSnapshot:
        return kernels_table(analysis)

    def detail_of(self) -> Callable[[TraceSource, str], Detail]:
        from neuron_explorer.tui.queries import kernel_detail

        return kernel_detail
