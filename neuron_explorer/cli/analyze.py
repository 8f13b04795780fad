"""Say what holds the run back: every metric and rule on a trace, as text, JSON or markdown.

Findings come most costly first, each with its numbers, the threshold used, the source lines
responsible and a fix. Rules that lack data say "skipped: needs X": text output folds them into
one line (--verbose lists each).

Examples:
  neuron-explorer analyze trace.parquet
  neuron-explorer analyze run_dir/ --format json -o analysis.json
  neuron-explorer analyze rank0.pt.trace.json.gz --rules device,dataloader_stall --min-severity warning
  neuron-explorer analyze trace.parquet --format markdown --fail-on error   # CI gate: exit 1 on errors
  neuron-explorer analyze trace.parquet --threshold device_idle.min_busy_pct=70
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neuron_explorer.analyzers import SEVERITIES, analyze
from neuron_explorer.analyzers.core.context import ANALYSIS_COLUMNS
from neuron_explorer.analyzers.finding import SEVERITY_RANK
from neuron_explorer.cli._common import (
    add_device_spec_argument,
    add_output_argument,
    add_trace_argument,
    device_spec_of,
    open_trace,
    write_stdout,
)
from neuron_explorer.cli.memory_check import check_fits
from neuron_explorer.trace import Trace
from neuron_explorer.trace.atomic import atomic_path, check_output
from neuron_explorer.trace.errors import AnalysisError, TraceFormatError
from neuron_explorer.trace.printable import printable

EXIT_FINDINGS = 1


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument(
        "--format", choices=["text", "json", "markdown"], default="text", help="output format (default: text)"
    )
    parser.add_argument("--rules", metavar="IDS", help="comma-separated rule ids or families to run (default: all)")
    parser.add_argument("--min-severity", choices=SEVERITIES, default="info", help="hide findings below this severity")
    parser.add_argument(
        "--fail-on",
        choices=["warning", "error"],
        help="exit with status 1 when a finding of this severity or worse is found",
    )
    parser.add_argument(
        "--threshold",
        metavar="RULE.NAME=VALUE",
        action="append",
        default=[],
        help="override a rule threshold, e.g. device_idle.min_busy_pct=70 (repeatable)",
    )
    parser.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        help="list every rule that did not apply, with what it lacked (text output folds them into one line)",
    )
    parser.add_argument("--top", type=int, default=10, help="rows per table in text/markdown output (default: 10)")
    add_device_spec_argument(parser)
    add_output_argument(parser, "write the report to this file instead of stdout")


def parse_thresholds(items: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or "." not in key:
            raise AnalysisError(f"--threshold {item!r}: expected RULE.NAME=VALUE, e.g. device_idle.min_busy_pct=70")
        try:
            out[key.strip()] = float(value)
        except ValueError:
            raise AnalysisError(f"--threshold {item!r}: {value!r} is not a number") from None
    return out


def _check_thresholds(overrides: dict[str, float]) -> None:
    from neuron_explorer.analyzers.rules import all_rules

    rules = all_rules()
    for key in overrides:
        rid, _, name = key.partition(".")
        if rid not in rules:
            raise AnalysisError(f"--threshold {key}: unknown rule {rid!r}")
        if name not in rules[rid].thresholds:
            raise AnalysisError(
                f"--threshold {key}: rule {rid} has no threshold {name!r} "
                f"(it has: {', '.join(rules[rid].thresholds) or 'none'})"
            )


def run(args: argparse.Namespace) -> int:
    overrides = parse_thresholds(args.threshold)
    _check_thresholds(overrides)
    rules = [r for r in args.rules.split(",") if r.strip()] if args.rules else None
    spec = device_spec_of(args)
    if args.output:
        check_output(args.output)  # (before the work, not after it)
    trace = load_for_analysis(args.trace, quiet=args.format != "text" and not args.output)
    a = analyze(trace, rules=rules, thresholds=overrides, device_spec=spec)
    if args.format == "json":
        from neuron_explorer.reports.json_report import render as render_json

        text = render_json(a, args.min_severity) + "\n"
    elif args.format == "markdown":
        from neuron_explorer.reports.markdown import render as render_md

        text = render_md(a, args.min_severity, args.top)
    else:
        text = None
    if text is None:
        from neuron_explorer.reports.text import render as render_text

        if args.output:
            import io

            buf = io.StringIO()
            render_text(a, buf, args.min_severity, args.top, width=140, verbose=args.verbose)
            _write(Path(args.output), buf.getvalue())
            print(f"wrote {printable(args.output)} ({len(a.findings)} findings)", file=sys.stderr)
        else:
            render_text(a, sys.stdout, args.min_severity, args.top, verbose=args.verbose)
    elif args.output:
        _write(Path(args.output), text)
        print(f"wrote {printable(args.output)} ({len(a.findings)} findings)", file=sys.stderr)
    else:
        write_stdout(text)
    if args.fail_on:
        floor = SEVERITY_RANK[args.fail_on]
        if any(SEVERITY_RANK[f.severity] >= floor for f in a.findings):
            return EXIT_FINDINGS
    return 0


def load_for_analysis(path: str, quiet: bool = False) -> Trace:
    """A Parquet trace or run directory is read with only the columns the analyzers use (most
    of a trace's bytes are raw args they never read); JSON is imported in full."""
    p = Path(path)
    if p.is_dir() or p.suffix in (".parquet", ".pq"):
        check_fits(p)
        try:
            return Trace.read(p, columns=ANALYSIS_COLUMNS)
        except TraceFormatError:
            if not p.is_dir():
                raise
            # not a run directory of Parquet traces: a Neuron export directory, say
    return open_trace(path, quiet=quiet)


def _write(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    print(f"wrote {printable(path)}", file=sys.stderr)
