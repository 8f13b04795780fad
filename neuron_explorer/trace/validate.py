"""A Parquet trace checked against the schema when it is opened: reject, or repair out loud.

The rules (docs/schema.md, "Validation"), whole-column:

- the file holds at least one event; text columns hold UTF-8; the required columns (``REQUIRED``) are present with a
  type that converts losslessly to the schema's (any integer width for integers, plain or
  dictionary strings for text, integers for floats); ``event_id`` is 0..n-1 in row order;
  ``start_ns`` has no null and stays within +-``MAX_TIME_NS``; ``dur_ns`` is at most
  ``MAX_TIME_NS``. Anything else there rejects the file (``TraceFormatError``).
- an optional column that is missing, or whose type does not convert, is all null (repair);
  a null or negative ``dur_ns`` is clamped to 0; a link column (``parent_id``, ``launch_id``,
  ``op_id``, ``fwd_id``) pointing outside the file is set to null.
- metadata values of the wrong JSON type are ignored (``rank`` and ``schema_version`` aside:
  see ``model._check_metadata``).

Every repair is counted (``trace.repairs``): stored in the metadata, warned once per file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.arrow import from_numpy, null_mask, to_numpy
from neuron_explorer.trace.errors import TraceFormatError
from neuron_explorer.trace.repairs import CLAMPED, FILLED, IGNORED, NULLED, Repairs
from neuron_explorer.trace.schema import ADDED_IN, COLUMN_BY_NAME

MAX_TIME_NS = 4 * 10**18
INT32_MAX = 2**31 - 1
REQUIRED = ("event_id", "kind", "name", "start_ns", "dur_ns")
LINK_COLUMNS = ("parent_id", "launch_id", "op_id", "fwd_id", "capture_op_id")

#: Metadata keys and the JSON types they must have (others are kept as they are).
_METADATA_TYPES: dict[str, tuple[type, ...]] = {
    "device_properties": (list,),
    "distributed_info": (dict, type(None)),
    "trace_metadata": (dict,),
    "device_types": (list,),
    "base_time_ns": (int, type(None)),
    "world_size": (int, type(None)),
    "source_file": (str, type(None)),
    "collector": (str,),
    "repairs": (list,),
    "dropped_events": (int,),
    "rank_known": (bool,),
}


#: Fields of a ``device_properties`` entry that the analyzers read: (types, low, high).
_DEVICE_FIELDS: dict[str, tuple[tuple[type, ...], int, int]] = {
    "id": ((int,), 0, INT32_MAX),
    "name": ((str,), 0, 0),
    "totalGlobalMem": ((int,), 0, 2**62),
    "total_memory": ((int,), 0, 2**62),
    "totalMemory": ((int,), 0, 2**62),
    "computeMajor": ((int,), 0, INT32_MAX),
    "computeMinor": ((int,), 0, INT32_MAX),
}


def device_properties(props: list[Any], repairs: Repairs, what: str = "deviceProperties") -> list[dict[str, Any]]:
    """The objects of a device-properties list, each without the fields the analyzers read that
    have the wrong type or range (an ``id`` that is not an int32 >= 0, a ``name`` that is not
    text, a memory size that is not a byte count, ...); other fields are kept as they are.
    One rule for the Kineto ``deviceProperties`` and the Parquet ``device_properties``."""
    out = []
    bad = sum(not isinstance(p, dict) for p in props)
    repairs.add(f"{what} entry not an object", IGNORED, bad)
    for p in props:
        if not isinstance(p, dict):
            continue
        kept = dict(p)
        for key, (types, low, high) in _DEVICE_FIELDS.items():
            if key not in kept:
                continue
            if kept[key] is None:  # (no value: the same as no field, for every reader)
                del kept[key]
                continue
            v = kept[key]
            ok = type(v) in types and (types != (int,) or low <= v <= high)
            if not ok:
                repairs.add(f"{what}.{key} of the wrong type or range", IGNORED)
                del kept[key]
        out.append(kept)
    return out


def check_metadata(metadata: dict[str, Any], path: Path, repairs: Repairs) -> dict[str, Any]:
    """The metadata with every value of the wrong type dropped (and counted)."""
    out = dict(metadata)
    for key, types in _METADATA_TYPES.items():
        if key in out and (type(out[key]) not in types or (bool not in types and type(out[key]) is bool)):
            repairs.add(f"metadata {key} of type {type(out[key]).__name__}", IGNORED)
            del out[key]
    for key, low, high in (
        ("base_time_ns", 0, MAX_TIME_NS),
        ("world_size", 1, INT32_MAX),
        ("dropped_events", 0, 2**62),
    ):
        v = out.get(key)
        if type(v) is int and not low <= v <= high:
            repairs.add(f"metadata {key} {str(v)[:24]} (out of range)", IGNORED)
            del out[key]
    rank = out.setdefault("rank", 0)  # a trace written without one is rank 0
    if type(rank) is not int or not 0 <= rank <= INT32_MAX:
        repairs.add(f"metadata rank {str(rank)[:20]!r} (not an int32 >= 0; read as 0)", IGNORED)
        out["rank"] = 0
    props = out.get("device_properties")
    if props is not None:
        out["device_properties"] = device_properties(props, repairs, "metadata device_properties")
    return out


def _convertible(have: pa.DataType, want: pa.DataType) -> bool:
    if have == want:
        return True
    if pa.types.is_integer(want):
        return pa.types.is_integer(have)
    if pa.types.is_floating(want):
        return pa.types.is_floating(have) or pa.types.is_integer(have)
    if pa.types.is_dictionary(want) or pa.types.is_string(want):
        if pa.types.is_dictionary(have):
            have = have.value_type
        return pa.types.is_string(have) or pa.types.is_large_string(have)
    if pa.types.is_list(want):
        return (pa.types.is_list(have) or pa.types.is_large_list(have)) and pa.types.is_integer(have.value_type)
    return False


def _cast(col: pa.ChunkedArray, want: pa.DataType) -> pa.ChunkedArray | None:
    """``col`` as ``want``, None when a value does not fit (an integer beyond the width)."""
    if col.type == want:
        return col
    try:
        if pa.types.is_dictionary(want):
            plain = col.cast(pa.string())
            return plain.dictionary_encode().cast(want)
        return col.cast(want)  # safe: overflow raises
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def check_columns(
    table: pa.Table, wanted: list[str], rank: int, path: Path, repairs: Repairs, written_by: tuple[int, int] = (1, 0)
) -> pa.Table:
    """``table`` with exactly the ``wanted`` schema columns, each of its schema type (``rank``:
    the file's, for a missing rank column; a column added after ``written_by``, the file's
    schema (major, minor), is null without a repair: the file predates it)."""
    n = table.num_rows
    arrays: list[Any] = []
    fields: list[pa.Field] = []
    for name in wanted:
        want = COLUMN_BY_NAME[name].type
        col = table[name] if name in table.column_names else None
        if col is None:
            if name in REQUIRED:
                raise TraceFormatError(f"trace is missing required column {name}", path)
            if ADDED_IN.get(name, (0, 0)) > written_by:
                col = pa.chunked_array([pa.nulls(n, want)], want)
            elif name == "rank":  # every row of a file is its rank's
                repairs.add("column rank missing (filled with the metadata rank)", NULLED, n)
                col = pa.chunked_array([pa.array(np.full(n, rank, np.int32))], want)
            else:
                repairs.add(f"column {name} missing", NULLED, n)
                col = pa.chunked_array([pa.nulls(n, want)], want)
        else:
            cast = _cast(col, want) if _convertible(col.type, want) else None
            if cast is None:
                problem = f"column {name} of type {_type_name(col.type)}, expected {_type_name(want)}"
                if name in REQUIRED:
                    raise TraceFormatError(problem, path)
                repairs.add(problem, NULLED, n)
                cast = pa.chunked_array([pa.nulls(n, want)], want)
            col = cast
        arrays.append(col)
        fields.append(pa.field(name, want))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def conform(table: pa.Table, path: Path) -> pa.Table:
    """Columns read straight from a trace file (a few row groups, a filter; not through
    ``Trace.read``) with the schema's types: a column of another type, or text that is not
    UTF-8, is all null, as the full read would have made it (``check_columns``)."""
    wanted = [name for name in table.column_names if name in COLUMN_BY_NAME and name not in REQUIRED]
    checked = check_columns(table.select(wanted), wanted, 0, path, Repairs())
    for name in checked.column_names:
        try:
            _check_text(checked[name], name, path)
        except TraceFormatError:
            typ = checked.schema.field(name).type
            checked = checked.set_column(checked.column_names.index(name), name, pa.nulls(checked.num_rows, typ))
    rest = [name for name in table.column_names if name not in wanted]
    for name in rest:
        checked = checked.append_column(name, table[name])
    return checked.select(table.column_names)


def _check_text(col: pa.ChunkedArray, name: str, path: Path) -> None:
    """Text columns hold UTF-8 (Parquet does not check it on read; a flipped bit would fail
    later, far from here). Dictionary columns: their dictionaries only."""
    typ = col.type
    is_dict = pa.types.is_dictionary(typ)
    if not (is_dict or pa.types.is_string(typ) or pa.types.is_large_string(typ)):
        return
    for chunk in col.chunks:
        try:
            (chunk.dictionary if is_dict else chunk).validate(full=True)
        except pa.ArrowInvalid:
            raise TraceFormatError(f"damaged trace: column {name} holds text that is not UTF-8", path) from None


def _type_name(typ: pa.DataType) -> str:
    return f"{typ.value_type} (dictionary)" if pa.types.is_dictionary(typ) else str(typ)


def check_values(table: pa.Table, path: Path, repairs: Repairs) -> pa.Table:
    """Times, ids and links of the rows, per the module's rules."""
    n = table.num_rows
    names = table.column_names
    for name in names:
        _check_text(table[name], name, path)
    for name in ("name", "kind"):  # (required text: a null is the empty string, counted)
        if name in names and table[name].null_count:
            col = table[name]
            repairs.add(f"{name} null (read as the empty string)", FILLED, col.null_count)
            filled = pc.fill_null(col.cast(pa.string()), "")
            table = table.set_column(
                names.index(name), name, filled.cast(col.type) if col.type != pa.string() else filled
            )
    if "event_id" in names:
        ids = table["event_id"]
        if ids.null_count or not np.array_equal(to_numpy(ids), np.arange(n)):
            raise TraceFormatError("damaged trace: event_id is not the row number 0..n-1", path)
    if "start_ns" in names:
        start = table["start_ns"]
        if start.null_count:
            raise TraceFormatError(f"damaged trace: {start.null_count:,} events have no start_ns", path)
        if n and max(abs(pc.min(start).as_py()), abs(pc.max(start).as_py())) > MAX_TIME_NS:
            raise TraceFormatError("damaged trace: start_ns beyond +-4e18 ns (the year 2096)", path)
    if "dur_ns" in names:
        dur = table["dur_ns"].combine_chunks()
        values = to_numpy(dur, fill=0)
        if n and values.max() > MAX_TIME_NS:
            raise TraceFormatError("damaged trace: dur_ns beyond 4e18 ns", path)
        fix = null_mask(dur) | (values < 0)
        if fix.any():
            repairs.add("dur_ns null or negative", CLAMPED, int(np.count_nonzero(fix)))
            table = table.set_column(names.index("dur_ns"), "dur_ns", from_numpy(np.maximum(values, 0), pa.int64()))
    for name in LINK_COLUMNS:
        if name not in names:
            continue
        col = table[name].combine_chunks()
        values = to_numpy(col, fill=0)
        outside = ~null_mask(col) & ((values < 0) | (values >= n))
        if outside.any():
            repairs.add(f"{name} outside the trace", NULLED, int(np.count_nonzero(outside)))
            mask = null_mask(col) | outside
            table = table.set_column(names.index(name), name, from_numpy(np.where(mask, 0, values), pa.int64(), mask))
    return table
