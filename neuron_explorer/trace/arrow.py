"""Arrow arrays from numpy arrays and Python lists, built from buffers.

Collectors (and views that must start fast) turn millions of decoded values into Arrow columns. ``pa.array(...)`` on a Python
list or a numpy array (and ``Array.to_numpy``, ``pa.scalar``) imports pandas in pyarrow 26:
~0.15 s of CPU and ~38 MB of RSS that a ``convert`` never needs. These helpers build the same
arrays with ``pa.Array.from_buffers`` and read them back with ``np.frombuffer``; they fall back
to ``pa.array`` only for values they do not know (nested lists of mixed types, say).
"""

from __future__ import annotations

from itertools import chain, compress, repeat
from operator import is_
from typing import Any

import numpy as np
import pyarrow as pa

_NP_OF: dict[pa.DataType, Any] = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.float64(): np.float64,
    pa.float32(): np.float32,
}


def _validity(mask: np.ndarray | None) -> tuple[pa.Buffer | None, int]:
    """(validity bitmap, null count) for a boolean ``mask`` that is True where a value is null."""
    if mask is None:
        return None, 0
    nulls = int(np.count_nonzero(mask))
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(~mask, bitorder="little")), nulls


def from_numpy(values: np.ndarray, typ: pa.DataType, mask: np.ndarray | None = None) -> pa.Array:
    """A primitive Arrow array of ``typ`` over ``values`` (cast to typ's width), nulls where
    ``mask`` is True."""
    values = np.ascontiguousarray(values, dtype=_NP_OF[typ])
    validity, nulls = _validity(mask)
    return pa.Array.from_buffers(typ, len(values), [validity, pa.py_buffer(values)], null_count=nulls)


def bool_array(values: np.ndarray) -> pa.Array:
    bits = pa.py_buffer(np.packbits(np.asarray(values, bool), bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, bits], null_count=0)


def to_numpy(arr: pa.Array | pa.ChunkedArray, fill: Any = None) -> np.ndarray:
    """The values of a primitive array as numpy (a copy when chunked or ``fill`` is given);
    nulls become ``fill`` (they are undefined when ``fill`` is None)."""
    if isinstance(arr, pa.ChunkedArray):
        if arr.num_chunks == 1:
            return to_numpy(arr.chunk(0), fill)
        typ = arr.type
        parts = [to_numpy(c, fill) for c in arr.chunks]
        return np.concatenate(parts) if parts else np.zeros(0, _NP_OF[typ])
    dtype = _NP_OF[arr.type]
    buf = arr.buffers()[1]
    out = np.frombuffer(buf, dtype=dtype, count=len(arr), offset=arr.offset * np.dtype(dtype).itemsize)
    if fill is not None and arr.null_count:
        out = out.copy()
        out[null_mask(arr)] = fill
    return out


def null_mask(arr: pa.Array) -> np.ndarray:
    """True where ``arr`` is null."""
    n = len(arr)
    if arr.null_count == 0:
        return np.zeros(n, bool)
    if pa.types.is_null(arr.type):
        return np.ones(n, bool)
    if pa.types.is_dictionary(arr.type):
        arr = arr.indices
    bitmap = arr.buffers()[0]
    bits = np.unpackbits(np.frombuffer(bitmap, np.uint8), bitorder="little", count=arr.offset + n)
    return bits[arr.offset :] == 0


def string_array(values: list[Any]) -> pa.Array:
    """A string array of a (short) list of str/None, e.g. a dictionary's values."""
    n = len(values)
    encoded = [b"" if v is None else (v if isinstance(v, str) else str(v)).encode("utf-8", "replace") for v in values]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.fromiter(map(len, encoded), np.int64, n), out=offsets[1:])
    mask = np.fromiter(map(is_, values, repeat(None)), bool, n) if n else None
    validity, nulls = _validity(mask)
    return pa.Array.from_buffers(
        pa.string(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))], null_count=nulls
    )


def dictionary_array(values: list[Any], none_as: str | None = None) -> pa.DictionaryArray:
    """``values`` (str, None, or anything else, written with ``str``) dictionary-encoded with
    one hash per value and no Python object per row; ``None`` becomes ``none_as`` (null when
    ``none_as`` is None)."""
    n = len(values)
    uniq = dict.fromkeys(values)
    for i, key in enumerate(uniq):
        uniq[key] = i
    keys = list(uniq)
    idx = np.fromiter(map(uniq.__getitem__, values), np.int32, n)
    # A null row points at a "" entry (dictionaries with null values cannot be unified).
    words: list[Any] = [((none_as or "") if k is None else (k if type(k) is str else str(k))) for k in keys]
    mask = None
    if none_as is None and None in uniq:
        mask = idx == uniq[None]
    # Equal texts from different keys (1 and "1") must share one dictionary entry.
    if len(set(words)) != len(words):
        first: dict[Any, int] = {}
        remap = np.array([first.setdefault(w, len(first)) for w in words], np.int32)
        words = list(first)
        idx = remap[idx]
    validity, nulls = _validity(mask)
    indices = pa.Array.from_buffers(pa.int32(), n, [validity, pa.py_buffer(idx)], null_count=nulls)
    return pa.DictionaryArray.from_arrays(indices, string_array(words))


