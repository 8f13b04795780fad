"""The rows every reader fills: ``RawEvents`` and the kind vocabulary the builder codes them with.

A reader (Kineto JSON, in-process capture, Neuron import) decodes its input into ``RawEvents``
columns and hands them to ``normalize.build_trace``; this module is all it needs for that, so no
reader imports the builder's steps. Here too: ``KINDS`` and ``K`` (the ``Kind`` values and their
int8 codes, one per event in every build step), ``CARRIED`` (the ``RawEvents.columns`` key of
the columns an export of ours carried) and ``_int_column``, the one reading of an argument
column as int64 (-1 for null or not a number) that readers and builder share.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from neuron_explorer.trace.arrow import bool_array, to_numpy
from neuron_explorer.trace.schema import Kind

KINDS: tuple[str, ...] = (
    Kind.CPU_OP,
    Kind.PYTHON,
    Kind.ANNOTATION,
    Kind.STEP,
    Kind.RUNTIME,
    Kind.SYNC,
    Kind.KERNEL,
    Kind.COLLECTIVE,
    Kind.MEMCPY,
    Kind.MEMSET,
    Kind.DEVICE_ANNOTATION,
    Kind.MEMORY,
    Kind.INSTANT,
    Kind.FLOW,
    Kind.METADATA,
    Kind.TRACE,
    Kind.OTHER,
)
K = {k: np.int8(i) for i, k in enumerate(KINDS)}

#: ``RawEvents.columns`` keys ``__carried__:<column>``: the mask of the events that carried that column.
CARRIED = "__carried__"


@dataclass
class RawEvents:
    """Columns of raw profiler records, in any order, as collectors produce them.

    ``start_ns`` is relative to ``metadata['base_time_ns']`` when that is set, else absolute.
    ``typed`` holds arguments already pulled out of ``args`` (keys as in ``kineto.kineto_args._ARG_FIELDS``);
    ``src`` optional exact source columns (src_file, src_line, src_func, src_module,
    src_precision) from a collector that knows calling lines; ``columns`` any finished schema
    columns a collector sets itself (e.g. ``device_type``, ``cycle``).

    Columns may be ``pa.Array`` or ``pa.ChunkedArray`` (``concat`` of streamed chunks copies
    nothing); string columns may be plain or dictionary-encoded (chunks with different
    dictionaries are unified). ``build_trace`` consumes the object: it frees each input column
    as soon as its reordered copy exists, when the caller holds no other reference.
    """

    n: int
    ph: pa.Array
    cat: pa.Array
    name: pa.Array
    pid: pa.Array
    tid: pa.Array
    start_ns: np.ndarray
    dur_ns: np.ndarray
    flow_id: pa.Array
    args: pa.Array
    extra: pa.Array
    typed: dict[str, pa.Array] = field(default_factory=dict)
    src: dict[str, pa.Array] = field(default_factory=dict)
    columns: dict[str, pa.Array] = field(default_factory=dict)
    #: Repairs made while building the columns: (what, action) -> count (``trace.repairs``).
    issues: dict[tuple[str, str], int] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.n

    @classmethod
    def concat(cls, parts: list[RawEvents]) -> RawEvents:
        """The parts as one ``RawEvents`` whose columns are ``ChunkedArray``s: nothing is
        copied (``build_trace`` reorders them into single arrays in one pass)."""
        if len(parts) == 1:
            return parts[0]
        n = sum(p.n for p in parts)

        def chunked(arrays: list[Any], typ: pa.DataType | None = None) -> pa.ChunkedArray:
            chunks: list[pa.Array] = []
            for a in arrays:
                chunks.extend(a.chunks if isinstance(a, pa.ChunkedArray) else [a])
            if typ is None:
                types = {c.type for c in chunks}
                if all(pa.types.is_dictionary(t) for t in types):
                    typ = pa.dictionary(pa.int32(), pa.string())
                else:
                    typ = types.pop() if len(types) == 1 else pa.string()
            return pa.chunked_array([_coerce(c, typ) for c in chunks], typ)

        def merge(dicts: list[dict[str, Any]]) -> dict[str, pa.ChunkedArray]:
            keys = list(dict.fromkeys(k for d in dicts for k in d))
            out: dict[str, pa.ChunkedArray] = {}
            for k in keys:
                pieces = [d.get(k) for d in dicts]
                types = {p.type for p in pieces if p is not None and not pa.types.is_null(p.type)}
                typ = types.pop() if len(types) == 1 else (pa.string() if types else pa.null())
                out[k] = chunked([pa.nulls(part.n, typ) if p is None else p for p, part in zip(pieces, parts)], typ)
            return out

        string_or_dict = [(p.ph, p.cat, p.name) for p in parts]
        return cls(
            n=n,
            ph=chunked([s[0] for s in string_or_dict]),
            cat=chunked([s[1] for s in string_or_dict]),
            name=chunked([s[2] for s in string_or_dict]),
            pid=chunked([p.pid for p in parts], pa.int64()),
            tid=chunked([p.tid for p in parts], pa.int64()),
            start_ns=np.concatenate([p.start_ns for p in parts]),
            dur_ns=np.concatenate([p.dur_ns for p in parts]),
            flow_id=chunked([p.flow_id for p in parts], pa.int64()),
            args=chunked([p.args for p in parts], pa.string()),
            extra=chunked([p.extra for p in parts], pa.string()),
            typed=merge([p.typed for p in parts]),
            src=merge([p.src for p in parts]),
            columns=merge([p.columns for p in parts]),
            issues=_sum_issues([p.issues for p in parts]),
        )

    def filter(self, keep: np.ndarray) -> RawEvents:
        """Only the rows where ``keep`` is True (every column, typed and source ones too)."""
        mask = bool_array(keep)

        def f(arr: Any) -> Any:
            return arr.filter(mask)

        return RawEvents(
            n=int(np.count_nonzero(keep)),
            ph=f(self.ph),
            cat=f(self.cat),
            name=f(self.name),
            pid=f(self.pid),
            tid=f(self.tid),
            start_ns=np.asarray(self.start_ns)[keep],
            dur_ns=np.asarray(self.dur_ns)[keep],
            flow_id=f(self.flow_id),
            args=f(self.args),
            extra=f(self.extra),
            typed={k: f(v) for k, v in self.typed.items()},
            src={k: f(v) for k, v in self.src.items()},
            columns={k: f(v) for k, v in self.columns.items()},
            issues=dict(self.issues),
        )


def _sum_issues(parts: list[dict[tuple[str, str], int]]) -> dict[tuple[str, str], int]:
    total: dict[tuple[str, str], int] = {}
    for part in parts:
        for key, count in part.items():
            total[key] = total.get(key, 0) + count
    return total


def _coerce(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    if arr.type == typ:
        return arr
    if pa.types.is_dictionary(typ) and not pa.types.is_dictionary(arr.type):
        return arr.cast(pa.string()).dictionary_encode().cast(typ)
    if pa.types.is_string(typ) and pa.types.is_dictionary(arr.type):
        return arr.cast(pa.string())
    try:
        return arr.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([None if v is None else str(v) for v in arr.to_pylist()], typ)


def _int_column(arr: pa.Array | None, n: int) -> np.ndarray:
    """An int64 numpy column with -1 for null or non-numeric values."""
    if arr is None:
        return np.full(n, -1, np.int64)
    if pa.types.is_integer(arr.type) and arr.type in (pa.int8(), pa.int16(), pa.int32(), pa.int64()):
        return to_numpy(arr, fill=-1).astype(np.int64, copy=True)
    if pa.types.is_floating(arr.type):
        return _floats_to_int64(to_numpy(arr.cast(pa.float64()), fill=np.nan))
    if pa.types.is_null(arr.type):
        return np.full(n, -1, np.int64)
    if pa.types.is_integer(arr.type):
        return to_numpy(arr.cast(pa.int64()), fill=-1).astype(np.int64, copy=True)
    return _floats_to_int64(_numbers(arr.to_pylist()))


#: Floats at or beyond 2**63 have no int64 value (casting them is undefined behaviour).
_INT64_LIMIT = float(2**63)


def _floats_to_int64(v: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(v) & (np.abs(v) < _INT64_LIMIT)
    return np.where(ok, v, -1).astype(np.int64)


def _numbers(values: list[Any]) -> np.ndarray:
    """Mixed-type argument values (numbers written as strings by some profilers) as float64,
    NaN where a value is not a number. Only used when a column is not already numeric."""
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        if v is None or isinstance(v, (list, dict, bool)):
            continue
        with contextlib.suppress(TypeError, ValueError):
            out[i] = float(v)
    return out
