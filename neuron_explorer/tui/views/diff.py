"""The diff view: two traces compared (``neuron-explorer diff BASE NEW --tui``).

A small app of its own, handed the finished ``DiffView`` (the same rows the text, markdown and
HTML renderers show): the headline, the answer and the gate on top, then one tab per table
(step time and categories, and each table's slower and faster items). The diff is computed
before the app starts, so a bad input is one line of error, not a broken terminal.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Header, Static, TabbedContent, TabPane

from neuron_explorer.reports.diff.view import DiffView


def _summary(view: DiffView) -> str:
    from rich.markup import escape

    lines = [f"[b]{escape(view.headline)}[/b]", ""]
    if view.answer:
        lines.append("What got slower:")
        lines += [f"  {escape(a)}" for a in view.answer]
    else:
        lines.append("No op, kernel or collective got confidently slower.")
    if view.gate:
        verdict = "[red]regression gate failed[/red]" if view.gate_failed else "[green]regression gate passed[/green]"
        lines += ["", verdict, *(f"  {escape(g)}" for g in view.gate)]
    if view.notes:
        lines += ["", *(f"[dim]{escape(n)}[/dim]" for n in view.notes)]
    return "\n".join(lines)


class DiffApp(App[None]):
    """Browse a diff: the answer, then a tab per table (1-9 or tab to switch, q to quit)."""

    TITLE = "Neuron Explorer diff"
    CSS = """
    #diff-summary { height: auto; max-height: 50%; padding: 0 1; border: round $primary; }
    DataTable { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        Binding("tab", "next_tab(1)", "Next table", priority=True),
        Binding("shift+tab", "next_tab(-1)", "Prev table", show=False, priority=True),
        *[Binding(str(i), f"tab({i - 1})", show=False) for i in range(1, 10)],
    ]

    def __init__(self, view: DiffView) -> None:
        super().__init__()
        self.view = view
        self.sub_title = view.title

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static(_summary(self.view), id="diff-summary")
            with TabbedContent(id="diff-tabs"):
                for i, section in enumerate(self.view.sections):
                    with TabPane(section.title, id=f"diff-tab-{i}"):
                        yield DataTable(id=f"diff-table-{i}", zebra_stripes=True, cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        for i, section in enumerate(self.view.sections):
            table = self.query_one(f"#diff-table-{i}", DataTable)
            table.add_columns(*section.columns)
            table.add_rows(section.rows)  # plain strings: never parsed as markup

    def _tab_ids(self) -> list[str]:
        return [f"diff-tab-{i}" for i in range(len(self.view.sections))]

    def action_tab(self, index: int) -> None:
        ids = self._tab_ids()
        if 0 <= index < len(ids):
            self.query_one(TabbedContent).active = ids[index]

    def action_next_tab(self, step: int) -> None:
        ids = self._tab_ids()
        if ids:
            tabs = self.query_one(TabbedContent)
            current = ids.index(tabs.active) if tabs.active in ids else 0
            tabs.active = ids[(current + step) % len(ids)]
