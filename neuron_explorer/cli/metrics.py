"""Export the analysis as Parquet tables for agents and notebooks (one file per metric family).

Writes one Parquet file per table: steps, attribution, breakdown, temporal, idle, kernels,
kernel_types, ops, source_lines, launches, overlap, neuron_operators, neuron_summary,
neuron_engines, op_perf, op_categories, rank_steps, collectives, collective_sizes,
memory_at_peak, memory_live, memory_replay, memory_fragmentation and findings (empty where the
trace has no such data), plus fields.parquet (every field's table, type, unit and description) and summary.json.
The directory is written atomically. Which table answers which question: docs/agents.md.

Examples:
  neuron-explorer metrics trace.parquet -o metrics/
  python -c "import pandas; print(pandas.read_parquet('metrics/ops.parquet'))"
"""

from __future__ import annotations

import argparse
import os
import sys

from neuron_explorer.analyzers import analyze
from neuron_explorer.cli._common import (
    add_device_spec_argument,
    add_output_argument,
    add_trace_argument,
    device_spec_of,
)
from neuron_explorer.cli.analyze import load_for_analysis
from neuron_explorer.trace.atomic import check_output
from neuron_explorer.trace.errors import AnalysisError
from neuron_explorer.trace.printable import printable


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    add_output_argument(parser, "directory to write the tables into (replaced atomically)", required=True)
    add_device_spec_argument(parser)


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.reports.metrics_parquet import write_metrics

    out = check_output(args.output, directory=True)
    if out.is_dir() and any(out.iterdir()):
        # Replaced whole (atomically), so only an export holding nothing but what an export
        # writes: a user's notes.txt beside an earlier export was deleted with it before.
        foreign = sorted(
            p.name for p in out.iterdir() if not (p.is_file() and (p.suffix == ".parquet" or p.name == "summary.json"))
        )
        if foreign or not (out / "fields.parquet").exists():
            shown = ", ".join(printable(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise AnalysisError(
                "output directory is not a previous metrics export"
                + (f" (it holds {shown}, which an export does not write)" if foreign else "")
                + "; refusing to replace it: name a new or empty directory",
                out,
            )
    spec = device_spec_of(args)
    trace = load_for_analysis(args.trace)
    a = analyze(trace, device_spec=spec)
    write_metrics(a, out)
    print(f"wrote {len(os.listdir(out))} files to {printable(out)}", file=sys.stderr)
    return 0
