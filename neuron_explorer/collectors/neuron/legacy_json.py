"""Read the legacy ``neuron-profile view --output-format json`` export into a ``DeviceProfile``.

The file is one JSON object whose values are lists of records (``instruction``, ``dma``,
``summary``, ``metadata``, ``active_time``, ``dma_queues_info``, ``warnings``, ...). Instruction
and DMA ``timestamp``/``duration`` are device-relative nanoseconds, and so are
``metadata.first_hw_timestamp``/``last_hw_timestamp`` (confirmed on real files, although
``ticks_per_nanosec`` says 1000). A ``summary-json`` export (only ``summary``) is read as
metrics without events. A ``system_profile.json`` (Profiler 2.0 era) next to it adds the
host-clock runtime events. Field conventions: docs/neuron.md.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from neuron_explorer.collectors.build.input_limits import read_text
from neuron_explorer.collectors.neuron import frames as F
from neuron_explorer.collectors.neuron.dma import finish_dmas, mark_transfers, queue_table
from neuron_explorer.collectors.neuron.model import DeviceProfile, bounded_record, core_index
from neuron_explorer.trace.errors import TraceFormatError

try:
    from isal.isal_zlib import error as _isal_error
except ImportError:  # pragma: no cover - isal is a declared dependency
    _isal_error = zlib.error  # type: ignore[misc]

INSTRUCTION_FIELDS = {
    "timestamp": "start_ns",
    "duration": "dur_ns",
    "label": "track",
    "evt_wait_time": "evt_wait_ns",
    "tensor_instruction_type": "instruction_type",
    "nki_source_location": "source_location",
}
DMA_FIELDS = {
    "timestamp": "start_ns",
    "duration": "dur_ns",
    "transfer_size": "bytes",
    "read_size": "read_bytes",
    "write_size": "write_bytes",
    "transfer_rate": "throughput",
    "dma_engine": "engine_idx",
    "is_cc_dma": "is_cc",
}
#: Fields of the legacy records this importer knows (docs/neuron.md); others are listed in the
#: trace metadata as ``unknown_columns`` and kept in ``args``.
KNOWN_FIELDS: dict[str, frozenset[str]] = {
    "instruction": frozenset(
        {
            *INSTRUCTION_FIELDS,
            "subgroup",
            "opcode",
            "operands",
            "hlo_name",
            "layer",
            "hlo_attrs",
            "bir_id",
            "predecessors",
            "hbm_read_bytes",
            "hbm_write_bytes",
            "pc",
            "id",
        }
    ),
    "dma": frozenset(
        {
            *DMA_FIELDS,
            "source",
            "dest",
            "variable",
            "queue_type",
            "dma_queue",
            "subgroup",
            "semaphore_id",
            "aggregated",
            "duplicate",
            "packet_aggregation_id",
        }
    ),
    "active_time": frozenset({"engine", "start_ts", "end_ts", "duration_ns", "pcore_idx"}),
}
#: Top-level keys read; the others (dma_throughput, nc_mem_usage, ...) are counted in the metadata.
READ_KEYS = frozenset(
    {"summary", "metadata", "instruction", "dma", "active_time", "dma_queues_info", "warnings", "layer_summary"}
)
#: Top-level keys of a device-profile export; a JSON object with none of them is not one.
DEVICE_KEYS = ("instruction", "dma", "summary", "metadata", "active_time", "profile_info")
SYSTEM_KEYS = ("trace_events", "trace_event")


def load_json(path: Path) -> Any:
    """The decoded JSON of a file (``.gz`` or not), read within ``input_limits``' bounds:
    inflation and one string's length are checked while it decompresses, a byte order mark
    is dropped."""
    try:
        data = read_text(path)
    except (OSError, EOFError, zlib.error, _isal_error) as exc:
        raise TraceFormatError(f"cannot read ({exc}); is the .gz file truncated?", path) from None
    if not data or data.isspace():
        raise TraceFormatError("the file is empty", path)
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"invalid JSON ({str(exc)[:120]}); is the file truncated?", path) from None
    except RecursionError:  # no Neuron export nests deeper than a few levels
        raise TraceFormatError("not a Neuron profile (JSON nested too deep)", path) from None


def _is_summary_record(obj: Any) -> bool:
    return isinstance(obj, dict) and "total_time" in obj and any(str(k).endswith("_percent") for k in obj)


def as_device_json(obj: Any) -> Any:
    """A ``summary-json`` export (one summary record, or a list of them, at the top level) in
    the shape of a device export (``{"summary": [...]}``); anything else unchanged."""
    if _is_summary_record(obj):
        return {"summary": [obj]}
    if isinstance(obj, list) and obj and all(_is_summary_record(r) for r in obj):
        return {"summary": obj}
    return obj


#: Keys only a device-profile export has (a compiler ``kernel_info.json`` has ``summary`` too).
_EVENT_KEYS = ("instruction", "dma", "active_time", "metadata", "profile_info")


def is_compiler_kernel_info(obj: Any) -> bool:
    """A compiler ``kernel_info.json`` (``{"kernels": ..., "summary": ...}``), found beside real
    profiles: not a profile, although it has a ``summary``."""
    return (
        isinstance(obj, dict)
        and "kernels" in obj
        and not any(k in obj for k in _EVENT_KEYS)
        and not is_kineto_json(obj)
    )


KERNEL_INFO_MESSAGE = (
    "a compiler kernel_info.json (keys 'kernels' and 'summary'), not a device profile: "
    "give a neuron-profile JSON or Parquet export instead"
)


def is_kineto_json(obj: Any) -> bool:
    """A Kineto/Chrome trace: an object with a ``traceEvents`` member (TraceLens traces also
    have a top-level ``metadata``, a name Neuron exports use too), or a list of events."""
    return (isinstance(obj, dict) and "traceEvents" in obj) or (
        isinstance(obj, list) and bool(obj) and isinstance(obj[0], dict) and "ph" in obj[0]
    )


def is_device_json(obj: Any) -> bool:
    if is_compiler_kernel_info(obj) or is_kineto_json(obj):
        return False
    obj = as_device_json(obj)
    return isinstance(obj, dict) and any(k in obj for k in DEVICE_KEYS)


def is_system_json(obj: Any) -> bool:
    return isinstance(obj, dict) and not is_kineto_json(obj) and any(k in obj for k in SYSTEM_KEYS)


def _records(obj: dict[str, Any], key: str, path: Path) -> pd.DataFrame:
    value = obj.get(key)
    if value is None:
        return pd.DataFrame()
    # (an object is refused, not read as one record: docs/neuron.md, "a table that is not a list of records")
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise TraceFormatError(f"'{key}' should be a list of records, found {type(value).__name__}", path)
    return pd.DataFrame.from_records(value)


def _first(obj: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = obj.get(key)
    record = value[0] if isinstance(value, list) and value else value
    if record is None or record == []:
        return {}
    if not isinstance(record, dict):
        raise TraceFormatError(f"'{key}' should be a list of records, found {type(record).__name__}", path)
    return {k: v for k, v in record.items() if v is not None}


def read_legacy_json(path: str | Path, obj: Any | None = None) -> DeviceProfile:
    path = Path(path)
    obj = load_json(path) if obj is None else obj
    if is_compiler_kernel_info(obj):
        raise TraceFormatError(KERNEL_INFO_MESSAGE, path)
    obj = as_device_json(obj)
    if not is_device_json(obj):
        raise TraceFormatError(
            f"JSON, but not a neuron-profile export: none of the keys {', '.join(DEVICE_KEYS)}", path
        )
    try:
        return _read(path, obj)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        # Fields of the wrong type deep in a record (a dict where a number belongs, ...).
        why = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise TraceFormatError(f"unexpected content in the neuron-profile export ({why})", path) from None


def _read(path: Path, obj: dict[str, Any]) -> DeviceProfile:
    profile = DeviceProfile(source=path, format="json", tables=sorted(obj))
    meta = bounded_record(_first(obj, "metadata", path), profile, "metadata")
    profile.metadata_raw = meta
    profile.schema_version = str(meta.get("data_version")) if meta.get("data_version") is not None else None
    summary = bounded_record(_first(obj, "summary", path), profile, "summary")
    profile.summary_raw = summary
    profile.file_warnings = file_warnings(obj.get("warnings"))
    profile.metrics_only = not any(k in obj for k in ("instruction", "dma", "active_time"))
    if not summary:
        profile.warn("'summary' missing: MFU and engine/DMA utilization are computed from the events instead")
    if not meta and not profile.metrics_only:
        profile.warn("'metadata' missing: device clock and hardware details unknown")
    if profile.metrics_only:
        if not summary:
            raise TraceFormatError("neuron-profile JSON with neither events nor a summary", path)
        profile.warn(
            "summary-json export: metrics only, no instruction or DMA events (export --output-format json for events)"
        )

    active = _records(obj, "active_time", path)
    if len(active):
        profile.active = F.active_intervals(active, profile, _origin(active, "start_ts", meta))
    ins = _records(obj, "instruction", path)
    for key, table in (("instruction", ins), ("active_time", active)):
        profile.unknown_columns[key] = sorted(set(map(str, table.columns)) - KNOWN_FIELDS[key])
    profile.other_tables = {
        str(k): len(v) if isinstance(v, list) else 1 for k, v in obj.items() if k not in READ_KEYS and v
    }
    if len(ins):
        _need(ins, "instruction", ("timestamp", "duration"), path)
        args = F.records_json(ins)
        first_hw = _number(meta.get("first_hw_timestamp"))
        ins = F.core_from_subgraph(ins.rename(columns=INSTRUCTION_FIELDS))
        ins = F.event_times(ins, first_hw, profile, "instruction records", args)
        profile.instructions = F.finish_instructions(ins, profile, profile.active)
    elif not profile.metrics_only:
        profile.warn("'instruction' missing or empty: no engine activity in this profile")
    dma = _records(obj, "dma", path)
    profile.unknown_columns["dma"] = sorted(set(map(str, dma.columns)) - KNOWN_FIELDS["dma"])
    if len(dma):
        _need(dma, "dma", ("timestamp", "duration"), path)
        args = F.records_json(dma)
        dma = dma.drop(columns=[c for c in ("queue",) if c in dma.columns])
        first_hw = _number(meta.get("first_hw_timestamp"))
        dma = F.core_from_subgraph(dma.rename(columns=DMA_FIELDS))
        dma = F.event_times(dma, first_hw, profile, "dma records", args)
        queues = queue_table(obj.get("dma_queues_info"))
        profile.dmas = mark_transfers(finish_dmas(dma, profile, queues), profile)
    elif not profile.metrics_only:
        profile.warn("'dma' missing or empty: no DMA activity in this profile")

    profile.layers = layer_table(obj.get("layer_summary"), _number(meta.get("first_hw_timestamp")))
    # Confirmed on real exports: first/last_hw_timestamp are already nanoseconds, whatever
    # ticks_per_nanosec says (1000 on inf2), and their difference is summary.total_time.
    first, last = _float(meta.get("first_hw_timestamp")), _float(meta.get("last_hw_timestamp"))
    if first is not None and last is not None and 0 < last - first <= 4e18:
        profile.span_ns = round(last - first)
    total = _float(summary.get("total_time"))
    tpn = _float(meta.get("ticks_per_nanosec"))
    if total and 0 < total * 1e9 <= 4e18:
        total_ns = total * 1e9
        if profile.span_ns is None:
            profile.span_ns = round(total_ns)
        elif abs(profile.span_ns - total_ns) > 0.05 * total_ns:
            if tpn and tpn > 0 and abs(profile.span_ns / tpn - total_ns) <= 0.05 * total_ns:
                # This file's hardware timestamps are ticks after all: the summary says so.
                profile.span_ns = round(profile.span_ns / tpn)
            else:
                profile.warn(
                    f"hardware timestamps span {profile.span_ns:,} ns but summary.total_time is {total:g} s; "
                    "the span is taken from the timestamps"
                )
    profile.device = core_index(summary.get("nc_idx", meta.get("nc_idx")), profile)
    return profile


def layer_table(records: Any, first_hw: float | None) -> pd.DataFrame:
    """``layer_summary`` as ``name``, ``subgraph``, ``start_ns``, ``end_ns`` (device-relative, as
    the instructions), rows with unusable times left out. Measured on the real trn2 exports: one
    row per subgraph (``/sg00``, ``/sg01``, covering its whole activity) and one per kernel layer
    under it (``/sg00/Unknown``, 13.2-14.0 us in, in any row order); ``start``/``end`` are on
    the instructions' clock."""
    cols = ["name", "subgraph", "start_ns", "end_ns"]
    if not isinstance(records, list) or not records:
        return pd.DataFrame(columns=cols)
    rows = [r for r in records if isinstance(r, dict)][:10_000]
    df = pd.DataFrame(
        {
            "name": [str(r.get("name", ""))[:200] for r in rows],
            "subgraph": [str(r.get("fully_qualified_subgraph", ""))[:200] for r in rows],
            "start_ns": pd.to_numeric(pd.Series([r.get("start") for r in rows], dtype=object), errors="coerce"),
            "end_ns": pd.to_numeric(pd.Series([r.get("end") for r in rows], dtype=object), errors="coerce"),
        }
    )
    ok = np.isfinite(df["start_ns"]) & np.isfinite(df["end_ns"]) & (df["end_ns"] > df["start_ns"])
    ok &= (df["start_ns"].abs() < 4e18) & (df["end_ns"].abs() < 4e18)
    df = df[ok].copy()
    if first_hw is not None and len(df) and (df["start_ns"] >= first_hw).all():
        df["start_ns"] -= first_hw
        df["end_ns"] -= first_hw
    df["start_ns"] = df["start_ns"].round().astype(np.int64)
    df["end_ns"] = df["end_ns"].round().astype(np.int64)
    return df.reset_index(drop=True)[cols]


