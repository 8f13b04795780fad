"""Write a self-contained HTML report (Plotly charts, sortable tables) of a trace's analysis.

The page holds the verdict, the findings (most costly first, with evidence, source lines and
the fix), the step-time breakdown, a device timeline, the top kernels and ops, the line-level
profile and the memory timeline: the same numbers as `neuron-explorer analyze`. Plotly is
embedded, so the file works offline, from a file URL or as an e-mail attachment.

examples:
  neuron-explorer report trace.parquet -o report.html
  neuron-explorer report run_dir/ -o run.html --title "ResNet-50, 8x A100"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neuron_explorer.cli._common import (
    add_device_spec_argument,
    add_output_argument,
    add_trace_argument,
    device_spec_of,
    open_trace,
)


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    add_output_argument(parser, "the HTML file to write (default: <trace name>.html in the current directory)")
    parser.add_argument("--title", help="the workload name shown in the header (default: the trace's name)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    add_device_spec_argument(parser)


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.analyzers import analyze
    from neuron_explorer.reports.html import write_report
    from neuron_explorer.trace.atomic import check_output
    from neuron_explorer.trace.printable import printable

    output = Path(args.output) if args.output else Path.cwd() / f"{_stem(Path(args.trace))}.html"
    check_output(output)  # say so before minutes of import and analysis, not after
    spec = device_spec_of(args)
    trace = open_trace(args.trace, quiet=args.quiet)
    path = write_report(trace, output, analysis=analyze(trace, device_spec=spec), title=args.title)
    if not args.quiet:
        size_mb = path.stat().st_size / 1e6
        print(f"wrote {printable(path)} ({size_mb:.1f} MB); open it in a browser", file=sys.stderr)
    return 0


def _stem(path: Path) -> str:
    name = path.resolve().name
    for suffix in (".gz", ".json", ".parquet", ".pq", ".pt.trace"):
        name = name.removesuffix(suffix)
    return name or "report"
