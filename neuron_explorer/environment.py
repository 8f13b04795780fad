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
STRICT_RULES = "NEURON_EXPLORER_STRICT_RULES"
MAX_INFLATION = "NEURON_EXPLORER_MAX_INFLATION"
MAX_STRING = "NEURON_EXPLORER_MAX_STRING"

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


#: The largest whole number a count takes (int64: every count ends up in an Arrow or DuckDB
#: integer) and the largest size (1 EiB: no machine holds more, and a float of it is exact).
MAX_COUNT = (1 << 63) - 1
MAX_SIZE = 1 << 60


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: The most decode workers ``NEURON_EXPLORER_WORKERS`` takes: twice the CPUs this process may
#: use, at least 8 (the default's own cap, so a setting that works on an 8-CPU machine is never
#: refused). Decoding is CPU-bound: past the CPUs a worker adds ~90 MB and no speed (measured:
#: 32 workers on 2 CPUs, 2.9 GB and twice as slow as 2); the 2x leaves room for an affinity that
#: undercounts (a container's quota).
MAX_WORKERS = max(8, 2 * _usable_cpus())


def _count(text: str, most: int = MAX_COUNT) -> int:
    # ASCII digits only: int() also takes other scripts' digits ('\u0663' is 3).
    if not re.fullmatch(r"\+?[0-9]{1,19}", text):
        raise ValueError
    value = int(text)
    if value > most:
        raise ValueError
    return value


def _workers(text: str) -> int:
    return _count(text, MAX_WORKERS)


def _size(text: str) -> int | None:
    if text.lower() in _OFF:
        return None
    m = re.fullmatch(r"([0-9]{1,19}(?:\.[0-9]{1,9})?)\s*([KMGT]?B?)", text.upper())
    if not m:
        raise ValueError
    unit = m.group(2) if m.group(2).endswith("B") or not m.group(2) else m.group(2) + "B"
    value = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if not 0 < value <= MAX_SIZE:
        raise ValueError
    return value


def _ratio(text: str) -> int | None:
    if text.lower() in _OFF:
        return None
    value = _count(text, 1 << 20)
    if value < 1:
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
            _workers,
            f"a whole number of worker processes from 0 to {MAX_WORKERS}, e.g. 4 (0 or 1: decode in one process)",
            "worker processes decoding a large JSON trace (default: the usable CPUs, at most 8)",
        ),
        Variable(
            SPOOL_EVENTS,
            _count,
            "a whole number of events up to 2**63-1, e.g. 1000000 (0: every streamed trace)",
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
            "a size such as 8GB or 512MB (at most 1073741824GB), or off",
            "the memory a command may use holding a trace (default: MemAvailable)",
        ),
        Variable(
            MAX_INFLATION,
            _ratio,
            "a whole number from 1 to 1048576, e.g. 500, or off (0)",
            "how many times its own size a .gz input may decompress to, at least 1 GiB (default 200)",
        ),
        Variable(
            MAX_STRING,
            _size,
            "a size such as 64MB or 1GB, or off (0)",
            "the longest string a JSON input may hold (default 64MB)",
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
        Variable(
            STRICT_RULES,
            _flag,
            "1 or 0 (true/false, yes/no, on/off)",
            "a rule that fails on a trace raises instead of becoming one line in rule_errors (the test suite sets it)",
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
        shown = raw if len(raw) <= 80 else raw[:60] + "..."
        raise EnvironmentSettingError(f"{name}={shown!r}: expected {var.expected}") from None


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


def _set_or_unset(name: str) -> int | str | None:
    """The parsed value of ``name``, None when set to ``off``, or ``"unset"`` when not set."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return "unset"
    return value(name)


def memory_budget() -> int | str | None:
    """Bytes, None when set to ``off``, or ``"unset"`` when the variable is not set."""
    return _set_or_unset(MEMORY)


def max_inflation() -> int | str | None:
    """The ratio, None when set to ``off``, or ``"unset"`` when the variable is not set."""
    return _set_or_unset(MAX_INFLATION)


def max_string() -> int | str | None:
    """Bytes, None when set to ``off``, or ``"unset"`` when the variable is not set."""
    return _set_or_unset(MAX_STRING)


def exclude_patterns() -> tuple[str, ...]:
    """Extra library patterns from ``NEURON_EXPLORER_EXCLUDE`` (``os.pathsep``-separated): the
    user-code policy of the builder, the source-line tables and the reports add them to their own."""
    return value(EXCLUDE) or ()


def aws_cli() -> str | None:
    return value(AWS_CLI)


def debug() -> bool:
    return bool(value(DEBUG))


def strict_rules() -> bool:
    """Whether a failing rule raises (``NEURON_EXPLORER_STRICT_RULES``: the test suite)."""
    return bool(value(STRICT_RULES))
