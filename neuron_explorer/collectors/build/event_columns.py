"""The output columns that are a function of each event alone, and the schema table.

``typed_columns``: sizes, kernel launch figures, memory and collective arguments from each
event's typed arguments, kind and name; the helpers that read an argument column as a nullable,
narrowed or list column, counting every value they null (``trace.repairs``); ``schema_table``:
finished columns as a table in ``EVENTS_SCHEMA`` order and types. Row by row, so the in-memory
build and the out-of-core one (batch by batch) share them.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.build.event_kinds import _DEVICE_KIND_CODES, _Words
from neuron_explorer.collectors.build.raw_events import K, _coerce, _int_column, _numbers
from neuron_explorer.trace.arrow import dictionary_from_codes, from_numpy, to_numpy
from neuron_explorer.trace.repairs import NULLED
from neuron_explorer.trace.schema import EVENTS_SCHEMA, Kind

_MEMCPY_NAME = re.compile(r"(?i)memcpy\s*(HtoD|DtoH|DtoD|HtoH|PtoP|DtoA|AtoD)")
_AMD_COPY = {"CopyHostToDevice": "HtoD", "CopyDeviceToHost": "DtoH", "CopyDeviceToDevice": "DtoD"}

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def _narrow_int32(values: np.ndarray, what: str, issues: dict[tuple[str, str], int]) -> np.ndarray:
    """int64 values for an int32 column: those beyond int32 become -1 (null), counted."""
    beyond = (values > _INT32_MAX) | (values < _INT32_MIN)
    k = int(np.count_nonzero(beyond))
    if not k:
        return values
    key = (f"{what} beyond int32", NULLED)
    issues[key] = issues.get(key, 0) + k
    return np.where(beyond, -1, values)


def _element_count(arr: pa.Array | None, n: int, what: str, issues: dict[tuple[str, str], int]) -> pa.Array:
    """A count argument (a collective's message elements) as int64: null where absent, not an
    integer within int64, or negative (counted)."""
    values = _int_column(arr, n)
    negative = _float_column(arr, n) < 0
    k = int(np.count_nonzero(negative))
    if k:
        key = (f"negative {what}", NULLED)
        issues[key] = issues.get(key, 0) + k
        values = np.where(negative, -1, values)
    return _nullable(values, pa.int64())


def _float_column(arr: pa.Array | None, n: int) -> np.ndarray:
    if arr is None or pa.types.is_null(arr.type):
        return np.full(n, np.nan)
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):
        return to_numpy(arr.cast(pa.float64()), fill=np.nan).astype(np.float64, copy=True)
    return _numbers(arr.to_pylist())


def masked_array(values: np.ndarray, typ: pa.DataType, mask: np.ndarray) -> pa.Array:
    """``pa.array(values, typ, mask=mask)`` without pyarrow's masked-conversion path, which
    imports pandas (0.5 s of a command's start-up)."""
    return from_numpy(values, typ, mask)


def _nullable(values: np.ndarray, typ: pa.DataType, null: Any = -1) -> pa.Array:
    mask = np.isnan(values) if values.dtype.kind == "f" else values == null
    return masked_array(values, typ, mask)


def typed_columns(
    typed: dict[str, Any], kind: np.ndarray, name: _Words, n: int, issues: dict[tuple[str, str], int], pop: Any = None
) -> dict[str, pa.Array]:
    """The output columns that are a function of each event's own typed arguments, kind and
    name alone (sizes, kernel launch figures, memory and collective arguments). Row by row, so
    the in-memory build and the spooled one (``collectors.kineto.spooled``, batch by batch) share it;
    ``pop(key)`` takes an argument out of ``typed`` (the in-memory build frees each as it goes)."""
    take = pop or (lambda key: typed.pop(key, None))
    is_mem = kind == K[Kind.MEMORY]
    is_device_work = np.isin(kind, _DEVICE_KIND_CODES)
    size_bytes = np.where(is_mem, _int_column(take("mem_bytes"), n), -1)
    sized = (kind == K[Kind.MEMCPY]) | (kind == K[Kind.MEMSET])
    size_bytes = np.where(sized, _int_column(take("bytes"), n), size_bytes)
    coll_bytes = _int_column(take("in_msg_size"), n)
    size_bytes = np.where((size_bytes == -1) & (coll_bytes >= 0), coll_bytes, size_bytes)
    del coll_bytes
    return {
        "sequence_nr": _nullable(_int_column(take("sequence_nr"), n), pa.int64()),
        "flops": _nullable(_int_column(take("flops"), n), pa.int64()),
        "bytes": masked_array(size_bytes, pa.int64(), size_bytes == -1),
        "bandwidth_gbps": _nullable(_float_column(take("bandwidth"), n), pa.float64()),
        "memcpy_kind": _memcpy_kinds(name, kind == K[Kind.MEMCPY]),
        "grid": _shape_column(take("grid"), n, "grid", issues),
        "block": _shape_column(take("block"), n, "block", issues),
        "registers_per_thread": _nullable(
            _narrow_int32(_int_column(take("registers"), n), "registers per thread", issues), pa.int32()
        ),
        "shared_memory_bytes": _nullable(_int_column(take("shared_memory"), n), pa.int64()),
        "blocks_per_sm": _nullable(_float_column(take("blocks_per_sm"), n), pa.float64()),
        "warps_per_sm": _nullable(_float_column(take("warps_per_sm"), n), pa.float64()),
        "occupancy_pct": _nullable(_float_column(take("occupancy"), n), pa.float64()),
        "mem_total_allocated_bytes": _nullable(
            np.where(is_mem, _int_column(take("total_allocated"), n), -1), pa.int64()
        ),
        "mem_total_reserved_bytes": _nullable(np.where(is_mem, _int_column(take("total_reserved"), n), -1), pa.int64()),
        "mem_addr": _nullable(np.where(is_mem, _int_column(take("addr"), n), -1), pa.int64()),
        "graph_id": _nullable(np.where(is_device_work, _int_column(take("graph_id"), n), -1), pa.int64()),
        "collective_name": _string_column(take("collective_name"), n),
        "group_size": _nullable(_narrow_int32(_int_column(take("group_size"), n), "group size", issues), pa.int32()),
        "process_group": _string_column(take("process_group"), n),
        "process_group_desc": _string_column(take("process_group_desc"), n),
        "in_msg_nelems": _element_count(take("in_msg_nelems"), n, "In msg nelems", issues),
        "out_msg_nelems": _element_count(take("out_msg_nelems"), n, "Out msg nelems", issues),
        "msg_dtype": _string_column(take("msg_dtype"), n),
    }


def schema_table(cols: dict[str, Any], n: int, skip: Any = ()) -> pa.Table:
    """``cols`` (consumed) as a table of the ``EVENTS_SCHEMA`` columns not in ``skip``, in schema
    order and types; a column not given is all null."""
    arrays, fields = [], []
    for f in EVENTS_SCHEMA:
        if f.name in skip:
            continue
        fields.append(f)
        v = cols.pop(f.name, None)
        if v is None:
            arrays.append(pa.nulls(n, f.type))
            continue
        if isinstance(v, pa.ChunkedArray):
            v = v.combine_chunks()
        if v.type != f.type:
            v = (
                v.cast(f.type)
                if not pa.types.is_dictionary(f.type)
                else pc.cast(
                    v.cast(pa.string()) if pa.types.is_dictionary(v.type) else v, pa.string()
                ).dictionary_encode()
            )
        arrays.append(v)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _memcpy_kinds(name: _Words, is_copy: np.ndarray) -> pa.Array:
    labels: list[str | None] = []
    for nm in name.words:
        nm = nm or ""
        m = _MEMCPY_NAME.search(nm)
        if m:
            # "Memcpy DtoH (Device -> Pageable)", "Memcpy HtoD (Pageable -> Device)": host memory on either side
            memory = next((w for w in ("Pageable", "Pinned") if w in nm[m.end(1) :]), None)
            labels.append(f"{m.group(1)} ({memory})" if memory else m.group(1))
        else:
            labels.append(next((v for k, v in _AMD_COPY.items() if k in nm), None))
    return dictionary_from_codes(np.where(is_copy, name.codes, -1), labels)


def _shape_column(arr: pa.Array | None, n: int, what: str, issues: dict[tuple[str, str], int]) -> pa.Array:
    """A list<int32> column (kernel grid, block); a value that is not a list of int32 integers
    is null, and counted when it is a list (its text stays in ``args``)."""
    if arr is None or pa.types.is_null(arr.type):
        return pa.nulls(n, pa.list_(pa.int32()))
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        try:
            return arr.cast(pa.list_(pa.int32()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    out: list[list[int] | None] = []
    unusable = 0
    for v in arr.to_pylist():
        ok = isinstance(v, list) and all(type(x) is int and _INT32_MIN <= x <= _INT32_MAX for x in v)
        out.append(v if ok else None)
        unusable += isinstance(v, list) and not ok  # (triton's text "grid(100,)" is no list: not counted)
    if unusable:
        key = (f"{what} not a list of int32", NULLED)
        issues[key] = issues.get(key, 0) + unusable
    return pa.array(out, pa.list_(pa.int32()))


def _string_column(arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None or pa.types.is_null(arr.type):
        return pa.nulls(n, pa.string())
    return arr if pa.types.is_string(arr.type) else _coerce(arr, pa.string())