def _present(values: list[Any]) -> tuple[np.ndarray | None, list[Any]]:
    """(null mask or None when nothing is null, the non-null values), with C-level loops."""
    if None not in values:
        return None, values
    mask = np.fromiter(map(is_, values, repeat(None)), bool, len(values))
    return mask, list(compress(values, ~mask))


def _spread(dense: np.ndarray, mask: np.ndarray | None, fill: Any = 0) -> np.ndarray:
    if mask is None:
        return dense
    out = np.full(len(mask), fill, dtype=dense.dtype)
    out[~mask] = dense
    return out


def int_or_float_array(values: list[Any]) -> pa.Array | None:
    """int64 (all ints), float64 (ints and floats) or all-null arrays from a list, None when
    the list holds anything else. Sparse columns (most arguments exist on a few event kinds)
    cost one C-level pass over the list plus work on the present values only."""
    n = len(values)
    mask, present = _present(values)
    if not present:
        return pa.nulls(n, pa.null())
    types = set(map(type, present))
    if not types <= {int, float}:
        return None
    if types == {int}:
        try:
            dense = np.array(present, dtype=np.int64)
        except OverflowError:
            return None
        return from_numpy(_spread(dense, mask), pa.int64(), mask)
    return from_numpy(_spread(np.array(present, dtype=np.float64), mask), pa.float64(), mask)


def int_list_array(values: list[Any], typ: pa.DataType) -> pa.Array | None:
    """``list<int>`` from a list of int lists and None; None when any value is something else."""
    n = len(values)
    mask, present = _present(values)
    if set(map(type, present)) != {list}:
        return None
    flat = list(chain.from_iterable(present))
    if flat and set(map(type, flat)) != {int}:
        return None
    lens = _spread(np.fromiter(map(len, present), np.int64, len(present)), mask)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    validity, nulls = _validity(mask)
    child = from_numpy(np.array(flat, dtype=np.int64), typ.value_type)
    return pa.ListArray.from_buffers(typ, n, [validity, pa.py_buffer(offsets)], null_count=nulls, children=[child])


def loose_array(values: list[Any]) -> pa.Array:
    """The natural Arrow array of decoded JSON values: numbers, strings, int lists; mixed or
    odd values as their text."""
    arr = int_or_float_array(values)
    if arr is not None:
        return arr
    types = set(map(type, values)) - {type(None)}
    if types == {str}:
        return dictionary_array(values).cast(pa.string())
    if types == {list}:
        lists = int_list_array(values, pa.list_(pa.int64()))
        if lists is not None:
            return lists
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def dict_parts(arr: pa.Array | pa.ChunkedArray) -> tuple[list[Any], np.ndarray]:
    """(words, codes) of a string or dictionary column: ``words[codes[i]]`` is row i's value;
    null rows have code -1 (append a word for them and index with the codes as they are)."""
    if isinstance(arr, pa.ChunkedArray):
        # Concatenating dictionary chunks unifies their dictionaries (indices only are copied).
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_null(arr.type):
        return [], np.full(len(arr), -1, np.int32)
    if not pa.types.is_dictionary(arr.type):
        if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
            arr = arr.cast(pa.string())
        arr = arr.dictionary_encode()
    indices = arr.indices
    if indices.type != pa.int32():
        indices = indices.cast(pa.int32())
    return arr.dictionary.to_pylist(), to_numpy(indices, fill=-1).astype(np.int32, copy=False)


def dictionary_from_codes(codes: np.ndarray, words: list[Any]) -> pa.DictionaryArray:
    """The dictionary array of ``words[codes]`` (null where the code is < 0 or the word None),
    with the dictionary ``dictionary_encode`` would build: distinct values in order of first
    appearance. Only codes are touched per row; words are handled once each."""
    n = len(codes)
    m = len(words)
    first_of: dict[Any, int] = {}
    canon = np.full(m + 1, -1, np.int64)  # slot m: code -1
    for i, w in enumerate(words):
        if w is not None:
            canon[i] = first_of.setdefault(w, len(first_of))
    uniq = list(first_of)
    c = canon[np.where(codes < 0, m, codes)] if n else np.zeros(0, np.int64)
    valid = c >= 0
    k = len(uniq)
    first = np.full(k, n, np.int64)
    np.minimum.at(first, c[valid], np.nonzero(valid)[0])
    order = np.argsort(first, kind="stable")
    order = order[first[order] < n]
    remap = np.zeros(max(k, 1), np.int32)
    remap[order] = np.arange(order.size, dtype=np.int32)
    idx = np.where(valid, remap[np.maximum(c, 0)], 0).astype(np.int32)
    indices = from_numpy(idx, pa.int32(), ~valid)
    return pa.DictionaryArray.from_arrays(indices, string_array([uniq[i] for i in order.tolist()]))
