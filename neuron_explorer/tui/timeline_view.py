"""The text-mode timeline widget: a step's lanes as shaded cells, zoomed and panned by key."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from neuron_explorer.reports.colors import kind_color
from neuron_explorer.tui.format import fmt_ns
from neuron_explorer.tui.snapshots import Timeline, TimelineEvent
from neuron_explorer.tui.timeline import render_cells

#: Colors of the kinds drawn in timeline lanes (also the legend): the report's, defined once.
KIND_STYLE: dict[str, str] = {
    k: kind_color(k) for k in ("cpu_op", "runtime", "sync", "kernel", "collective", "memcpy", "memset")
}
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
    ]

    zoom: reactive[float] = reactive(1.0)
    center: reactive[float] = reactive(0.5)  # view centre as a fraction of the step window

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeline: Timeline | None = None
        self.selected: TimelineEvent | None = None

    def show(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.selected = None
        self.zoom, self.center = 1.0, 0.5
        self.refresh(layout=True)
        self._announce()

    def select(self, event: TimelineEvent | None, frame: bool = True) -> None:
        """Mark ``event``; with ``frame``, zoom so it spans about a third of the view, centred."""
        self.selected = event
        t = self.timeline
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
        self.border_subtitle = f"zoom ×{self.zoom:.3g}"
        self._announce()

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
        sel = self.selected
        edges = (
            (int((sel.start_ns - lo) * width // max(hi - lo, 1)), int((sel.end_ns - lo) * width // max(hi - lo, 1)))
            if sel is not None
            else (0, -1)
        )
        for lane in t.lanes:
            out.append(lane.label[:LABEL_WIDTH].ljust(LABEL_WIDTH) + " ", style="bold" if lane.group == "host" else "")
            marked = sel is not None and sel.lane == lane.label
            for i, (ch, kind) in enumerate(render_cells(lane, lo, hi, width)):
                style = KIND_STYLE.get(kind, "")
                if marked and edges[0] <= i <= max(edges[1], edges[0]):
                    ch, style = (ch if ch != " " else "█"), f"reverse {style}".strip()
                out.append(ch, style=style)
            out.append("\n")
        out.append("legend  ", style="dim")  # from the left edge: it fits 80 columns
        present = {k for lane in t.lanes for k in lane.intervals}
        for kind, style in [(k, v) for k, v in KIND_STYLE.items() if k in present]:
            out.append("█ ", style=style)
            out.append(kind + "  ", style="dim")
        return out
