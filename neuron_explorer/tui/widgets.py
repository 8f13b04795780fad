"""A sortable, filterable table of a snapshot that fits its columns to the terminal.

The layout follows the rules every text output uses (``reports.fit``): numbers are never cut;
when the columns do not fit, headers first take their short labels (the table's subtitle
says what they mean), then the columns marked ``drop`` are left out, highest first (never the
one sorted by), then names and shapes are shortened, in the middle. What is left over goes to
the name column, so a table always fills its width.
"""

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
#: Columns the vertical scrollbar takes inside a table's border.
SCROLLBAR = 2
#: A wrapped column (a finding's title) is laid out as if this wide: the columns that may be
#: left out give way before it wraps.
WRAP_COMFORT = 44


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
        self._labels: dict[str, str] = {}  # column key -> the header shown (full or short)
        self._legend = ""  # what the short headers mean
        self._dropped: list[str] = []  # the columns left out to fit

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
        cut = self._cut_names(widths)
        height = None if any(snap.columns[j].wrap for j, _ in widths) else 1
        for n, i in enumerate(self.shown):
            cells = [
                self._cell(snap.columns[j], cut[j][n] if j in cut else snap.rows[i][j], w, j in cut) for j, w in widths
            ]
            self.add_row(*cells, key=str(i), height=height)
        if 0 < cursor < len(self.shown):
            self.move_cursor(row=cursor)
        self._update_title(len(indices))

    def _header(self, column: Column, width: int) -> Text:
        """The label fit chose (full or short); the sort arrow of the sorted column is never cut."""
        label, arrow = self._labels.get(column.key, column.label), ""
        if column.key == self.sort_key:
            arrow = " ▼" if self.sort_reverse else " ▲"
        room = max(width - len(arrow), 1)
        if len(label) > room:
            label = label[: max(room - 1, 1)] + "…"
        return Text(label + arrow, justify="right" if self._numeric(column.key) else "left")

    def _kind(self, j: int, column: Column) -> str:
        """The column as ``reports.fit`` lays it out: the name, a secondary name, text or a number.
        A wrapped column is text up to ``WRAP_COMFORT`` characters: optional columns give way
        before it wraps."""
        if self._numeric(column.key):
            return "num"
        if column.wrap:
            return "text"
        if j == self._wide_index():
            return "name"
        return "shape" if column.width else "text"

    def _wide_index(self) -> int | None:
        snap = self.snapshot
        assert snap is not None
        return next((j for j, c in enumerate(snap.columns) if c.width and not self._numeric(c.key)), None)

    def _fit(self) -> tuple[tuple[int, int], ...]:
        """(column, width) of the columns shown, laid out by ``reports.fit.fit`` (see the module
        doc) over the first 200 rows shown; the name column then takes what is left."""
        from neuron_explorer.reports import fit as layout

        snap = self.snapshot
        assert snap is not None
        rows = [snap.rows[i] for i in self.shown[:200]]
        total = self.size.width or (self.app.size.width if self.is_attached else 120)
        specs = []
        for j, c in enumerate(snap.columns):
            arrow = " ▼" if c.key == self.sort_key else ""
            specs.append(
                layout.Column(
                    c.label + arrow,
                    self._kind(j, c),
                    short=(c.short + arrow) if c.short else None,
                    meaning=c.label,
                    drop=0 if c.key == self.sort_key else c.drop,
                )
            )
        cells = [
            [
                fmt_value(c, r[j], None, snap.root)[: WRAP_COMFORT if c.wrap else None]
                for j, c in enumerate(snap.columns)
            ]
            for r in rows
        ]
        # (``size`` is inside the border) each cell has one space of padding either side, and
        # the vertical scrollbar takes 2
        fitted = layout.fit(specs, cells, total, gap=lambda n: 2 * n + SCROLLBAR)
        kept = [next(j for j, spec in enumerate(specs) if spec is f) for f in fitted.columns]
        widths = dict(zip(kept, fitted.widths))
        self._labels = {snap.columns[j].key: h.removesuffix(" ▼") for j, h in zip(kept, fitted.headers)}
        self._legend = fitted.legend
        self._dropped = fitted.dropped
        wide = self._wide_index()
        if wide is not None and wide in widths:
            used = sum(w + 2 for w in widths.values()) + SCROLLBAR
            # what is left over (or, for a wrapped column that did not fit, what is missing)
            spare = total - used
            widths[wide] = max(widths[wide] + spare, 12) if snap.columns[wide].wrap else widths[wide] + max(spare, 0)
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
        if self._legend:
            parts.append(self._legend)
        if self._dropped:
            parts.append(f"left out to fit: {', '.join(self._dropped)}")
        self.border_subtitle = " · ".join(parts)

    def _cut_names(self, widths: tuple[tuple[int, int], ...]) -> dict[int, list[str]]:
        """Plain-text name and shape columns (op names, shapes) cut in the middle so that
        different values never read the same (``reports.fit.distinct``); kernels, paths and
        locations have their own shorteners, and wrapped columns are not cut."""
        from neuron_explorer.reports.fit import distinct

        snap = self.snapshot
        assert snap is not None
        from neuron_explorer.reports.names import short_kernel_name

        out = {}
        for j, w in widths:
            c = snap.columns[j]
            if c.unit not in ("", "kernel") or c.wrap or self._kind(j, c) not in ("name", "shape"):
                continue
            values = ["" if snap.rows[i][j] is None else str(snap.rows[i][j]) for i in self.shown]
            if c.unit == "kernel":
                out[j] = distinct(values, w, short_kernel_name)
            elif any(len(v) > w for v in values):
                out[j] = distinct(values, w)
        return out

    def _cell(self, column: Column, value: Any, width: int, shortened: bool = False) -> Text:
        root = self.snapshot.root if self.snapshot else None
        text = value if shortened else fmt_value(column, value, width, root)
        if column.unit and column.unit not in ("path", "loc", "kernel"):
            return Text(text, justify="right")
        if column.wrap:  # (wrapped by hand: a number never parts from its unit)
            from neuron_explorer.tui.format import Prose

            return Prose(text)  # type: ignore[return-value]
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
