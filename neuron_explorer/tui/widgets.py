"""A sortable, filterable table of a snapshot that fits its columns to the terminal."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, OptionList
from textual.widgets.option_list import Option

from neuron_explorer.tui.format import fmt_value
from neuron_explorer.tui.snapshots import Column, TableSnapshot

#: Rows a table shows at most (after filtering); a note says when rows were left out.
MAX_ROWS = 5000
#: Narrowest the wide (name or path) column gets before the number columns give way.
MIN_WIDE = 24
#: Widest a number column gets (a long header is cut rather than crowding the name out).
MAX_NUMBER = 11


class SnapshotTable(DataTable):
    """A ``TableSnapshot`` with filter-as-you-type (on the first column) and sort by column.

    Keys: ``s`` chooses the column to sort by, ``r`` reverses; a click on a header sorts by it,
    and the sorted column's header carries ▼ or ▲. The first text column with a width (the
    name or path) takes the width the number columns leave, so a narrow terminal cuts names
    (paths from the left), never the numbers. Row keys are indices into the snapshot's rows,
    so selection maps back to raw values.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "choose_sort", "Sort", tooltip="choose the column to sort by (or click a column header)"),
        Binding("r", "reverse_sort", "Reverse", tooltip="reverse the order"),
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
        # (column index, width) of the columns shown: narrow terminals leave some out
        self._widths: tuple[tuple[int, int], ...] = ()

    def show(self, snapshot: TableSnapshot) -> None:
        if self.snapshot is None or self.snapshot.columns != snapshot.columns:
            self.sort_key = None
        self.snapshot = snapshot
        self._widths = ()
        self._refill()

    def set_filter(self, text: str) -> None:
        self.filter_text = text.strip().lower()
        self._refill()

    def sort_by(self, key: str, reverse: bool | None = None) -> None:
        if reverse is None:
            # Same column again flips the order; a new column starts largest (or A) first.
            reverse = not self.sort_reverse if key == self.sort_key else self._numeric(key)
        self.sort_key, self.sort_reverse = key, reverse
        self._widths = ()  # the header label changes
        self._refill()

    def action_choose_sort(self) -> None:
        if not self.snapshot or not self.snapshot.columns:
            return
        self.app.push_screen(SortChooser(self.snapshot.columns, self.sort_key), self._sort_chosen)

    def _sort_chosen(self, key: str | None) -> None:
        if key is not None:
            self.sort_by(key, self._numeric(key) if key != self.sort_key else not self.sort_reverse)

    def action_reverse_sort(self) -> None:
        if self.sort_key is not None:
            self.sort_by(self.sort_key, not self.sort_reverse)

    def _numeric(self, key: str) -> bool:
        assert self.snapshot is not None
        return self.snapshot.columns[self.snapshot.column_index(key)].unit not in ("", "path", "loc", "kernel")

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(str(event.column_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.row_values(int(str(event.row_key.value)))
        if row is not None:
            self.post_message(self.Chosen(self, row))

    def on_resize(self, event: Resize) -> None:
        if self.snapshot is not None and self._fit() != self._widths:
            self._refill()

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
        if self.filter_text and snap.columns:
            needle, first = self.filter_text, snap.columns[0]
            indices = [i for i in indices if needle in snap.text_of(first, snap.rows[i][0]).lower()]
        if self.sort_key is not None:
            col = snap.column_index(self.sort_key)
            column = snap.columns[col]
            numeric = self._numeric(self.sort_key)

            def key(i: int) -> Any:
                v = snap.rows[i][col]
                if numeric:
                    return (v is not None, v if v is not None else 0)
                return snap.text_of(column, v).lower()

            indices.sort(key=key, reverse=self.sort_reverse)
        self.shown = indices[:MAX_ROWS]
        widths = self._fit()
        cursor = self.cursor_row
        if widths != self._widths:
            self.clear(columns=True)
            for j, w in widths:
                c = snap.columns[j]
                self.add_column(self._header(c, w), key=c.key, width=w)
            self._widths = widths
        else:
            self.clear()
        for i in self.shown:
            self.add_row(*[self._cell(snap.columns[j], snap.rows[i][j], w) for j, w in widths], key=str(i))
        if 0 < cursor < len(self.shown):
            self.move_cursor(row=cursor)
        self._update_title(len(indices))

    def _header(self, column: Column, width: int) -> Text:
        """The label, cut to fit; the sort arrow of the sorted column is never cut."""
        label, arrow = column.label, ""
        if column.key == self.sort_key:
            arrow = " ▼" if self.sort_reverse else " ▲"
        room = max(width - len(arrow), 1)
        if len(label) > room:
            label = label[: max(room - 1, 1)] + "…"
        return Text(label + arrow, justify="right" if self._numeric(column.key) else "left")

    def _fit(self) -> tuple[tuple[int, int], ...]:
        """(column, width) of the columns shown: numbers as wide as their values, the wide
        column the rest; when that leaves it under ``MIN_WIDE``, the columns marked ``drop``
        are left out, highest first."""
        snap = self.snapshot
        assert snap is not None
        rows = [snap.rows[i] for i in self.shown[:200]]
        widths = {}
        for j, c in enumerate(snap.columns):
            longest = max((len(fmt_value(c, r[j], None, snap.root)) for r in rows), default=0)
            arrow = 2 if c.key == self.sort_key else 0
            if self._numeric(c.key):
                widths[j] = max(min(len(c.label), MAX_NUMBER) + arrow, longest)
            else:
                widths[j] = max(len(c.label) + arrow, min(longest, c.width or 40))
        wide = next((j for j, c in enumerate(snap.columns) if c.width and not self._numeric(c.key)), None)
        if wide is None:
            return tuple(widths.items())
        total = self.size.width or (self.app.size.width if self.is_attached else 120)
        droppable = sorted((c.drop, j) for j, c in enumerate(snap.columns) if c.drop and c.key != self.sort_key)

        def room() -> int:
            # each cell has one space of padding either side; the border and scrollbar take 3
            return total - sum(w + 2 for j, w in widths.items() if j != wide) - 2 - 3

        while room() < MIN_WIDE and droppable:
            del widths[droppable.pop()[1]]
        widths[wide] = max(room(), MIN_WIDE)
        return tuple(sorted(widths.items()))

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

    def _cell(self, column: Column, value: Any, width: int) -> Text:
        root = self.snapshot.root if self.snapshot else None
        text = fmt_value(column, value, width, root)
        if column.unit and column.unit not in ("path", "loc", "kernel"):
            return Text(text, justify="right")
        return Text(text, overflow="ellipsis", no_wrap=True)


class SortChooser(ModalScreen[str | None]):
    """Pick the column a table sorts by (``s``); the current one is highlighted."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,s", "dismiss(None)", "Cancel", tooltip="enter picks the column")
    ]

    def __init__(self, columns: tuple[Column, ...], current: str | None) -> None:
        super().__init__()
        self.columns = columns
        self.current = current

    def compose(self) -> Any:
        options = OptionList(*[Option(c.label, id=c.key) for c in self.columns], id="sort-chooser")
        options.border_title = "Sort by (enter)"
        yield options

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        keys = [c.key for c in self.columns]
        if self.current in keys:
            options.highlighted = keys.index(self.current)
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
