"""Run the main job: profile the bundled example, analyze it and write the HTML report.

Profiles the bundled example training script on whatever device torch finds, writes the
Parquet trace, shows what is in it, analyzes it and writes the HTML report.

Example:
  neuron-explorer demo --output-dir out
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from neuron_explorer.cli.exit_codes import EXIT_BROKEN_PIPE

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--output-dir", default="out", metavar="DIR", help="where the trace and report go (default: out)"
    )


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _step(args: argparse.Namespace, title: str, argv: list[str]) -> int:
    print(f"\n$ neuron-explorer {' '.join(argv)}", file=sys.stderr, flush=True)
    code = args.run_command(argv)  # the dispatcher (cli.main), as if the user had typed it
    # 1 = findings above --fail-on, not a failure of the job; a closed output pipe ends the
    # demo quietly (the callers return any other code at once)
    if code not in (0, 1, EXIT_BROKEN_PIPE):
        print(f"neuron-explorer demo: step '{title}' failed with exit code {code}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.trace.atomic import OutputError, check_output, describe_os_error

    out = check_output(args.output_dir, directory=True)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot make the directory ({describe_os_error(exc)})", out) from None
    trace = out / "trace.parquet"
    example = EXAMPLES / "train_mlp.py"
    if _has("torch") and _has("neuron_explorer.cli.record") and example.exists():
        code = _step(args, "record", ["record", "-o", str(trace), str(example)])
    else:
        # Capture needs torch; without it, the job runs on a bundled CPU trace.
        code = _step(args, "convert", ["convert", str(EXAMPLES / "sample_cpu_trace.json"), "-o", str(trace)])
    if code != 0:
        return code
    code = _step(args, "info", ["info", str(trace)])
    if code != 0:
        return code
    if _has("neuron_explorer.cli.analyze"):
        code = _step(args, "analyze", ["analyze", str(trace)])
        if code not in (0, 1):
            return code
    if _has("neuron_explorer.cli.report"):
        code = _step(args, "report", ["report", str(trace), "-o", str(out / "report.html")])
        if code != 0:
            return code
    print(
        f"\nDone: {trace}" + (f" and {out / 'report.html'}" if (out / "report.html").exists() else ""), file=sys.stderr
    )
    return 0
