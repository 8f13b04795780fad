"""The validation rules of Kineto JSON fields, in one place, as whole-column checks.

Each field the importer reads has one rule (docs/schema.md, "Validation"):

- ``ts`` (microseconds): a JSON number whose absolute time in ns (plus ``baseTimeNanoseconds``)
  lies within +-``MAX_TIME_NS``; anything else (a string, a boolean, null, out of range) drops
  the event. Missing ``ts`` on a non-metadata event rejects the file (kineto_json).
- ``dur`` (microseconds): absent or null (0), or a number with 0 <= dur_ns <= ``MAX_TIME_NS``;
  a negative, non-numeric or out-of-range duration drops the event.
- ``name`` and ``cat``: a string, absent or null; any other JSON value drops the event.
- ``pid``, ``tid``, ``id``: an int64 integer is kept as a number; any other value (a string, a
  float, a boolean, an integer beyond int64) is a label, numbered by a CRC and kept verbatim in
  ``extra`` (lossless, so not a repair).
- ``args``: kept byte for byte whatever it holds (kineto_json; deep nesting: ``json_depth``).

The checks run on the columns the decoder already builds (C-level maps and numpy); per-event
Python runs only for the values that fail the fast whole-column test.
"""

from __future__ import annotations

import io
import re
from decimal import Decimal
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from neuron_explorer.trace.arrow import to_numpy
from neuron_explorer.trace.repairs import IGNORED, Repairs
from neuron_explorer.trace.validate import device_properties

#: The largest |time| in ns a trace holds (the year 2096 since the epoch). start + dur of two
#: such values still fits int64, so no later sum overflows.
MAX_TIME_NS = 4 * 10**18
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1

# Reasons an event is dropped (the ``what`` of a repair).
TS_NOT_A_NUMBER = "ts is not a number"
TS_OUT_OF_RANGE = "ts beyond the int64 ns range"
DUR_NOT_A_NUMBER = "dur is not a number"
DUR_NEGATIVE = "negative dur"
DUR_OUT_OF_RANGE = "dur beyond the int64 ns range"
NAME_NOT_A_STRING = "name is not a string"
CAT_NOT_A_STRING = "cat is not a string"
ARGS_NOT_UTF8 = "args not valid UTF-8"

