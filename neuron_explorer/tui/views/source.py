"""The Source view: files ranked by time, and one file with a per-line gutter of its time.

A file readable on this machine shows its text with host and device time beside each line;
one that is not (recorded elsewhere) shows the table of its attributed lines instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from neuron_explorer.tui.format import fmt_ns
from neuron_explorer.tui.snapshots import SourceFile
from neuron_explorer.tui.tables import files_table, source_file
from neuron_explorer.tui.widgets import SnapshotTable

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis


class SourcePane(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "escape",
            "leave_filter",
            "Back to the table",
            show=False,
            tooltip="from the filter; enter on a file opens it",
        )
    ]

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter files  ( / )", classes="filter", compact=True)
        yield SnapshotTable(id="files-table")
        yield Static("analyzing…", id="source-hint")

    def on_mount(self) -> None:
        self.query_one(SnapshotTable).border_title = "Source files by time"

    def show_analysis(self, analysis: Analysis) -> None:
        table = files_table(analysis)
        self.query_one(SnapshotTable).show(table)
        hint = "enter (or click) opens a file" if table.rows else "no events carry source lines in this trace"
        self.query_one("#source-hint", Static).update(Text(hint, style="dim"))

    def show_analysis_error(self, message: str) -> None:
        self.query_one("#source-hint", Static).update(Text(f"analysis unavailable: {message}", style="red"))

    def action_leave_filter(self) -> None:
        self.screen.set_focus(self.query_one(SnapshotTable))

    def focus_filter(self) -> None:
        self.screen.set_focus(self.query_one(Input))  # now: the next keys are typed into it

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one(SnapshotTable).set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(SnapshotTable).focus()

    def on_snapshot_table_chosen(self, event: SnapshotTable.Chosen) -> None:
        self.app.push_screen(SourceFileScreen(str(event.row[0])))


class SourceFileScreen(Screen):
    """One source file; escape goes back to the list."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", tooltip="close the file (the file view)")
    ]

    def __init__(self, path: str, line: int | None = None) -> None:
        super().__init__()
        self.path = path
        self.line = line  # the line to put the cursor on (else the hottest)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(self._label(), style="bold"), id="file-path")
        yield DataTable(id="file-lines", cursor_type="row", zebra_stripes=False)
        yield Footer()

    def on_mount(self) -> None:
        self.load_file()

    def _label(self) -> str:
        """The file as every output shows it, fitting half the width (the rest says where it was read)."""
        from neuron_explorer.reports.location import Locations
        from neuron_explorer.tui.tables import location_root

        root = location_root(self.app.source.analysis_ready)  # type: ignore[attr-defined]
        return Locations(root).format(self.path, self.line, width=max(self.app.size.width // 2, 24))

    @work(thread=True, exclusive=True, group="file")
    def load_file(self) -> None:
        app = self.app
        sf = source_file(app.source.analysis(), self.path, app.search_dirs)  # type: ignore[attr-defined]
        app.call_from_thread(self.show_file, sf)

    def show_file(self, sf: SourceFile) -> None:
        table = self.query_one("#file-lines", DataTable)
        table.clear(columns=True)
        cols = sf.lines.columns
        idx = {c.key: i for i, c in enumerate(cols)}
        if sf.resolved is not None:
            self.query_one("#file-path", Static).update(
                Text.assemble((self._label(), "bold"), (f"   read from {_shown(sf.resolved)}", "dim"))
            )
            by_line = {row[idx["src_line"]]: row for row in sf.lines.rows}
            table.add_column("Host", key="host", width=9)
            table.add_column("Device", key="device", width=9)
            table.add_column("Line", key="line", width=5)
            table.add_column("Code", key="code")
            hottest = (
                max((r[idx["host_ns"]] or 0) + (r[idx["device_ns"]] or 0) for r in sf.lines.rows)
                if sf.lines.rows
                else 0
            )
            for n, code in enumerate(sf.text_lines, start=1):
                row = by_line.get(n)
                host = row[idx["host_ns"]] if row else None
                dev = row[idx["device_ns"]] if row else None
                heat = ((host or 0) + (dev or 0)) / hottest if hottest else 0
                style = "bold red" if heat > 0.5 else "yellow" if heat > 0.1 else ""
                table.add_row(
                    Text(fmt_ns(host) if host else "", justify="right", style=style),
                    Text(fmt_ns(dev) if dev else "", justify="right", style=style),
                    Text(str(n), justify="right", style="dim"),
                    Text(code.expandtabs(4), no_wrap=True),
                    key=str(n),
                )
            hot = max(
                by_line,
                key=lambda k: (by_line[k][idx["host_ns"]] or 0) + (by_line[k][idx["device_ns"]] or 0),
                default=None,
            )
            target = self.line if self.line is not None else hot
            if target is not None and 1 <= target <= len(sf.text_lines):
                table.move_cursor(row=target - 1)
        else:
            self.query_one("#file-path", Static).update(
                Text.assemble((self._label(), "bold"), ("   not readable on this machine: its attributed lines", "dim"))
            )
            for c in cols:
                table.add_column(c.label, key=c.key)
            for row in sf.lines.rows:
                table.add_row(*[_cell(c.unit, v) for c, v in zip(cols, row)])
            line_at = [r[idx["src_line"]] for r in sf.lines.rows]
            if self.line in line_at:
                table.move_cursor(row=line_at.index(self.line))
        table.focus()


def _shown(path: str) -> str:
    """A path relative to the current directory when it is below it (shorter, and the same on every checkout)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _cell(unit: str, value: object) -> Text:
    if value is None:
        return Text("")
    if unit == "ns":
        return Text(fmt_ns(value), justify="right")  # type: ignore[arg-type]
    return Text(str(value), justify="right" if unit else "left")