def file_warnings(value: Any) -> list[str]:
    """The export's ``warnings`` as one line each (records, strings or a single value)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            text = item.get("message") or item.get("warning") or item.get("description")
            if text is None:
                text = "; ".join(f"{k}: {v}" for k, v in item.items())
        else:
            text = item
        line = " ".join(str(text).split())
        if line:
            out.append(line[:400])
    return out


def read_system_json(path: Path, obj: Any) -> pd.DataFrame:
    """Runtime events of a ``system_profile.json`` (host clock, Unix ns)."""
    key = next((k for k in SYSTEM_KEYS if k in obj), None)
    ev = _records(obj, key, path) if key else pd.DataFrame()
    if not len(ev):
        return pd.DataFrame()
    _need(ev, key or "trace_events", ("timestamp", "name"), path)
    args = F.records_json(ev)
    ev = ev.rename(columns={"timestamp": "start_ns", "duration": "dur_ns", "process_id": "pid", "thread_id": "tid"})
    ev = F.times(ev, 0)
    ev["args"] = args
    group = ev["group"].astype(str) if "group" in ev else pd.Series("", index=ev.index)
    nc = group.str.extract(r"nc-?(\d+)")[0]
    ev["nc_idx"] = pd.to_numeric(nc, errors="coerce")
    ev["source"] = "neuron_rt"
    return F.ensure(ev, {"pid": 0, "tid": 0})


def _origin(df: pd.DataFrame, column: str, meta: dict[str, Any]) -> int:
    """What to subtract from a table's timestamps to make them device-relative: real files write
    them from 0, but a table whose every timestamp is at or past ``first_hw_timestamp`` is on
    the absolute hardware clock (decided per table, never for the whole file)."""
    first = _float(meta.get("first_hw_timestamp"))
    if first is None or first <= 0 or column not in df:
        return 0
    values = pd.to_numeric(df[column], errors="coerce")
    return int(first) if values.notna().any() and float(values.min()) >= first else 0


def _need(df: pd.DataFrame, key: str, fields: tuple[str, ...], path: Path) -> None:
    missing = [f for f in fields if f not in df.columns]
    if missing:
        raise TraceFormatError(f"'{key}' records lack required field(s) {', '.join(missing)}", path)


def _number(v: Any) -> float | None:
    """A JSON number (not a string or a boolean) that is finite, else None."""
    if type(v) not in (int, float):
        return None
    return _float(v)


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None
