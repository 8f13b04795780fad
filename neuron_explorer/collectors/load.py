"""Open any supported input as a ``Trace``: a Parquet file, a run directory, a Kineto JSON, or a
Neuron profiler export. It chooses the collector that reads it, so it lives above the trace
model (``neuron_explorer.trace`` imports nothing above it); ``neuron_explorer.load`` is this."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from neuron_explorer.collectors.build.input_limits import BOM, InputLimitError
from neuron_explorer.trace.errors import NeuronExplorerError, TraceFormatError
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.paths import require_input


def load(path: str | Path, progress: Any = None) -> Trace:
    """Open a trace: a Parquet file, a run directory of per-rank files (Parquet ``rank=N/``, or
    Kineto JSON with each rank from its ``distributedInfo``), or a Kineto JSON
    (``.json``/``.json.gz``) imported on the fly."""
    p = Path(path)
    require_input(p)
    name = p.name.lower()
    if p.is_file() and name.endswith((".ntff", ".neff", ".pb")):
        from neuron_explorer.collectors.neuron import raw_capture_error

        raise raw_capture_error(p)
    if p.is_file() and (name.endswith((".json", ".json.gz", ".gz")) or _looks_like_json(p)):
        from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json

        try:
            return import_kineto_json(p, progress=progress)
        except InputLimitError:  # (past a bound of the input: no other reader is tried)
            raise
        except TraceFormatError:
            if _is_neuron(p):  # a legacy neuron-profile JSON export
                return _import_neuron(p)
            raise
    if p.is_dir():
        from neuron_explorer.collectors.kineto.run_dir import is_json_run, load_run

        if is_json_run(p):  # a run directory of Kineto JSON rank traces
            return load_run(p, progress=progress)
    try:
        return Trace.read(p)
    except TraceFormatError:
        if p.is_dir() and _is_neuron(p):  # a Neuron Explorer Parquet export directory
            return _import_neuron(p)
        if p.is_dir():
            raw_captures_refusal(p)
        raise


def raw_captures_refusal(directory: Path, limit: int = 10_000) -> None:
    """Raise the one-line "export it first" error when ``directory`` holds raw Neuron captures
    (``.ntff``/``.neff``/``.pb``, which only AWS's tools read) and nothing we read; looks at up
    to ``limit`` entries, so a huge tree costs a bounded walk."""
    from itertools import islice

    from neuron_explorer.collectors.neuron import export_hint

    raws = [
        f for f in islice(directory.rglob("*"), limit) if f.suffix.lower() in (".ntff", ".neff", ".pb") and f.is_file()
    ]
    if not raws:
        return
    ntff = next((f for f in raws if f.suffix.lower() == ".ntff"), raws[0])
    raise TraceFormatError(
        f"no trace or device-profile export here, only raw Neuron captures ({len(raws)} such as {ntff.name}); "
        + export_hint(ntff.name),
        directory,
    )


def _is_neuron(path: Path) -> bool:
    from neuron_explorer.collectors.neuron import is_neuron_profile
    from neuron_explorer.collectors.neuron.legacy_json import (
        is_compiler_kernel_info,
        is_device_json,
        is_system_json,
        load_json,
    )

    if path.is_dir():
        return is_neuron_profile(path)
    try:
        obj = load_json(path)
    except (NeuronExplorerError, RecursionError):  # (a probe: the Kineto error stands)
        return False
    # (a compiler kernel_info.json goes to the Neuron reader, which refuses it in one line; an
    # object with a traceEvents member is a Kineto trace, whatever else it holds: its error stands)
    return is_device_json(obj) or is_system_json(obj) or is_compiler_kernel_info(obj)


def _import_neuron(path: Path) -> Trace:
    from neuron_explorer.collectors.neuron import import_neuron_profile

    return import_neuron_profile(path)


def _looks_like_json(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(64)
    head = head.removeprefix(BOM).lstrip()
    return head[:1] in (b"{", b"[") or head[:2] == b"\x1f\x8b"
