"""Outputs never destroy inputs: every command's output paths are checked against its inputs.

Checked once, in the dispatcher, before a command reads anything: each output a command was
given (``-o``/``--output``, ``--html``) against each input path (the trace or traces, the paths
``compare`` takes, ``diff``'s two sides, a device profile, a provenance file, a
``--device-spec`` file, ``record``'s script). An output is refused when it is the same file as an input through any alias (``./t``,
``DIR/../DIR/t``, ``/proc/self/cwd/t``, a symlinked directory, a hard link: compared by device
and inode), or, when it does not exist yet, when its real path is the input's; and when it is an
existing trace-named file (``.parquet``, ``.json``, ``.gz``) inside an input directory (a run
directory: it may be one of its traces).
``analyze -o t.parquet t.parquet`` wrote its JSON over the trace, exit 0 (issue 43).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator

from neuron_explorer.trace.errors import NeuronExplorerError

#: Attributes of a command's parsed arguments that name files it reads.
INPUTS = ("trace", "traces", "paths", "base", "new", "run", "device_profile", "provenance", "device_spec")
#: Names an input directory's readers take as traces: an existing file of these inside an input
#: directory is refused as an output (a report beside them, ``run/report.html``, is not).
TRACE_SUFFIXES = (".parquet", ".pq", ".json", ".gz")
#: Attributes that name files it writes (``option`` shown in the error).
OUTPUTS = {"output": "-o", "html": "--html"}


class OutputIsInputError(NeuronExplorerError):
    """A command was asked to write over one of its own inputs."""


def _paths(value: object) -> Iterator[str]:
    if isinstance(value, str) and value and value != "-":
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _paths(v)


def _inputs(args: argparse.Namespace) -> list[str]:
    found = [p for name in INPUTS for p in _paths(getattr(args, name, None))]
    program = getattr(args, "program", None)  # record's script: the first word of the program
    if isinstance(program, list) and program and program[0].endswith(".py"):
        found.append(program[0])
    return found


def _same(output: str, source: str) -> bool:
    try:
        if os.path.exists(output):
            return os.path.samefile(output, source)
        return os.path.realpath(output) == os.path.realpath(source)
    except OSError:
        return False


def _inside(output: str, directory: str) -> bool:
    """Whether ``output`` is an existing file inside the input ``directory`` (one the command
    may be reading: a run directory's rank traces); a new file there destroys nothing."""
    try:
        if not os.path.isdir(directory) or not os.path.isfile(output) or not output.lower().endswith(TRACE_SUFFIXES):
            return False
        real_dir = os.path.realpath(directory)
        real_out = os.path.realpath(output)
    except (OSError, ValueError):
        return False
    return real_out != real_dir and real_out.startswith(real_dir.rstrip(os.sep) + os.sep)


def refuse_outputs_over_inputs(args: argparse.Namespace) -> None:
    """Raise ``OutputIsInputError`` (one line: the option, the output, the input) when an output
    of this command is one of its inputs or lies inside an input directory."""
    sources = [p for p in _inputs(args) if os.path.exists(p)]  # (a name such as --device-spec h100 is no file)
    for attr, option in OUTPUTS.items():
        for output in _paths(getattr(args, attr, None)):
            for source in sources:
                if _same(output, source):
                    raise OutputIsInputError(
                        f"{option} {output} is the input {source}: writing it would destroy the input; "
                        "choose another output path (nothing was written)"
                    )
                if _inside(output, source):
                    raise OutputIsInputError(
                        f"{option} {output} is a file inside the input directory {source}: it may be one of its "
                        "traces; choose a new path or one outside it (nothing was written)"
                    )
