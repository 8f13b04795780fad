"""Compare many traces side by side: one row per trace or device profile, sortable (a sweep).

Each PATH is a trace file, a Neuron device profile (neuron-profile JSON or a Parquet export), or
a directory of them: a directory of independent profiles (a sweep of matrix sizes, batch sizes
or compiler options) gives one row per file. Neuron rows carry AWS's Summary fields and what
neuron-explorer derives (span, kernel window, per-engine active time and instructions,
HBM/SBUF/PSUM bytes, FLOPs, MFU/HFU/MBU over span and kernel, arithmetic intensity, DMA
transfers and bytes); GPU and CPU traces their span, steps and step-time attribution.

Examples:
  neuron-explorer compare sweep/ --sort n
  neuron-explorer compare sweep/ --format csv -o sweep.csv
  neuron-explorer compare a.json b.json gpu.pt.trace.json --sort=-kernel_time_ns
  neuron-explorer compare sweep/ --format parquet -o sweep.parquet --html sweep.html
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from pathlib import Path

from neuron_explorer.trace.atomic import atomic_path
from neuron_explorer.trace.printable import printable


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="traces, device profiles, or directories of them")
    parser.add_argument(
        "--format", choices=["text", "csv", "parquet", "json"], default="text", help="output format (default: text)"
    )
    parser.add_argument("-o", "--output", metavar="PATH", help="write here instead of stdout (parquet needs it)")
    parser.add_argument(
        "--sort",
        metavar="COL",
        action="append",
        help="sort by this column (repeatable; a leading - sorts descending, e.g. --sort=-kernel_time_ns)",
    )
    parser.add_argument("--html", metavar="PATH", help="also write an HTML page: the table and a chart")
    parser.add_argument(
        "--chart", metavar="Y[,X]", help="chart column(s) for --html (default: kernel_time_ns against m*k*n or file)"
    )


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.analyzers.sweep import CompareError, compare_traces, sort_rows

    if args.format == "parquet" and not args.output:
        raise CompareError("--format parquet needs -o PATH")

    def skip(line: str) -> None:
        print(f"neuron-explorer: {line}", file=sys.stderr)

    df = sort_rows(compare_traces(args.paths, on_skip=skip), args.sort)
    if args.html:
        from neuron_explorer.reports.sweep_html import render

        y, _, x = (args.chart or "").partition(",")
        with atomic_path(Path(args.html)) as tmp:
            Path(tmp).write_text(render(df, y or None, x or None), encoding="utf-8")
    if args.format == "parquet":
        with atomic_path(Path(args.output)) as tmp:
            _plain(df).to_parquet(tmp, index=False)
        print(f"wrote {len(df)} rows to {printable(args.output)}", file=sys.stderr)
        return 0
    if args.format == "csv":
        text = df.to_csv(index=False)
    elif args.format == "json":
        text = json.dumps(json.loads(df.to_json(orient="records")), indent=2) + "\n"
    else:
        text = _text(df)
    if args.output:
        with atomic_path(Path(args.output)) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
        print(f"wrote {len(df)} rows to {printable(args.output)}", file=sys.stderr)
    else:
        from neuron_explorer.cli._common import write_stdout

        write_stdout(text)
    return 0


def _plain(df):  # type: ignore[no-untyped-def]
    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object:
            out[col] = out[col].astype("string")
    return out


def _text(df) -> str:  # type: ignore[no-untyped-def]
    from rich.console import Console
    from rich.table import Table

    from neuron_explorer.analyzers.metrics.neuron_summary import fmt_pct, fmt_time
    from neuron_explorer.analyzers.sweep import HEADLINE

    cols = [c for c in HEADLINE if c in df and df[c].notna().any()]
    t = Table(title=f"{len(df)} traces", title_justify="left", show_edge=False)
    for c in cols:
        t.add_column(
            c.removesuffix("_ns").removesuffix("_pct").replace("_", " "),
            justify="left" if c in ("file", "kind", "bound") else "right",
        )
    for r in df.to_dict(orient="records"):
        cells = []
        for c in cols:
            v = r.get(c)
            if v is None or (isinstance(v, float) and v != v):
                cells.append("-")
            elif c == "file":
                cells.append(Path(str(v)).name)
            elif c.endswith("_ns"):
                cells.append(fmt_time(float(v)))
            elif c.endswith("_pct"):
                cells.append(fmt_pct(float(v)))
            elif (isinstance(v, float) and v.is_integer()) or isinstance(v, int):
                cells.append(f"{int(v):,}")
            else:
                cells.append(str(v))
        t.add_row(*cells)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(t)
    return console.export_text()
