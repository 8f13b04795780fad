"""Options and helpers shared by subcommands (one place, not pasted into each command)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from neuron_explorer.cli.memory_check import check_fits
from neuron_explorer.collectors.load import load
from neuron_explorer.trace import Trace


def write_stdout(text: str) -> None:
    """``text`` to standard output in full. A write larger than a pipe holds can be cut short
    when the reader leaves (``| head``) and Python's text layer drops the rest without an
    error, so the bytes go out in a loop that sees the short write and then the broken pipe
    (which ``cli.main`` ends quietly)."""
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # (a text stream in memory: a test's, or an embedding program's)
        sys.stdout.write(text)
        return
    sys.stdout.flush()
    data = memoryview(text.encode(sys.stdout.encoding or "utf-8", errors="replace"))
    while data:
        written = out.write(data)
        data = data[written if written else len(data) :]
    out.flush()


def add_trace_argument(parser: argparse.ArgumentParser, nargs: str | None = None) -> None:
    parser.add_argument(
        "trace",
        nargs=nargs,
        metavar="TRACE",
        help="a Parquet trace, a run directory of per-rank traces, or a Kineto .json/.json.gz (imported on the fly)",
    )


def add_device_spec_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device-spec",
        metavar="NAME|FILE.toml",
        help="the device whose peak FLOP/s and bandwidth the op roofline uses: a name such as H100-SXM, "
        "MI300X, Trainium2 (docs/perf.md) or a TOML file; default: detected from the trace",
    )


def device_spec_of(args: argparse.Namespace) -> Any:
    """The ``DeviceSpec`` named by ``--device-spec`` (checked before any trace is read), or None."""
    value = getattr(args, "device_spec", None)
    if not value:
        return None
    from neuron_explorer.analyzers.perf import load_spec

    return load_spec(value)


def add_output_argument(parser: argparse.ArgumentParser, help_text: str, required: bool = False) -> None:
    parser.add_argument("-o", "--output", metavar="PATH", required=required, help=help_text)


@contextmanager
def progress_bar(description: str, enabled: bool = True) -> Iterator[Any]:
    """A rich progress bar on stderr when it is a terminal; a no-op callback otherwise."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    class _Bytes(DownloadColumn):  # (none for a step with no byte count)
        def render(self, task: Any) -> Any:
            return "" if task.total is None and not task.completed else super().render(task)

    with Progress(
        TextColumn("{task.description}"), BarColumn(), _Bytes(), TimeRemainingColumn(), transient=True
    ) as bar:
        task = bar.add_task(description, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        steps: list[Any] = []

        def phase(text: str) -> None:  # a step after reading, with no byte count (an out-of-core build)
            if not steps:
                bar.update(task, visible=False)
                steps.append(bar.add_task("", total=None))
            bar.update(steps[0], description=f"{description}: {text}")

        update.phase = phase  # type: ignore[attr-defined]
        yield update


def open_trace(path: str | Path, quiet: bool = False) -> Trace:
    """Load any supported trace, with a progress bar while a JSON trace is imported; a Parquet
    trace or run too large for the memory available is refused first (``memory_check``)."""
    check_fits(path)
    with progress_bar(f"importing {Path(path).name}", enabled=not quiet) as update:
        return load(path, progress=update)
