"""Export a trace to another format: Chrome trace JSON for Perfetto and chrome://tracing.

The export is exact: importing it again gives the same events table.

Examples:
  neuron-explorer export trace.parquet --format chrome -o trace.json.gz
"""

from __future__ import annotations

import argparse
import sys

from neuron_explorer.cli._common import add_output_argument, add_trace_argument, open_trace
from neuron_explorer.reports.chrome_trace import write_chrome_trace
from neuron_explorer.trace.atomic import check_output
from neuron_explorer.trace.printable import printable


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument("--format", choices=["chrome"], default="chrome", help="output format (default: chrome)")
    add_output_argument(parser, "output file; .json or .json.gz", required=True)


def run(args: argparse.Namespace) -> int:
    check_output(args.output)
    trace = open_trace(args.trace)
    path = write_chrome_trace(trace, args.output)
    print(f"wrote {printable(path)} ({trace.num_events:,} events)", file=sys.stderr)
    return 0
