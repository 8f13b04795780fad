"""Render an ``Analysis`` as readable terminal text with rich tables (``analyze --format text``)."""

from __future__ import annotations

from typing import IO, Any

from neuron_explorer.analyzers import Analysis
from neuron_explorer.analyzers.attribution import CATEGORY_NAMES
from neuron_explorer.analyzers.perf.shapes import short_shapes
from neuron_explorer.reports._format import fmt_bytes, fmt_ns, fmt_value, skipped_details, skipped_summary
from neuron_explorer.reports.fit import (
    KEEP,
    Column,
    make_console,
    print_prose,
    print_table,
    printable,
    prose_width,
)
from neuron_explorer.reports.fixes import cost_phrase, fixes_line
from neuron_explorer.reports.location import Locations, function_level_hint
from neuron_explorer.reports.names import display_kernel_name, short_kernel_name

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render(
    a: Analysis,
    out: IO[str] | None = None,
    min_severity: str = "info",
    top: int = 10,
    width: int | None = None,
    verbose: bool = False,
) -> None:
    """The analysis as text ``width`` columns wide (the terminal's by default); ``verbose``
    lists every rule that did not apply with its reason instead of one summary line."""
    from rich.markup import escape
    from rich.text import Text

    console = make_console(out, width)
    where = Locations.for_analysis(a)
    function_level = False
    s = a.summary
    console.print(f"[bold]{escape(printable(s['source'] or 'trace'))}[/bold]")
    console.print(
        f"{s['num_events']:,} events, span {fmt_ns(s['wall_ns'])}, {s['num_steps']} step(s), ranks {s['ranks']}, "
        f"devices {', '.join(s['devices']) or 'cpu only'}"
    )
    print_prose(console, Text.assemble(("Verdict:", "bold"), " ", printable(s["verdict"])))
    for w in s.get("profile_warnings") or []:
        console.print(f"[yellow]The profile itself warns:[/yellow] {escape(str(w))}")
    if any(d.get("metrics_only") for d in s.get("neuron") or []):
        console.print("Metrics only: this Neuron export (summary-json) holds no events, so event-based rules skip.")

    if a.step_stats.get("num_steps"):
        st = a.step_stats
        console.print(
            f"Steps: p50 {fmt_ns(st['p50_ns'])}, p95 {fmt_ns(st['p95_ns'])}, mean {fmt_ns(st['mean_ns'])}, "
            f"cv {st['cv_pct']:.1f}%, warm-up {st['num_warmup']}, outliers {st['num_outliers']}"
        )

    print_attribution(console, a)

    findings = a.filter(min_severity)
    console.print(f"\n[bold]Findings ({len(findings)}, most costly first)[/bold]")
    if not findings:
        console.print("No problems detected by the rules that ran.")
    for _rid, line in a.rule_errors:
        print_prose(console, Text(printable(line), style="yellow"))
    if fixes_line(a.fixes):
        print_prose(console, Text(fixes_line(a.fixes) or ""))
    for i, f in enumerate(findings, 1):
        # (wrapped by hand: a number never parts from its unit, a metric from its value)
        title = Text.assemble(
            f"{i}. ",
            (f.severity.upper(), _STYLE[f.severity]),
            " ",
            (printable(f.title), "bold"),
            cost_phrase(f),
            "  ",
            (f.rule_id, "dim"),
        )
        print_prose(console, title, hang=3)
        print_prose(console, Text("   " + printable(f.message)), hang=3)
        if f.metrics:
            items = ", ".join(f"{k}{KEEP}{fmt_value(v)}" for k, v in f.metrics.items())
            print_prose(console, Text("   " + items, style="dim"), hang=3)
        if f.threshold:
            items = ", ".join(f"{k}{KEEP}{fmt_value(v)}" for k, v in f.threshold.items())
            print_prose(console, Text("   threshold: " + items, style="dim"), hang=3)
        if f.source_lines:
            shown = f.source_lines[:3]
            function_level |= any(where.is_function_level(x.get("file"), x.get("line")) for x in shown)
            room = max(prose_width(console) - len("   Where: "), 20)
            for k, x in enumerate(shown):
                lead = "   Where: " if k == 0 else "          "
                console.print(lead + where.finding_line(x, room), overflow="ignore", crop=False)
        print_prose(console, Text.assemble("   ", ("Fix:", "green"), " ", printable(f.recommendation)), hang=3)
    console.print()

    if len(a.kernels):
        kernel_rows = [
            [
                display_kernel_name(str(r.name)),
                str(r.category),
                f"{r.count:,}",
                fmt_ns(r.total_ns),
                fmt_ns(r.mean_ns),
                f"{r.pct:.1f}",
            ]
            for r in a.kernels.head(top).itertuples()
        ]
        print_table(console, f"Top kernels (of {len(a.kernels)})", KERNEL_COLUMNS, kernel_rows, {0: short_kernel_name})

    if len(a.ops):
        op_rows = [
            [
                str(r.name),
                f"{r.count:,}",
                fmt_ns(r.host_total_ns),
                fmt_ns(r.host_self_ns),
                fmt_ns(r.device_ns),
                f"{r.kernel_count:,}",
            ]
            for r in a.ops.head(top).itertuples()
        ]
        zero = {i for i, col in ((4, "device_ns"), (5, "kernel_count")) if not (a.ops[col].head(top) != 0).any()}
        cols = [c for i, c in enumerate(OP_COLUMNS) if i not in zero]
        op_rows = [[v for i, v in enumerate(r) if i not in zero] for r in op_rows]
        print_table(console, f"Top ops (of {len(a.ops)})", cols, op_rows)

    if len(a.neuron_engines):
        from neuron_explorer.reports.neuron_text import render_engine_table

        render_engine_table(console, a.neuron_engines)
    if len(a.neuron_operators):
        neuron_rows = [
            [
                _text(r.layer, "(no layer)"),
                _text(r.hlo_name, "(no HLO op)"),
                f"{r.instructions:,}",
                fmt_ns(r.device_ns),
                f"{r.device_pct:.1f}",
            ]
            for r in a.neuron_operators.head(top).itertuples()
        ]
        print_table(console, "Operator Table: NeuronCore time by layer and HLO op", NEURON_COLUMNS, neuron_rows)
    _op_perf_table(console, a, top)

    if len(a.source_lines):
        function_level |= _source_lines_table(console, a, where, top)

    if function_level:
        console.print(f"[dim]{escape(function_level_hint(s.get('collector')))}[/dim]")
    if a.skipped:
        if verbose:
            console.print("[dim]Rules that did not apply:[/dim]")
            for rid, why in skipped_details(a.skipped, bool(a.summary.get("device_profile_only"))):
                console.print(f"[dim]  {escape(printable(rid))}: {escape(printable(why))}[/dim]")
        else:
            line = skipped_summary(a.skipped, bool(a.summary.get("device_profile_only")))
            print_prose(console, Text(f"{line}; --verbose lists them", style="dim"))


