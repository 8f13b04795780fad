"""Widgets that draw snapshots: a sortable, filterable table and the text-mode timeline."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import DataTable

from neuron_explorer.tui.format import fmt_ns, fmt_value
from neuron_explorer.tui.snapshots import Column, TableSnapshot, Timeline
from neuron_explorer.tui.timeline import render_cells

#: Rows a table shows at most (after filtering); a note says when rows were left out.
MAX_ROWS = 5000


class SnapshotTable(DataTable):
    """A ``TableSnapshot`` with filter-as-you-type (on the first column) and sort by column.

    Keys: ``s`` sorts by the next column, ``r`` reverses; a click on a header sorts by it.
    Row keys are indices into the snapshot's rows, so selection maps back to raw values.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "cycle_sort", "Sort"),
        Binding("r", "reverse_sort", "Reverse"),
    ]

    class Chosen(Message):
        """A row was chosen (enter or click): its raw values."""

        def __init__(self, table: SnapshotTable, row: tuple[Any, ...]) -> None:
            super().__init__()
            self.table = table
            self.row = row

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self.snapshot: TableSnapshot | None = None
        self.filter_text = ""
        self.sort_key: str | None = None
        self.sort_reverse = True
        self.shown: list[int] = []

    def show(self, snapshot: TableSnapshot) -> None:
        first = self.snapshot is None or self.snapshot.columns != snapshot.columns
        self.snapshot = snapshot
        if first:
            self.clear(columns=True)
            for c in snapshot.columns:
                self.add_column(c.label, key=c.key, width=c.width)
            self.sort_key = None
        self._refill()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._refill()

    def sort_by(self, key: str, reverse: bool | None = None) -> None:
        if reverse is None:
            # Same column again flips the order; a new column starts largest (or A) first.
            reverse = not self.sort_reverse if key == self.sort_key else self._numeric(key)
        self.sort_key, self.sort_reverse = key, reverse
        self._refill()

    def action_cycle_sort(self) -> None:
        if not self.snapshot or not self.snapshot.columns:
            return
        keys = [c.key for c in self.snapshot.columns]
        nxt = keys[(keys.index(self.sort_key) + 1) % len(keys)] if self.sort_key in keys else keys[0]
        self.sort_by(nxt, self._numeric(nxt))

    def action_reverse_sort(self) -> None:
        if self.sort_key is not None:
            self.sort_by(self.sort_key, not self.sort_reverse)

    def _numeric(self, key: str) -> bool:
        assert self.snapshot is not None
        return self.snapshot.columns[self.snapshot.column_index(key)].unit != ""

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.row_values(int(str(event.row_key.value)))
        if row is not None:
            self.post_message(self.Chosen(self, row))

    def row_values(self, index: int) -> tuple[Any, ...] | None:
        if self.snapshot is None or not 0 <= index < len(self.snapshot.rows):
            return None
        return self.snapshot.rows[index]

    @property
    def current_row(self) -> tuple[Any, ...] | None:
        if not self.shown or self.cursor_row < 0 or self.cursor_row >= len(self.shown):
            return None
        return self.row_values(self.shown[self.cursor_row])

    def _refill(self) -> None:
        snap = self.snapshot
        if snap is None:
            return
        indices = list(range(len(snap.rows)))
        if self.filter_text:
            needle = self.filter_text
            indices = [i for i in indices if needle in str(snap.rows[i][0]).lower()]
        if self.sort_key is not None:
            col = snap.column_index(self.sort_key)
            numeric = self._numeric(self.sort_key)

            def key(i: int) -> Any:
                v = snap.rows[i][col]
                if numeric:
                    return (v is not None, v if v is not None else 0)
                return str(v or "").lower()

            indices.sort(key=key, reverse=self.sort_reverse)
        self.shown = indices[:MAX_ROWS]
        self.clear()
        cols = snap.columns
        for i in self.shown:
            self.add_row(*[self._cell(c, snap.rows[i][j]) for j, c in enumerate(cols)], key=str(i))
        self._update_title(len(indices))

    def _update_title(self, matched: int) -> None:
        snap = self.snapshot
        assert snap is not None
        total = len(snap.rows)
        parts = [f"{matched:,} of {total:,}" if self.filter_text else f"{total:,}"]
        if matched > MAX_ROWS:
            parts.append(f"first {MAX_ROWS:,} shown")
        if self.sort_key is not None:
            label = snap.columns[snap.column_index(self.sort_key)].label
            parts.append(f"sorted by {label} {'▼' if self.sort_reverse else '▲'}")
        if snap.note:
            parts.append(snap.note)
        self.border_subtitle = " · ".join(parts)

    @staticmethod
    def _cell(column: Column, value: Any) -> Text:
        text = fmt_value(column, value)
        return Text(text, justify="right") if column.unit else Text(text, overflow="ellipsis", no_wrap=True)


