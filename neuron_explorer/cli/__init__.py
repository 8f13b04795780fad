"""The ``neuron-explorer`` command line: one module per subcommand, listed in ``COMMANDS``.

Each subcommand module defines ``prepare_parser(parser)`` and ``run(args) -> int``; its module
docstring is its ``--help`` text (first line: the summary). Library code raises
``NeuronExplorerError``; only ``main`` turns errors into one line on stderr and an exit code.
AWS's ``neuron-explorer`` subcommands (``view``, ``capture``, ...) are handed to AWS's binary
(``cli.aws``).

The top layer: it may import every package below it. A command that runs other commands
(``demo``) is given this dispatcher as ``args.run_command`` rather than importing it back.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import IO

from neuron_explorer import environment
from neuron_explorer.cli import signals
from neuron_explorer.cli.aws import aws_command
from neuron_explorer.cli.exit_codes import (
    EXIT_BROKEN_PIPE,
    EXIT_FINDINGS,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
)
from neuron_explorer.cli.outputs import refuse_outputs_over_inputs
from neuron_explorer.trace.atomic import remove_temporaries
from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.trace.printable import printable
from neuron_explorer.version import __version__

__all__ = [
    "COMMANDS",
    "EXIT_BROKEN_PIPE",
    "EXIT_FINDINGS",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "entry_point",
    "main",
]

#: Subcommand name -> (module implementing it, one-line summary), in ``--help`` order. The
#: summary is the module docstring's first line (a test keeps them equal); it is repeated here
#: so that ``--help`` and every command start without importing the other commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "record": (
        "neuron_explorer.cli.record",
        "Run a Python program under the profiler and write its trace (like python -m cProfile).",
    ),
    "convert": (
        "neuron_explorer.cli.convert",
        "Convert a Kineto/Chrome JSON trace (.json or .json.gz) or a Neuron profile to a Parquet trace.",
    ),
    "info": (
        "neuron_explorer.cli.info",
        "Show what is inside a trace: events, devices, streams, steps, source and link coverage.",
    ),
    "analyze": (
        "neuron_explorer.cli.analyze",
        "Say what holds the run back: every metric and rule on a trace, as text, JSON or markdown.",
    ),
    "diff": (
        "neuron_explorer.cli.diff",
        "Compare two traces: what got slower per step, where in the code, and how sure (a CI gate).",
    ),
    "compare": (
        "neuron_explorer.cli.compare",
        "Compare many traces side by side: one row per trace or device profile, sortable (a sweep).",
    ),
    "ranks": (
        "neuron_explorer.cli.ranks",
        "Cross-rank view of a converted run, rank by rank (process pool or Dask): the rank that delays the collectives.",
    ),
    "whatif": (
        "neuron_explorer.cli.whatif",
        "Replay the run's dependency graph with edits: what the step time would be if ops got faster.",
    ),
    "metrics": (
        "neuron_explorer.cli.metrics",
        "Export the analysis as Parquet tables for agents and notebooks (one file per metric family).",
    ),
    "report": (
        "neuron_explorer.cli.report",
        "Write a self-contained HTML report (Plotly charts, sortable tables) of a trace's analysis.",
    ),
    "tui": (
        "neuron_explorer.cli.tui",
        "Browse a trace in the terminal: overview, findings, ops, kernels, source lines, timeline.",
    ),
    "mcp": ("neuron_explorer.cli.mcp", "Serve traces to AI agents over the Model Context Protocol (stdio)."),
    "export": (
        "neuron_explorer.cli.export",
        "Export a trace to another format: Chrome trace JSON for Perfetto and chrome://tracing.",
    ),
    "demo": (
        "neuron_explorer.cli.demo",
        "Run the main job: profile the bundled example, analyze it and write the HTML report.",
    ),
}


def _load(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:  # a subcommand not built into this install
            return None
        raise


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """A command's docstring as its help, fitted to the terminal: prose paragraphs are wrapped to
    the width; indented lines are kept as written (an example command stays one line to copy),
    except a two-column line ("  name   what it does", the tool list) too long for the width,
    whose second column wraps under itself instead of the terminal cutting a word."""

    def _format_usage(self, usage, actions, groups, prefix) -> str:  # type: ignore[no-untyped-def]
        """argparse's usage, unless a line of it is wider than the help: then the same parts
        (``[--format {text,json}]`` kept whole) wrapped at the width, continuations indented 4."""
        import re

        text = super()._format_usage(usage, actions, groups, prefix)
        width = self._width + 2  # argparse keeps 2 columns spare; the usage may use the whole width
        if all(len(line) <= width for line in text.splitlines()):
            return text
        body = " ".join(text.split())
        parts = re.findall(r"\[[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]|\S+", body)
        lines, cur = [], ""
        for part in parts:
            if cur and len(cur) + 1 + len(part) > width:
                lines.append(cur)
                cur = "    " + part
            else:
                cur = f"{cur} {part}" if cur else part
        lines.append(cur)
        return "\n".join(lines) + "\n\n"

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import re
        import textwrap

        out: list[str] = []
        for paragraph in re.split(r"\n\s*\n", text):
            lines = paragraph.splitlines()
            if not lines:
                continue
            if not any(line.startswith((" ", "\t")) for line in lines):  # prose: re-wrap it
                body = " ".join(x.strip() for x in lines)
                out.append(textwrap.fill(body, width, initial_indent=indent, subsequent_indent=indent))
                continue
            kept: list[str] = []
            entry: tuple[str, str] | None = None  # a two-column entry: (its first line, its hang)

            def close(entry: tuple[str, str] | None, kept: list[str]) -> None:
                if entry is None:
                    return
                first, hang = entry
                if len(indent + first) <= width:
                    kept.append(indent + first)
                    return
                lead = first[: len(first) - len(first.lstrip())]
                second = first[len(hang) :]
                if second.startswith("#"):  # an example command and its comment: the comment under it
                    kept.extend(_command_lines(indent + first[: len(hang)].rstrip(), width))
                    kept.append(
                        textwrap.fill(
                            second, width, initial_indent=indent + lead + "  ", subsequent_indent=indent + lead + "  # "
                        )
                    )
                    return
                if len(indent + hang) > 0.6 * width:  # the second column would be a sliver: under the first
                    hang = lead + "    "
                kept.append(textwrap.fill(first, width, initial_indent=indent, subsequent_indent=indent + hang))

            for line in lines:
                two_columns = re.match(r"(\s+\S+(?: \S+)*\s{2,})\S", line)
                if entry is not None and line.startswith(entry[1]) and not line[len(entry[1])].isspace():
                    # the second column goes on under itself: one entry, wrapped as a whole
                    entry = (entry[0] + " " + line.strip(), entry[1])
                    continue
                close(entry, kept)
                entry = None
                if two_columns is not None:
                    entry = (line, " " * len(two_columns.group(1)))
                    continue
                kept.extend(_command_lines(indent + line, width))
            close(entry, kept)
            out.append("\n".join(kept))
        return "\n\n".join(out)


def _command_lines(line: str, width: int) -> list[str]:
    """A line kept as written (an example command) when it fits; else broken at spaces with a
    shell continuation (`` \\``), so each piece fits and the command still pastes as one."""
    if len(line) <= width:
        return [line]
    lead = line[: len(line) - len(line.lstrip())]
    out, rest, floor = [], line, len(lead) + 1
    while len(rest) > width:
        cut = rest.rfind(" ", floor, width - 1)
        if cut <= floor:
            break  # one word wider than the line: left whole
        out.append(rest[:cut] + " \\")
        rest = lead + "    " + rest[cut + 1 :].lstrip()
        floor = len(lead) + 5  # past the continuation's indent
    return [*out, rest]


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but help on a closed pipe raises (argparse would swallow the error and
    exit 0 with the help half written): ``main`` ends it with the status of a closed pipe."""

    def print_help(self, file: IO[str] | None = None) -> None:
        (file or sys.stdout).write(self.format_help())

    def print_usage(self, file: IO[str] | None = None) -> None:
        (file or sys.stdout).write(self.format_usage())


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported (all of them when it is None)."""
    parser = _Parser(
        prog="neuron-explorer",
        description="Profile PyTorch on any accelerator, map every event to its source line, and say what holds it back.",
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="say which neuron-explorer this is (and whether AWS's is installed)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, summary) in COMMANDS.items():
        if command is not None and name != command:
            sub.add_parser(name, help=summary)
            continue
        module = _load(module_name)
        if module is None:
            continue
        doc = (module.__doc__ or "").strip()
        p = sub.add_parser(
            name,
            help=summary or doc.splitlines()[0],
            description=doc,
            formatter_class=_HelpFormatter,
        )
        module.prepare_parser(p)
        # run_command: the dispatcher itself, for a command that runs others (demo), which
        # then needs no import of this module (the registry names it: that would be a circle)
        p.set_defaults(_run=module.run, run_command=main)
    return parser


class _Version(argparse.Action):
    """``--version`` printed as one unwrapped line (argparse would wrap the path of AWS's tool)."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from neuron_explorer.cli.aws import version_text

        print(version_text(__version__))
        parser.exit()


def _format_warning(message: Warning | str, category: type[Warning], *args: object, **kwargs: object) -> str:
    return f"neuron-explorer: warning: {printable(message)}\n"


def _error(text: object) -> None:
    """One line on stderr: file names and messages from outside cannot split or recolour it."""
    print(f"neuron-explorer: error: {printable(text)}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status (``EXIT_*``). A closed output pipe ends it quietly."""
    try:
        return _main(argv)
    except BaseException as exc:
        if _stdout_full(exc):
            # `analyze x > /dev/full`, a full disk under a redirect: one line, not a traceback
            print(f"neuron-explorer: error: cannot write to standard output: {exc.strerror}", file=sys.stderr)
            _stdout_to_devnull()  # (so the flush at exit fails no more)
            return EXIT_INPUT
        if not _broken_pipe(exc) or not _stdout_gone():
            raise  # (a pipe of our own, a worker's, that broke is a bug, not the reader leaving)
        # `neuron-explorer analyze x | head`: not an error. Later writes, and the flush at
        # exit, go to /dev/null so Python prints no "Exception ignored" either.
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE


def _stdout_to_devnull() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _stdout_full(exc: BaseException) -> bool:
    """A write to standard output that failed for lack of room (ENOSPC, EDQUOT, EFBIG, EIO):
    told by the traceback's last frame writing to ``sys.stdout``'s file, as rich and print do."""
    import errno

    if not isinstance(exc, OSError) or exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
        return False
    try:
        out = os.fstat(sys.stdout.fileno())
    except (OSError, ValueError):
        return True
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    target = tb.tb_frame.f_locals.get("self") if tb is not None else None
    stream = getattr(target, "file", target)
    try:
        st = os.fstat(stream.fileno()) if stream is not None else None
    except (AttributeError, OSError, ValueError):
        st = None
    return st is None or (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino)


def _broken_pipe(exc: BaseException) -> bool:
    """A ``BrokenPipeError``, or a group of nothing else (the MCP server's task group)."""
    if isinstance(exc, BrokenPipeError):
        return True
    inner = getattr(exc, "exceptions", None)  # (an ExceptionGroup)
    return bool(inner) and all(_broken_pipe(e) for e in inner)


def _stdout_gone() -> bool:
    """Whether standard output is a pipe or socket whose reader has gone (poll says so without
    writing); True where that cannot be asked (no poll), as stdout is then the likely one."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, ValueError, OSError):
        return True


def _main(argv: Sequence[str] | None = None) -> int:
    warnings.formatwarning = _format_warning  # one readable line, not a source excerpt
    argv = list(sys.argv[1:] if argv is None else argv)
    aws = aws_command(argv, tuple(COMMANDS))
    if aws is not None:
        return _hand_to_aws(aws, argv)
    chosen = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        with signals.handled(watchdog=args.command not in ("record", "demo")):  # (demo runs record)
            try:
                environment.check_all()
                refuse_outputs_over_inputs(args)
                code = int(args._run(args) or 0)
            finally:
                if signals.received() is not None:
                    remove_temporaries()
        if signals.received() is None:
            return code
        raise KeyboardInterrupt  # (the signal's exception was swallowed on the way: still an interruption)
    except BaseException as exc:
        signum = signals.received()
        if signum is not None and not isinstance(exc, SystemExit):
            remove_temporaries()
            print(f"neuron-explorer: interrupted ({signals.name(signum)})", file=sys.stderr)
            return signals.exit_code(signum)
        if isinstance(exc, NeuronExplorerError):
            _error(exc)
            return EXIT_INPUT
        if isinstance(exc, KeyboardInterrupt):  # (raised by hand, outside the handler)
            print("neuron-explorer: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        raise  # (a BrokenPipeError included: main ends it quietly)


def _hand_to_aws(command: str, argv: list[str]) -> int:
    """AWS's ``neuron-explorer`` commands go to AWS's binary (see ``cli.aws``)."""
    from neuron_explorer.cli import aws

    binary = aws.installed_aws_cli()
    if binary is None:
        _error(aws.not_installed_message(command))
        return EXIT_USAGE
    if environment.value(environment.HANDED_OFF):
        print(
            f"neuron-explorer: error: {binary} handed '{command}' back to this tool; it is not AWS's", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        aws.hand_off(binary, argv)
    except OSError as exc:
        print(f"neuron-explorer: error: cannot run AWS's neuron-explorer at {binary}: {exc.strerror}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK  # not reached: execv replaced this process


def entry_point() -> None:
    sys.exit(main())
