"""Render an ``Analysis`` as readable terminal text with rich tables (``analyze --format text``)."""

from __future__ import annotations

from typing import IO

from neuron_explorer.analyzers import Analysis
from neuron_explorer.analyzers.perf.shapes import short_shapes
from neuron_explorer.reports._format import fmt_bytes, fmt_line, fmt_ns, fmt_value, short

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def render(
    a: Analysis, out: IO[str] | None = None, min_severity: str = "info", top: int = 10, width: int | None = None
) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=width, highlight=False, soft_wrap=False)
    s = a.summary
    console.print(f"[bold]{s['source'] or 'trace'}[/bold]")
    console.print(
        f"{s['num_events']:,} events, wall {fmt_ns(s['wall_ns'])}, {s['num_steps']} step(s), ranks {s['ranks']}, "
        f"devices {', '.join(s['devices']) or 'cpu only'}"
    )
    console.print(f"[bold]Verdict:[/bold] {s['verdict']}")

    if a.step_stats.get("num_steps"):
        st = a.step_stats
        console.print(
            f"Steps: p50 {fmt_ns(st['p50_ns'])}, p95 {fmt_ns(st['p95_ns'])}, mean {fmt_ns(st['mean_ns'])}, "
            f"cv {st['cv_pct']:.1f}%, warm-up {st['num_warmup']}, outliers {st['num_outliers']}"
        )

    t = Table(title="Where the time went (per rank and device, all steps)", title_justify="left")
    for col in ("rank", "device", "wall", "compute", "memcpy", "memset", "comm (exposed)", "host (exposed)", "idle"):
        t.add_column(col, justify="right" if col not in ("device",) else "left")
    bd = a.breakdown
    if len(bd):
        g = bd.groupby(["rank", "device", "device_type"], as_index=False)[
            ["wall_ns", "compute_ns", "memcpy_ns", "memset_ns", "communication_ns", "host_exposed_ns", "idle_ns"]
        ].sum()
        for r in g.itertuples():
            wall = r.wall_ns or 1
            pct = [
                f"{100 * v / wall:.1f}%"
                for v in (r.compute_ns, r.memcpy_ns, r.memset_ns, r.communication_ns, r.host_exposed_ns, r.idle_ns)
            ]
            dev = f"{r.device_type}:{r.device}" if r.device >= 0 else "cpu (host only)"
            t.add_row(str(r.rank), dev, fmt_ns(r.wall_ns), *pct)
    console.print(t)

    findings = a.filter(min_severity)
    console.print(f"\n[bold]Findings ({len(findings)}, most costly first)[/bold]")
    if not findings:
        console.print("No problems detected by the rules that ran.")
    for i, f in enumerate(findings, 1):
        cost = f" (costs ~{fmt_ns(f.cost_ns)})" if f.cost_ns else ""
        console.print(
            f"{i}. [{_STYLE[f.severity]}]{f.severity.upper()}[/] [bold]{f.title}[/bold]{cost}  [dim]{f.rule_id}[/dim]"
        )
        console.print(f"   {f.message}")
        if f.metrics:
            console.print("   [dim]" + ", ".join(f"{k} {fmt_value(v)}" for k, v in f.metrics.items()) + "[/dim]")
        if f.source_lines:
            console.print("   Where: " + "; ".join(fmt_line(x) for x in f.source_lines[:3]))
        console.print(f"   [green]Fix:[/green] {f.recommendation}")
    console.print()

    if len(a.kernels):
        t = Table(title=f"Top kernels (of {len(a.kernels)})", title_justify="left")
        for col in ("kernel", "category", "count", "total", "mean", "%"):
            t.add_column(col, justify="left" if col in ("kernel", "category") else "right")
        for r in a.kernels.head(top).itertuples():
            t.add_row(
                short(r.name, 60), r.category, f"{r.count:,}", fmt_ns(r.total_ns), fmt_ns(r.mean_ns), f"{r.pct:.1f}"
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
        t = Table(title="Top source lines", title_justify="left")
        for col in ("line", "host (self)", "device", "kernels", "allocated"):
            t.add_column(col, justify="left" if col == "line" else "right")
        for r in a.source_lines.head(top).itertuples():
            t.add_row(
                short(f"{r.src_file}:{r.src_line} ({r.src_func})", 70),
                fmt_ns(r.host_ns),
                fmt_ns(r.device_ns),
                f"{r.kernel_count:,}",
                fmt_bytes(r.alloc_bytes),
            )
        console.print(t)

    if a.skipped:
        console.print("[dim]Rules skipped: " + "; ".join(f"{rid} ({why})" for rid, why in a.skipped) + "[/dim]")
