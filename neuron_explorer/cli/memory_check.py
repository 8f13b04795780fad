"""Refuse, in one line, to load a Parquet trace or run that cannot fit in memory.

``analyze``, ``report``, ``tui``, ``mcp``, ``info``, ``export``, ``metrics`` and ``diff`` hold a
whole trace (every rank of a run) in one process. A run of hundreds of ranks does not fit, and
the kernel's out-of-memory killer ends the command with no message. Before reading, the events
are counted from the Parquet footers (no data read) and the memory the command will need is
estimated from what these commands measured (bench/README.md, "One rank's import memory" and
"Ranks": ~0.5-0.95 KB per event plus the interpreter); when that passes the memory available,
the command stops and names what to run instead: ``ranks`` for the cross-rank view (rank by
rank, on a process pool or Dask), or one rank's file.

The budget is the system's available memory (``MemAvailable`` of /proc/meminfo; no check where
it is unknown), or ``NEURON_EXPLORER_MEMORY``: a size such as ``8GB`` or ``512MB``, or ``off``.
JSON traces are not estimated (their event count is only known once decoded).
"""

from __future__ import annotations

from pathlib import Path

from neuron_explorer.trace.errors import NeuronExplorerError

#: Memory one command needs per event it holds, and for the interpreter and its imports (an
#: upper estimate of the figures measured: 0.95 GB for 1M events, 2.8 GB for 5M, 2.0 GB for a
#: 64-rank run of 2.1M events).
BYTES_PER_EVENT = 900
BASE_BYTES = 200 << 20
ENV = "NEURON_EXPLORER_MEMORY"


class TooLargeError(NeuronExplorerError):
    """The trace would not fit in the memory this command may use."""


def budget_bytes() -> int | None:
    """The memory a command may use: ``NEURON_EXPLORER_MEMORY``, else the available memory;
    None when there is no limit to check against."""
    from neuron_explorer import environment

    value = environment.memory_budget()
    if value != "unset":
        return value  # type: ignore[return-value]
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def parquet_events(path: Path) -> tuple[int, int] | None:
    """(events, files) of a Parquet trace or run directory, from the footers; None for anything
    else (JSON, a Neuron export, an unreadable file: its own reader says what is wrong)."""
    import pyarrow.parquet as pq

    from neuron_explorer.trace.model import PARQUET_SUFFIXES

    if path.is_dir():
        files = [p for p in path.rglob("*") if p.suffix in PARQUET_SUFFIXES and p.is_file()]
    elif path.suffix in PARQUET_SUFFIXES and path.is_file():
        files = [path]
    else:
        return None
    if not files:
        return None
    total = 0
    for f in files:
        try:
            total += pq.ParquetFile(f).metadata.num_rows
        except Exception:  # (a damaged file: Trace.read gives the one-line error)
            return None
    return total, len(files)


def check_fits(path: str | Path) -> None:
    """Raise ``TooLargeError`` when the Parquet trace or run at ``path`` needs more memory than
    the budget (see the module docstring)."""
    path = Path(path)
    budget = budget_bytes()
    if budget is None:
        return
    counted = parquet_events(path)
    if counted is None:
        return
    events, files = counted
    need = BASE_BYTES + BYTES_PER_EVENT * events
    if need <= budget:
        return
    what = f"{files:,} rank files, {events:,} events" if files > 1 else f"{events:,} events"
    instead = (
        f"for the cross-rank view run `neuron-explorer ranks {path} --workers N` (rank by rank), or open one "
        "rank's file"
        if files > 1
        else "record fewer steps (torch.profiler.schedule(active=...))"
    )
    raise TooLargeError(
        f"{what}: holding them in one process needs about {_gb(need)} and {_gb(budget)} is available; "
        f"{instead}; or set {ENV}=off to try anyway",
        path,
    )


def _gb(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):,.1f} GB"
    return f"{n / (1 << 20):,.0f} MB" if n >= 1 << 20 else f"{n / (1 << 10):,.0f} KB"
