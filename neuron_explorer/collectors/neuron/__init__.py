"""Neuron (Trainium / Inferentia) profiles: import, and join with a framework trace.

Public API:

- ``import_neuron_profile(path) -> Trace``: a Neuron Explorer Parquet export directory, a legacy
  ``neuron-profile`` JSON file, or a directory of those (one per NeuronCore, optionally with a
  ``system_profile.json``).
- ``join_device_profile(trace, path) -> Trace``: the framework trace (torch.profiler) with the
  device profile aligned to its clock and linked to the ops that launched it
  (``neuron-explorer convert --device-profile DIR``).
- ``join_inspect_output_dir(trace, directory) -> Trace``: the same for the exports found under
  ``NEURON_RT_INSPECT_OUTPUT_DIR`` (used by ``record`` / ``profile()``).

Formats, field mappings, units and assumptions: docs/neuron.md.

Imports ``collectors/build/`` (every reader hands its rows to ``build_trace``) and ``trace/``;
no module of this package imports this face.
"""

from __future__ import annotations

import os
from pathlib import Path

from neuron_explorer.collectors.neuron.events import build_device_trace
from neuron_explorer.collectors.neuron.legacy_json import (
    KERNEL_INFO_MESSAGE,
    is_compiler_kernel_info,
    is_device_json,
    is_system_json,
    load_json,
    read_legacy_json,
    read_system_json,
)
from neuron_explorer.collectors.neuron.model import DeviceProfile, NeuronProfileWarning
from neuron_explorer.collectors.neuron.parquet_export import is_parquet_export, read_parquet_export
from neuron_explorer.trace.errors import CollectorError, TraceFormatError, TraceNotFoundError
from neuron_explorer.trace.model import Trace

__all__ = [
    "DeviceProfile",
    "NeuronProfileWarning",
    "build_device_trace",
    "find_device_profiles",
    "import_neuron_profile",
    "is_neuron_profile",
    "join_device_profile",
    "join_inspect_output_dir",
    "read_device_profile",
]

_RAW_SUFFIXES = (".ntff", ".neff", ".pb")


def export_hint(name: str = "PROFILE.ntff") -> str:
    """How to export a raw capture with AWS's tools (they alone read ``.ntff``/``.pb``)."""
    stem = name[: -len(".ntff")] if name.endswith(".ntff") else "profile"
    return (
        f"export it first with AWS's tool: /opt/aws/neuron/bin/neuron-profile view -n MODEL.neff -s {name} "
        f"--output-format json --output-file {stem}.json (or /opt/aws/neuron/bin/neuron-explorer view ... "
        "--output-format parquet), then give neuron-explorer the export"
    )


def raw_capture_error(path: Path) -> TraceFormatError:
    """The one-line refusal of a raw ``.ntff``/``.neff``/``.pb`` file."""
    return TraceFormatError(
        f"a raw Neuron capture ({path.suffix}), which only AWS's tools read: {export_hint(path.name)}", path
    )


class SeparateProfilesError(TraceFormatError):
    """A directory of independent device profiles (a sweep), not one run of several cores."""


def is_neuron_profile(path: str | Path) -> bool:
    """True for a Parquet export directory or a directory/file holding neuron-profile JSON."""
    p = Path(path)
    if is_parquet_export(p):
        return True
    if p.is_dir():
        return any(is_parquet_export(d) for d in p.iterdir() if d.is_dir()) or any(
            f.name.lower().endswith((".json", ".json.gz")) for f in p.iterdir()
        )
    return False


def find_device_profiles(root: str | Path) -> list[Path]:
    """Parquet export directories and device JSON files at or below ``root`` (sorted)."""
    root = Path(root)
    if is_parquet_export(root):
        return [root]
    if root.is_file():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        d = Path(dirpath)
        if is_parquet_export(d):
            found.append(d)
            dirnames.clear()
            continue
        found.extend(d / f for f in filenames if f.endswith((".json", ".json.gz")))
    return sorted(found)


