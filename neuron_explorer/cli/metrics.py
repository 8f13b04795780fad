"""Export the analysis as Parquet tables for agents and notebooks (one file per metric family).

Writes steps, breakdown, temporal, idle, kernels, kernel_types, ops, source_lines, launches, overlap and
findings, plus fields.parquet (every field's table, type, unit and description) and
summary.json. The directory is written atomically.

Examples:
  neuron-explorer metrics trace.parquet -o metrics/
  duckdb -c "select * from 'metrics/source_lines.parquet' order by host_ns desc limit 5"
"""

from __future__ import annotations

import argparse
import os

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
from neuron_explorer.trace.paths import printable


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    add_output_argument(parser, "directory to write the tables into (replaced atomically)", required=True)
    add_device_spec_argument(parser)


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.reports.metrics_parquet import write_metrics

    out = check_output(args.output, directory=True)
    if out.is_dir() and any(out.iterdir()) and not (out / "fields.parquet").exists():
        raise AnalysisError(
            "output directory is not empty and is not a previous metrics export; refusing to replace it", out
        )
    spec = device_spec_of(args)
    trace = load_for_analysis(args.trace)
    a = analyze(trace, device_spec=spec)
    write_metrics(a, out)
    print(f"wrote {len(os.listdir(out))} files to {printable(out)}")
    return 0
