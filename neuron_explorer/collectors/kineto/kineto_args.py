"""Typed arguments of Kineto events: the fields analyzers use, pulled out of ``args``.

Decoded per category (within one category the same arguments recur), by a msgspec struct of
just those fields (the other keys are skipped without building objects); ``input_dims`` and
``input_type`` stay raw JSON text. Used by the JSON importer and the in-process capture.
"""

from __future__ import annotations

from functools import lru_cache
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.arrow import from_numpy, loose_array, string_array

_ARG_FIELDS: dict[str, str] = {
    "external_id": "External id",
    "external_id_old": "external id",
    "correlation": "correlation",
    "device": "device",
    "stream": "stream",
    "sequence_nr": "Sequence number",
    "input_dims": "Input Dims",
    "input_type": "Input type",
    "flops": "flops",
    "bytes": "bytes",
    "bandwidth": "memory bandwidth (GB/s)",
    "grid": "grid",
    "block": "block",
    "registers": "registers per thread",
    "shared_memory": "shared memory",
    "blocks_per_sm": "blocks per SM",
    "warps_per_sm": "warps per SM",
    "occupancy": "est. achieved occupancy %",
    "mem_bytes": "Bytes",
    "total_allocated": "Total Allocated",
    "total_reserved": "Total Reserved",
    "mem_device_type": "Device Type",
    "mem_device_id": "Device Id",
    "addr": "Addr",
    "graph_id": "graph id",
    "collective_name": "Collective name",
    "in_msg_size": "In msgsize",
    "group_size": "Group size",
    "process_group": "Process Group Name",
    "process_group_desc": "Process Group Description",
    "in_msg_nelems": "In msg nelems",
    "out_msg_nelems": "Out msg nelems",
    "msg_dtype": "dtype",
}
#: Arguments kept as their JSON text (shapes and dtypes are nested lists).
_RAW_ARGS = frozenset(("input_dims", "input_type"))
_ALL_ARG_FIELDS = tuple(_ARG_FIELDS)


@lru_cache(maxsize=64)
def _args_decoder_for(fields: tuple[str, ...]) -> msgspec.json.Decoder:
    """A decoder for just the typed arguments present in a chunk: msgspec skips the other keys
    without building objects for them."""
    spec = [
        (
            f,
            msgspec.Raw if f in _RAW_ARGS else Any,
            msgspec.field(default=msgspec.Raw(b"") if f in _RAW_ARGS else None, name=_ARG_FIELDS[f]),
        )
        for f in fields
    ]
    struct = msgspec.defstruct("_Args", spec, gc=False)
    return msgspec.json.Decoder(list[struct])  # type: ignore[valid-type]


#: Every typed argument (``input_dims``/``input_type`` as raw JSON); used by capture_convert too.
_args_decoder = _args_decoder_for(_ALL_ARG_FIELDS)


def typed_args(raws: list[msgspec.Raw], groups: np.ndarray) -> dict[str, pa.Array]:
    """Decode the fields analyzers use from every event's args.

    Events are decoded per category (``groups``: a code per event): within one category the
    same arguments recur, so each typed column is built from dense lists of the events that
    carry it (kernels' grid, memory events' sizes) rather than from n mostly-None values.
    """
    n = len(raws)
    if n == 0:
        return {}
    order = np.argsort(groups, kind="stable")
    bounds = np.flatnonzero(np.diff(groups[order])) + 1
    pieces: dict[str, list[tuple[int, pa.Array]]] = {}
    for k, rows in enumerate(np.split(order, bounds)):
        group = [raws[rows[0]]] if len(rows) == 1 else list(itemgetter(*rows.tolist())(raws))
        for field, arr in _typed_group(group).items():
            pieces.setdefault(field, []).append((k, arr))
    if not pieces:
        return {}
    sizes = np.diff(np.concatenate([[0], bounds, [n]])).tolist()
    inverse = np.empty(n, np.int64)
    inverse[order] = np.arange(n)
    back = from_numpy(inverse, pa.int64())
    out: dict[str, pa.Array] = {}
    for field, found in pieces.items():
        typ = _common_type({a.type for _, a in found})
        arrays = {k: _coerce(a, typ) for k, a in found}
        if any(a.type != typ for a in arrays.values()):  # (a value that does not cast: all text)
            typ = pa.string()
            arrays = {k: _coerce(a, typ) for k, a in arrays.items()}
        column = pa.chunked_array(
            [arrays[k] if k in arrays else pa.nulls(size, typ) for k, size in enumerate(sizes)], typ
        )
        taken = column.take(back)
        out[field] = taken.chunk(0) if taken.num_chunks == 1 else taken.combine_chunks()
    old = out.pop("external_id_old", None)
    if old is not None:
        out["external_id"] = old if "external_id" not in out else pc.coalesce(out["external_id"], old)
    return out


def _typed_group(raws: list[msgspec.Raw]) -> dict[str, pa.Array]:
    """The typed arguments present in one group of events' args (absent ones are left out)."""
    blob = b"[" + b",".join(raws) + b"]"
    # All fields are decoded and absent ones dropped afterwards: cheaper than searching the
    # text for each key (a full scan of the args per absent key).
    fields = _ALL_ARG_FIELDS
    decoder = _args_decoder_for(fields)
    try:
        decoded: list[Any] = decoder.decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        # Some event's args is not an object, or nests deeper than the decoder goes: decode
        # one by one, empty where it fails (the args text itself is kept as it is).
        decoded = []
        empty = decoder.decode(b"[{}]")[0]
        for r in raws:
            try:
                decoded.append(decoder.decode(b"[" + bytes(r) + b"]")[0])
            except (msgspec.DecodeError, msgspec.ValidationError):
                decoded.append(empty)
            except RecursionError:  # (deep args: counted where they were cut out, json_depth)
                decoded.append(empty)
    del blob
    out: dict[str, pa.Array] = {}
    for field in fields:
        values = list(map(attrgetter(field), decoded))
        if field in _RAW_ARGS:
            if any(values):
                out[field] = _raw_text(values)[0]
            continue
        if values.count(None) == len(values):
            continue
        arr = loose_array(values)
        if not pa.types.is_null(arr.type):
            out[field] = arr
    return out


def _common_type(types: set[pa.DataType]) -> pa.DataType:
    """The type ``pa.array`` would infer for the values of several groups together."""
    if len(types) == 1:
        return next(iter(types))
    if types <= {pa.int64(), pa.float64()}:
        return pa.float64()
    return pa.string()


def _coerce(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """``arr`` as ``typ``: integers become floats even past 2**53 (as ``pa.array`` infers a
    mixed list: 9223372036854775807 beside -1e19); anything else that does not cast, text."""
    if arr.type == typ:
        return arr
    try:
        return arr.cast(typ, safe=not (pa.types.is_integer(arr.type) and pa.types.is_floating(typ)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return string_array([None if v is None else str(v) for v in arr.to_pylist()])


def _raw_text(raws: list[msgspec.Raw]) -> tuple[pa.Array, int]:
    """Raw JSON fragments (empty = missing) as a string array."""
    n = len(raws)
    lens = np.fromiter(map(len, raws), np.int64, n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    valid = lens > 0
    nulls = n - int(np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    arr = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(raws))], null_count=nulls
    )
    try:
        return arr.cast(pa.large_string()).cast(pa.string()), nulls
    except pa.ArrowInvalid:
        return string_array([bytes(r).decode("utf-8", "replace") if r else None for r in raws]), nulls
