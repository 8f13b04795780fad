"""The text-mode timeline widget: a step's lanes as shaded cells, zoomed and panned by key."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.widget import Widget

from neuron_explorer.tui.format import fmt_ns
from neuron_explorer.tui.snapshots import Timeline
from neuron_explorer.tui.timeline import render_cells

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
