"""Show what is inside a trace: events, devices, streams, steps, source and link coverage.

Events by kind and device, streams, steps, ranks, time span, source-line coverage, and how
complete the kernel -> launch -> op links are (and why the rest are not linked).

Examples:
  neuron-explorer info trace.parquet
  neuron-explorer info rank0.pt.trace.json.gz --format json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from neuron_explorer.analyzers.metrics.neuron_summary import (
    engine_table,
    fmt_pct,
    fmt_time,
    neuron_overview,
    profile_warnings,
)
from neuron_explorer.cli._common import add_trace_argument, open_trace, write_stdout
from neuron_explorer.reports.neuron_text import render_engine_table
from neuron_explorer.trace.line_coverage import coverage_text
from neuron_explorer.trace.summary import describe

_REASONS = {
    "cuda_graph": "replayed from a CUDA graph (one launch, many kernels)",
    "no_runtime_events": "the trace has no runtime (launch) events",
    "before_trace_window": "launched before the trace window began",
    "launch_not_recorded": "launch record missing from the trace",
}


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument("--format", choices=["text", "json"], default="text", help="output format (default: text)")


def run(args: argparse.Namespace) -> int:
    trace = open_trace(args.trace)
    info = describe(trace)
    neuron = neuron_overview(trace.metadata)
    if neuron:
        info["neuron"] = neuron
        info["neuron_engines"] = engine_table(trace.metadata).to_dict(orient="records")
        info["profile_warnings"] = profile_warnings(trace.metadata)
        # A device profile alone: no framework events, so no steps, source lines or launches.
        info["device_profile_only"] = not info["source"]["ops"] and not info["steps"]
    if args.format == "json":
        write_stdout(json.dumps(info, indent=2, default=_json_default) + "\n")
    else:
        render_text(info)
    return 0


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def _ms(ns: float | int | None) -> str:
    """A duration as analyze and every other output show it ("4.91 s", "297 µs")."""
    from neuron_explorer.trace.units import format_duration

    return "-" if ns is None else format_duration(ns)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def render_text(info: dict[str, Any]) -> None:
    from rich.markup import escape

    from neuron_explorer.reports.fit import Column, make_console, print_table, printable

    console = make_console()
    console.print(f"[bold]{escape(printable(info['path']))}[/bold]")
    ranks = info["ranks"]
    rank_note = "" if info.get("rank_known", True) else " (rank not recorded; assumed 0)"
    console.print(
        f"{info['events']:,} events · ranks {', '.join(map(str, ranks)) or '-'}{rank_note}"
        f" · world size {info.get('world_size') or '-'} · span {_ms(info['span_ns'])}"
        f" · devices {escape(printable(', '.join(info['device_types'])))} · schema {info['schema_version']}"
    )
    print_table(
        console,
        "Events by kind",
        [Column("kind", "name"), Column("events")],
        [[k, f"{v:,}"] for k, v in info["by_kind"].items()],
    )
    if info["devices"]:
        print_table(
            console,
            "Devices",
            [
                Column("rank"),
                Column("type", "text"),
                Column("device"),
                Column("streams", short="str", meaning="streams"),
                Column("events"),
                Column("busy (union)", short="busy", meaning="busy time, union over streams"),
                Column("sum over streams", short="sum", meaning="busy time summed over streams"),
            ],
            [
                [
                    str(d["rank"]),
                    str(d["device_type"]),
                    str(d["device"]),
                    str(d["streams"]),
                    f"{d['events']:,}",
                    _ms(d["busy_ns"]),
                    _ms(d["stream_busy_sum_ns"]),
                ]
                for d in info["devices"]
            ],
        )
        print_table(
            console,
            "Device streams",
            [
                Column("rank"),
                Column("device"),
                Column("stream"),
                Column("events"),
                Column("busy on stream", short="busy"),
            ],
            [
                [str(s["rank"]), str(s["device"]), str(s["stream"]), f"{s['events']:,}", _ms(s["busy_ns"])]
                for s in info["streams"][:32]
            ],
        )
    if info.get("device_profile_only"):
        console.print(
            "Framework side: none (a Neuron device profile alone: no steps, ops, source lines or launches; "
            "join the torch.profiler trace of the same run for them, docs/neuron.md)",
            markup=False,
        )
        _render_device_only_tail(console, info)
        return
    if info["steps"]:
        print_table(
            console,
            "Steps",
            [Column("rank"), Column("step"), Column("duration")],
            [[str(s["rank"]), str(s["step"]), _ms(s["dur_ns"])] for s in info["steps"][:50]],
        )
    else:
        console.print("Steps: none (no ProfilerStep#N annotations; profile with a schedule or call prof.step())")
    dropped = info.get("dropped_steps") or []
    if dropped:
        console.print(
            f"Dropped {len(dropped)} trailing partial step(s), not counted as steps: "
            + ", ".join(f"rank {d.get('rank', 0)} #{d.get('step')} ({_ms(d.get('dur_ns'))})" for d in dropped)
            + " (the span after the last step boundary, without a step's work)"
        )
    pruned_line = pruned_text(info.get("pruned") or {})
    if pruned_line:
        console.print(pruned_line, markup=False)
    src = info["source"]
    console.print(
        f"Source lines: {src['with_source']:,} of {src['events']:,} events ({_pct(src['with_source'], src['events'])}); "
        f"ops {src['ops_with_source']:,}/{src['ops']:,} ({_pct(src['ops_with_source'], src['ops'])}), "
        f"exact line {src['ops_exact_line']:,}; device events {src['device_events_with_source']:,}"
    )
    if src["by_precision"]:
        console.print("  by precision: " + ", ".join(f"{k} {v:,}" for k, v in src["by_precision"].items()))
    graph_line = graph_replay_text(info.get("graph_replay") or {})
    if graph_line:
        console.print(graph_line, markup=False)
    coverage = coverage_text(src.get("time") or {})
    if coverage:
        console.print(f"  {coverage}", markup=False)
    oplines = info.get("operator_lines") or {}
    if oplines.get("ops"):
        console.print(
            f"  operator syntax (a @ b, x[i]) placed from bytecode: {oplines['exact']:,} of {oplines['ops']:,} ops "
            f"at an exact line, {oplines['ambiguous']:,} ambiguous (left at their function), "
            f"{oplines['unmatched']:,} unmatched",
            markup=False,
        )
    for line in compiled_text(info):
        console.print(line, markup=False)
    links = info["links"]
    if links["device_events"]:
        console.print(
            f"Links: {links['launch_linked']:,} of {links['device_events']:,} device events linked to their launch "
            f"({links['launch_linked_pct']}%), {links['op_linked']:,} to a framework op ({links['op_linked_pct']}%)"
        )
        for reason, count in links["unlinked_reasons"].items():
            console.print(f"  not linked: {count:,} {_REASONS.get(reason, reason)}", markup=False)
    if links.get("backward_ops"):
        console.print(
            f"Backward ops linked to their forward op: {links['backward_ops_linked_to_forward']:,} of {links['backward_ops']:,}"
        )
    _render_device_only_tail(console, info)


def _render_device_only_tail(console: Any, info: dict[str, Any]) -> None:
    """Repairs, device properties and the NeuronCore block: what every trace ends with."""
    from neuron_explorer.reports.fit import printable

    if info.get("repairs"):
        console.print(f"Repairs made reading the input ({info['dropped_events']:,} events dropped):", markup=False)
        for r in info["repairs"]:
            console.print(f"  {r.get('action')}: {r.get('what')} ({r.get('count', 0):,})", markup=False)
    for p in info["device_properties"][:8]:
        mem = p.get("totalGlobalMem")
        name = printable(p.get("name"))
        console.print(f"Device {p.get('id')}: {name} {'' if mem is None else f'{mem / 2**30:.1f} GiB'}", markup=False)
    render_neuron(console, info)


def compiled_text(info: dict[str, Any]) -> list[str]:
    """Lines on torch.compile: the compiles (one-time spans), the kernels matched to Inductor's
    lines (metadata ``compiled_lines``) and inferred steps (``steps_from``)."""
    out = []
    spans, lines, steps = (
        info.get("compile_spans") or {},
        info.get("compiled_lines") or {},
        info.get("steps_from") or {},
    )
    if spans:
        out.append(
            f"Compiles: {spans['spans']:,} spans, {_ms(spans.get('dur_ns'))} (one-time; the compiler itself is not recorded)"
        )
    if lines.get("error"):
        out.append(f"Compiled regions: no lines from Inductor's provenance ({printable_value(lines['error'])})")
    elif lines:
        out.append(
            f"Compiled regions: {int(lines.get('matched_calls') or 0):,} kernel calls in "
            f"{int(lines.get('graph_runs') or 0):,} graph runs on the lines Inductor's provenance names "
            f"({int(lines.get('kernel_calls') or 0):,} calls of {int(lines.get('graphs') or 0):,} graphs; from "
            f"{printable_value(lines.get('source'))})"
        )
    if "function" in steps:
        out.append(
            f"Steps: one per return of {printable_value(steps['function'])} ({int(steps.get('calls') or 0):,} calls)"
        )
    elif "compiled_region" in steps:
        out.append(
            f"Steps: one per run of compiled region {printable_value(steps['compiled_region'])} (no optimizer step)"
        )
    return out


def printable_value(value: Any) -> str:
    from neuron_explorer.reports.fit import printable

    return printable(str(value))


def pruned_text(pruned: dict[str, Any]) -> str:
    """The line saying what the capture pruned of one-time Python (metadata ``pruned``)."""
    calls, spans = int(pruned.get("builtin_calls") or 0), int(pruned.get("collapsed_spans") or 0)
    if not calls and not spans:
        return ""
    return (
        f"Pruned one-time Python: {calls:,} builtin calls without torch work ({_ms(pruned.get('builtin_call_ns'))}); "
        f"{int(pruned.get('collapsed_events') or 0):,} library frames collapsed into {spans:,} spans "
        f"({_ms(pruned.get('collapsed_ns'))})"
    )


#: Why replayed graph work keeps its launch line (metadata ``graph_replay``), as ``info`` says it.
_GRAPH_REASONS = {
    "capture_not_in_trace": "captured before the trace began",
    "no_matching_capture": "no capture in the trace fits",
    "ambiguous": "several captures fit with other lines",
}


def graph_replay_text(graph: dict[str, Any]) -> str:
    """The line saying how much CUDA/HIP graph work took its capture's lines (``graph_replay``)."""
    events = int(graph.get("replayed_events") or 0)
    if not events:
        return ""
    matched = int(graph.get("matched_events") or 0)
    unmatched = graph.get("unmatched_events") or {}
    rest = "; ".join(f"{int(n):,} {_GRAPH_REASONS.get(k, k)}" for k, n in unmatched.items())
    return (
        f"  graph replays: {matched:,} of {events:,} replayed device events carry the line of their capture "
        f"({int(graph.get('graph_launches') or 0):,} launches, {int(graph.get('captures') or 0):,} captures in the trace)"
        + (f"; {rest}" if rest else "")
    )