def _source_lines_table(console: Any, a: Analysis, where: Locations, top: int) -> bool:
    """The line-level profile; the line column gets what the numbers leave of the width, and
    columns that are zero on every row are left out. True when a shown line is function-level."""

    rows = a.source_lines.head(top)
    numbers = [
        (label, [fmt(v) for v in rows[col]])
        for label, col, fmt in (
            ("host (self)", "host_ns", fmt_ns),
            ("device", "device_ns", fmt_ns),
            ("kernels", "kernel_count", lambda v: f"{v:,}"),
            ("allocated", "alloc_bytes", fmt_bytes),
        )
        if (rows[col] != 0).any() or col == "host_ns"
    ]
    precision = rows["src_precision"] if "src_precision" in rows else [None] * len(rows)
    args = list(zip(rows["src_file"], rows["src_line"], rows["src_func"], precision))
    full = [printable(where.format(f, n, fn, p, 10_000)) for f, n, fn, p in args]
    by_label = dict(zip(full, args))
    # fitted like every table (reports/fit.py): the line column gets what the numbers leave, cut
    # by where.format at that width; where even that does not fit, allocations, then kernels go
    drop = {"allocated": 3, "kernels": 2}
    columns = [Column("line", "name"), *(Column(label, drop=drop.get(label, 0)) for label, _ in numbers)]
    table = [[full[i], *(vals[i] for _, vals in numbers)] for i in range(len(full))]
    print_table(
        console,
        "Top source lines",
        columns,
        table,
        shorten={0: lambda label, w: printable(where.format(*by_label[label], w)) if label in by_label else label},
    )
    return any(where.is_function_level(f, n, p) for f, n, p in zip(rows["src_file"], rows["src_line"], precision))


