"""Render an ``Analysis`` as GitHub-flavoured markdown for PR comments (``analyze --format markdown``)."""

from __future__ import annotations

from neuron_explorer.analyzers import Analysis
from neuron_explorer.analyzers.attribution import (
    CATEGORY_LABELS,
    CATEGORY_NAMES,
    HOST_ONLY_LABELS,
    NEURON_DEVICE_LABELS,
)
from neuron_explorer.analyzers.perf.shapes import short_shapes
from neuron_explorer.reports._format import fmt_ns, fmt_value, short, skipped_details, skipped_summary
from neuron_explorer.reports.fixes import cost_phrase, fixes_line
from neuron_explorer.reports.location import Locations, function_level_hint
from neuron_explorer.reports.names import short_kernel_name
from neuron_explorer.reports.text import OVER_PEAK_NOTE, OVER_PEAK_PCT, rate

_ICON = {"error": "🔴", "warning": "🟠", "info": "🔵"}


def _pct(v: object) -> str:
    from neuron_explorer.analyzers.metrics.neuron_summary import fmt_pct

    return fmt_pct(float(v)) if isinstance(v, (int, float)) and v == v else "-"


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
        *[f"> The profile itself warns: {_cell(w)}\n" for w in s.get("profile_warnings") or []],
        f"{s['num_events']:,} events · span {fmt_ns(s['wall_ns'])} · {s['num_steps']} step(s) · ranks {s['ranks']} · "
        f"devices {', '.join(s['devices']) or 'cpu only'}",
        "",
    ]
    if a.step_stats.get("num_steps"):
        st = a.step_stats
        out += [f"Step time: p50 {fmt_ns(st['p50_ns'])}, p95 {fmt_ns(st['p95_ns'])}, cv {st['cv_pct']:.1f}%", ""]
    labels = HOST_ONLY_LABELS if s["device_types"] == ["cpu"] else CATEGORY_LABELS
    if s["device_types"] == ["neuron"] and s.get("neuron") and not len(a.ops):  # a device profile alone
        labels = NEURON_DEVICE_LABELS
    out += [
        "| where the profiled time went (every step window, warm-up included; each instant once, by priority) "
        "| share |",
        "|---|---:|",
    ]
    for name in CATEGORY_NAMES:
        if s.get(f"{name}_pct"):
            out.append(f"| {labels[name]} | {s[f'{name}_pct']:.1f}% |")
    findings = a.filter(min_severity)
    out += ["", f"### Findings ({len(findings)})", ""]
    if not findings:
        out.append("No problems detected by the rules that ran.")
    if fixes_line(a.fixes):
        out += [_cell(fixes_line(a.fixes) or ""), ""]
    for f in findings:
        out.append(f"#### {_ICON[f.severity]} {f.severity}: {_cell(f.title)} (`{f.rule_id}`)")
        out.append("")
        out.append(_cell(f.message + cost_phrase(f)))
        if f.metrics:
            out.append("")
            out.append(" · ".join(f"{k}: **{fmt_value(v)}**" for k, v in f.metrics.items()))
        if f.threshold:
            out.append("")
            out.append("Threshold: " + " · ".join(f"{k} {fmt_value(v)}" for k, v in f.threshold.items()))
        if f.source_lines:
            out.append("")
            out.append("Where: " + ", ".join(f"`{_cell(where.finding_line(x))}`" for x in f.source_lines[:3]))
            function_level |= any(where.is_function_level(x.get("file"), x.get("line")) for x in f.source_lines[:3])
        out += ["", f"**Fix:** {_cell(f.recommendation)}", ""]
    engines = getattr(a, "neuron_engines", None)
    if engines is not None and len(engines):
        out += [
            "### NeuronCore engines and DMA queues",
            "",
            "| core | engine / queue | instructions | active | % of kernel | % of span |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for r in engines.to_dict(orient="records"):
            unit = ("DMA " if r["type"] == "dma" else "") + str(r["unit"])
            n = r.get("instructions")
            out.append(
                f"| {r['device']} | {_cell(unit)} | {'-' if n is None or n != n else f'{int(n):,}'} | "
                f"{fmt_ns(r['active_ns'])} | {_pct(r.get('kernel_util_pct'))} | {_pct(r.get('span_util_pct'))} |"
            )
        out.append("")
    if len(a.kernels):
        out += ["### Top kernels", "", "| kernel | category | count | total | % |", "|---|---|---:|---:|---:|"]
        for r in a.kernels.head(top).itertuples():
            out.append(
                f"| `{_cell(short_kernel_name(r.name, 60))}` | {r.category} | {r.count:,} | {fmt_ns(r.total_ns)} | {r.pct:.1f} |"
            )
        out.append("")
    if len(a.ops):
        out += [
            "### Top ops",
            "",
            "| op | calls | host total | host self | device | kernels |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in a.ops.head(top).itertuples():
            out.append(
                f"| `{_cell(short(r.name, 60))}` | {r.count:,} | {fmt_ns(r.host_total_ns)} | {fmt_ns(r.host_self_ns)} | "
                f"{fmt_ns(r.device_ns)} | {r.kernel_count:,} |"
            )
        out.append("")
    perf = a.op_perf[a.op_perf["gflops"].notna()] if len(a.op_perf) else a.op_perf
    device = (a.perf_summary.get("device") or {}).get("name")
    if len(perf) and (not device or a.perf_summary.get("time_source") != "device kernels"):
        out += [
            f"_Op performance: no device roofline ({_cell(a.perf_summary.get('device_source') or 'no device')})._",
            "",
        ]
    elif len(perf):
        out += [
            f"### Op performance vs {_cell(device)}",
            "",
            "| op | shapes | calls | kernel time | TFLOP/s | TB/s | bound | % of roof |",
            "|---|---|---:|---:|---:|---:|---|---:|",
        ]
        over = 0
        for r in perf.head(top).itertuples():
            flagged = r.pct_of_peak > OVER_PEAK_PCT
            over += bool(flagged)
            pct = "-" if r.pct_of_peak != r.pct_of_peak else ("over ⚠" if flagged else f"{r.pct_of_peak:.1f}")
            out.append(
                f"| `{_cell(short(r.name, 40))}` | `{_cell(short(short_shapes(r.shapes), 40))}` | {r.count:,} | "
                f"{fmt_ns(r.kernel_time_us * 1e3)} | {rate(r.tflops_per_s)} | {rate(r.tb_per_s)} | {r.bound or '-'} | {pct} |"
            )
        out.append("")
        if over:
            out += [f"⚠ {over} op group(s) above 100% of the {_cell(device)} peak: {OVER_PEAK_NOTE}", ""]
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
        out += [f"_{_cell(function_level_hint(a.summary.get('collector')))}_", ""]
    out += [f"> **{_cell(line)}**" for _r, line in a.rule_errors] + ([""] if a.rule_errors else [])
    if a.skipped:
        line = skipped_summary(a.skipped, bool(a.summary.get("device_profile_only")))
        out += [f"<details><summary>{_cell(line)}</summary>", ""]
        details = skipped_details(a.skipped, bool(a.summary.get("device_profile_only")))
        out += [f"- `{rid}`: {_cell(why)}" for rid, why in details]
        out += ["", "</details>", ""]
    return "\n".join(out)
