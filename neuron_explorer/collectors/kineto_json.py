"""Import Kineto / Chrome trace JSON (``.json``, ``.json.gz``) written by torch.profiler.

The decompressed text is decoded in chunks of ~4 MB of events (from the first byte once a file
is larger than ``STREAM_THRESHOLD``), so the Python objects of only one chunk exist at a time
and memory follows the output columns, not the JSON. Each chunk is decoded by msgspec into
``gc=False`` structs whose ``args`` and ``ts`` stay raw bytes: ``args`` is kept byte for byte
(lossless), and ``ts`` is parsed exactly (integers as int64, <= 3 decimals through float64
where that is exact, else as decimals), so ``1712195495519689.047`` keeps its last digit.
Typed arguments are decoded per category, where they are dense. Columns are built from
buffers (``trace.arrow``): no per-event Python beyond attribute reads and C-level maps,
no pandas import. The cyclic garbage collector is paused during the import (the decoded
objects hold no cycles). Everything after decoding is columnar (``collectors.normalize``).
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Callable
from functools import lru_cache
from itertools import compress
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors import json_depth
from neuron_explorer.collectors import kineto_checks as checks
from neuron_explorer.collectors._conversion import conversion_settings
from neuron_explorer.collectors.kineto_carry import take_carried
from neuron_explorer.collectors.normalize import RawEvents, build_trace
from neuron_explorer.collectors.parallel_decode import ChunkDecoder
from neuron_explorer.trace import carry
from neuron_explorer.trace.arrow import (
    dictionary_array,
    from_numpy,
    loose_array,
    string_array,
    to_numpy,
)
from neuron_explorer.trace.errors import TraceFormatError, TraceNotFoundError
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.repairs import DROPPED, IGNORED, KEPT_AS_TEXT, Repairs

try:  # ISA-L's gzip is 2-3x faster than zlib's; fall back to the standard library.
    from isal import igzip as _gzip
    from isal.isal_zlib import error as _isal_error
except ImportError:  # pragma: no cover - isal is a declared dependency
    _gzip = gzip  # type: ignore[no-redef]
    _isal_error = zlib.error  # type: ignore[misc]

JSON_SUFFIXES = (".json", ".json.gz", ".gz")
#: Above this many uncompressed bytes the events are decoded in chunks.
STREAM_THRESHOLD = 8 << 20
#: Uncompressed bytes decoded at a time: small enough that the Python objects of one chunk
#: (~1 KB per event) stay a few tens of MB, large enough that per-chunk overhead is noise.
CHUNK_BYTES = 4 << 20

ProgressCallback = Callable[[int, int], None]


class _MalformedEventsError(ValueError):
    """Events that lack the fields every trace event has (ph, and ts for timed events)."""


#: ``args`` of an event that has none. A decoded raw value never ends in whitespace, so this
#: default is told apart from a real ``"args": {}`` by its trailing space, with no per-event
#: Python; it decodes as an empty object, so the typed-args pass needs no scatter.
_NO_ARGS = msgspec.Raw(b"{} ")


# gc=False: decoded events hold no reference cycles; tracking millions of them only makes the
# cyclic collector walk them again and again (a third of the decode time).
class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: Any = None
    name: Any = ""
    pid: Any = 0
    tid: Any = 0
    ts: msgspec.Raw = msgspec.Raw(b"")
    dur: Any = None
    id: Any = None
    bp: Any = None
    s: Any = None
    cname: Any = None
    tts: Any = None
    args: msgspec.Raw = _NO_ARGS


_EXTRA_FIELDS = ("bp", "s", "cname", "tts")
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


_events_decoder = msgspec.json.Decoder(list[_Event])
#: Every typed argument (``input_dims``/``input_type`` as raw JSON); used by capture_convert too.
_args_decoder = _args_decoder_for(_ALL_ARG_FIELDS)
_loose_array = loose_array
_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])
#: Checks a chunk's JSON syntax without building its events (~5% of decoding them).
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])


def import_kineto_json(path: str | Path, progress: ProgressCallback | None = None) -> Trace:
    """Read a Kineto/Chrome JSON trace into a ``Trace`` with every link resolved."""
    path = Path(path)
    if not path.exists():
        raise TraceNotFoundError("no such file", path)
    if path.is_dir():
        raise TraceFormatError("is a directory, expected a .json or .json.gz trace", path)
    with conversion_settings():
        return _import(path, progress)


def _import(path: Path, progress: ProgressCallback | None) -> Trace:
    try:
        top, chunks, repairs = _decode(path, progress)
    except TraceFormatError:
        raise
    except (EOFError, zlib.error, _isal_error, gzip.BadGzipFile, OSError) as exc:
        raise TraceFormatError(f"cannot decompress ({_why(exc)}); is the .gz file truncated?", path) from None
    except msgspec.ValidationError as exc:  # (a DecodeError subclass: tested first)
        raise TraceFormatError(f"not a Chrome/Kineto trace ({_why(exc)})", path) from None
    except msgspec.DecodeError as exc:
        raise TraceFormatError(f"invalid JSON ({_why(exc)}); is the file truncated?", path) from None
    except _MalformedEventsError as exc:
        raise TraceFormatError(str(exc), path) from None
    if not chunks or sum(len(c) + _dropped(c) for c in chunks) == 0:
        raise TraceFormatError("the trace holds no events (traceEvents is empty)", path)
    if sum(len(c) for c in chunks) == 0:
        raise TraceFormatError(f"no valid event: all {sum(map(_dropped, chunks)):,} were dropped", path)
    metadata = _metadata(top, path, repairs)
    # build_trace gets the only reference to the columns (none stays here or in `chunks`), so it
    # can free each input column as soon as its reordered copy exists.
    box = [_within_time_range(RawEvents.concat(chunks), metadata["base_time_ns"], repairs, path)]
    chunks.clear()
    repairs.record(metadata)
    trace = build_trace(box.pop(), metadata, source=path)
    found = Repairs()
    found.merge({(e["what"], e["action"]): e["count"] for e in trace.metadata.get("repairs") or []})
    found.warn(path, stacklevel=4)
    return trace


def _within_time_range(raw: RawEvents, base: int | None, repairs: Repairs, path: Path) -> RawEvents:
    """Drop the events whose absolute start (ts + baseTimeNanoseconds) passes ``MAX_TIME_NS``
    (each alone is within it: the sum cannot overflow)."""
    if not base:
        return raw
    start = np.asarray(raw.start_ns, np.int64)
    keep = np.abs(start + base) <= checks.MAX_TIME_NS
    if keep.all():
        return raw
    repairs.add(checks.TS_OUT_OF_RANGE, DROPPED, int(np.count_nonzero(~keep)))
    if not keep.any():
        raise TraceFormatError(f"no valid event: all {len(keep):,} start past {checks.MAX_TIME_NS:.0e} ns", path)
    return raw.filter(keep)


def _dropped(raw: RawEvents) -> int:
    return sum(c for (_, action), c in raw.issues.items() if action == DROPPED)


# ------------------------------------------------------------------------------- decoding
def _open_bytes(path: Path) -> io.BufferedIOBase:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return _gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


_Decoded = tuple[dict[str, Any], list[RawEvents], Repairs]


def _decode(path: Path, progress: ProgressCallback | None) -> _Decoded:
    size = path.stat().st_size
    with _open_bytes(path) as fh:
        head = fh.read(STREAM_THRESHOLD)
        if len(head) < STREAM_THRESHOLD:
            if progress:
                progress(size, size)
            return _decode_whole(head, path)
        return _decode_stream(head, fh, path, size, progress)


def _decode_whole(data: bytes, path: Path) -> _Decoded:
    try:
        return _decode_whole_fast(data, path)
    except RecursionError:  # nested deeper than the decoder goes: the path that cuts it out
        return _decode_stream(data, io.BytesIO(b""), path, len(data), None)


def _decode_whole_fast(data: bytes, path: Path) -> _Decoded:
    stripped = data.lstrip()
    if not stripped:
        raise TraceFormatError("the file is empty", path)
    if stripped[:1] == b"[":  # the Chrome "JSON array format": events only
        return {}, [_columns(_events_decoder.decode(data))], Repairs()
    if stripped[:1] != b"{":
        raise TraceFormatError("not JSON (does not start with '{' or '[')", path)
    top = _top_decoder.decode(data)
    if "traceEvents" not in top:
        raise TraceFormatError("JSON, but not a trace: it has no 'traceEvents' list", path)
    events = _events_decoder.decode(top.pop("traceEvents"))
    meta = {k: msgspec.json.decode(v) for k, v in top.items()}
    return meta, [_columns(events)], Repairs()


_EVENTS_KEY = b'"traceEvents"'


def _decode_stream(
    head: bytes, fh: io.BufferedIOBase, path: Path, size: int, progress: ProgressCallback | None
) -> _Decoded:
    """Decode a large trace chunk by chunk; metadata before and after ``traceEvents`` is kept."""
    meta: dict[str, Any] = {}
    repairs = Repairs()
    if head.lstrip()[:1] == b"[":  # the JSON array format: events only
        buf = head.lstrip()[1:]
    else:
        key = head.find(_EVENTS_KEY)
        while key < 0 and len(head) < (256 << 20):  # metadata before the events can be long
            more = fh.read(CHUNK_BYTES)
            if not more:
                break
            head += more
            key = head.find(_EVENTS_KEY)
        bracket = head.find(b"[", key) if key >= 0 else -1
        if key < 0 or bracket < 0:
            raise TraceFormatError("JSON, but not a trace: no 'traceEvents' list near the start", path)
        prefix = head[:key].rstrip().rstrip(b",")
        if prefix.strip() not in (b"{", b""):
            _update_metadata(meta, prefix + b"}", repairs, path)
        buf = head[bracket + 1 :]
    del head
    decoder = ChunkDecoder(_decode_chunk, _check_chunk)
    try:
        buf = _decode_chunks(buf, fh, size, progress, decoder)
        chunks: list[RawEvents] = decoder.results()
    finally:
        decoder.close()
    # The tail holds the last events, the closing bracket and any metadata after it.
    end, tail, deep = _array_end(buf)
    if end < 0:
        raise TraceFormatError("the traceEvents list never closes; is the file truncated?", path)
    if tail or deep:
        chunks.append(_with_issues(_columns(tail), deep))
    del tail
    rest = buf[end + 1 :].strip()
    if rest.startswith(b","):
        _update_metadata(meta, b"{" + rest[1:], repairs, path)
    elif rest not in (b"}", b""):
        raise TraceFormatError("invalid JSON after traceEvents; is the file truncated?", path)
    return meta, chunks, repairs


def _update_metadata(meta: dict[str, Any], text: bytes, repairs: Repairs, path: Path) -> None:
    obj, deep = json_depth.decode_metadata(text)
    if not isinstance(obj, dict):
        raise TraceFormatError("JSON, but not a trace: the top level is not an object", path)
    meta.update(obj)
    repairs.add(json_depth.DEEP_METADATA, IGNORED, deep)


def _decode_chunk(blob: bytes) -> RawEvents:
    events, deep = _decode_events(blob)
    return _with_issues(_columns(events), deep)


def _with_issues(raw: RawEvents, issues: dict[tuple[str, str], int]) -> RawEvents:
    for key, count in issues.items():
        raw.issues[key] = raw.issues.get(key, 0) + count
    return raw


def _check_chunk(blob: bytes) -> None:
    """Raises ``msgspec.DecodeError`` when ``blob`` is not a JSON list (a wrong cut)."""
    try:
        _raw_list_decoder.decode(blob)
    except RecursionError:
        flat, _ = json_depth.shallow(blob, 2)
        try:
            _raw_list_decoder.decode(flat)
        except RecursionError:
            raise msgspec.DecodeError("nested too deep") from None


def _decode_events(blob: bytes) -> tuple[list[_Event], dict[tuple[str, str], int]]:
    """A JSON list of events, decoded; values nested deeper than the decoder goes are cut out
    first (``json_depth``): deep args are put back verbatim, events with another deep field
    are dropped (both counted)."""
    try:
        return _events_decoder.decode(blob), {}
    except RecursionError:
        pass
    flat, stash = json_depth.shallow(blob, 2)
    try:
        events = _events_decoder.decode(flat)
    except RecursionError:
        raise msgspec.DecodeError(f"JSON nested deeper than {json_depth.DEPTH_LIMIT} levels outside args") from None
    issues: dict[tuple[str, str], int] = {}
    kept: list[_Event] = []
    for e in events:
        k = json_depth.placeholder_index(bytes(e.args))
        if k is not None:
            e.args = msgspec.Raw(stash[k])
            issues[(json_depth.DEEP_ARGS, KEPT_AS_TEXT)] = issues.get((json_depth.DEEP_ARGS, KEPT_AS_TEXT), 0) + 1
        if (
            any(json_depth.is_placeholder(getattr(e, f)) for f in _PLAIN_FIELDS)
            or json_depth.placeholder_index(bytes(e.ts)) is not None
        ):
            issues[(json_depth.DEEP_FIELD, DROPPED)] = issues.get((json_depth.DEEP_FIELD, DROPPED), 0) + 1
            continue
        kept.append(e)
    return kept, issues


_PLAIN_FIELDS = ("ph", "cat", "name", "pid", "tid", "dur", "id", "bp", "s", "cname", "tts")


def _decode_chunks(
    buf: bytes, fh: io.BufferedIOBase, size: int, progress: ProgressCallback | None, decoder: ChunkDecoder
) -> bytes:
    """Cut the events text into chunks of ~``CHUNK_BYTES`` at event boundaries and decode each
    (in order, here or in workers); returns the unread tail."""
    raw_fh: Any = getattr(fh, "fileobj", None) or getattr(fh, "_fp", None)
    while True:
        cut = _last_boundary(buf, len(buf)) if len(buf) >= CHUNK_BYTES else -1
        for _ in range(16):
            if cut < 0:
                break
            try:
                decoder.add(b"".join((b"[", memoryview(buf)[:cut], b"]")))
            except msgspec.ValidationError:  # an event of the wrong shape, not a wrong cut
                raise
            except msgspec.DecodeError:  # the cut fell inside an event: try an earlier one
                cut = _last_boundary(buf, cut - 1)
                continue
            buf = buf[cut:].lstrip().lstrip(b",")
            decoder.throttle()  # (outside the try: a chunk's own DecodeError is no bad cut)
            break
        else:
            cut = -1
        if cut >= 0 and len(buf) >= CHUNK_BYTES:
            continue  # more whole chunks in the buffer
        block = fh.read(CHUNK_BYTES)
        if progress:
            pos = _tell(raw_fh, fh)
            progress(min(pos, size), size)
        if not block:
            return buf
        buf += block


def _tell(raw_fh: Any, fh: Any) -> int:
    try:
        return int((raw_fh or fh).tell())
    except (OSError, ValueError, AttributeError):
        return 0


def _last_boundary(buf: bytes, before: int) -> int:
    """Index just past the last ``}``, before ``before``, that is followed by ``,`` and ``{``.

    Between two top-level events that sequence always appears; inside an event it appears only
    in an array of objects, where decoding the chunk fails and the caller tries an earlier one.
    """
    pos = before
    while True:
        close = buf.rfind(b"}", 0, pos)
        if close < 0:
            return -1
        rest = buf[close + 1 : close + 64].lstrip()
        if rest[:1] == b"," and rest[1:].lstrip()[:1] == b"{":
            return close + 1
        pos = close


def _array_end(buf: bytes) -> tuple[int, list[_Event], dict[tuple[str, str], int]]:
    """Index of the ``]`` closing the events array in the final tail (-1 if none), the events
    before it and the repairs made decoding them."""
    pos = len(buf)
    for _ in range(10000):
        idx = buf.rfind(b"]", 0, pos)
        if idx < 0:
            return -1, [], {}
        try:
            events, issues = _decode_events(b"".join((b"[", memoryview(buf)[:idx], b"]")))
            return idx, events, issues
        except msgspec.ValidationError:  # the events parse but one has the wrong shape
            raise
        except msgspec.DecodeError:  # not the closing bracket: try an earlier one
            pos = idx
    return -1, [], {}


# ------------------------------------------------------------------------------- columns
def _columns(events: list[_Event]) -> RawEvents:
    """Turn decoded events into columns; per-event Python work is limited to attribute reads
    and C-level ``map``s, and no Arrow array is built through ``pa.array``. Events that break a
    rule of ``kineto_checks`` are dropped here and counted in ``RawEvents.issues``."""
    ph = list(map(attrgetter("ph"), events))
    ts = list(map(attrgetter("ts"), events))
    _check_required(events, ph, ts)
    start_ns, ts_ok = checks.parse_times(ts)
    del ts
    dur_ns, bad = checks.durations(list(map(attrgetter("dur"), events)))
    bad[checks.TS_NOT_A_NUMBER] = ~ts_ok
    cats = list(map(attrgetter("cat"), events))
    names = list(map(attrgetter("name"), events))
    for reason, values in ((checks.CAT_NOT_A_STRING, cats), (checks.NAME_NOT_A_STRING, names)):
        mask = checks.not_strings(values)
        if mask is not None:
            bad[reason] = mask
    issues: dict[tuple[str, str], int] = {}
    drop = _drop_mask(bad, events, issues)
    if drop is not None:
        keep = (~drop).tolist()
        events, ph, cats, names = (list(compress(x, keep)) for x in (events, ph, cats, names))
        start_ns, dur_ns = start_ns[~drop], dur_ns[~drop]
    n = len(events)
    cat = dictionary_array(cats)
    name = dictionary_array(names, none_as="")
    del cats, names
    pid, pid_extra = _int_or_label(list(map(attrgetter("pid"), events)))
    tid, tid_extra = _int_or_label(list(map(attrgetter("tid"), events)))
    flow_id, flow_extra = _int_or_label(list(map(attrgetter("id"), events)), null_default=True)
    extras = _extras(events, pid_extra, tid_extra, flow_extra)
    args_raw = list(map(attrgetter("args"), events))
    del events
    data = b"".join(args_raw)
    columns: dict[str, pa.Array] = {}
    if carry.PREFIX in data:  # an export of ours: take back the columns it carried
        args_raw, columns = take_carried(args_raw, _NO_ARGS, issues)
        data = b"".join(args_raw)
    args = _args_text(args_raw, data)
    typed = _typed_args(args_raw, to_numpy(cat.indices, fill=-1))
    return RawEvents(
        n=n,
        ph=dictionary_array(ph, none_as=""),
        cat=cat,
        name=name,
        pid=pid,
        tid=tid,
        start_ns=start_ns,
        dur_ns=dur_ns,
        flow_id=flow_id,
        args=args,
        extra=extras,
        typed=typed,
        columns=columns,
        issues=issues,
    )


def _drop_mask(
    bad: dict[str, np.ndarray], events: list[_Event], issues: dict[tuple[str, str], int]
) -> np.ndarray | None:
    """The events to drop (None when none), each counted once under its first reason."""
    drop: np.ndarray | None = None
    for reason, mask in bad.items():
        if not mask.any():
            continue
        if reason == checks.TS_NOT_A_NUMBER:  # split: not a number vs out of range
            rows = np.nonzero(mask)[0]
            numeric = np.array([checks.is_number_text(events[i].ts) for i in rows.tolist()], bool)
            mask = mask.copy()
            mask[rows[numeric]] = False
            counts = {checks.TS_NOT_A_NUMBER: mask, checks.TS_OUT_OF_RANGE: np.zeros_like(mask)}
            counts[checks.TS_OUT_OF_RANGE][rows[numeric]] = True
        else:
            counts = {reason: mask}
        for what, m in counts.items():
            fresh = m if drop is None else (m & ~drop)
            k = int(np.count_nonzero(fresh))
            if k:
                issues[(what, DROPPED)] = issues.get((what, DROPPED), 0) + k
                drop = fresh.copy() if drop is None else (drop | fresh)
    return drop


def _check_required(events: list[_Event], ph: list[str], ts: list[msgspec.Raw]) -> None:
    if "" in ph:
        missing_ph = [i for i, p in enumerate(ph) if not p]
        i = missing_ph[0]
        raise _MalformedEventsError(
            f"{len(missing_ph):,} events have no 'ph' (phase) field, e.g. event {i}: {_brief(events[i])}"
        )
    if 0 in map(len, ts):
        missing_ts = [i for i, (r, p) in enumerate(zip(ts, ph)) if not r and p != "M"]
        if missing_ts:
            i = missing_ts[0]
            raise _MalformedEventsError(
                f"{len(missing_ts):,} events have no 'ts' (timestamp) field, e.g. event {i}: {_brief(events[i])}"
            )


def _brief(e: _Event) -> str:
    return f"ph={e.ph!r} cat={e.cat!r} name={str(e.name)[:60]!r}"


def _int_or_label(values: list[Any], null_default: bool = False) -> tuple[pa.Array, list[Any] | None]:
    """Integer ids as int64; string ids (``"Spans"``, ``"stream 7"``) get a stable negative
    number (from a CRC of the label) and are kept verbatim in ``extra`` so export writes them back."""
    types = set(map(type, values))
    if types == {int}:
        try:
            return from_numpy(np.array(values, np.int64), pa.int64()), None
        except OverflowError:
            pass
    if types == {type(None)}:
        return (
            pa.nulls(len(values), pa.int64()) if null_default else from_numpy(np.zeros(len(values)), pa.int64())
        ), None
    values = list(values)
    extra: list[Any] = [None] * len(values)
    mask = np.zeros(len(values), bool)
    has_extra = False
    for i, v in enumerate(values):
        if type(v) is int and checks.in_int64(v):
            continue
        if v is None:
            values[i] = 0
            mask[i] = null_default
        elif type(v) is float and v.is_integer() and checks.in_int64(int(v)):
            values[i] = int(v)
            extra[i] = v
            has_extra = True
        else:
            # A stable number per label, the same in every chunk of a streamed file.
            values[i] = -1 - zlib.crc32(str(v).encode())
            extra[i] = v
            has_extra = True
    return from_numpy(np.array(values, np.int64), pa.int64(), mask), (extra if has_extra else None)


def _extras(events: list[_Event], pid_x: list[Any] | None, tid_x: list[Any] | None, id_x: list[Any] | None) -> pa.Array:
    """JSON text of the non-standard top-level fields of each event (null when none).

    Built column-wise: each field's ``"key": value`` fragment comes from encoding its distinct
    values once, and the fragments are joined by Arrow, not per event in Python.
    """
    n = len(events)
    fragments: list[pa.Array] = []
    sources = [(k, x) for k, x in (("pid", pid_x), ("tid", tid_x), ("id", id_x)) if x is not None]
    sources[:0] = [(f, values) for f in _EXTRA_FIELDS if (values := list(map(attrgetter(f), events))).count(None) != n]
    enc = msgspec.json.encode
    for key, values in sources:
        hashable = set(map(type, values)) <= {str, int, float, bool, type(None)}
        if not hashable:
            words = [None if v is None else f'"{key}": ' + enc(v).decode() for v in values]
            fragments.append(string_array(words))
            continue
        uniq = {v: None for v in values}
        text = {v: (None if v is None else f'"{key}": ' + enc(v).decode()) for v in uniq}
        # 1 and True hash alike: encode by (type, value) when both occur.
        if len({(type(v), v) for v in uniq}) != len(uniq):
            words = [None if v is None else f'"{key}": ' + enc(v).decode() for v in values]
            fragments.append(string_array(words))
            continue
        fragments.append(dictionary_array(list(map(text.__getitem__, values))).cast(pa.string()))
    if not fragments:
        return pa.nulls(n, pa.string())
    if len(fragments) == 1:
        body = pc.coalesce(fragments[0], _EMPTY)
    else:
        # Each present fragment is prefixed with ", ", the row joined, and the first ", " cut off.
        # (null_handling="skip" would be simpler but drops all-null rows in pyarrow 26.)
        prefixed = [pc.binary_join_element_wise(_COMMA, f, _EMPTY) for f in fragments]
        body = pc.binary_join_element_wise(*prefixed, _EMPTY, null_handling="replace", null_replacement="")
        body = pc.utf8_slice_codeunits(body, 2)
    empty = pc.equal(body, _EMPTY)
    return pc.if_else(empty, pa.nulls(n, pa.string()), pc.binary_join_element_wise(_OPEN, body, _CLOSE, _EMPTY))


def _text_scalar(text: str) -> pa.Scalar:
    """A string scalar built without ``pa.scalar`` (which imports pandas)."""
    return string_array([text])[0]


_EMPTY, _COMMA, _OPEN, _CLOSE = (_text_scalar(t) for t in ("", ", ", "{", "}"))


def _args_text(raws: list[msgspec.Raw], data: bytes) -> pa.Array:
    """The raw args fragments (``data``: them joined) as an Arrow string array (no per-item
    copies; null where an event has no args)."""
    n = len(raws)
    lens = np.fromiter(map(len, raws), np.int64, n)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    # Events without args carry the _NO_ARGS default: three bytes ending in a space.
    three = np.nonzero(lens == 3)[0]
    valid = np.ones(n, bool)
    if three.size:
        last = np.frombuffer(data, np.uint8)[offsets[three] + 2]
        valid[three[last == 32]] = False
    nulls = n - int(np.count_nonzero(valid))
    if nulls:
        lens[~valid] = 0
        np.cumsum(lens, out=offsets[1:])
        data = b"".join(compress(raws, valid.tolist()))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    arr = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
    )
    try:
        return arr.cast(pa.large_string()).cast(pa.string())
    except pa.ArrowInvalid:
        # Invalid UTF-8 inside args: keep the text, replacing the bad bytes.
        return string_array(
            [bytes(r).decode("utf-8", "replace") if ok else None for r, ok in zip(raws, valid.tolist())]
        )


def _parse_ts(raws: list[msgspec.Raw]) -> np.ndarray:
    """Microsecond timestamps (JSON numbers) to int64 ns (0 where not valid; see
    ``kineto_checks.parse_times`` for the mask)."""
    return checks.parse_times(raws)[0]


def _typed_args(raws: list[msgspec.Raw], groups: np.ndarray) -> dict[str, pa.Array]:
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
        arrays = dict(found)
        column = pa.chunked_array(
            [_coerce(arrays[k], typ) if k in arrays else pa.nulls(size, typ) for k, size in enumerate(sizes)], typ
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
    if arr.type == typ:
        return arr
    try:
        return arr.cast(typ)
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


# ------------------------------------------------------------------------------- metadata
def _metadata(top: dict[str, Any], path: Path, repairs: Repairs) -> dict[str, Any]:
    return {
        "collector": "kineto_json",
        "source_file": os.path.abspath(path),
        **checks.trace_metadata(top, repairs),
        "trace_metadata": top,
    }


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]