def attribution_rows(a: Analysis) -> tuple[list[Column], list[list[str]]]:
    """The step-time attribution per rank and device, summed over steps: each category's share."""
    at = a.attribution
    present = [c for c in CATEGORY_NAMES if len(at) and at[f"{c}_ns"].sum() > 0]
    host_only = bool(len(at)) and bool((at["device"] < 0).all())
    labels = HOST_ONLY_SHORT if host_only else SHORT_LABELS
    if a.summary.get("device_profile_only"):
        # A Neuron device profile alone: what no engine or queue covers is its semaphore waits and
        # idle gaps, which the profile records; there is no host side to leave untraced.
        labels = {**labels, "untraced": "waits, idle"}
    columns = [
        Column("rank"),
        Column("device", "text", short="dev"),
        Column("profiled", short="time", meaning="the step windows summed"),
    ]
    # where the table does not fit, the categories that hold least go first (those under 0.05%
    # on every row read 0.0%), named in the "left out" note
    share = (
        {c: float((at[f"{c}_ns"] / at["wall_ns"].where(at["wall_ns"] > 0)).max() * 100) for c in present}
        if len(at)
        else {}
    )
    for c in present:
        label = labels[c]
        drop = 3 if share.get(c, 0) < 0.05 else 2 if share.get(c, 0) < 1.0 else 0
        columns.append(Column(label, short=TINY_LABELS.get(label), meaning=label, drop=drop))
    rows: list[list[str]] = []
    if len(at):
        g = at.groupby(["rank", "device", "device_type"], as_index=False)[
            ["wall_ns", *(f"{c}_ns" for c in present)]
        ].sum()
        for r in g.itertuples():
            wall = r.wall_ns or 1
            dev = f"{r.device_type}:{r.device}" if r.device >= 0 else "cpu (host only)"
            rows.append(
                [str(r.rank), dev, fmt_ns(r.wall_ns), *(f"{100 * getattr(r, f'{c}_ns') / wall:.1f}%" for c in present)]
            )
    return columns, rows


ATTRIBUTION_TITLE = "Where the profiled time went (all steps; docs/rules.md)"


def print_attribution(console: Any, a: Analysis) -> None:
    columns, rows = attribution_rows(a)
    print_table(console, ATTRIBUTION_TITLE, columns, rows)


SHORT_LABELS = {
    "one_time": "one-time",
    "compute": "compute",
    "communication": "comm",
    "copy": "copy",
    "host_blocked": "host blocked",
    "device_wait": "dev wait",
    "data_loading": "data",
    "host_launch": "host launch",
    "host_python": "python",
    "untraced": "untraced",
}
HOST_ONLY_SHORT = {**SHORT_LABELS, "compute": "ops"}
#: The attribution headers when the full ones do not fit (a legend says what they mean).
TINY_LABELS = {
    "one-time": "once",
    "compute": "comp",
    "comm": "comm",
    "copy": "copy",
    "host blocked": "blkd",
    "dev wait": "dwait",
    "data": "data",
    "host launch": "launch",
    "python": "py",
    "untraced": "untr",
    "waits, idle": "wait",
    "ops": "ops",
}
KERNEL_COLUMNS = [
    Column("kernel", "name"),
    Column("category", "text", short="cat", drop=2),
    Column("count", short="n", meaning="launches"),
    Column("total"),
    Column("mean", drop=1),
    Column("% of device", short="%", meaning="% of device time"),
]
OP_COLUMNS = [
    Column("op", "name"),
    Column("count", short="n", meaning="calls"),
    Column("host total", short="host", meaning="host time incl. children"),
    Column("host self", short="self", meaning="host self time"),
    Column("device", short="dev", meaning="device time of its kernels"),
    Column("kernels", short="kern", meaning="kernel launches", drop=1),
]
NEURON_COLUMNS = [
    Column("layer", "name"),
    Column("HLO op", "shape"),
    Column("instructions", short="instr"),
    Column("device"),
    Column("%"),
]
PERF_COLUMNS = [
    Column("op", "name"),
    Column("shapes", "shape"),  # what tells two rows of one op apart: kept, shortened
    Column("calls", short="n", meaning="calls"),
    Column("kernel time", short="time", meaning="kernel time"),
    # narrow: the bound goes first, then the rates (the % of roof says how far from the peak)
    Column("TFLOP/s", short="TF/s", meaning="TFLOP/s", drop=1),
    Column("TB/s", drop=2),
    Column("bound", "text", short="by", meaning="bound by", drop=3),
    Column("% of roof", short="%roof", meaning="% of the roofline peak"),
]


