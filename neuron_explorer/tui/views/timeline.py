"""The Timeline view: one step of one rank as text lanes, and the events in view below.

``[`` and ``]`` move between steps (a worker cuts the new step out of the trace); ``+``/``-``
zoom and the arrow keys pan without touching the trace again. The list below holds the events
in the visible window; enter on one selects it (marked in its lane, the view framed on it, its
details on the line between), ``o`` opens its source line. ``goto`` (the ``g`` key of the
Findings, Ops and Kernels views) shows the step holding a time, zoomed to it.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from neuron_explorer.reports.location import Locations
from neuron_explorer.reports.names import short_kernel_name
from neuron_explorer.tui.format import Phrases, fmt_ns
from neuron_explorer.tui.snapshots import Column, TableSnapshot, Timeline, TimelineEvent
from neuron_explorer.tui.timeline import step_of, timeline
from neuron_explorer.tui.timeline_view import TimelineView
from neuron_explorer.tui.widgets import SnapshotTable

EVENT_COLUMNS = (
    Column("name", "Event", "kernel", width=50),
    Column("kind", "Kind", drop=2),
    Column("lane", "Lane", drop=1),
    Column("start", "Start", "ns"),
    Column("dur_ns", "Duration", "ns"),
)


class TimelinePane(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left_square_bracket", "step(-1)", "Prev step"),
        Binding("right_square_bracket", "step(1)", "Next step", tooltip="across ranks in a run directory"),
        Binding("o", "open_source", "Open line", show=False, tooltip="the selected event's source line"),
        Binding(
            "e",
            "focus('#timeline-events')",
            "Events",
            show=False,
            tooltip="the keyboard to the list of events in view; enter selects one (marked in its lane)",
        ),
        Binding("t", "focus('#timeline-view')", "Lanes", show=False, tooltip="the keyboard back to the lanes"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.current: Timeline | None = None
        self.requested = False
        self.in_view: list[TimelineEvent] = []
        #: (start_ns, end_ns, event_id) to frame once the step that holds it is cut
        self.pending: tuple[int, int, int | None] | None = None
        #: (rank, step) asked for by [ or ] and not shown yet: the next press moves on from it
        self.target: tuple[int, int] | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="timeline-title")
        yield TimelineView(id="timeline-view")
        yield Static("", id="timeline-event")
        yield SnapshotTable(id="timeline-events")

    def on_mount(self) -> None:
        self.query_one("#timeline-view").border_title = "Lanes  (+/- zoom, ←/→ pan, 0 reset, [ ] step)"
        self.query_one("#timeline-events").border_title = "Events in view  (e here, enter selects, o opens its line)"

    def ensure_loaded(self) -> None:
        """Cut the first step on the first visit (not at start-up: the timeline is not the first screen)."""
        if not self.requested:
            self.requested = True
            self.load(None, None)

    def goto(self, rank: int | None, start_ns: int, end_ns: int, event_id: int | None = None) -> None:
        """Show the step of ``rank`` holding ``start_ns``, zoomed to ``[start_ns, end_ns)``."""
        self.requested = True
        self.target = None
        self.pending = (start_ns, max(end_ns, start_ns + 1), event_id)
        overview = getattr(self.app, "overview", None)
        steps = tuple((s.rank, s.step, s.start_ns, s.dur_ns) for s in overview.steps) if overview else ()
        rank = rank if rank is not None else (steps[0][0] if steps else None)
        step = step_of(steps, rank, start_ns) if rank is not None else None
        t = self.current
        if t is not None and t.rank == rank and t.step == step:
            self._apply_pending()
        else:
            self.load(rank, step)

    @work(thread=True, exclusive=True, group="timeline")
    def load(self, rank: int | None, step: int | None) -> None:
        result = timeline(self.app.source, rank, step)  # type: ignore[attr-defined]
        self.app.call_from_thread(self.show, result)

    def show(self, t: Timeline) -> None:
        if self.target is not None and self.target != (t.rank, t.step):
            return  # an older request finishing after a newer one was made: the newer one shows
        self.target = None
        self.current = t
        which = f"rank {t.rank} · step {t.step}" if t.step is not None else f"rank {t.rank} · whole trace (no steps)"
        position = ""
        if t.step is not None and (t.rank, t.step) in t.steps:
            position = f" ({t.steps.index((t.rank, t.step)) + 1} of {len(t.steps)})"
        self.query_one("#timeline-title", Static).update(
            Text.assemble((which + position, "bold"), (f"   window {fmt_ns(t.end_ns - t.start_ns)}", "dim"))
        )
        self.query_one("#timeline-event", Static).update("")
        self.query_one(TimelineView).show(t)
        self._apply_pending()

    def _apply_pending(self) -> None:
        if self.pending is None or self.current is None:
            return
        start, end, event_id = self.pending
        self.pending = None
        view = self.query_one(TimelineView)
        event = next((e for e in self.current.events if e.event_id == event_id), None) if event_id is not None else None
        if event is not None:
            view.select(event)
            self._describe(event)
        else:
            view.show_range(start, end)
        self.screen.set_focus(view)

    def on_timeline_view_window_changed(self, message: TimelineView.WindowChanged) -> None:
        t = self.current
        if t is None:
            return
        lo, hi = message.start_ns, message.end_ns
        self.in_view = [e for e in t.events if e.start_ns < hi and e.end_ns > lo]
        rows = tuple((e.name, e.kind, e.lane, e.start_ns - t.start_ns, e.dur_ns, i) for i, e in enumerate(self.in_view))
        listed = "" if t.total_events <= len(t.events) else f" (the {len(t.events):,} longest of {t.total_events:,})"
        note = f"{len(rows):,} in view{listed}"
        table = self.query_one("#timeline-events", SnapshotTable)
        table.show(TableSnapshot(EVENT_COLUMNS, rows, note=note))

    def on_snapshot_table_chosen(self, message: SnapshotTable.Chosen) -> None:
        index = message.row[-1]
        if 0 <= index < len(self.in_view):
            event = self.in_view[index]
            self.query_one(TimelineView).select(event, frame=False)
            self._describe(event)

    def _describe(self, e: TimelineEvent) -> None:
        t = self.current
        origin = t.start_ns if t is not None else 0
        where = Locations(t.root if t is not None else None)
        src = where.format(*e.source, width=40) if e.source else ""
        lane = next((x for x in t.lanes if x.label == e.lane), None) if t is not None else None
        lane_text = f"{e.lane} ({lane.detail})" if lane is not None and lane.detail else e.lane
        # (a line break only between the parts: "+25.9 µs" never splits from its unit)
        parts = (e.kind, lane_text, f"+{fmt_ns(e.start_ns - origin)}", fmt_ns(e.dur_ns), *([src] if e.source else []))
        self.query_one("#timeline-event", Static).update(Phrases(parts, head=short_kernel_name(e.name, 32) + "  "))

    @property
    def selected(self) -> TimelineEvent | None:
        return self.query_one(TimelineView).selected

    def action_focus(self, selector: str) -> None:
        self.screen.set_focus(self.query_one(selector))

    def action_open_source(self) -> None:
        event = self.selected
        if event is None or event.source is None:
            self.app.notify("select an event with a source line first (enter in the list)")
            return
        self.app.open_source(event.source[0], event.source[1])  # type: ignore[attr-defined]

    def action_step(self, delta: int) -> None:
        """Move ``delta`` steps from the step shown or, while one is loading, from that one:
        three quick presses of ``]`` move three steps (the latest request wins the worker)."""
        t = self.current
        if t is None:
            return
        here = self.target or ((t.rank, t.step) if t.step is not None else None)
        if here is None or here not in t.steps:
            return
        i = t.steps.index(here) + delta
        if 0 <= i < len(t.steps):
            rank, step = self.target = t.steps[i]
            self.query_one("#timeline-title", Static).update(
                Text(f"rank {rank} · step {step} ({i + 1} of {len(t.steps)})   loading…", style="bold")
            )
            self.load(rank, step)
