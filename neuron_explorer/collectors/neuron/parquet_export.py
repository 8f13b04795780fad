"""Read a Neuron Explorer Parquet export directory into a ``DeviceProfile``.

``neuron-explorer view ... --output-format parquet`` writes one file per table
(``Instruction.parquet``, big tables split as ``Instruction_0.parquet``, ``Instruction_1.parquet``)
and only for activity that exists. Fields are read by name, so new optional fields never break
the import; they are kept in ``args`` and listed in the trace metadata. A table we need that is
missing, or a required field missing from a table that is present, is a warning or a
``TraceFormatError`` naming the file, never a crash.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from neuron_explorer.collectors.neuron import frames as F
from neuron_explorer.collectors.neuron.dma import finish_dmas, mark_transfers
from neuron_explorer.collectors.neuron.model import KNOWN_SCHEMA_MAJORS, DeviceProfile, bounded_record, core_index
from neuron_explorer.collectors.neuron.parquet_fields import (
    CC_FIELDS,
    DMA_FIELDS,
    INSTRUCTION_FIELDS,
    KNOWN_FIELDS,
    SYSTEM_FIELDS,
)
from neuron_explorer.trace.errors import TraceFormatError

_ACTIVITY = ("Instruction", "DmaPacketAggregated", "DmaPacket", "CcOp", "SystemProfileEvents")
_MARKERS = ("Metadata", "Summary", "SchemaFields", "ActiveTime", *_ACTIVITY)


def table_files(directory: Path) -> dict[str, list[Path]]:
    """Table name -> its file(s), ``Name.parquet`` or ``Name_0.parquet``, ``Name_1.parquet``..."""
    out: dict[str, list[tuple[int, Path]]] = {}
    for p in directory.iterdir():
        if not p.is_file() or p.suffix != ".parquet":
            continue
        m = re.fullmatch(r"(?P<name>[A-Za-z]+?)(?:_(?P<part>\d+))?", p.stem)
        if m:
            out.setdefault(m.group("name"), []).append((int(m.group("part") or -1), p))
    return {k: [p for _, p in sorted(v)] for k, v in out.items()}


def is_parquet_export(path: Path) -> bool:
    return path.is_dir() and any(t in _MARKERS for t in table_files(path))


def _read(
    files: list[Path], table: str, need: list[tuple[str, ...]] | None = None, version: str | None = None
) -> pd.DataFrame:
    parts = []
    for f in files:
        try:
            part = pq.read_table(f)
        except (pa.ArrowInvalid, OSError) as exc:
            why = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            raise TraceFormatError(
                f"{table} table is not readable Parquet ({why}); is the file truncated?", f
            ) from None
        if need:  # checked per part: a split table's parts must each be complete
            _require(part.column_names, table, f, need, version)
        parts.append(part)
    try:
        merged = pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise TraceFormatError(f"the parts of the {table} table disagree on their schema ({exc})", files[0]) from None
    return merged.to_pandas()


def _require(columns: list[str], table: str, file: Path, need: list[tuple[str, ...]], version: str | None) -> None:
    missing = [" or ".join(alts) for alts in need if not any(a in columns for a in alts)]
    if missing:
        ver = f" (profile schema {version})" if version else ""
        raise TraceFormatError(f"{table} table lacks required field(s) {', '.join(missing)}{ver}", file)


def read_parquet_export(directory: str | Path) -> DeviceProfile:
    directory = Path(directory)
    files = table_files(directory)
    profile = DeviceProfile(source=directory, format="parquet", tables=sorted(files))
    if not any(t in files for t in _ACTIVITY) and "Summary" in files:
        profile.metrics_only = True
        profile.summary_raw = bounded_record(_one_row(files, "Summary"), profile, "Summary")
        profile.metadata_raw = bounded_record(_one_row(files, "Metadata"), profile, "Metadata")
        profile.warn("Summary table only: metrics, no instruction or DMA events")
        return profile
    if not any(t in files for t in _ACTIVITY):
        raise TraceFormatError(
            "no activity tables (Instruction, DmaPacket[Aggregated], CcOp or SystemProfileEvents) in this "
            "Neuron export directory",
            directory,
        )
    meta = bounded_record(_one_row(files, "Metadata"), profile, "Metadata")
    profile.metadata_raw = meta
    version = meta.get("profile_schema_version")
    profile.schema_version = str(version) if version is not None else None
    _check_version(profile)
    if "Metadata" not in files:
        profile.warn("Metadata table missing: schema version and hardware clocks unknown; timestamps used as they are")
    if "Summary" in files:
        profile.summary_raw = bounded_record(_one_row(files, "Summary"), profile, "Summary")
    else:
        profile.warn("Summary table missing: MFU and engine/DMA utilization are computed from the events instead")

    first_hw = _int(meta.get("first_hw_timestamp"))
    last_hw = _int(meta.get("last_hw_timestamp"))
    origin = 0
    if "Instruction" in files:
        ins = _read(
            files["Instruction"],
            "Instruction",
            [("start_ts",), ("end_ts", "duration_ns"), ("engine", "timeline_track")],
            profile.schema_version,
        )
        origin = first_hw if first_hw is not None and len(ins) and ins["start_ts"].min() >= first_hw else 0
        if "ActiveTime" in files:
            profile.active = F.active_intervals(_read(files["ActiveTime"], "ActiveTime"), profile, origin)
        profile.instructions = _instructions(ins, files, origin, profile)
    else:
        profile.warn("Instruction table missing: no engine activity in this profile")
    profile.dmas = _dmas(files, origin, profile)
    if "CcOp" in files:
        cc = _read(
            files["CcOp"], "CcOp", [("start_ts",), ("end_ts", "duration_ns"), ("operation",)], profile.schema_version
        )
        profile.unknown_columns["CcOp"] = _unknown(cc, "CcOp")
        args = F.records_json(cc)
        cc = F.event_times(cc.rename(columns=CC_FIELDS), None, profile, "CcOp rows", args, origin)
        profile.ccops = F.finish_ccops(cc)
    if "SystemProfileEvents" in files:
        sp = _read(
            files["SystemProfileEvents"],
            "SystemProfileEvents",
            [("name",), ("start_ts",), ("end_ts", "duration_ns")],
            profile.schema_version,
        )
        profile.unknown_columns["SystemProfileEvents"] = _unknown(sp, "SystemProfileEvents")
        args = F.records_json(sp)
        sp = F.event_times(sp.rename(columns=SYSTEM_FIELDS), None, profile, "SystemProfileEvents rows", args, 0)
        profile.system = F.ensure(sp, {"source": "neuron_rt", "pid": 0, "tid": 0, "nc_idx": np.nan})
    if "ExecutionInfo" in files:
        ex = _read(files["ExecutionInfo"], "ExecutionInfo")
        if {"execution_start_ts", "execution_end_ts"} <= set(ex.columns):
            ex = ex.dropna(subset=["execution_start_ts", "execution_end_ts"])
            profile.executions = pd.DataFrame(
                {
                    "index": pd.to_numeric(ex.get("execution_index", pd.Series(range(len(ex)))), errors="coerce")
                    .fillna(-1)
                    .astype(np.int64)
                    .to_numpy(),
                    "start_ns": ex["execution_start_ts"].astype(np.int64).to_numpy(),
                    "end_ns": ex["execution_end_ts"].astype(np.int64).to_numpy(),
                    "neff_name": ex.get("neff_name", pd.Series([None] * len(ex))).to_numpy(),
                }
            )
    if first_hw is not None and last_hw is not None and 0 < last_hw - first_hw <= 4 * 10**18:
        profile.span_ns = last_hw - first_hw
    profile.wall_origin_ns = _wall_clock(meta.get("first_ts"))
    profile.device = core_index(meta.get("neuroncore_idx"), profile)
    if "Warnings" in files:
        from neuron_explorer.collectors.neuron.legacy_json import file_warnings

        profile.file_warnings = file_warnings(_read(files["Warnings"], "Warnings").to_dict("records"))
    return profile


def _instructions(ins: pd.DataFrame, files: dict[str, list[Path]], origin: int, profile: DeviceProfile) -> pd.DataFrame:
    profile.unknown_columns["Instruction"] = _unknown(ins, "Instruction")
    args = F.records_json(ins)
    df = F.event_times(ins.rename(columns=INSTRUCTION_FIELDS), None, profile, "Instruction rows", args, origin)
    loc_cols = [c for c in ("nki_source_location", "bir_debug_info_source_location") if c in df]
    if loc_cols:
        df["source_location"] = df[loc_cols].bfill(axis=1).iloc[:, 0]
    if "stack_frame_ids" in df and df["stack_frame_ids"].notna().any():
        needed = ("StackFrame", "StackFrameFileLocation", "StackFrameFileName", "StackFrameFunctionName")
        absent = [t for t in needed if t not in files]
        if absent:
            profile.warn(f"{', '.join(absent)} table(s) missing: instructions keep no Python source lines")
        else:
            src = F.resolve_stack_frames(df["stack_frame_ids"], *(_read(files[t], t) for t in needed))
            df[["src_file", "src_line", "src_func"]] = src[["src_file", "src_line", "src_func"]]
    return F.finish_instructions(df, profile, profile.active)


def _dmas(files: dict[str, list[Path]], origin: int, profile: DeviceProfile) -> pd.DataFrame:
    """Transfers (``DmaPacketAggregated``) and packets (``DmaPacket``), kept apart (see ``dma``)."""
    parts = []
    for table, aggregated in (("DmaPacketAggregated", True), ("DmaPacket", False)):
        if table not in files:
            continue
        dma = _read(files[table], table, [("start_ts",), ("end_ts", "duration_ns")], profile.schema_version)
        profile.unknown_columns[table] = _unknown(dma, table)
        args = F.records_json(dma)
        df = F.event_times(dma.rename(columns=DMA_FIELDS), None, profile, f"{table} rows", args, origin)
        df["aggregated"] = aggregated
        parts.append(df)
    if not parts:
        profile.warn("DmaPacketAggregated and DmaPacket tables missing: no DMA activity in this profile")
        return pd.DataFrame()
    df = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    return mark_transfers(finish_dmas(df, profile), profile)


def _one_row(files: dict[str, list[Path]], table: str) -> dict[str, Any]:
    if table not in files:
        return {}
    try:
        rows = pq.read_table(files[table][0]).slice(0, 1).to_pylist()
    except (pa.ArrowInvalid, OSError) as exc:
        why = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise TraceFormatError(
            f"{table} table is not readable Parquet ({why}); is the file truncated?", files[table][0]
        ) from None
    return {k: v for k, v in rows[0].items() if v is not None} if rows else {}


def _is_missing(v: Any) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _check_version(profile: DeviceProfile) -> None:
    v = profile.schema_version
    if v is None:
        return
    m = re.match(r"^(\d+)\.(\d+)", v)
    if not m:
        profile.warn(f"profile_schema_version {v!r} is not MAJOR.MINOR.PATCH; fields are read by name")
        return
    major = int(m.group(1))
    if major not in KNOWN_SCHEMA_MAJORS:
        profile.warn(
            f"profile schema {v} is newer than the versions this importer knows (up to "
            f"{KNOWN_SCHEMA_MAJORS[-1]}.x); fields are read by name and unknown ones kept in args"
        )


def _unknown(df: pd.DataFrame, table: str) -> list[str]:
    return sorted(set(df.columns) - KNOWN_FIELDS.get(table, set()))


def _int(v: Any) -> int | None:
    try:
        return None if v is None or _is_missing(v) else int(v)
    except (TypeError, ValueError):
        return None


def _wall_clock(text: Any) -> int | None:
    """Unix ns of a Metadata ``first_ts`` string; None when absent or the epoch placeholder."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        ts = pd.Timestamp(re.sub(r"\s+UTC$", "", text.strip()))
    except (ValueError, TypeError):
        return None
    if ts.tzinfo is None:
        ts = ts.tz_localize("UTC")
    ns = int(ts.value)
    return ns if ns > 86_400 * 10**9 else None
