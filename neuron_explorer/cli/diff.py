"""Compare two traces: what got slower per step, where in the code, and how sure (a CI gate).

BASE and NEW are traces (Parquet, Kineto .json/.json.gz) or run directories. Step time, its
attribution categories, kernels, ops, source lines and collectives are matched and compared
per step, each change with a confidence over steps (a bootstrap; "not enough steps" under 3
per side). Source lines match across code versions when the source files are readable.

Examples:
  neuron-explorer diff base.parquet new.parquet
  neuron-explorer diff base/ new/ --format markdown -o diff.md        # a PR comment
  neuron-explorer diff base.parquet new.parquet --format html -o diff.html
  neuron-explorer diff base.parquet new.parquet --fail-on-regression 5   # CI: exit 1 when slower
  neuron-explorer diff a.json.gz b.json.gz --fail-on-regression 3 --metric step,communication

Exit status: 0, or 1 when --fail-on-regression finds a regression; 3 for a bad input.
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Sequence
from pathlib import Path

from neuron_explorer.analyzers.core.context import ANALYSIS_COLUMNS
from neuron_explorer.analyzers.diff import CONFIDENCE, DiffError, GateCheck, TraceDiff, diff_traces, gate
from neuron_explorer.cli._common import add_output_argument, open_trace, write_stdout
from neuron_explorer.reports.fit import PIPE_WIDTH, text_width
from neuron_explorer.trace import Trace
from neuron_explorer.trace.atomic import atomic_path, check_output
from neuron_explorer.trace.errors import TraceFormatError

EXIT_REGRESSION = 1
#: Source files larger than this are not read for line matching (generated code, data).
MAX_SOURCE_BYTES = 4 << 20


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", metavar="BASE", help="the trace or run directory to compare against")
    parser.add_argument("new", metavar="NEW", help="the trace or run directory to compare")
    parser.add_argument(
        "--format",
        choices=["text", "json", "markdown", "html"],
        default="text",
        help="output format (default: text; html needs -o)",
    )
    parser.add_argument(
        "--fail-on-regression",
        type=float,
        metavar="PCT",
        help="exit with status 1 when the step time or an attribution category got slower by more "
        "than PCT %% of the base step time, with confidence",
    )
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAMES",
        help="what --fail-on-regression gates: step, a category (compute, idle, ...), categories or "
        "all (default); comma-separated or repeated",
    )
    parser.add_argument(
        "--confidence",
        type=float,
        default=CONFIDENCE,
        metavar="P",
        help=f"the confidence a change needs to count (default: {CONFIDENCE})",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="gate even runs that are not comparable (different devices or world size; default: they fail nothing)",
    )
    parser.add_argument("--include-warmup", action="store_true", help="keep warm-up steps (left out by default)")
    parser.add_argument("--tui", action="store_true", help="browse the diff in the terminal instead of printing it")
    parser.add_argument("--top", type=int, default=10, help="rows per table in text/markdown/html (default: 10)")
    add_output_argument(parser, "write the diff to this file instead of stdout")


def load_for_diff(path: str, quiet: bool = False) -> Trace:
    """A Parquet trace or run directory with the analysis columns plus input shapes; JSON in full."""
    p = Path(path)
    if p.is_file() and p.suffix in (".parquet", ".pq"):
        return Trace.read(p, columns=tuple(dict.fromkeys((*ANALYSIS_COLUMNS, "input_shapes"))))
    if p.is_dir():
        try:
            return Trace.read(p, columns=tuple(dict.fromkeys((*ANALYSIS_COLUMNS, "input_shapes"))))
        except TraceFormatError:
            pass  # not a converted run: a Neuron Parquet export, a JSON run, raw captures (load says)
    return open_trace(path, quiet=quiet)


def read_source_lines(path: str) -> Sequence[str] | None:
    """The lines of a source file named in a trace, or None when it cannot be read here."""
    try:
        p = Path(path)
        if not p.is_file() or p.stat().st_size > MAX_SOURCE_BYTES:
            return None
        return p.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def run(args: argparse.Namespace) -> int:
    if args.format == "html" and not args.output:
        raise DiffError("--format html writes a page: give it a file with -o diff.html")
    if not 0.5 <= args.confidence < 1:
        raise DiffError(f"--confidence {args.confidence}: expected a probability in [0.5, 1), e.g. 0.95")
    metrics = [m for item in args.metric for m in item.split(",") if m.strip()] or None
    if args.output:
        check_output(args.output)
    quiet = args.format != "text" or bool(args.output)
    base = load_for_diff(args.base, quiet=quiet)
    new = load_for_diff(args.new, quiet=quiet)
    d = diff_traces(base, new, read_lines=read_source_lines, include_warmup=args.include_warmup, confidence=args.confidence)  # fmt: skip
    checks = gate(d, args.fail_on_regression, metrics, args.force) if args.fail_on_regression is not None else None
    if checks is None and metrics:
        gate(d, 0.0, metrics)  # validate --metric even without a gate: a typo should not pass silently
    if args.tui:
        return _browse(d, args.top, checks, args.fail_on_regression)
    text = render(d, args.format, args.top, checks, args.fail_on_regression, None if args.output else text_width())
    if args.output:
        with atomic_path(args.output) as tmp:
            tmp.write_text(text, encoding="utf-8")
    else:
        write_stdout(text)
    if checks is not None and any(c.failed for c in checks):
        for c in checks:
            if c.failed:
                print(
                    f"neuron-explorer: regression: {c.describe()} > {args.fail_on_regression:g}%",
                    file=sys.stderr,
                )
        return EXIT_REGRESSION
    return 0


def _browse(d: TraceDiff, top: int, checks: list[GateCheck] | None, threshold: float | None) -> int:
    if not sys.stdout.isatty():
        raise DiffError("--tui needs a terminal; leave it out for text output")
    from neuron_explorer.reports.diff.view import build
    from neuron_explorer.tui.views.diff import DiffApp

    DiffApp(build(d, top=max(top, 50), checks=checks, threshold=threshold)).run()
    return EXIT_REGRESSION if checks and any(c.failed for c in checks) else 0


def render(
    d: TraceDiff,
    fmt: str,
    top: int,
    checks: list[GateCheck] | None,
    threshold: float | None,
    width: int | None = None,
) -> str:
    """The diff in one format (the gate's checks shown when given)."""
    if fmt == "json":
        from neuron_explorer.reports.diff.json import render as render_json

        return render_json(d, max_rows=max(top, 50), checks=checks, threshold=threshold) + "\n"
    from neuron_explorer.reports.diff.view import build

    view = build(d, top=top, checks=checks, threshold=threshold)
    if fmt == "markdown":
        from neuron_explorer.reports.diff.markdown import render as render_md

        return render_md(view)
    if fmt == "html":
        from neuron_explorer.reports.diff.html import render as render_html

        return render_html(view)
    from neuron_explorer.reports.diff.text import render as render_text

    buf = io.StringIO()
    buf.write(render_text(view, width or PIPE_WIDTH) + "\n")
    return buf.getvalue()
