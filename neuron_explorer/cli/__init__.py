"""The ``neuron-explorer`` command line: one module per subcommand, listed in ``COMMANDS``.

Each subcommand module defines ``prepare_parser(parser)`` and ``run(args) -> int``; its module
docstring is its ``--help`` text (first line: the summary). Library code raises
``NeuronExplorerError``; only ``main`` turns errors into one line on stderr and an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from neuron_explorer import __version__
from neuron_explorer.trace.errors import NeuronExplorerError

#: Subcommand name -> module implementing it, in the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
    "record": "neuron_explorer.cli.record",
    "convert": "neuron_explorer.cli.convert",
    "info": "neuron_explorer.cli.info",
    "analyze": "neuron_explorer.cli.analyze",
    "metrics": "neuron_explorer.cli.metrics",
    "report": "neuron_explorer.cli.report",
    "tui": "neuron_explorer.cli.tui",
    "mcp": "neuron_explorer.cli.mcp",
    "export": "neuron_explorer.cli.export",
    "demo": "neuron_explorer.cli.demo",
}

EXIT_OK = 0
EXIT_FINDINGS = 1  # analyze --fail-on matched
EXIT_USAGE = 2
EXIT_INPUT = 3  # a bad or missing input file
EXIT_INTERRUPTED = 130


def _load(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:  # a subcommand not built into this install
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuron-explorer",
        description="Profile PyTorch on any accelerator, map every event to its source line, and say what holds it back.",
    )
    parser.add_argument("--version", action="version", version=f"neuron-explorer {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = _load(module_name)
        if module is None:
            continue
        doc = (module.__doc__ or "").strip()
        summary = doc.splitlines()[0] if doc else name
        p = sub.add_parser(name, help=summary, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
        module.prepare_parser(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args._run(args) or 0)
    except NeuronExplorerError as exc:
        print(f"neuron-explorer: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("neuron-explorer: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `neuron-explorer info x | head`: not an error; silence the flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def entry_point() -> None:
    sys.exit(main())
