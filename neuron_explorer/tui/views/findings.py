"""The Findings view: every finding, most costly first, and the evidence of the selected one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Input, Static

from neuron_explorer.reports.fixes import cost_phrase
from neuron_explorer.reports.location import FUNCTION_LEVEL_HINT, Locations
from neuron_explorer.trace.units import format_line_value
from neuron_explorer.tui.format import Phrases, Prose, fmt_metric, fmt_ns
from neuron_explorer.tui.snapshots import Column, TableSnapshot
from neuron_explorer.tui.views.overview import SEVERITY_STYLE
from neuron_explorer.tui.widgets import SnapshotTable

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis, Finding

#: The title wraps rather than being cut; on a narrow terminal the rule id (also in the detail)
#: is left out first.
FINDING_COLUMNS = (
    Column("title", "Finding", width=34, wrap=True),
    Column("severity", "Severity", short="sev"),
    Column("cost_ns", "Cost", "ns"),
    Column("rule_id", "Rule", width=20, drop=1),
)
#: Source lines and time ranges listed in a finding's detail.
MAX_LISTED = 10
#: Widest a location in the detail gets (it fits the detail pane at 80 columns).
LINE_CHARS = 36


class FindingsPane(Horizontal):
    """The findings; ``g`` shows the selected one's first time range in the timeline, ``o``
    its first source line in the source view."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "leave_filter", "Back to the table", show=False, tooltip="from the filter"),
        Binding("g", "goto_time", "Go to time", tooltip="the finding's first time range, in the timeline"),
        Binding("o", "open_source", "Open line", tooltip="the first source line the finding blames"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.findings: list[Finding] = []
        self.origin_ns = 0
        self.where: Locations | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="findings-list"):
            yield Input(placeholder="filter findings  ( / )", id="findings-filter", classes="filter", compact=True)
            yield SnapshotTable(id="findings-table")
        with VerticalScroll(id="findings-detail", classes="panel"):
            yield Static("analyzing…", id="findings-detail-body")

    def on_mount(self) -> None:
        self.query_one("#findings-detail").border_title = "Detail"
        self.query_one(SnapshotTable).border_title = "Findings"

    def show_analysis(self, analysis: Analysis, origin_ns: int) -> None:
        self.findings = list(analysis.findings)
        self.origin_ns = origin_ns
        self.where = Locations.for_analysis(analysis)
        rows = tuple((f.title, f.severity, f.cost_ns, f.rule_id, i) for i, f in enumerate(self.findings))
        table = self.query_one(SnapshotTable)
        table.show(TableSnapshot(FINDING_COLUMNS, rows, note=_skipped_note(analysis)))
        body = self.query_one("#findings-detail-body", Static)
        if self.findings:
            self.show_finding(0)
        else:
            body.update(Text("No rule fired on this trace.", style="green"))

    def show_analysis_error(self, message: str) -> None:
        self.query_one("#findings-detail-body", Static).update(Text(f"analysis unavailable: {message}", style="red"))

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one(SnapshotTable).set_filter(event.value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.show_finding(int(event.row_key.value))

    def on_snapshot_table_chosen(self, event: SnapshotTable.Chosen) -> None:
        self.query_one("#findings-detail").focus()

    def show_finding(self, index: int) -> None:
        if 0 <= index < len(self.findings):
            self.query_one("#findings-detail-body", Static).update(
                finding_renderable(self.findings[index], self.origin_ns, self.where)
            )

    def action_leave_filter(self) -> None:
        self.screen.set_focus(self.query_one(SnapshotTable))

    def _selected(self) -> Finding | None:
        row = self.query_one(SnapshotTable).current_row
        return self.findings[row[4]] if row is not None and 0 <= row[4] < len(self.findings) else None

    def action_goto_time(self) -> None:
        f = self._selected()
        if f is None or not f.time_ranges:
            self.app.notify("this finding names no time range")
            return
        start, end = f.time_ranges[0]
        event_id = f.event_ids[0] if f.event_ids else None
        self.app.goto_time(f.rank, start, end, event_id)  # type: ignore[attr-defined]

    def action_open_source(self) -> None:
        f = self._selected()
        if f is None or not f.source_lines:
            self.app.notify("this finding names no source line")
            return
        self.app.open_source(f.source_lines[0].get("file"), f.source_lines[0].get("line"))  # type: ignore[attr-defined]

    def focus_filter(self) -> None:
        self.screen.set_focus(self.query_one("#findings-filter", Input))  # now: the next keys are typed into it


def _skipped_note(analysis: Analysis) -> str:
    skipped = list(getattr(analysis, "skipped", []) or [])
    return f"{len(skipped)} rules skipped" if skipped else ""


def finding_renderable(f: Finding, origin_ns: int = 0, where: Locations | None = None) -> Group:
    """A finding's full evidence: message, numbers vs thresholds, lines, time ranges, fix."""
    # (Prose: wrapped so that a figure never parts from its unit)
    parts: list[Any] = [
        Prose(Text.assemble((f"{f.severity.upper()}  ", SEVERITY_STYLE.get(f.severity, "")), (f.title, "bold"))),
        Prose(
            Text(
                f"{f.rule_id} · {cost_phrase(f).strip(' ()') or 'no cost'}"
                + (f" · rank {f.rank}" if f.rank is not None else ""),
                style="dim",
            )
        ),
        Text(""),
        Prose(f.message),
    ]
    if f.metrics:
        numbers = Table(title="Evidence", title_justify="left", box=None, header_style="bold")
        numbers.add_column("Metric")
        numbers.add_column("Value", justify="right")
        numbers.add_column("Threshold", justify="right")
        for name, m in f.metrics.items():
            th = f.threshold.get(name)
            numbers.add_row(name, fmt_metric(m), fmt_metric(th) if th else "")
        for name, th in f.threshold.items():
            if name not in f.metrics:
                numbers.add_row(name, "", fmt_metric(th))
        parts += [Text(""), numbers]
    if f.source_lines:
        lines = Table(title="Source lines", title_justify="left", box=None, header_style="bold")
        # the line column must not wrap: a location is cut from the left by its own rules
        lines.add_column("Line", no_wrap=True, overflow="ignore", ratio=1)
        lines.add_column("Value", justify="right", no_wrap=True)
        where = where or Locations()
        for sl in f.source_lines[:MAX_LISTED]:
            lines.add_row(where.finding_line(sl, LINE_CHARS), format_line_value(sl))
        parts += [Text(""), lines]
        if any(where.is_function_level(sl.get("file"), sl.get("line")) for sl in f.source_lines[:MAX_LISTED]):
            parts.append(Text(FUNCTION_LEVEL_HINT, style="dim"))
    if f.time_ranges:
        shown = [f"+{fmt_ns(s - origin_ns)}…+{fmt_ns(e - origin_ns)}" for s, e in f.time_ranges[:MAX_LISTED]]
        if len(f.time_ranges) > MAX_LISTED:
            shown.append(f"(+{len(f.time_ranges) - MAX_LISTED} more)")
        parts += [Text(""), Phrases(shown, sep=", ", head="When: ")]
    if f.event_ids:
        parts.append(
            Text.assemble(("Events: ", "bold"), f"{len(f.event_ids):,} (ids {', '.join(map(str, f.event_ids[:5]))}…)")
        )
    if f.recommendation:
        parts += [Text(""), Text("Fix", style="bold green"), Prose(f.recommendation)]
    return Group(*parts)
