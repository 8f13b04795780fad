"""Read the legacy ``neuron-profile view --output-format json`` export into a ``DeviceProfile``.

The file is one JSON object whose values are lists of records (``instruction``, ``dma``,
``summary``, ``metadata``, ...). Instruction and DMA ``timestamp``/``duration`` are device-relative
nanoseconds; ``metadata.first_hw_timestamp``/``last_hw_timestamp`` are raw device ticks,
converted with ``ticks_per_nanosec`` (an assumption documented in docs/neuron.md). A
``system_profile.json`` (Profiler 2.0 era) next to it adds the host-clock runtime events.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from neuron_explorer.collectors.neuron import frames as F
from neuron_explorer.collectors.neuron.model import DeviceProfile
from neuron_explorer.trace.errors import TraceFormatError

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
    "subgroup": "queue",
    "dma_engine": "engine_idx",
    "is_cc_dma": "is_cc",
}
#: Top-level keys of a device-profile export; a JSON object with none of them is not one.
DEVICE_KEYS = ("instruction", "dma", "summary", "metadata", "active_time", "profile_info")
SYSTEM_KEYS = ("trace_events", "trace_event")


def load_json(path: Path) -> Any:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(f"cannot read ({exc}); is the .gz file truncated?", path) from None
    if not data.strip():
        raise TraceFormatError("the file is empty", path)
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"invalid JSON ({str(exc)[:120]}); is the file truncated?", path) from None


def is_device_json(obj: Any) -> bool:
    return isinstance(obj, dict) and any(k in obj for k in DEVICE_KEYS)


def is_system_json(obj: Any) -> bool:
    return isinstance(obj, dict) and any(k in obj for k in SYSTEM_KEYS)


def _records(obj: dict[str, Any], key: str, path: Path) -> pd.DataFrame:
    value = obj.get(key)
    if value is None:
        return pd.DataFrame()
    if isinstance(value, dict):
        value = [value]
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
    if not is_device_json(obj):
        raise TraceFormatError(
            f"JSON, but not a neuron-profile export: none of the keys {', '.join(DEVICE_KEYS)}", path
        )
    profile = DeviceProfile(source=path, format="json", tables=sorted(obj))
    meta = _first(obj, "metadata", path)
    profile.metadata_raw = meta
    profile.schema_version = str(meta.get("data_version")) if meta.get("data_version") is not None else None
    summary = _first(obj, "summary", path)
    profile.summary_raw = summary
    if not summary:
        profile.warn("'summary' missing: MFU and engine/DMA utilization are computed from the events instead")
    if not meta:
        profile.warn("'metadata' missing: device clock (ticks_per_nanosec) unknown")

    ins = _records(obj, "instruction", path)
    if len(ins):
        _need(ins, "instruction", ("timestamp", "duration"), path)
        args = F.records_json(ins)
        ins = F.times(ins.rename(columns=INSTRUCTION_FIELDS), 0)
        ins["args"] = args
        profile.instructions = F.finish_instructions(ins, profile)
    else:
        profile.warn("'instruction' missing or empty: no engine activity in this profile")
    dma = _records(obj, "dma", path)
    if len(dma):
        _need(dma, "dma", ("timestamp", "duration"), path)
        args = F.records_json(dma)
        dma = dma.drop(columns=[c for c in ("queue",) if c in dma.columns])
        if "dma_queue" in dma and "subgroup" not in dma:
            dma = dma.rename(columns={"dma_queue": "subgroup"})
        dma = F.times(dma.rename(columns=DMA_FIELDS), 0)
        dma["args"] = args
        profile.dmas = F.finish_dmas(dma, profile)
    else:
        profile.warn("'dma' missing or empty: no DMA activity in this profile")

    tpn = _float(meta.get("ticks_per_nanosec"))
    first, last = _float(meta.get("first_hw_timestamp")), _float(meta.get("last_hw_timestamp"))
    if first is not None and last is not None and last > first:
        if tpn and tpn > 0:
            profile.span_ns = round((last - first) / tpn)
        else:
            profile.warn("ticks_per_nanosec missing: the profile span is taken from the events")
    device = summary.get("nc_idx", meta.get("nc_idx"))
    profile.device = int(device) if isinstance(device, (int, float)) and device == device else 0
    return profile


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


def _need(df: pd.DataFrame, key: str, fields: tuple[str, ...], path: Path) -> None:
    missing = [f for f in fields if f not in df.columns]
    if missing:
        raise TraceFormatError(f"'{key}' records lack required field(s) {', '.join(missing)}", path)


def _float(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None
