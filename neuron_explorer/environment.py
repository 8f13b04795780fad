"""Every ``NEURON_EXPLORER_*`` environment variable, read and validated in this one module.

Each variable has one parser here; the code that uses a setting calls its accessor
(``workers()``, ``spool_events()``, ...) instead of reading ``os.environ`` itself. A malformed
value is never ignored: the accessor raises ``EnvironmentSettingError`` naming the variable, the
value and what it expects, and ``cli.main`` checks them all (``check_all``) before a command
starts, so a typo is one line of error (exit status 3) rather than a default taken silently.
docs/cli.md, "Environment variables", lists them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuron_explorer.trace.errors import NeuronExplorerError

WORKERS = "NEURON_EXPLORER_WORKERS"
SPOOL_EVENTS = "NEURON_EXPLORER_SPOOL_EVENTS"
SPOOL_DIR = "NEURON_EXPLORER_SPOOL_DIR"
MEMORY = "NEURON_EXPLORER_MEMORY"
EXCLUDE = "NEURON_EXPLORER_EXCLUDE"
AWS_CLI = "NEURON_EXPLORER_AWS_CLI"
HANDED_OFF = "NEURON_EXPLORER_HANDED_OFF"
DEBUG = "NEURON_EXPLORER_DEBUG"
NO_PRUNE = "NEURON_EXPLORER_NO_PRUNE"
TRACE_COMPILE = "NEURON_EXPLORER_TRACE_COMPILE"

_SIZE_UNITS = {"": 1, "B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
_OFF = ("off", "0", "none")
_FLAG_VALUES = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


class EnvironmentSettingError(NeuronExplorerError):
    """A ``NEURON_EXPLORER_*`` variable holds a value its setting cannot take."""


@dataclass(frozen=True)
class Variable:
    name: str
    parse: Callable[[str], Any]
    expected: str  # what a valid value looks like, for the error line and the docs
    meaning: str


def _count(text: str) -> int:
    if not re.fullmatch(r"\+?\d+", text):
        raise ValueError
    return int(text)


def _size(text: str) -> int | None:
    if text.lower() in _OFF:
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]?B?)", text.upper())
    if not m:
        raise ValueError
    unit = m.group(2) if m.group(2).endswith("B") or not m.group(2) else m.group(2) + "B"
    value = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if value <= 0:
        raise ValueError
    return value


def _text(text: str) -> str:
    if "\x00" in text:
        raise ValueError
    return text


def _patterns(text: str) -> tuple[str, ...]:
    return tuple(x for x in _text(text).split(os.pathsep) if x)


def _flag(text: str) -> bool:
    try:
        return _FLAG_VALUES[text.lower()]
    except KeyError:
        raise ValueError from None


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable(
            WORKERS,
            _count,
            "a whole number of worker processes, e.g. 4 (0 or 1: decode in one process)",
            "worker processes decoding a large JSON trace (default: the usable CPUs, at most 8)",
        ),
        Variable(
            SPOOL_EVENTS,
            _count,
            "a whole number of events, e.g. 1000000 (0: every streamed trace)",
            "event count past which a JSON import is built out of core (default 1,048,576)",
        ),
        Variable(
            SPOOL_DIR,
            _text,
            "a directory",
            "where the out-of-core build keeps its temporary database (default: the system's temporary directory)",
        ),
        Variable(
            MEMORY,
            _size,
            "a size such as 8GB or 512MB, or off",
            "the memory a command may use holding a trace (default: MemAvailable)",
        ),
        Variable(
            EXCLUDE,
            _patterns,
            f"path substrings separated by {os.pathsep!r}",
            "extra path patterns that are library code, not user code, for source lines",
        ),
        Variable(
            AWS_CLI, _text, "the path of AWS's neuron-explorer binary", "where AWS's neuron-explorer is installed"
        ),
        Variable(HANDED_OFF, _text, "set by this tool", "internal: set when a command was handed to AWS's binary"),
        Variable(DEBUG, _flag, "1 or 0 (true/false, yes/no, on/off)", "print tracebacks of capture failures"),
        Variable(
            NO_PRUNE,
            _flag,
            "1 or 0 (true/false, yes/no, on/off)",
            "keep every one-time Python call in a capture (no pruning, docs/capture.md)",
        ),
        Variable(
            TRACE_COMPILE,
            _flag,
            "1 or 0 (true/false, yes/no, on/off)",
            "record torch.compile's own Python while it compiles (by default paused, docs/capture.md)",
        ),
    )
}


def value(name: str, environ: Any = None) -> Any:
    """The parsed value of variable ``name``, or None when it is unset or empty."""
    var = VARIABLES[name]
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or not raw.strip():
        return None
    try:
        return var.parse(raw.strip())
    except ValueError:
        raise EnvironmentSettingError(f"{name}={raw!r}: expected {var.expected}") from None


def check_all(environ: Any = None) -> None:
    """Raise ``EnvironmentSettingError`` for the first malformed variable (all are parsed)."""
    for name in VARIABLES:
        value(name, environ)


def workers() -> int | None:
    return value(WORKERS)


def spool_events() -> int | None:
    return value(SPOOL_EVENTS)


def spool_dir() -> str | None:
    return value(SPOOL_DIR)


def memory_budget() -> int | str | None:
    """Bytes, None when set to ``off``, or ``"unset"`` when the variable is not set."""
    raw = os.environ.get(MEMORY)
    if raw is None or not raw.strip():
        return "unset"
    return value(MEMORY)


def exclude_patterns() -> tuple[str, ...]:
    """Extra library patterns from ``NEURON_EXPLORER_EXCLUDE`` (``os.pathsep``-separated): the
    user-code policy of the builder, the source-line tables and the reports add them to their own."""
    return value(EXCLUDE) or ()


def aws_cli() -> str | None:
    return value(AWS_CLI)


def debug() -> bool:
    return bool(value(DEBUG))
