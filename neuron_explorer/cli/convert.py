"""Convert a Kineto/Chrome JSON trace (.json or .json.gz) or a Neuron profile to a Parquet trace.

The output is one zstd Parquet file with every event, its links (kernel -> launch -> op,
backward op -> forward op, event -> step) and its source attribution resolved. It is written
atomically: an interrupted convert leaves no output file.

Examples:
  neuron-explorer convert rank0.pt.trace.json.gz                # writes rank0.pt.trace.parquet
  neuron-explorer convert trace.json.gz -o out/trace.parquet
  neuron-explorer convert profile.json                          # a neuron-profile JSON export
  neuron-explorer convert ./inspect/export -o device.parquet    # a Neuron Parquet export directory
  neuron-explorer convert train.json.gz --provenance torch_trace/   # compiled kernels to their lines
  neuron-explorer convert run/ -o run_pq/                       # one Kineto JSON per rank -> run_pq/rank=N/trace.parquet
  neuron-explorer convert run/ -o run_pq/ --workers 4           # ranks on a local Dask cluster of 4 workers
  neuron-explorer convert run/ -o run_pq/ --dask tcp://sched:8786   # ranks on an existing Dask cluster
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from neuron_explorer.cli._common import add_output_argument, progress_bar
from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json
from neuron_explorer.trace import Trace
from neuron_explorer.trace.atomic import check_output
from neuron_explorer.trace.errors import TraceFormatError
from neuron_explorer.trace.paths import require_input
from neuron_explorer.trace.printable import printable


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "trace",
        metavar="TRACE",
        help="a Kineto/Chrome trace (.json or .json.gz), or a Neuron profile: neuron-profile JSON, summary-json, "
        "a Parquet export directory or a directory of several",
    )
    add_output_argument(
        parser,
        "output Parquet file (default: the input's name with .parquet); for a run directory the output directory (default: RUN_DIR_parquet)",
    )
    parser.add_argument(
        "--device-profile",
        metavar="DIR",
        help="a Neuron device profile (Parquet export directory or neuron-profile JSON) to join with the framework trace",
    )
    parser.add_argument(
        "--provenance",
        metavar="FILE",
        help="Inductor's provenance for a torch.compile trace: the TORCH_TRACE log (or its directory) of the "
        "recorded run with INDUCTOR_PROVENANCE=1, or a kernel stack trace JSON; compiled kernels get their lines",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run directory: import the ranks on a local Dask cluster of N worker processes "
        "(default: a process pool of the machine's cores)",
    )
    parser.add_argument(
        "--dask", metavar="ADDRESS", help="run directory: import the ranks on the Dask scheduler at ADDRESS"
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")


def default_output(path: Path) -> Path:
    name = path.name
    for suffix in (".json.gz", ".json", ".gz"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return path.with_name(name + ".parquet")


def import_input(src: Path, progress: Any = None) -> Trace:
    """A Kineto/Chrome JSON trace, or a Neuron profile: a legacy ``neuron-profile`` JSON or
    ``summary-json`` file, a Parquet export directory, or a directory of several."""
    require_input(src)
    if src.is_file():
        from neuron_explorer.collectors.build.input_limits import InputLimitError

        try:
            return import_kineto_json(src, progress=progress)
        except InputLimitError:
            raise  # (past a size limit: any reader would read it all again)
        except TraceFormatError:
            from neuron_explorer.collectors.load import load

            return load(src)  # a Neuron export, else the Kineto importer's error again
    from neuron_explorer.collectors.neuron import import_neuron_profile

    return import_neuron_profile(src)


def with_provenance(trace: Trace, path: Path) -> Trace:
    """``trace`` with its compiled kernels attributed to the lines Inductor's provenance in
    ``path`` names (``collectors.lines.compiled_lines``)."""
    from neuron_explorer.collectors.lines.compiled_lines import apply_compiled_lines
    from neuron_explorer.collectors.lines.inductor_provenance import read_provenance_file

    require_input(path)
    return apply_compiled_lines(trace, read_provenance_file(path), source=str(path))


def run(args: argparse.Namespace) -> int:
    src = Path(args.trace)
    from neuron_explorer.collectors.kineto.run_dir import is_json_run

    if is_json_run(src):
        return _convert_run(src, args)
    if args.workers is not None or args.dask:
        raise TraceFormatError("--workers/--dask need a run directory of JSON rank traces", src)
    out = Path(args.output) if args.output else default_output(src)
    if out.resolve() == src.resolve():
        raise TraceFormatError("the output would overwrite the input; pass -o", src)
    check_output(out)
    t0 = time.perf_counter()
    with progress_bar(f"importing {src.name}", enabled=not args.quiet) as update:
        trace = import_input(src, progress=update)
        if args.device_profile:
            from neuron_explorer.collectors.neuron import join_device_profile

            trace = join_device_profile(trace, Path(args.device_profile))
        if args.provenance:
            trace = with_provenance(trace, Path(args.provenance))
        if update is not None and hasattr(update, "phase"):
            update.phase(f"writing {out.name}")
        trace.write(out)
    if not args.quiet:
        dt = time.perf_counter() - t0
        rate = trace.num_events / dt if dt > 0 else 0
        print(
            f"wrote {printable(out)} ({trace.num_events:,} events in {dt:.2f} s, {rate:,.0f} events/s)", file=sys.stderr
        )
    return 0


def _convert_run(src: Path, args: argparse.Namespace) -> int:
    """A run directory of Kineto JSON rank traces -> ``OUT/rank=N/trace.parquet``, one task per rank."""
    from neuron_explorer.collectors.kineto.run_dir import convert_run
    from neuron_explorer.parallel import make_executor

    if args.device_profile or args.provenance:
        raise TraceFormatError("--device-profile and --provenance join one trace, not a run directory", src)
    out = Path(args.output) if args.output else src.with_name(src.name + "_parquet")
    check_output(out, directory=True)
    t0 = time.perf_counter()
    with make_executor(workers=args.workers, dask=args.dask) as executor:
        results = convert_run(src, out, executor)
        how = executor.describe()
    if not args.quiet:
        dt = time.perf_counter() - t0
        events = sum(r["num_events"] for r in results)
        print(
            f"wrote {printable(out)} ({len(results)} ranks, {events:,} events in {dt:.2f} s on {how}, "
            f"{60 * len(results) / dt if dt > 0 else 0:,.0f} ranks/min)",
            file=sys.stderr,
        )
    return 0
