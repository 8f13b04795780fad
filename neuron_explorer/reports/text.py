"""Render an ``Analysis`` as readable terminal text with rich tables (``analyze --format text``)."""

from __future__ import annotations

from typing import IO, Any

from neuron_explorer.analyzers import Analysis
from neuron_explorer.analyzers.attribution import CATEGORY_NAMES
from neuron_explorer.analyzers.perf.shapes import short_shapes
from neuron_explorer.reports._format import fmt_bytes, fmt_ns, fmt_value, short, skipped_summary
from neuron_explorer.reports.location import FUNCTION_LEVEL_HINT, Locations
from neuron_explorer.reports.names import short_kernel_name

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
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(file=out, width=width, highlight=False, soft_wrap=False)
    where = Locations.for_analysis(a)
    function_level = False
    s = a.summary
    console.print(f"[bold]{s['source'] or 'trace'}[/bold]")
    console.print(
        f"{s['num_events']:,} events, wall {fmt_ns(s['wall_ns'])}, {s['num_steps']} step(s), ranks {s['ranks']}, "
        f"devices {', '.join(s['devices']) or 'cpu only'}"
    )
    console.print(f"[bold]Verdict:[/bold] {s['verdict']}")
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

    console.print(attribution_table(a))

    findings = a.filter(min_severity)
    console.print(f"\n[bold]Findings ({len(findings)}, most costly first)[/bold]")
    if not findings:
        console.print("No problems detected by the rules that ran.")
    for i, f in enumerate(findings, 1):
        cost = f" (costs ~{fmt_ns(f.cost_ns)} of {f.category})" if f.cost_ns and f.category else ""
        console.print(
            f"{i}. [{_STYLE[f.severity]}]{f.severity.upper()}[/] [bold]{f.title}[/bold]{cost}  [dim]{f.rule_id}[/dim]"
        )
        console.print(f"   {f.message}")
        if f.metrics:
            console.print("   [dim]" + ", ".join(f"{k} {fmt_value(v)}" for k, v in f.metrics.items()) + "[/dim]")
        if f.source_lines:
            shown = f.source_lines[:3]
            function_level |= any(where.is_function_level(x.get("file"), x.get("line")) for x in shown)
            room = max(console.width - len("   Where: "), 20)
            for k, x in enumerate(shown):
                lead = "   Where: " if k == 0 else "          "
                console.print(lead + where.finding_line(x, room), overflow="ignore", crop=False)
        console.print(f"   [green]Fix:[/green] {f.recommendation}")
    console.print()

    if len(a.kernels):
        t = Table(title=f"Top kernels (of {len(a.kernels)})", title_justify="left")
        for col in ("kernel", "category", "count", "total", "mean", "%"):
            t.add_column(col, justify="left" if col in ("kernel", "category") else "right")
        for r in a.kernels.head(top).itertuples():
            t.add_row(
                short_kernel_name(r.name, 60),
                r.category,
                f"{r.count:,}",
                fmt_ns(r.total_ns),
                fmt_ns(r.mean_ns),
                f"{r.pct:.1f}",
            )
        console.print(t)

    if len(a.ops):
        t = Table(title=f"Top ops (of {len(a.ops)})", title_justify="left")
        for col in ("op", "count", "host total", "host self", "device", "kernels"):
            t.add_column(col, justify="left" if col == "op" else "right")
        for r in a.ops.head(top).itertuples():
            t.add_row(
                short(r.name, 50),
                f"{r.count:,}",
                fmt_ns(r.host_total_ns),
                fmt_ns(r.host_self_ns),
                fmt_ns(r.device_ns),
                f"{r.kernel_count:,}",
            )
        console.print(t)

    if len(a.neuron_engines):
        from neuron_explorer.analyzers.neuron_summary import render_engine_table

        render_engine_table(console, a.neuron_engines)
    if len(a.neuron_operators):
        t = Table(title="Operator Table: NeuronCore time by layer and HLO op", title_justify="left")
        for col in ("layer", "HLO op", "instructions", "device", "%"):
            t.add_column(col, justify="left" if col in ("layer", "HLO op") else "right")
        for r in a.neuron_operators.head(top).itertuples():
            t.add_row(
                short(_text(r.layer, "(no layer)"), 50),
                short(_text(r.hlo_name, "(no HLO op)"), 30),
                f"{r.instructions:,}",
                fmt_ns(r.device_ns),
                f"{r.device_pct:.1f}",
            )
        console.print(t)
    perf = a.op_perf[a.op_perf["gflops"].notna()] if len(a.op_perf) else a.op_perf
    if len(perf):
        device = (a.perf_summary.get("device") or {}).get("name") or "unknown device"
        t = Table(title=f"Op performance vs {device} (of {len(a.op_perf)} op groups)", title_justify="left")
        for col in ("op", "shapes", "calls", "kernel time", "TFLOP/s", "TB/s", "bound", "% of roof"):
            t.add_column(col, justify="left" if col in ("op", "shapes", "bound") else "right")
        for r in perf.head(top).itertuples():
            t.add_row(
                short(r.name, 40),
                short(short_shapes(r.shapes), 40),
                f"{r.count:,}",
                fmt_ns(r.kernel_time_us * 1e3),
                f"{r.tflops_per_s:.3g}",
                f"{r.tb_per_s:.3g}",
                str(r.bound or "-"),
                "-" if r.pct_of_peak != r.pct_of_peak else f"{r.pct_of_peak:.1f}",
            )
        console.print(t)
        cats = ", ".join(
            f"{c.category} {c.device_time_pct:.1f}% ({c.modelled_pct:.0f}% modelled)"
            for c in a.op_categories.itertuples()
        )
        console.print(f"[dim]Device time by op category: {cats}[/dim]")

    if len(a.source_lines):
        function_level |= _source_lines_table(console, a, where, top)

    if function_level:
        console.print(f"[dim]{FUNCTION_LEVEL_HINT}[/dim]")
    if a.skipped:
        if verbose:
            console.print("[dim]Rules that did not apply:[/dim]")
            for rid, why in a.skipped:
                console.print(f"[dim]  {rid}: {why}[/dim]")
        else:
            console.print(f"[dim]{skipped_summary(a.skipped)}; --verbose lists them[/dim]")