#: Colors of the kinds drawn in timeline lanes (also the legend).
KIND_STYLE: dict[str, str] = {
    "cpu_op": "dodger_blue2",
    "runtime": "cyan",
    "sync": "grey70",
    "kernel": "green3",
    "collective": "magenta",
    "memcpy": "yellow",
    "memset": "light_salmon3",
}
LABEL_WIDTH = 24


class TimelineView(Widget, can_focus=True):
    """A step's lanes as shaded character cells; zoom with + and -, pan with the arrow keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "zoom(2)", "Zoom in"),
        Binding("minus", "zoom(0.5)", "Zoom out"),
        Binding("left", "pan(-0.25)", "Pan left", show=False),
        Binding("right", "pan(0.25)", "Pan right", show=False),
        Binding("0", "reset", "Reset zoom", show=False),
    ]

    zoom: reactive[float] = reactive(1.0)
    center: reactive[float] = reactive(0.5)  # view centre as a fraction of the step window

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeline: Timeline | None = None

    def show(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.zoom, self.center = 1.0, 0.5
        self.refresh(layout=True)

    def window(self) -> tuple[int, int]:
        t = self.timeline
        assert t is not None
        span = t.end_ns - t.start_ns
        # Offsets from the step start in whole ns, so the ruler never reads "+-96 ns".
        lo = t.start_ns + max(round((self.center - 0.5 / self.zoom) * span), 0)
        hi = t.start_ns + min(round((self.center + 0.5 / self.zoom) * span), span)
        return lo, max(hi, lo + 1)

    def action_zoom(self, factor: float) -> None:
        self.zoom = min(max(self.zoom * factor, 1.0), 1e6)
        self._clamp()

    def action_pan(self, fraction: float) -> None:
        self.center += fraction / self.zoom
        self._clamp()

    def action_reset(self) -> None:
        self.zoom, self.center = 1.0, 0.5

    def _clamp(self) -> None:
        half = 0.5 / self.zoom
        self.center = min(max(self.center, half), 1 - half)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return 3 + (len(self.timeline.lanes) if self.timeline else 1)

    def render(self) -> Text:
        t = self.timeline
        if t is None:
            return Text("loading the timeline…", style="dim")
        if not t.lanes:
            return Text("no host ops or device work in this step", style="dim")
        width = max(self.size.width - LABEL_WIDTH - 1, 10)
        lo, hi = self.window()
        out = Text()
        ruler_left, ruler_right = f"+{fmt_ns(lo - t.start_ns)}", f"+{fmt_ns(hi - t.start_ns)}"
        gap = max(width - len(ruler_left) - len(ruler_right), 1)
        out.append(" " * LABEL_WIDTH + " " + ruler_left + " " * gap + ruler_right + "\n", style="dim")
        for lane in t.lanes:
            out.append(lane.label[:LABEL_WIDTH].ljust(LABEL_WIDTH) + " ", style="bold" if lane.group == "host" else "")
            for ch, kind in render_cells(lane, lo, hi, width):
                out.append(ch, style=KIND_STYLE.get(kind, ""))
            out.append("\n")
        out.append(" " * LABEL_WIDTH + " ")
        for kind, style in KIND_STYLE.items():
            out.append("█ ", style=style)
            out.append(kind + "  ", style="dim")
        out.append(f"   zoom ×{self.zoom:g}", style="dim")
        return out