def read_device_profile(path: str | Path, separate_ok: bool = True) -> list[DeviceProfile]:
    """Every device profile at ``path``, with a sibling ``system_profile.json`` attached.

    With ``separate_ok=False`` a directory of independent profiles (several files of the same
    NeuronCore) raises ``SeparateProfilesError`` that points at ``neuron-explorer compare``."""
    path = Path(path)
    if not path.exists():
        raise TraceNotFoundError("no such file or directory", path)
    if path.is_file() and path.suffix.lower() in _RAW_SUFFIXES:
        raise raw_capture_error(path)
    profiles: list[DeviceProfile] = []
    system = None
    for item in find_device_profiles(path):
        try:
            if item.is_dir():
                profiles.append(read_parquet_export(item))
                continue
            obj = load_json(item)
            if is_system_json(obj) and not is_device_json(obj):
                system = read_system_json(item, obj)
            elif is_device_json(obj):
                profiles.append(read_legacy_json(item, obj))
            elif item == path and is_compiler_kernel_info(obj):
                raise TraceFormatError(KERNEL_INFO_MESSAGE, item)
            elif item == path:
                raise TraceFormatError("JSON, but neither a neuron-profile export nor a system profile", item)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
            # Fields of the wrong type (a dict where a number belongs, ...): one line, naming the file.
            why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            raise TraceFormatError(f"unexpected content in the Neuron profile ({why})", item) from None
    if not profiles:
        raws = sorted(
            (p.name for p in path.rglob("*") if p.suffix in _RAW_SUFFIXES) if path.is_dir() else [],
            key=lambda n: not n.endswith(".ntff"),  # name the capture itself, not the NEFF beside it
        )
        hint = f" (found raw capture files such as {raws[0]}: {export_hint(raws[0])})" if raws else ""
        raise TraceFormatError(f"no Neuron device profile (Parquet export or neuron-profile JSON) here{hint}", path)
    if system is not None:
        import pandas as pd

        for p in profiles:
            if not len(p.system):
                p.system = system
            else:
                p.system = pd.concat([p.system, system], ignore_index=True)
    if separate_ok is False:
        refuse_separate_profiles(path, profiles)
    _distinct_devices(profiles)
    return profiles


def separate_profiles(profiles: list[DeviceProfile]) -> bool:
    """Several files that each describe the same NeuronCore: independent profiles (a sweep of
    runs, as real output folders hold), not the cores of one run."""
    files = {p.source for p in profiles}
    return len(files) > 1 and len({p.device for p in profiles}) < len(profiles)


def refuse_separate_profiles(path: Path, profiles: list[DeviceProfile]) -> None:
    if separate_profiles(profiles):
        cores = sorted({p.device for p in profiles})
        raise SeparateProfilesError(
            f"holds {len(profiles)} separate device profiles (of NeuronCore {', '.join(map(str, cores))}), not one "
            f"run: compare them with `neuron-explorer compare {path}`, or give one file",
            path,
        )


def _distinct_devices(profiles: list[DeviceProfile]) -> None:
    seen: set[int] = set()
    for i, p in enumerate(profiles):
        if p.device in seen:
            p.device = max(seen) + 1
            p.warn(f"NeuronCore index repeats another profile's; numbered {p.device} (profile {i})")
        seen.add(p.device)


def import_neuron_profile(path: str | Path, separate_ok: bool = False) -> Trace:
    """Import a Neuron device (and system) profile as a trace of its own. A directory of
    separate profiles (a sweep) is refused unless ``separate_ok`` (then numbered as cores)."""
    return build_device_trace(read_device_profile(path, separate_ok=separate_ok))


def join_device_profile(trace: Trace, path: str | Path, max_gap_ns: int | None = None) -> Trace:
    """The framework ``trace`` with the Neuron device profile at ``path`` aligned and linked."""
    from neuron_explorer.collectors.neuron.join import DEFAULT_MAX_GAP_NS, join_profiles

    return join_profiles(trace, read_device_profile(path), Path(path), max_gap_ns or DEFAULT_MAX_GAP_NS)


def join_inspect_output_dir(trace: Trace, directory: str | Path | None = None) -> Trace:
    """Join the device profiles exported under ``NEURON_RT_INSPECT_OUTPUT_DIR``.

    The runtime writes raw ``.ntff``/``.pb`` files there; only AWS's ``neuron-explorer`` reads
    those, so this joins the Parquet/JSON exports found in that tree and raises
    ``CollectorError`` (saying how to export) when there are none.
    """
    directory = directory or os.environ.get("NEURON_RT_INSPECT_OUTPUT_DIR")
    if not directory:
        raise CollectorError("NEURON_RT_INSPECT_OUTPUT_DIR is not set: no Neuron device profile to join")
    root = Path(directory)
    try:
        return join_device_profile(trace, root)
    except TraceNotFoundError:
        raise CollectorError("the Neuron inspect output directory does not exist", root) from None
    except TraceFormatError as exc:
        raise CollectorError(exc.message, exc.path or root) from None