def rate(x: float) -> str:
    """A TFLOP/s or TB/s figure without exponents: ``611``, ``0.328``, ``<0.001``."""
    if x != x:
        return "-"
    if x == 0:
        return "0"
    if abs(x) < 0.001:
        return "<0.001"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


#: Figures above this share of the device's peak are not physical: the peak (the device table
#: entry, or a variant of the part) is wrong, not the kernel faster than its hardware.
OVER_PEAK_PCT = 100.0
OVER_PEAK_NOTE = (
    "not possible on that device, so the device entry is wrong or this is a variant of it; give the right "
    "peaks with --device-spec (docs/perf.md)"
)


def _op_perf_table(console: Any, a: Analysis, top: int) -> None:
    """The roofline per op shape: only against a device (a host-only trace has no device peaks
    and would show zeros), modelled ops first, figures over 100% of a peak flagged."""
    from rich.markup import escape

    perf = a.op_perf[a.op_perf["gflops"].notna()] if len(a.op_perf) else a.op_perf
    if not len(perf):
        return
    device = (a.perf_summary.get("device") or {}).get("name")
    if not device or a.perf_summary.get("time_source") != "device kernels":
        console.print(
            f"[dim]Op performance: no device roofline ({printable(a.perf_summary.get('device_source') or 'no device')}"
            f"; times are {printable(a.perf_summary.get('time_source') or 'host')}); FLOPs and bytes per op shape are "
            "in --format json (op_perf)[/dim]"
        )
        return
    over = perf["pct_of_peak"] > OVER_PEAK_PCT
    rows = []
    for r, flagged in zip(perf.head(top).itertuples(), over.head(top)):
        # a figure over the roof is not a figure: the device entry is wrong (flagged, not printed)
        pct = "-" if r.pct_of_peak != r.pct_of_peak else ("over!" if flagged else f"{r.pct_of_peak:.1f}")
        rows.append(
            [
                str(r.name),
                short_shapes(r.shapes),
                f"{r.count:,}",
                fmt_ns(r.kernel_time_us * 1e3),
                rate(r.tflops_per_s),
                rate(r.tb_per_s),
                str(r.bound or "-"),
                pct,
            ]
        )
    print_table(console, f"Op performance vs {printable(device)} (of {len(a.op_perf)} op groups)", PERF_COLUMNS, rows)
    if over.any():
        console.print(
            f"[yellow]{int(over.sum())} op group(s) above 100% of the {escape(printable(device))} peak (marked !): "
            f"{OVER_PEAK_NOTE}[/yellow]"
        )
    cats = ", ".join(
        f"{c.category} {c.device_time_pct:.1f}% ({c.modelled_pct:.0f}% modelled)" for c in a.op_categories.itertuples()
    )
    console.print(f"[dim]Device time by op category: {cats}[/dim]")


def _text(value: object, missing: str) -> str:
    """A label cell: ``missing`` for None, NaN and empty strings (never "nan")."""
    if (
        value is None
        or (isinstance(value, float) and value != value)
        or str(value).strip().lower() in ("", "nan", "none")
    ):
        return missing
    return str(value)