def _window_words(d: dict[str, Any]) -> str:
    """How the kernel start was found, and the parts before it (docs/neuron.md)."""
    w = d.get("kernel_window") or {}
    pre, wait = w.get("preamble_ns") or 0, w.get("fixed_wait_ns") or 0
    parts = f"after a {fmt_time(pre)} preamble" + (f" and a {fmt_time(wait)} fixed wait" if wait else "")
    source = w.get("source")
    if source == "layer":
        return f"the kernel layer {w.get('layer')} of layer_summary, {parts}"
    if source == "wait":
        return f"the end of the fixed wait, {parts}"
    return "the first work row"


def render_neuron(console: Any, info: dict[str, Any]) -> None:
    from rich.markup import escape

    for d in info.get("neuron") or []:
        pct = [
            f"{label} {fmt_pct(d[key])}"
            for label, key in (
                ("engines alone active", "engines_active_pct"),
                ("engines plus DMA active", "engines_dma_active_pct"),
                ("DMA active", "dma_active_pct"),
                ("MFU", "mfu_pct"),
            )
        ]
        console.print(f"NeuronCore {d['device']}: {_ms(d['total_time_ns'])} profiled, " + ", ".join(pct))
        if d.get("kernel_time_ns"):
            kernel = [
                f"{label} {fmt_pct(d[key])}"
                for label, key in (
                    ("engines alone", "kernel_engines_active_pct"),
                    ("DMA", "kernel_dma_active_pct"),
                    ("engines plus DMA", "kernel_engines_dma_active_pct"),
                    ("MFU", "mfu_kernel_pct"),
                )
            ]
            console.print(
                f"  kernel {fmt_time(d['kernel_time_ns'])} (from {fmt_time(d['kernel_start_ns'])}, "
                f"{_window_words(d)}): " + ", ".join(kernel)
            )
        if d["metrics_only"]:
            console.print("  metrics only: a summary-json export holds no events")
    if info.get("neuron_engines"):
        import pandas as pd

        render_engine_table(console, pd.DataFrame(info["neuron_engines"]))
    for w in info.get("profile_warnings") or []:
        console.print(f"[yellow]The profile itself warns:[/yellow] {escape(str(w))}")
