"""Serve traces to AI agents over the Model Context Protocol (stdio).

Starts an MCP server on stdin/stdout for an MCP client (Claude Desktop, Claude Code, an IDE,
any agent framework) to launch. It serves the given traces and their analysis as tools:
list_traces, trace_summary, findings, top_kernels, top_ops, top_source_lines, step_breakdown,
source_context, schema and sql (read-only DuckDB SQL, 5,000 rows at most, with a time limit),
and docs/schema.md and docs/rules.md as resources. Source code is shown only from inside the
--source-root directories and the directories of the absolute source files the traces recorded.

Examples:
  neuron-explorer mcp run/trace.parquet
  neuron-explorer mcp run/ --source-root ~/src/my-model
  neuron-explorer mcp a.parquet b.parquet --sql-timeout 10

Client configuration (Claude Desktop's claude_desktop_config.json): see docs/agents.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neuron_explorer.cli._common import open_trace


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "traces",
        nargs="+",
        metavar="TRACE",
        help="Parquet traces, run directories of per-rank traces, or Kineto .json/.json.gz files to serve",
    )
    parser.add_argument(
        "--source-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory whose files source_context may show (repeatable); relative src_file paths are looked up in it",
    )
    parser.add_argument(
        "--no-recorded-roots",
        action="store_true",
        help="do not add the directories of the traces' recorded absolute source files as source roots",
    )
    parser.add_argument(
        "--sql-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="stop any SQL query that runs longer than this (default: 30)",
    )


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.agents.catalog import TraceCatalog
    from neuron_explorer.agents.server import build_server
    from neuron_explorer.agents.source import roots_of_recorded_sources
    from neuron_explorer.trace.errors import NeuronExplorerError

    if not args.sql_timeout > 0:  # also refuses nan
        raise NeuronExplorerError(f"--sql-timeout must be positive, not {args.sql_timeout}")
    for root in args.source_root:
        if not Path(root).expanduser().is_dir():
            raise NeuronExplorerError("--source-root is not a directory", Path(root))
    # Load everything before serving: a missing or corrupt trace is a one-line error and exit
    # code here, not a server that starts and then fails every call.
    catalog = TraceCatalog.open(args.traces, loader=lambda p: open_trace(p, quiet=True))
    roots = [Path(r).expanduser() for r in args.source_root]
    if not args.no_recorded_roots:
        roots += roots_of_recorded_sources(s.trace for s in catalog)
    server = build_server(catalog, roots, sql_timeout_s=args.sql_timeout)
    # stdout carries the protocol; anything for the human goes to stderr.
    print(
        f"neuron-explorer mcp: serving {', '.join(catalog.names)} over stdio "
        f"({len(roots)} source root{'s' if len(roots) != 1 else ''})",
        file=sys.stderr,
    )
    server.run("stdio")
    return 0
