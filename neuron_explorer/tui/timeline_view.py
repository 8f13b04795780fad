"""The text-mode timeline widget: a step's lanes as shaded cells, zoomed and panned by key.

When the lanes do not all fit (a short terminal: the event list below keeps its rows), the
widget shows as many as fit and ``↑``/``↓`` scroll them; its subtitle says which are shown.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from neuron_explorer.reports.colors import kind_color, part_color
from neuron_explorer.tui.format import fmt_ns
from neuron_explorer.tui.snapshots import Lane, Timeline, TimelineEvent
from neuron_explorer.tui.timeline import DATA_LOADING, PYTHON, render_cells

#: Colors of the kinds drawn in timeline lanes (also the legend): the report's, defined once.
KIND_STYLE: dict[str, str] = {
    **{k: kind_color(k) for k in ("cpu_op", "runtime", "sync", "kernel", "collective", "memcpy", "memset")},
    DATA_LOADING: part_color("data_loading_ns"),
    PYTHON: part_color("host_python_ns"),
}
#: How the legend names a kind (the sub-lanes' are attribution categories, not event kinds).
KIND_LABEL: dict[str, str] = {DATA_LOADING: "data loading", PYTHON: "Python (outside ops)"}
#: The widest a lane's label gets; narrower when every label is shorter.
LABEL_WIDTH = 24


class TimelineView(Widget, can_focus=True):
    """A step's lanes as shaded character cells; zoom with + and -, pan with the arrow keys.

    The selected event is drawn in reverse video in its lane; every change of the visible
    window posts ``WindowChanged`` so the event list below can follow it.
    """

    class WindowChanged(Message):
        def __init__(self, start_ns: int, end_ns: int) -> None:
            super().__init__()
            self.start_ns = start_ns
            self.end_ns = end_ns

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus,equals_sign", "zoom(2)", "Zoom in"),
        Binding("minus", "zoom(0.5)", "Zoom out"),
        Binding("left", "pan(-0.25)", "Pan left", show=False),
        Binding("right", "pan(0.25)", "Pan right", show=False),
        Binding("0", "reset", "Reset zoom", show=False),
        Binding("up", "scroll_lanes(-1)", "Scroll the lanes", show=False, tooltip="when not all of them fit"),
        Binding("down", "scroll_lanes(1)", "Scroll the lanes", show=False, tooltip="when not all of them fit"),
    ]

    zoom: reactive[float] = reactive(1.0)
    center: reactive[float] = reactive(0.5)  # view centre as a fraction of the step window
    lane_offset: reactive[int] = reactive(0)  # the first lane shown when not all fit

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeline: Timeline | None = None
        self.selected: TimelineEvent | None = None

    def show(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.selected = None
        self.zoom, self.center = 1.0, 0.5
        self.lane_offset = 0
        self.refresh(layout=True)
        self._announce()

    def select(self, event: TimelineEvent | None, frame: bool = True) -> None:
        """Mark ``event``; with ``frame``, zoom so it spans about a third of the view, centred."""
        self.selected = event
        t = self.timeline
        if event is not None and t is not None:
            self._reveal(event.lane)
        if event is not None and t is not None and frame:
            span = max(t.end_ns - t.start_ns, 1)
            self.zoom = min(max(span / max(3 * event.dur_ns, 1), 1.0), 1e6)
            self.center = ((event.start_ns + event.end_ns) / 2 - t.start_ns) / span
            self._clamp()
        self.refresh()

    def show_range(self, start_ns: int, end_ns: int) -> None:
        """Zoom to ``[start_ns, end_ns)`` (a finding's time range, a call)."""
        t = self.timeline
        if t is None:
            return
        span = max(t.end_ns - t.start_ns, 1)
        self.zoom = min(max(span / max(1.5 * (end_ns - start_ns), 1), 1.0), 1e6)
        self.center = ((start_ns + end_ns) / 2 - t.start_ns) / span
        self._clamp()

    def watch_zoom(self) -> None:
        self._subtitle()
        self._announce()

    def watch_lane_offset(self) -> None:
        self._subtitle()

    def on_resize(self) -> None:
        self.lane_offset = self.lane_offset  # (clamped by the validator for the new height)
        self._subtitle()

    def _subtitle(self) -> None:
        shown = self.lanes_shown()
        total = len(self.timeline.lanes) if self.timeline else 0
        parts = [f"zoom ×{self.zoom:.3g}"]
        if total and len(shown) < total:
            first = self.lane_offset + 1
            parts.insert(0, f"lanes {first}-{first + len(shown) - 1} of {total} (↑↓)")
        self.border_subtitle = " · ".join(parts)

    def watch_center(self) -> None:
        self._announce()

    def _announce(self) -> None:
        if self.timeline is not None:
            lo, hi = self.window()
            self.post_message(self.WindowChanged(lo, hi))

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

    def action_scroll_lanes(self, delta: int) -> None:
        self.lane_offset += delta

    def validate_lane_offset(self, offset: int) -> int:
        total = len(self.timeline.lanes) if self.timeline else 0
        return max(0, min(offset, total - self.lane_rows()))

    def lane_rows(self) -> int:
        """How many lanes fit: the height less the ruler and the legend (all before layout)."""
        t = self.timeline
        if t is None:
            return 0
        if not self.size.height:
            return len(t.lanes)
        return max(self.size.height - 1 - len(self._legend_lines(t)), 1)

    def lanes_shown(self) -> tuple[Lane, ...]:
        t = self.timeline
        if t is None:
            return ()
        rows = self.lane_rows()
        return t.lanes[self.lane_offset : self.lane_offset + rows]

    def _reveal(self, label: str) -> None:
        """Scroll the lanes so the one called ``label`` (or holding it) shows."""
        t = self.timeline
        assert t is not None
        index = next((i for i, lane in enumerate(t.lanes) if lane.label == label), None)
        if index is None:
            return
        rows = self.lane_rows()
        if index < self.lane_offset:
            self.lane_offset = index
        elif index >= self.lane_offset + rows:
            self.lane_offset = index - rows + 1

    def _clamp(self) -> None:
        half = 0.5 / self.zoom
        self.center = min(max(self.center, half), 1 - half)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        t = self.timeline
        if t is None or not t.lanes:
            return 1
        return 1 + len(t.lanes) + len(self._legend_lines(t, width))

    def _label_width(self, t: Timeline) -> int:
        return min(max((len(self._label(lane)) for lane in t.lanes), default=8), LABEL_WIDTH)

    @staticmethod
    def _label(lane: Lane) -> str:
        return f" └ {lane.sub}" if lane.sub else lane.label

    def _legend_lines(self, t: Timeline, width: int | None = None) -> list[Text]:
        """The legend (the kinds present), wrapped to ``width`` (the widget's own by default)."""
        width = width or self.size.width or 80
        present = {k for lane in t.lanes for k in lane.intervals}
        lines = [Text("legend ", style="dim")]
        for kind, style in KIND_STYLE.items():
            if kind not in present:
                continue
            item = Text.assemble(("█ ", style), (KIND_LABEL.get(kind, kind) + "  ", "dim"))
            if lines[-1].cell_len + item.cell_len > width and lines[-1].cell_len > 7:
                lines.append(Text(" " * 7))
            lines[-1].append_text(item)
        return lines

    def render(self) -> Text:
        t = self.timeline
        if t is None:
            return Text("loading the timeline…", style="dim")
        if not t.lanes:
            return Text("no host ops or device work in this step", style="dim")
        label_width = self._label_width(t)
        width = max(self.size.width - label_width - 1, 10)
        lo, hi = self.window()
        out = Text()
        ruler_left, ruler_right = f"+{fmt_ns(lo - t.start_ns)}", f"+{fmt_ns(hi - t.start_ns)}"
        gap = max(width - len(ruler_left) - len(ruler_right), 1)
        out.append(" " * label_width + " " + ruler_left + " " * gap + ruler_right + "\n", style="dim")
        sel = self.selected
        edges = (
            (int((sel.start_ns - lo) * width // max(hi - lo, 1)), int((sel.end_ns - lo) * width // max(hi - lo, 1)))
            if sel is not None
            else (0, -1)
        )
        for lane in self.lanes_shown():
            label = self._label(lane)
            if len(label) > label_width:
                label = label[: label_width - 1] + "…"
            style = "bold" if lane.group == "host" and not lane.sub else ("dim" if lane.sub else "")
            out.append(label.ljust(label_width) + " ", style=style)
            marked = sel is not None and sel.lane == lane.label
            for i, (ch, kind) in enumerate(render_cells(lane, lo, hi, width)):
                style = KIND_STYLE.get(kind, "")
                if marked and edges[0] <= i <= max(edges[1], edges[0]):
                    ch, style = (ch if ch != " " else "█"), f"reverse {style}".strip()
                out.append(ch, style=style)
            out.append("\n")
        out.append_text(Text("\n").join(self._legend_lines(t)))
        return out