#: Decimal 1000 from its 16 little-endian bytes (pa.scalar and pa.array would import pandas).
_THOUSAND = pa.Array.from_buffers(pa.decimal128(4, 0), 1, [None, pa.py_buffer(np.array([1000, 0], np.int64))])[0]
_FRACTION_DIGITS = re.compile(rb"\.\d{4}")
#: |ts| in us below which float64 times 1000 rounds to the exact ns of a <= 3-decimal text.
_FLOAT_EXACT_US = float(2**50) / 1000.0
_MAX_TIME_US = MAX_TIME_NS // 1000
#: A JSON number, exactly (RFC 8259).
_JSON_NUMBER = re.compile(rb"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
#: Bytes a column of JSON numbers (one per line) may hold; anything else needs the slow path.
_NUMBER_BYTES = np.zeros(256, bool)
_NUMBER_BYTES[np.frombuffer(b"0123456789.-+eE\n", np.uint8)] = True


def parse_times(raws: list[msgspec.Raw]) -> tuple[np.ndarray, np.ndarray]:
    """Microsecond timestamps (raw JSON text) to int64 ns, exact to the last written digit, and
    a mask of the valid ones: a JSON number within +-``MAX_TIME_NS``, or missing (empty raw,
    read as 0: the caller decides whether a missing ts is allowed)."""
    n = len(raws)
    if n == 0:
        return np.zeros(0, np.int64), np.ones(0, bool)
    # One value per line; missing timestamps (metadata events) are empty lines, read as null.
    text = b"\n".join(raws) + b"\n"
    if _NUMBER_BYTES[np.frombuffer(text, np.uint8)].all():
        out = _fast_times(text, n)
        if out is not None:
            ok = np.abs(out) <= MAX_TIME_NS
            return out, ok
    return _slow_times(raws)


def _fast_times(text: bytes, n: int) -> np.ndarray | None:
    fractional = b"." in text or b"e" in text or b"E" in text
    kind = "int" if not fractional else ("float" if not _FRACTION_DIGITS.search(text) else "decimal")
    try:
        if kind == "int":
            us = to_numpy(_read_numbers(text, pa.int64()), fill=0)
            if len(us) != n or np.abs(us).max() > _MAX_TIME_US:  # (x1000 would wrap around)
                return None
            return us.astype(np.int64) * 1000
        if kind == "float":
            us = to_numpy(_read_numbers(text, pa.float64()), fill=0.0)
            if len(us) == n and np.abs(us).max() < _FLOAT_EXACT_US:
                return np.rint(us * 1000.0).astype(np.int64)
        col = _read_numbers(text, pa.decimal128(32, 6))
        ns = pc.multiply(col, _THOUSAND)
        out = to_numpy(ns.cast(pa.decimal128(38, 0)).cast(pa.int64()), fill=0)
        return out.astype(np.int64) if len(out) == n else None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _slow_times(raws: list[msgspec.Raw]) -> tuple[np.ndarray, np.ndarray]:
    """Exponents, huge values and anything that is not a number: value by value."""
    n = len(raws)
    out = np.zeros(n, np.int64)
    ok = np.ones(n, bool)
    for i, r in enumerate(raws):
        if not r:
            continue
        b = bytes(r)
        if not _JSON_NUMBER.fullmatch(b):
            ok[i] = False
            continue
        try:
            ns = int((Decimal(b.decode()) * 1000).to_integral_value())
        except (ArithmeticError, ValueError):  # (decimal.Overflow on 17121e999867402349098)
            ok[i] = False
            continue
        if abs(ns) > MAX_TIME_NS:
            ok[i] = False
        else:
            out[i] = ns
    return out, ok


def _read_numbers(text: bytes, typ: pa.DataType) -> pa.Array:
    table = pcsv.read_csv(
        io.BytesIO(text),
        read_options=pcsv.ReadOptions(column_names=["v"], use_threads=False),
        parse_options=pcsv.ParseOptions(newlines_in_values=False, ignore_empty_lines=False, quote_char=False),
        convert_options=pcsv.ConvertOptions(column_types={"v": typ}),
    )
    return table["v"].combine_chunks()


def is_number_text(raw: msgspec.Raw) -> bool:
    return bool(raw) and _JSON_NUMBER.fullmatch(bytes(raw)) is not None


def durations(values: list[Any]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``dur`` values (us, any JSON value or None) to int64 ns (0 where absent) and, per drop
    reason, the mask of the events that break the rule."""
    types = set(map(type, values))
    bad_type = None
    if types <= {int, float, type(None)}:
        try:
            us = np.array(values, dtype=np.float64)  # None becomes nan
        except OverflowError:  # an integer beyond float64
            us = None
    else:
        us = None
    if us is None:
        numeric = [type(v) in (int, float) for v in values]
        bad_type = ~np.array(numeric, bool) & np.array([v is not None for v in values], bool)
        us = np.array([_float(v) if ok else np.nan for v, ok in zip(values, numeric)], np.float64)
    absent = np.isnan(us)
    ns_f = np.where(absent, 0.0, us * 1000.0)
    with np.errstate(invalid="ignore"):
        negative = ns_f < 0
        too_big = ~np.isfinite(ns_f) | (ns_f > MAX_TIME_NS)
    ns = np.where(negative | too_big, 0, np.rint(np.where(too_big, 0.0, ns_f))).astype(np.int64)
    bad = {DUR_NEGATIVE: negative & ~too_big, DUR_OUT_OF_RANGE: too_big & ~absent}
    if bad_type is not None:
        bad[DUR_NOT_A_NUMBER] = bad_type
        bad[DUR_OUT_OF_RANGE] &= ~bad_type
    return ns, bad


def _float(v: Any) -> float:
    try:
        return float(v)
    except (OverflowError, ValueError):
        return float("inf")


def not_strings(values: list[Any]) -> np.ndarray | None:
    """Mask of the values that are neither a string nor None (None when all are)."""
    if set(map(type, values)) <= {str, type(None)}:
        return None
    return np.array([v is not None and type(v) is not str for v in values], bool)


def in_int64(v: int) -> bool:
    return INT64_MIN <= v <= INT64_MAX


def _is_int(v: Any, low: int, high: int) -> bool:
    return type(v) is int and low <= v <= high


def trace_metadata(top: dict[str, Any], repairs: Repairs) -> dict[str, Any]:
    """The file-level values the importer uses, each checked (an unusable one is ignored, with
    a repair): ``baseTimeNanoseconds`` an integer in [0, MAX_TIME_NS]; ``deviceProperties`` a
    list of objects; ``distributedInfo`` an object whose ``rank`` is an int32 >= 0 and whose
    ``world_size`` an int32 >= 1. ``top`` itself is kept as it is (export writes it back)."""
    base = top.get("baseTimeNanoseconds")
    if base is not None and not _is_int(base, 0, MAX_TIME_NS):
        repairs.add("baseTimeNanoseconds not an integer in [0, 4e18] (times kept relative)", IGNORED)
        base = None
    props = top.get("deviceProperties")
    if props is None:
        props = []
    elif not isinstance(props, list):
        repairs.add("deviceProperties not a list", IGNORED)
        props = []
    else:
        props = device_properties(props, repairs)
    dist = top.get("distributedInfo")
    if dist is not None and not isinstance(dist, dict):
        repairs.add("distributedInfo not an object", IGNORED)
        dist = None
    dist = dist or {}
    rank = dist.get("rank")
    if rank is not None and not _is_int(rank, 0, INT32_MAX):
        repairs.add("distributedInfo.rank not an int32 >= 0 (rank unknown)", IGNORED)
        rank = None
    world = dist.get("world_size")
    if world is not None and not _is_int(world, 1, INT32_MAX):
        repairs.add("distributedInfo.world_size not an int32 >= 1", IGNORED)
        world = None
    return {
        "base_time_ns": base,
        "device_properties": props,
        "distributed_info": dist or None,
        "rank": rank if rank is not None else 0,
        "rank_known": rank is not None,
        "world_size": world,
    }
