"""Living beside AWS's ``neuron-explorer``: hand AWS's subcommands to AWS's binary.

AWS ships its own Neuron profiler CLI under the same name (package ``aws-neuronx-tools``,
installed as ``/opt/aws/neuron/bin/neuron-explorer``; it replaces ``neuron-profile``). Users
follow AWS's docs and type ``neuron-explorer view ...`` or ``neuron-explorer
--show-profile-schema`` into whichever ``neuron-explorer`` comes first on their PATH. When that
is ours, those commands are handed, unchanged, to AWS's binary (``os.execv``: AWS's tool then
owns the process, its output and its exit code); when AWS's tool is not installed, one line says
where they belong. ``NEURON_EXPLORER_AWS_CLI`` points at AWS's binary when it lives elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

AWS_PACKAGE = "aws-neuronx-tools"
AWS_DEFAULT_PATH = "/opt/aws/neuron/bin/neuron-explorer"
AWS_CLI_ENV = "NEURON_EXPLORER_AWS_CLI"
#: Set in the environment of the handed-off process, so a misconfigured path that points back
#: at this tool cannot loop.
HANDED_OFF_ENV = "NEURON_EXPLORER_HANDED_OFF"
#: AWS's subcommands and AWS-only top-level options (none of them is one of ours).
AWS_SUBCOMMANDS = frozenset({"view", "capture", "inspect"})
AWS_OPTIONS = frozenset({"--show-profile-schema"})


def aws_cli_path() -> Path:
    from neuron_explorer import environment

    return Path(environment.aws_cli() or AWS_DEFAULT_PATH)


def installed_aws_cli() -> Path | None:
    """AWS's binary when it is installed and executable, else None."""
    path = aws_cli_path()
    return path if path.is_file() and os.access(path, os.X_OK) else None


def aws_command(argv: Sequence[str], ours: Sequence[str]) -> str | None:
    """The AWS subcommand or option ``argv`` asks for, or None when it is one of ours."""
    first = next((a for a in argv if not a.startswith("-")), None)
    # Top-level options only: after a subcommand, arguments belong to it (record passes them on).
    for arg in argv[: argv.index(first) if first is not None else len(argv)]:
        if arg.split("=", 1)[0] in AWS_OPTIONS:
            return arg.split("=", 1)[0]
    if first in AWS_SUBCOMMANDS and first not in ours:
        return first
    return None


def not_installed_message(command: str) -> str:
    return (
        f"'{command}' is a command of AWS's Neuron Explorer ({AWS_PACKAGE}, {AWS_DEFAULT_PATH}), "
        f"which is not installed here (set {AWS_CLI_ENV} if it lives elsewhere); this neuron-explorer "
        "imports its exports: see `neuron-explorer convert --help`"
    )


def hand_off(binary: Path, argv: Sequence[str]) -> None:
    """Replace this process with AWS's tool, called with ``argv`` unchanged (returns only on error)."""
    os.environ[HANDED_OFF_ENV] = "1"
    os.execv(str(binary), [str(binary), *argv])


def version_text(version: str) -> str:
    """``--version``: which tool answered, and whether AWS's is installed beside it."""
    aws = installed_aws_cli()
    where = f"installed at {aws}" if aws else f"not installed ({AWS_DEFAULT_PATH})"
    return (
        f"neuron-explorer {version} (the PyTorch profiler and bottleneck analyzer, Python package "
        f"neuron-explorer); AWS's Neuron Explorer CLI ({AWS_PACKAGE}): {where}"
    )
