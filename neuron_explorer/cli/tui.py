"""Browse a trace in the terminal: overview, findings, ops, kernels, source lines, timeline.

Opens a Parquet trace, a run directory of per-rank traces, or a Kineto .json/.json.gz (imported
first, with a progress bar). The trace is read and checked before the screen switches to the
app, so a missing or corrupt file is one line of error, not a broken terminal. The analysis
runs in the background; the views fill in when it is done.

Keys: 1-6 or tab switch views, / filters (or searches), enter drills down, s/r sort, ? help, q quit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neuron_explorer.cli._common import add_trace_argument, progress_bar
from neuron_explorer.cli.memory_check import check_fits
from neuron_explorer.trace.errors import NeuronExplorerError


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument(
        "--source-dir",
        metavar="DIR",
        action="append",
        default=[],
        help="where to look for source files recorded with relative paths (repeatable; default: the trace's and the current directory)",
    )


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.tui.data import TraceSource

    path = Path(args.trace)
    check_fits(path)
    with progress_bar(f"importing {path.name}") as update:
        source = TraceSource.open(path, progress=update)
    if not sys.stdout.isatty():
        raise NeuronExplorerError("the TUI needs a terminal; use `neuron-explorer analyze` for text output")
    search_dirs = (*tuple(Path(d) for d in args.source_dir), path if path.is_dir() else path.parent, Path.cwd())

    from neuron_explorer.tui.app import ExplorerApp

    ExplorerApp(source, search_dirs=search_dirs).run()
    return 0
