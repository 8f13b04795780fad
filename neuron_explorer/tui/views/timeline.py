"""The Timeline view: one step of one rank as text lanes, with the longest events below.

``[`` and ``]`` move between steps (a worker cuts the new step out of the trace); ``+``/``-``
zoom and the arrow keys pan without touching the trace again.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from neuron_explorer.tui.format import fmt_ns
from neuron_explorer.tui.snapshots import Column, TableSnapshot, Timeline
from neuron_explorer.tui.timeline import timeline
from neuron_explorer.tui.timeline_view import TimelineView
from neuron_explorer.tui.widgets import SnapshotTable

LONGEST_COLUMNS = (
    Column("name", "Longest events in this step", width=50),
    Column("kind", "Kind"),
    Column("lane", "Lane", width=22),
    Column("start", "Start", "ns"),
    Column("dur_ns", "Duration", "ns"),
)


class TimelinePane(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "step(-1)", "Prev step"),
        Binding("right_square_bracket", "step(1)", "Next step"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.current: Timeline | None = None
        self.requested = False

    def compose(self) -> ComposeResult:
        yield Static("", id="timeline-title")
        yield TimelineView(id="timeline-view")
        yield SnapshotTable(id="timeline-longest")

    def on_mount(self) -> None:
        self.query_one("#timeline-view").border_title = "Lanes  (+/- zoom, ←/→ pan, 0 reset, [ ] step)"

    def ensure_loaded(self) -> None:
        """Cut the first step on the first visit (not at start-up: the timeline is not the first screen)."""
        if not self.requested:
            self.requested = True
            self.load(None, None)

    @work(thread=True, exclusive=True, group="timeline")
    def load(self, rank: int | None, step: int | None) -> None:
        result = timeline(self.app.source, rank, step)  # type: ignore[attr-defined]
        self.app.call_from_thread(self.show, result)

    def show(self, t: Timeline) -> None:
        self.current = t
        which = f"rank {t.rank} · step {t.step}" if t.step is not None else f"rank {t.rank} · whole trace (no steps)"
        position = ""
        if t.step is not None and (t.rank, t.step) in t.steps:
            position = f" ({t.steps.index((t.rank, t.step)) + 1} of {len(t.steps)})"
        self.query_one("#timeline-title", Static).update(
            Text.assemble((which + position, "bold"), (f"   window {fmt_ns(t.end_ns - t.start_ns)}", "dim"))
        )
        self.query_one(TimelineView).show(t)
        rows = tuple((e.name, e.kind, e.lane, e.start_ns - t.start_ns, e.dur_ns) for e in t.longest)
        self.query_one(SnapshotTable).show(TableSnapshot(LONGEST_COLUMNS, rows))

    def action_step(self, delta: int) -> None:
        t = self.current
        if t is None or t.step is None or (t.rank, t.step) not in t.steps:
            return
        i = t.steps.index((t.rank, t.step)) + delta
        if 0 <= i < len(t.steps):
            rank, step = t.steps[i]
            self.query_one("#timeline-title", Static).update(
                Text(f"rank {rank} · step {step}   loading…", style="bold")
            )
            self.load(rank, step)
