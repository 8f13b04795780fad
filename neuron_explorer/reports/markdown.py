"""Render an ``Analysis`` as GitHub-flavoured markdown for PR comments (``analyze --format markdown``)."""

from __future__ import annotations

from neuron_explorer.analyzers import Analysis
from neuron_explorer.reports._format import fmt_ns, fmt_value, skipped_summary
from neuron_explorer.reports.location import FUNCTION_LEVEL_HINT, Locations
from neuron_explorer.reports.names import short_kernel_name

_ICON = {"error": "🔴", "warning": "🟠", "info": "🔵"}


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(a: Analysis, min_severity: str = "info", top: int = 10) -> str:
    s = a.summary
    where = Locations.for_analysis(a)
    function_level = False
    out = [
        f"## Neuron Explorer analysis: `{_cell(s['source'] or 'trace')}`",
        "",
        f"**Verdict:** {s['verdict']}",
        "",
        f"{s['num_events']:,} events · wall {fmt_ns(s['wall_ns'])} · {s['num_steps']} step(s) · ranks {s['ranks']} · "
        f"devices {', '.join(s['devices']) or 'cpu only'}",
        "",
    ]
    if a.step_stats.get("num_steps"):
        st = a.step_stats
        out += [f"Step time: p50 {fmt_ns(st['p50_ns'])}, p95 {fmt_ns(st['p95_ns'])}, cv {st['cv_pct']:.1f}%", ""]
    out += ["| part | share of wall time |", "|---|---:|"]
    for key, label in (
        ("compute_pct", "compute"),
        ("memcpy_pct", "memcpy + memset"),
        ("communication_pct", "communication (exposed)"),
        ("host_exposed_pct", "host (exposed)"),
        ("idle_pct", "idle"),
    ):
        out.append(f"| {label} | {s[key]:.1f}% |")
    findings = a.filter(min_severity)
    out += ["", f"### Findings ({len(findings)})", ""]
    if not findings:
        out.append("No problems detected by the rules that ran.")
    for f in findings:
        out.append(f"#### {_ICON[f.severity]} {f.severity}: {_cell(f.title)} (`{f.rule_id}`)")
        out.append("")
        out.append(_cell(f.message))
        if f.metrics:
            out.append("")
            out.append(" · ".join(f"{k}: **{fmt_value(v)}**" for k, v in f.metrics.items()))
        if f.source_lines:
            out.append("")
            out.append("Where: " + ", ".join(f"`{_cell(where.finding_line(x))}`" for x in f.source_lines[:3]))
            function_level |= any(where.is_function_level(x.get("file"), x.get("line")) for x in f.source_lines[:3])
        out += ["", f"**Fix:** {_cell(f.recommendation)}", ""]
    if len(a.kernels):
        out += ["### Top kernels", "", "| kernel | category | count | total | % |", "|---|---|---:|---:|---:|"]
        for r in a.kernels.head(top).itertuples():
            out.append(
                f"| `{_cell(short_kernel_name(r.name, 60))}` | {r.category} | {r.count:,} | {fmt_ns(r.total_ns)} | {r.pct:.1f} |"
            )
        out.append("")
    if len(a.source_lines):
        out += ["### Top source lines", "", "| line | host (self) | device | kernels |", "|---|---:|---:|---:|"]
        for r in a.source_lines.head(top).itertuples():
            prec = getattr(r, "src_precision", None)
            function_level |= where.is_function_level(r.src_file, r.src_line, prec)
            out.append(
                f"| `{_cell(where.format(r.src_file, r.src_line, r.src_func, prec))}` | {fmt_ns(r.host_ns)} | "
                f"{fmt_ns(r.device_ns)} | {r.kernel_count:,} |"
            )
        out.append("")
    if function_level:
        out += [f"_{_cell(FUNCTION_LEVEL_HINT)}_", ""]
    if a.skipped:
        out += [f"<details><summary>{_cell(skipped_summary(a.skipped))}</summary>", ""]
        out += [f"- `{rid}`: {_cell(why)}" for rid, why in a.skipped]
        out += ["", "</details>", ""]
    return "\n".join(out)
