"""Replay the run's dependency graph with edits: what the step time would be if ops got faster.

The graph (docs/whatif.md) links host threads, device streams, launches, synchronizing calls
and cross-stream waits; replaying it unedited reproduces the run (the baseline error says how
well) and the unexplained share says how much of each step's critical path is a gap no
recorded dependency accounts for. Edits move everything that depends on what they change.

  --scale PATTERN=FACTOR   ops and kernels whose name matches the regex PATTERN (with what
                           is nested in those ops, and their kernels) take FACTOR x the time
  --remove PATTERN         matching events take no time; matching synchronizing calls wait
                           for nothing
  --nonblocking-copies     blocking and pageable copies become asynchronous: the calling
                           thread no longer waits for them; their transfers stay on their
                           streams, in order, at their measured length
  --overlap-comm           communication no longer delays compute or the host: nothing waits
                           for a collective kernel (synchronize calls, cross-stream events);
                           collectives still run in their stream's order and wait for their
                           last rank

Examples:
  neuron-explorer whatif trace.parquet
  neuron-explorer whatif trace.json.gz --scale 'aten::mm=0.5'
  neuron-explorer whatif trace.json.gz --remove cudaStreamSynchronize --format json
  neuron-explorer whatif run_dir/ --overlap-comm
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from neuron_explorer.analyzers.core.context import WHOLE_TRACE_STEP, TraceFrames
from neuron_explorer.analyzers.graph import Edits, whatif
from neuron_explorer.cli._common import add_trace_argument, open_trace, write_stdout
from neuron_explorer.trace.errors import AnalysisError


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    add_trace_argument(parser)
    parser.add_argument(
        "--scale",
        action="append",
        default=[],
        metavar="PATTERN=FACTOR",
        help="scale ops and kernels matching the regex PATTERN by FACTOR (repeatable)",
    )
    parser.add_argument(
        "--remove", action="append", default=[], metavar="PATTERN", help="remove matching events or waits (repeatable)"
    )
    parser.add_argument(
        "--nonblocking-copies",
        action="store_true",
        help="blocking and pageable copies become asynchronous (their transfers stay on the device)",
    )
    parser.add_argument(
        "--overlap-comm", action="store_true", help="nothing waits for communication kernels (compute, the host)"
    )
    parser.add_argument("--format", choices=["text", "json"], default="text", help="output format (default: text)")


def edits_of(
    scale: list[str], remove: list[str], nonblocking_copies: bool = False, overlap_comm: bool = False
) -> Edits:
    """The ``Edits`` of the command-line options (checked before any trace is read)."""
    pairs = []
    for item in scale:
        pattern, sep, factor = item.rpartition("=")
        try:
            value = float(factor)
        except ValueError:
            value = float("nan")
        if not sep or not pattern or not value >= 0 or value == float("inf"):
            raise AnalysisError(f"--scale wants PATTERN=FACTOR with a factor >= 0, got {item!r}")
        pairs.append((pattern, value))
    edits = Edits(
        scale=tuple(pairs), remove=tuple(remove), nonblocking_copies=nonblocking_copies, overlap_comm=overlap_comm
    )
    edits.patterns()  # a bad regex is reported now
    return edits


def run(args: argparse.Namespace) -> int:
    edits = edits_of(args.scale, args.remove, args.nonblocking_copies, args.overlap_comm)
    trace = open_trace(args.trace, quiet=args.format == "json")
    result = whatif(TraceFrames(trace), edits)
    result = {"source": str(args.trace), **result}
    if args.format == "json":
        write_stdout(json.dumps(result, indent=2) + "\n")
    else:
        write_stdout(render_text(result) + "\n")
    return 0


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f} ms"


def render_text(r: dict[str, Any], width: int | None = None) -> str:
    """The replay in words and a per-step table, laid out for ``width`` columns (the output's,
    ``reports.fit.output_width``): prose wrapped without parting a number from its unit, the
    table's columns as wide as their contents."""
    from rich.text import Text

    from neuron_explorer.reports.fit import PIPE_PROSE_WIDTH, PIPE_WIDTH, output_width, printable, wrap_prose

    width = width or output_width()
    prose = min(width, PIPE_PROSE_WIDTH) if width == PIPE_WIDTH else width
    lines: list[str] = []

    def say(text: str) -> None:
        lines.extend(line.plain for line in wrap_prose(Text(text), prose, hang=2))

    say(f"{printable(r['source'])}: {r['nodes']:,} nodes, {r['edges']:,} cross edges")
    say(
        f"measured {_ms(r['measured_ns'])}, baseline replay {_ms(r['replayed_ns'])} "
        f"(error {r['baseline_error_pct']:+.2f}%); critical path unexplained {r['unexplained_pct']:.1f}%, "
        f"untraced host time {r['untraced_pct']:.1f}%"
    )
    if r.get("note"):
        say(f"note: {r['note']}")
    edits = [f"scale {p}={f:g}" for p, f in r["edits"]["scale"]] + [f"remove {p}" for p in r["edits"]["remove"]]
    edits += [
        w
        for k, w in (("nonblocking_copies", "non-blocking copies"), ("overlap_comm", "overlapped communication"))
        if r["edits"].get(k)
    ]
    if edits:
        say(
            f"with {printable(', '.join(edits))}: projected {_ms(r['projected_ns'])}, saving {_ms(r['saving_ns'])} "
            f"({r['saving_pct']:.1f}%)"
        )
    lines.append("")
    header = ("rank", "step", "measured", "replayed", "error", "unexpl.", "projected", "saving")
    rows = [
        (
            str(s["rank"]),
            "-" if s["step"] == WHOLE_TRACE_STEP else str(s["step"]),
            _ms(s["measured_ns"]),
            _ms(s["replayed_ns"]),
            f"{s['baseline_error_pct']:+.2f}%",
            f"{s['unexplained_pct']:.1f}%",
            _ms(s["projected_ns"]),
            _ms(s["saving_ns"]),
        )
        for s in r["steps"]
    ]
    from neuron_explorer.reports.fit import Column, plain_table, text_width

    # fitted to the output's width: the replayed baseline and its error go first where it is narrow
    drop = {"replayed": 2, "error": 3}
    columns = [Column(h, drop=drop.get(h, 0)) for h in header]
    lines.extend(plain_table(columns, [list(r) for r in rows], text_width(), indent=""))
    return "\n".join(lines)
