"""Serve traces to AI agents over the Model Context Protocol (stdio).

Starts an MCP server on stdin/stdout for an MCP client (Claude Desktop, Claude Code, an IDE,
any agent framework) to launch. It serves the given traces and their analysis as the tools
listed below, and docs/schema.md, docs/rules.md, docs/diff.md, docs/perf.md and docs/agents.md
as resources. Every answer is compact JSON of at most 16,000 characters unless the call raises
max_chars; a cut answer says so and how to page. Source code is shown only from inside the
--source-root directories (the current directory when none is given), never from where a trace
says its files are; SQL is one read-only SELECT over the served tables (docs/agents.md).

Examples:
  neuron-explorer mcp run/trace.parquet
  neuron-explorer mcp run/ --source-root ~/src/my-model
  neuron-explorer mcp a.parquet b.parquet --sql-timeout 10 --tool-timeout 120

Client configuration (Claude Desktop's claude_desktop_config.json): see docs/agents.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from neuron_explorer.cli._common import open_trace


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    from neuron_explorer.agents.tools import help_text

    parser.epilog = help_text()  # from the registry the server serves, so the two cannot drift
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
        help="a directory whose files source_context may show (repeatable; default: the current directory); "
        "relative src_file paths are looked up in it",
    )
    # Accepted so existing client configurations keep working: trace-recorded roots are gone.
    parser.add_argument("--no-recorded-roots", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--sql-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="stop any SQL query that runs longer than this (default: 30)",
    )
    parser.add_argument(
        "--memory-limit",
        type=float,
        default=None,
        metavar="GIB",
        help="the memory the tools may add to what the server holds once the traces are loaded "
        "(default: 75%% of this machine's memory); past it an allocation fails and that call answers a "
        "one-line error, the server lives (SQL has its own 4 GiB cap)",
    )
    parser.add_argument(
        "--tool-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="answer any other tool call that takes longer with a one-line error (default: 300; the work goes on "
        "in the background and a trace's analysis, once done, serves the next call)",
    )


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.agents.catalog import TraceCatalog
    from neuron_explorer.agents.server import build_server
    from neuron_explorer.agents.source import default_roots
    from neuron_explorer.trace.errors import NeuronExplorerError

    for option, value in (("--sql-timeout", args.sql_timeout), ("--tool-timeout", args.tool_timeout)):
        if not 0 < value < 1e6:  # also refuses nan and inf
            raise NeuronExplorerError(f"{option} must be a positive number of seconds, not {value}")
    if args.memory_limit is not None and not 0 < args.memory_limit < 1 << 20:
        raise NeuronExplorerError(f"--memory-limit must be a positive number of GiB, not {args.memory_limit}")
    for root in args.source_root:
        if not Path(root).expanduser().is_dir():
            raise NeuronExplorerError("--source-root is not a directory", Path(root))
    # Load everything before serving: a missing or corrupt trace is a one-line error and exit
    # code here, not a server that starts and then fails every call.
    catalog = TraceCatalog.open(args.traces, loader=lambda p: open_trace(p, quiet=True))
    # The user's roots only: a trace naming /etc/passwd must not make /etc one.
    roots = default_roots(args.source_root)
    server = build_server(catalog, roots, sql_timeout_s=args.sql_timeout, tool_timeout_s=args.tool_timeout)
    # stdout carries the protocol; anything for the human goes to stderr.
    print(
        f"neuron-explorer mcp: serving {', '.join(catalog.names)} over stdio "
        f"({len(roots)} source root{'s' if len(roots) != 1 else ''})",
        file=sys.stderr,
    )
    limit_memory(args.memory_limit)
    server.run("stdio")


def limit_memory(gib: float | None) -> None:
    """Bound the address space the tools may add (RLIMIT_AS above what the server maps now):
    an analysis past it gets MemoryError, which its call answers in one line. Virtual, not
    resident, memory: a Python process maps about 1.7 GB for 185 MB resident (measured: a server
    on a 6k-event trace), hence a limit on the growth, not the total."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX: the time limits only
        return
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
    if gib is None:
        if not total:
            return
        budget = int(0.75 * total)
    else:
        budget = int(gib * (1 << 30))
    try:
        with open("/proc/self/status", "rb") as f:
            mapped = next(int(line.split()[1]) * 1024 for line in f if line.startswith(b"VmSize:"))
    except (OSError, StopIteration, ValueError):
        return  # (no /proc: the time limits only)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    want = mapped + budget
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    if soft == resource.RLIM_INFINITY or want < soft:
        resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    return 0
