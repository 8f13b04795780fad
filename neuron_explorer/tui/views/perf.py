"""The Roofline view (key ``p``): each op group against the device's peaks, and the categories.

The numbers are the analysis's ``op_perf``, ``op_categories`` and ``perf_summary`` (the same as
``analyze``, the report and the MCP ``op_perf`` tool show). A modal screen over the current
view: ``escape`` or ``p`` closes it; the table sorts and filters like every other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from neuron_explorer.analyzers.perf.shapes import short_shapes
from neuron_explorer.reports.text import OVER_PEAK_PCT
from neuron_explorer.tui.format import fmt_ns
from neuron_explorer.tui.snapshots import Column, TableSnapshot
from neuron_explorer.tui.tables import table_from_frame
from neuron_explorer.tui.widgets import SnapshotTable

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis

#: On a narrow terminal (docs/tui.md): headers take their short labels first, then Category,
#: Line and Bound are left out in that order, then Shapes and Op shrink (cut in the middle);
#: the figures (kernel time, TFLOP/s, TB/s, % of roof) always stay.
PERF_COLUMNS = (
    Column("name", "Op", width=28),
    Column("category", "Category", short="cat", drop=3),
    Column("shapes", "Shapes", width=24),
    Column("count", "Calls", "count", short="n"),
    Column("kernel_ns", "Kernel time", "ns", short="time"),
    Column("tflops", "TFLOP/s", "rate", short="TF/s"),
    Column("tbps", "TB/s", "rate"),
    Column("bound", "Bound", short="by", drop=1),
    Column("pct_of_peak", "% of roof", "roof%", short="%roof"),
    Column("location", "Line", width=24, drop=2),
)


def perf_table(analysis: Analysis) -> TableSnapshot:
    """The op groups, costliest first, with their source line shortened to its last two parts."""
    df = analysis.op_perf
    if df is None or not len(df):
        return TableSnapshot.empty(PERF_COLUMNS, note="no op groups: the trace has no kernels linked to ops")
    line = df["src_line"].fillna(-1).astype("int64")
    view = df.assign(
        shapes=[short_shapes(s) for s in df["shapes"]],
        kernel_ns=(df["kernel_time_us"] * 1e3).round(),
        tflops=df["tflops_per_s"],
        tbps=df["tb_per_s"],
        location=[f"{_tail(f)}:{n}" if n >= 0 and isinstance(f, str) else None for f, n in zip(df["src_file"], line)],
    )
    snap = table_from_frame(view, PERF_COLUMNS, "Op groups")
    modelled = int(df["gflops"].notna().sum())
    note = f"{modelled} of {len(df)} op groups modelled"
    over = int((df["pct_of_peak"] > OVER_PEAK_PCT).sum())
    if over:
        note += f" · {over} above 100% of the peak (!): the device's peaks are wrong, give them with --device-spec"
    return TableSnapshot(snap.columns, snap.rows, snap.title, note)


def summary_renderable(analysis: Analysis) -> Any:
    """The device the roofs come from and the device time per op category."""
    s = analysis.perf_summary or {}
    device = s.get("device")
    head = (
        Text.assemble(
            ("Device ", "bold"),
            f"{device['name']}: {device['mem_bw_tb_per_s']:g} TB/s, ",
            ", ".join(f"{k} {v:g}" for k, v in (device.get("matrix_tflops") or {}).items()),
            " TFLOP/s matrix  ",
            (f"({s.get('device_source', '')})", "dim"),
        )
        if device
        else Text(f"No device spec: {s.get('device_source', 'unknown')}; run with --device-spec", style="yellow")
    )
    cats = analysis.op_categories
    table = Table(box=None, pad_edge=False, expand=False)
    for label in ("category", "device time", "% device", "% modelled", "TFLOP/s", "TB/s"):
        table.add_column(label, justify="left" if label == "category" else "right")
    if isinstance(cats, pd.DataFrame) and len(cats):
        for r in cats.itertuples(index=False):
            table.add_row(
                str(r.category),
                fmt_ns(r.kernel_time_us * 1e3),
                _num(r.device_time_pct, "{:.1f}%"),
                _num(r.modelled_pct, "{:.0f}%"),
                _num(r.tflops_per_s, "{:.3g}"),
                _num(r.tb_per_s, "{:.3g}"),
            )
    return Group(head, table)


def _num(value: Any, fmt: str) -> str:
    return "–" if value is None or value != value else fmt.format(value)


def _tail(path: str, parts: int = 2) -> str:
    return "/".join(path.replace("\\", "/").split("/")[-parts:])


class PerfScreen(ModalScreen[None]):
    """Op groups against the device's roofs, over the current view."""

    DEFAULT_CSS = """
    PerfScreen { align: center middle; }
    #perf { width: 100%; max-width: 180; height: 100%; border: thick $accent; background: $surface; }
    #perf-summary { height: auto; max-height: 14; }
    #perf-table { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,p", "dismiss", "Close", tooltip="/ filters the op groups; s and r sort them"),
    ]

    def __init__(self, analysis: Analysis) -> None:
        super().__init__()
        self.analysis = analysis

    def compose(self) -> ComposeResult:
        with Vertical(id="perf"):
            yield Static(summary_renderable(self.analysis), id="perf-summary")
            yield Input(placeholder="filter op groups by name  ( / )", id="perf-filter", classes="filter", compact=True)
            yield SnapshotTable(id="perf-table")

    def on_mount(self) -> None:
        self.query_one("#perf").border_title = "Roofline: op groups vs the device's peaks"
        table = self.query_one(SnapshotTable)
        table.show(perf_table(self.analysis))
        self.set_focus(table)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one(SnapshotTable).set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.set_focus(self.query_one(SnapshotTable))

    def action_filter(self) -> None:
        """Focus the filter (the app's "/" lands here while this view is open)."""
        self.set_focus(self.query_one(Input))
