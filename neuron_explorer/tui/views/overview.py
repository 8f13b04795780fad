"""The Overview view: what the trace holds, how step time splits, and the top findings.

The trace facts (devices, ranks, steps, span) paint first; the breakdown and findings appear
when the analysis worker finishes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from neuron_explorer.reports.colors import part_color
from neuron_explorer.trace.line_coverage import coverage_text
from neuron_explorer.trace.warmup import steady_durations
from neuron_explorer.tui.critical import critical_path_renderable
from neuron_explorer.tui.format import Prose, fmt_ns, pack_phrases, zero_based_bars
from neuron_explorer.tui.snapshots import Overview

if TYPE_CHECKING:
    import pandas as pd

    from neuron_explorer.analyzers import Analysis

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
#: Breakdown parts in bar order, with their colors.
PARTS: tuple[tuple[str, str, str], ...] = tuple(
    (key, label, part_color(key))
    for key, label in (
        ("one_time_ns", "one-time"),
        ("compute_ns", "compute"),
        ("communication_ns", "comm"),
        ("copy_ns", "copy"),
        ("host_blocked_ns", "host blocked"),
        ("device_wait_ns", "device wait"),
        ("data_loading_ns", "data"),
        ("host_launch_ns", "host launch"),
        ("host_python_ns", "python"),
        ("untraced_ns", "untraced"),
    )
)
BAR_WIDTH = 50
TOP_FINDINGS = 5
TOP_RANKS = 8


class StepBars(Static):
    """Step durations as bars from zero (``zero_based_bars``), one column per step or bucket."""

    values: reactive[list[float]] = reactive(list, layout=False)

    def render(self) -> Text:
        rows = zero_based_bars(self.values, self.size.width, max(self.size.height, 1))
        return Text("\n".join(rows), style="green3")


class StepFacts(Static):
    """Short phrases joined with `` · ``, a line broken only between phrases (``min 1.5 ms``
    never splits from its unit), at whatever width the widget has."""

    phrases: reactive[tuple[str, ...]] = reactive(tuple, layout=True)

    def render(self) -> Text:
        return Text("\n".join(pack_phrases(self.phrases, max(self.size.width, 1))))

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return len(pack_phrases(self.phrases, max(width, 1)))


class OverviewPane(VerticalScroll):
    def compose(self) -> ComposeResult:
        with Horizontal(id="overview-top"):
            yield Static("reading the trace…", id="overview-facts", classes="panel")
            with VerticalScroll(id="overview-steps", classes="panel"):
                yield StepFacts(id="overview-steps-label")
                yield StepBars(id="overview-sparkline")
        # Findings first: on a small terminal they are what must be on screen without scrolling.
        yield Static("analyzing…", id="overview-findings", classes="panel")
        yield Static("analyzing…", id="overview-breakdown", classes="panel")
        yield Static("", id="overview-ranks", classes="panel")
        yield Static("", id="overview-memory", classes="panel")
        yield Static("", id="overview-devices", classes="panel")

    def on_mount(self) -> None:
        self.query_one("#overview-facts").border_title = "Trace"
        self.query_one("#overview-steps").border_title = "Step times"
        self.query_one("#overview-devices").border_title = "Devices"
        self.query_one(
            "#overview-breakdown"
        ).border_title = "Where the profiled time goes (every step, warm-up included)"
        self.query_one("#overview-findings").border_title = "Top findings"
        ranks = self.query_one("#overview-ranks")
        ranks.border_title = "Ranks (the busiest first; last = times it arrived last at a collective)"
        ranks.display = False  # (shown for a run of two or more ranks, once analyzed)
        memory = self.query_one("#overview-memory")
        memory.border_title = "Memory at the peak (what is alive, and which line made it)"
        memory.display = False  # (shown once analyzed, for a trace with memory events)

    #: How much op and device time has an exact line (the analysis summary's ``line_coverage``,
    #: the figures ``info`` prints): a row of the facts once the analysis is in.
    _coverage: str = ""
    _overview: Overview | None = None

    def show_overview(self, ov: Overview) -> None:
        self._overview = ov
        self._show_facts()
        self._show_steps_and_devices(ov)

    def _show_facts(self) -> None:
        ov = self._overview
        if ov is None:
            return
        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="bold")
        facts.add_column()
        facts.add_row("File", ov.name)
        facts.add_row("Events", f"{ov.num_events:,}")
        facts.add_row("Ranks", ", ".join(map(str, ov.ranks)) or "0")
        facts.add_row("Devices", ", ".join(ov.device_types))
        facts.add_row("Steps", str(len({(s.rank, s.step) for s in ov.steps})) if ov.steps else "none marked")
        facts.add_row("Trace span", fmt_ns(ov.span_ns))
        if ov.collector:
            facts.add_row("Collector", ov.collector)
        if ov.torch_version:
            facts.add_row("torch", ov.torch_version)
        if self._coverage:
            facts.add_row("Source lines", self._coverage)
        self.query_one("#overview-facts", Static).update(facts)

    def _show_steps_and_devices(self, ov: Overview) -> None:

        durs = [s.dur_ns for s in ov.steps]
        label = self.query_one("#overview-steps-label", StepFacts)
        if durs:
            steady, warmup = steady_durations((st.rank, st.dur_ns) for st in ov.steps)
            mean = sum(steady) / len(steady)
            # the mean analyze reports: warm-up steps left out, the same rule
            label.phrases = (
                f"{len(durs)} steps" + (f" ({warmup} warm-up)" if warmup else ""),
                f"{'steady mean' if warmup else 'mean'} {fmt_ns(mean)}",
                f"min {fmt_ns(min(durs))}",
                f"max {fmt_ns(max(durs))}",
            )
            self.query_one("#overview-sparkline", StepBars).values = [float(d) for d in durs]
        else:
            label.phrases = ("no ProfilerStep spans in this trace",)

        devices = Table(box=None, expand=False, header_style="bold")
        for name, justify in (
            ("Rank", "right"),
            ("Device", "left"),
            ("Queues", "right"),
            ("Events", "right"),
            ("Busy", "right"),
            ("Busy % of span", "right"),
        ):
            devices.add_column(name, justify=justify)  # type: ignore[arg-type]
        for d in ov.devices:
            pct = 100.0 * d.busy_ns / ov.span_ns if ov.span_ns else 0.0
            devices.add_row(
                str(d.rank),
                f"{d.device_type}:{d.device}",
                str(d.queues),
                f"{d.events:,}",
                fmt_ns(d.busy_ns),
                f"{pct:.1f}%",
            )
        body = devices if ov.devices else Text("host only: no device events", style="dim")
        self.query_one("#overview-devices", Static).update(body)

    def show_analysis(self, analysis: Analysis) -> None:
        self._coverage = coverage_text(analysis.summary.get("line_coverage") or {}, short=True)
        self._show_facts()
        self.query_one("#overview-breakdown", Static).update(
            breakdown_renderable(analysis.attribution, bool(analysis.summary.get("device_profile_only")))
        )
        ranks = ranks_renderable(analysis)
        panel = self.query_one("#overview-ranks", Static)
        panel.display = ranks is not None
        if ranks is not None:
            panel.update(ranks)
        memory = memory_renderable(analysis)
        mem_panel = self.query_one("#overview-memory", Static)
        mem_panel.display = memory is not None
        if memory is not None:
            mem_panel.update(memory)
        verdict = str(analysis.summary.get("verdict") or "")
        findings = analysis.findings[:TOP_FINDINGS]
        table = Table(box=None, header_style="bold", expand=True)
        table.add_column("Severity", width=8)
        table.add_column("Finding", ratio=1)
        table.add_column("Cost", justify="right", width=10)
        for f in findings:
            table.add_row(Text(f.severity, style=SEVERITY_STYLE.get(f.severity, "")), Prose(f.title), fmt_ns(f.cost_ns))
        parts: list = [Text(verdict, style="bold")] if verdict else []
        # A Neuron export's own warnings (e.g. its DMA figures may be wrong) come before the findings.
        parts += [
            Text(f"The profile itself warns: {w}", style="yellow")
            for w in analysis.summary.get("profile_warnings") or []
        ]
        engines = neuron_engines_renderable(analysis)
        if engines is not None:
            parts.append(engines)
        operators = neuron_operators_renderable(analysis)
        if operators is not None:
            parts.append(operators)
        parts.append(table if findings else Text("no findings: no rule fired", style="green"))
        if len(analysis.findings) > TOP_FINDINGS:
            parts.append(Text(f"… {len(analysis.findings) - TOP_FINDINGS} more in Findings (2)", style="dim"))
        critical = critical_path_renderable(analysis)
        if critical is not None:
            parts.append(critical)
        self.query_one("#overview-findings", Static).update(Group(*parts))

    def show_analysis_error(self, message: str) -> None:
        for wid in ("#overview-breakdown", "#overview-findings"):
            self.query_one(wid, Static).update(Text(f"analysis unavailable: {message}", style="red"))


def neuron_engines_renderable(analysis: Analysis) -> Table | None:
    """Trainium: each engine and DMA queue, active over the kernel window and the span; None
    for other traces."""
    engines = getattr(analysis, "neuron_engines", None)
    if engines is None or not len(engines):
        return None
    from neuron_explorer.analyzers.metrics.neuron_summary import fmt_pct

    def pct(v: object) -> str:
        return fmt_pct(float(v)) if isinstance(v, (int, float)) and v == v else "-"

    table = Table(box=None, header_style="bold", title="NeuronCore engines and DMA queues", title_justify="left")
    for name in ("Core", "Engine / queue", "Instructions", "Active", "% of kernel", "% of span"):
        table.add_column(name, justify="left" if name == "Engine / queue" else "right")
    for r in engines.to_dict(orient="records"):
        n = r.get("instructions")
        table.add_row(
            str(r.get("device")),
            ("DMA " if r.get("type") == "dma" else "") + str(r.get("unit")),
            f"{int(n):,}" if isinstance(n, (int, float)) and n == n else "-",
            fmt_ns(r.get("active_ns") or 0),
            pct(r.get("kernel_util_pct")),
            pct(r.get("span_util_pct")),
        )
    return table


def neuron_operators_renderable(analysis: Analysis, top: int = 8) -> Table | None:
    """Trainium: AWS's Operator Table, device time by framework layer and HLO op (waits
    excluded), the costliest first; None for other traces."""
    ops = getattr(analysis, "neuron_operators", None)
    if ops is None or not len(ops):
        return None
    from neuron_explorer.analyzers.metrics.neuron_summary import fmt_pct

    table = Table(
        box=None,
        header_style="bold",
        title=f"Operator Table (device time by layer / HLO op; {len(ops):,} rows, top {min(top, len(ops))})",
        title_justify="left",
    )
    for name in ("Core", "Layer", "HLO op", "Instructions", "Device time", "% of device"):
        table.add_column(name, justify="left" if name in ("Layer", "HLO op") else "right")
    for r in ops.head(top).to_dict(orient="records"):
        pct = r.get("device_pct")
        table.add_row(
            str(r.get("device")),
            Prose(str(r.get("layer") or "(no layer)")),
            Prose(str(r.get("hlo_name") or "(no HLO op)")),
            f"{int(r.get('instructions') or 0):,}",
            fmt_ns(r.get("device_ns") or 0),
            fmt_pct(float(pct)) if isinstance(pct, (int, float)) and pct == pct else "-",
        )
    return table


def _who(r: dict) -> str:
    """``rank 0 · cuda:0``, or ``rank 0 · host`` for a CPU-only trace (its device is -1)."""
    device = r.get("device")
    where = "host" if device is None or device < 0 else f"{r.get('device_type') or 'device'}:{device}"
    return f"rank {r.get('rank', 0)} · {where}"


def memory_renderable(analysis: Analysis, top: int = 5) -> Group | None:
    """The live set at the trace's peak of the device with the highest peak: its phases, then
    the lines holding the most (``Analysis.memory_at_peak``); None without memory events."""
    from neuron_explorer.analyzers.memory_live import at_peak_view
    from neuron_explorer.trace.units import format_quantity

    live = analysis.live_memory
    if live is None or not len(live.at_peak):
        return None
    t = live.at_peak[live.at_peak["scope"] == "trace"]
    head = t.loc[t["peak_allocated_bytes"].idxmax()]
    who = {"rank": int(head["rank"]), "device_type": str(head["device_type"]), "device": int(head["device"])}

    def mine(df: pd.DataFrame) -> pd.DataFrame:
        m = (df["rank"] == who["rank"]) & (df["device_type"] == who["device_type"]) & (df["device"] == who["device"])
        return df[m]

    phases = mine(at_peak_view(live, "phase"))
    lines = mine(at_peak_view(live, "line"))
    lines = lines[lines["src_file"].notna()].head(top)
    title = Text(
        f"{_who(who)}: peak {format_quantity(int(head['peak_allocated_bytes']), 'bytes')} · "
        + " · ".join(f"{r.phase.replace('_', ' ')} {r.pct_of_peak:.0f}%" for r in phases.head(4).itertuples()),
        style="bold",
    )
    table = Table(box=None, header_style="bold", expand=True)
    table.add_column("Line", ratio=1)
    table.add_column("Alive", justify="right", width=10)
    table.add_column("% of peak", justify="right", width=9)
    for r in lines.itertuples():
        table.add_row(
            f"{r.src_file}:{r.src_line}", format_quantity(int(r.live_bytes), "bytes"), f"{r.pct_of_peak:.1f}%"
        )
    return Group(title, table) if len(lines) else Group(title)


def ranks_renderable(analysis: Analysis, top: int = TOP_RANKS) -> Table | None:
    """The per-rank table of a multi-rank trace (``culprit.rank_summary``), None for one rank."""
    from neuron_explorer.analyzers.ranks.culprit import rank_summary, wait_by_rank

    rs = analysis.rank_steps
    if rs is None or not len(rs):
        return None
    summary = rank_summary(rs, wait_by_rank(analysis.collective_ranks))
    if not len(summary):
        return None
    table = Table(box=None, header_style="bold")
    for name in ("Rank", "Step", "Compute+copy", "vs median", "Exposed comm", "Last", "Wait caused"):
        table.add_column(name, justify="right")
    for r in summary.head(top).itertuples(index=False):
        table.add_row(
            str(r.rank),
            fmt_ns(r.wall_ns),
            fmt_ns(r.busy_ns),
            f"{r.busy_vs_median_pct:+.0f}%",
            fmt_ns(r.communication_ns),
            f"{r.times_last}/{r.instances}",
            fmt_ns(r.caused_wait_ns),
        )
    if len(summary) > top:
        table.add_row(f"… {len(summary) - top} more", "", "", "", "", "", "")
    return table


def breakdown_renderable(breakdown: pd.DataFrame | None, device_profile_only: bool = False) -> Table | Text:
    """One stacked bar per (rank, device): the parts of step wall time summed over steps. On a
    Neuron device profile alone, what no engine or queue covers is its semaphore waits and
    idle gaps (the profile records them): "waits, idle", not "untraced"."""
    if breakdown is None or len(breakdown) == 0:
        return Text("no step breakdown (no device work or steps)", style="dim")
    parts = [p for p in PARTS if p[0] in breakdown.columns and breakdown[p[0]].sum() > 0]
    if device_profile_only:
        parts = [(k, "waits, idle" if k == "untraced_ns" else label, style) for k, label, style in parts]
    keys = [k for k in ("rank", "device_type", "device") if k in breakdown.columns]
    sums = breakdown.groupby(keys, dropna=False)[["wall_ns", *[p[0] for p in parts]]].sum().reset_index()
    table = Table(box=None, header_style="bold")
    table.add_column("Rank/device")
    table.add_column("Wall", justify="right")
    table.add_column("Breakdown", width=BAR_WIDTH)
    for row in sums.itertuples(index=False):
        r = row._asdict()
        wall = r["wall_ns"] or 0
        bar = Text()
        used = 0
        for key, _, style in parts:
            cells = round(BAR_WIDTH * (r[key] or 0) / wall) if wall else 0
            cells = min(cells, BAR_WIDTH - used)
            bar.append("█" * cells, style=style)
            used += cells
        who = _who(r)
        table.add_row(who, fmt_ns(wall), bar)
    legend = Text()
    for key, label, style in parts:
        total = sums[key].sum()
        wall = sums["wall_ns"].sum()
        legend.append("█ ", style=style)
        legend.append(f"{label} {100.0 * total / wall if wall else 0:.0f}%   ")
    table.add_row("", "", legend)
    return table