def _source_lines_table(console: Any, a: Analysis, where: Locations, top: int) -> bool:
    """The line-level profile; the line column gets what the numbers leave of the width, and
    columns that are zero on every row are left out. True when a shown line is function-level."""
    from rich.table import Table

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
    # rich's box: a bar and a space each side of every cell, and one closing bar
    used = sum(max(len(label), *(len(v) for v in vals)) for label, vals in numbers) + 3 * (len(numbers) + 1) + 1
    room = max(console.width - used, 24)
    precision = rows["src_precision"] if "src_precision" in rows else [None] * len(rows)
    labels = [
        where.format(f, n, fn, p, room)
        for f, n, fn, p in zip(rows["src_file"], rows["src_line"], rows["src_func"], precision)
    ]
    t = Table(title="Top source lines", title_justify="left")
    t.add_column("line", no_wrap=True, min_width=min(max(map(len, labels)), room), overflow="ignore")
    for label, _ in numbers:
        t.add_column(label, justify="right", no_wrap=True)
    for i, label in enumerate(labels):
        t.add_row(label, *(vals[i] for _, vals in numbers))
    console.print(t, crop=False)
    return any(where.is_function_level(f, n, p) for f, n, p in zip(rows["src_file"], rows["src_line"], precision))


def attribution_table(a: Analysis) -> Any:
    """The step-time attribution per rank and device, summed over steps: each category's share."""
    from rich.table import Table

    at = a.attribution
    present = [c for c in CATEGORY_NAMES if len(at) and at[f"{c}_ns"].sum() > 0]
    host_only = bool(len(at)) and bool((at["device"] < 0).all())
    labels = HOST_ONLY_SHORT if host_only else SHORT_LABELS
    t = Table(title="Where step time went (each instant once, by priority; docs/rules.md)", title_justify="left")
    for col in ("rank", "device", "wall", *(labels[c] for c in present)):
        t.add_column(col, justify="left" if col == "device" else "right")
    if len(at):
        g = at.groupby(["rank", "device", "device_type"], as_index=False)[
            ["wall_ns", *(f"{c}_ns" for c in present)]
        ].sum()
        for r in g.itertuples():
            wall = r.wall_ns or 1
            dev = f"{r.device_type}:{r.device}" if r.device >= 0 else "cpu (host only)"
            t.add_row(
                str(r.rank), dev, fmt_ns(r.wall_ns), *(f"{100 * getattr(r, f'{c}_ns') / wall:.1f}%" for c in present)
            )
    return t


SHORT_LABELS = {
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


def _text(value: object, missing: str) -> str:
    """A label cell: ``missing`` for None, NaN and empty strings (never "nan")."""
    if (
        value is None
        or (isinstance(value, float) and value != value)
        or str(value).strip().lower() in ("", "nan", "none")
    ):
        return missing
    return str(value)
