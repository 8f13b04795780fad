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
objects hold no cycles). Everything after decoding is columnar (``collectors.build.normalize``).

Modules: events become columns in ``kineto_columns`` (the field rules: ``kineto_checks``;
typed arguments: ``kineto_args``; columns an export carried: ``kineto_carry``); values nested
deeper than the decoder goes are handled by ``json_depth``. What was repaired is counted in the
trace metadata and warned once (``trace.repairs``).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.build._conversion import conversion_settings
from neuron_explorer.collectors.build.input_limits import BoundedInput
from neuron_explorer.collectors.build.normalize import build_trace
from neuron_explorer.collectors.build.raw_events import RawEvents
from neuron_explorer.collectors.kineto import json_depth
from neuron_explorer.collectors.kineto import kineto_checks as checks
from neuron_explorer.collectors.kineto.chunk_decode import _check_chunk, _decode_chunk, _decode_events, _with_issues
from neuron_explorer.collectors.kineto.kineto_args import _ARG_FIELDS, _args_decoder, _raw_text  # noqa: F401 (capture_convert)
from neuron_explorer.collectors.kineto.kineto_columns import (  # noqa: F401 (_parse_ts: tests)
    _NO_ARGS,
    _columns,
    _Event,
    _MalformedEventsError,
    _parse_ts,
    decode_events,
)
from neuron_explorer.collectors.kineto.parallel_decode import ChunkDecoder
from neuron_explorer.collectors.kineto.spooled import NotSpoolable, Spool, spool_events
from neuron_explorer.trace.arrow import loose_array as _loose_array  # noqa: F401 (capture_convert)
from neuron_explorer.trace.errors import TraceFormatError
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.paths import require_input
from neuron_explorer.trace.repairs import DROPPED, IGNORED, Repairs

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


_top_decoder = msgspec.json.Decoder(dict[str, msgspec.Raw])


def import_kineto_json(path: str | Path, progress: ProgressCallback | None = None) -> Trace:
    """Read a Kineto/Chrome JSON trace into a ``Trace`` with every link resolved."""
    path = Path(path)
    require_input(path)
    if path.is_dir():
        raise TraceFormatError("is a directory, expected a .json or .json.gz trace", path)
    with conversion_settings():
        return _import(path, progress)


def _import(path: Path, progress: ProgressCallback | None) -> Trace:
    try:
        return _import_once(path, progress, spool_events())
    except NotSpoolable:  # an export of ours, with carried columns: built in memory
        return _import_once(path, progress, None)


class _Chunks:
    """Where decoded chunks go, in order: kept in memory, or past ``spool_at`` events into a
    ``Spool`` for the out-of-core build (``collectors.kineto.spooled``)."""

    def __init__(self, spool_at: int | None) -> None:
        self.parts: list[RawEvents] = []
        self.n = 0
        self.dropped = 0
        self.spool: Spool | None = None
        self._spool_at = spool_at

    def add(self, raw: RawEvents) -> None:
        self.n += raw.n
        self.dropped += _dropped(raw)
        if self.spool is not None:
            self.spool.add(raw)
            return
        self.parts.append(raw)
        if self._spool_at is not None and self.n > self._spool_at:
            self.spool = Spool()
            parts, self.parts = self.parts, []
            parts.reverse()
            while parts:
                self.spool.add(parts.pop())

    def close(self) -> None:
        if self.spool is not None:
            self.spool.close()

    def reset(self) -> None:
        """Forget every chunk (a later top-level ``traceEvents`` replaces these events)."""
        self.close()
        self.parts, self.n, self.dropped, self.spool = [], 0, 0, None


class _Skipping(_Chunks):
    """Chunks kept in memory without the events of one category."""

    def __init__(self, category: str) -> None:
        super().__init__(None)
        self.category = category

    def add(self, raw: RawEvents) -> None:
        cat = raw.cat.cast(pa.string()) if pa.types.is_dictionary(raw.cat.type) else raw.cat
        keep = np.asarray(pc.fill_null(pc.not_equal(cat, self.category), True), bool)
        super().add(raw if keep.all() else raw.filter(keep))


def _import_once(path: Path, progress: ProgressCallback | None, spool_at: int | None) -> Trace:
    chunks = _Chunks(spool_at)
    try:
        return _import_chunks(path, progress, chunks)
    except BaseException:
        chunks.close()
        raise


def read_events(path: str | Path, skip_category: str | None = None) -> tuple[RawEvents, dict[str, Any]]:
    """The events of a Kineto JSON file, decoded and checked but not built (in memory), and
    the trace metadata: for a caller that adds what it knows before ``build_trace``
    (``capture_fallback``). ``skip_category``: events of that category are dropped chunk by
    chunk as they are decoded (memory for the others only). Errors as ``import_kineto_json``'s."""
    path = Path(path)
    require_input(path)
    chunks = _Chunks(None) if skip_category is None else _Skipping(skip_category)
    with conversion_settings():
        top, repairs = _decode_checked(path, None, chunks)
        metadata = _metadata(top, path, repairs)
        raw = _within_time_range(RawEvents.concat(chunks.parts), metadata["base_time_ns"], repairs, path)
    chunks.parts.clear()
    repairs.record(metadata)
    return raw, metadata


def _import_chunks(path: Path, progress: ProgressCallback | None, chunks: _Chunks) -> Trace:
    top, repairs = _decode_checked(path, progress, chunks)
    metadata = _metadata(top, path, repairs)
    if chunks.spool is not None:
        trace: Trace = _build_spooled(chunks.spool, metadata, chunks.n, repairs, path, progress)
    else:
        # build_trace gets the only reference to the columns (none stays here or in `chunks`),
        # so it can free each input column as soon as its reordered copy exists.
        box = [_within_time_range(RawEvents.concat(chunks.parts), metadata["base_time_ns"], repairs, path)]
        chunks.parts.clear()
        repairs.record(metadata)
        trace = build_trace(box.pop(), metadata, source=path)
    found = Repairs()
    found.merge({(e["what"], e["action"]): e["count"] for e in trace.metadata.get("repairs") or []})
    found.warn(path, stacklevel=6)
    return trace


def _decode_checked(path: Path, progress: ProgressCallback | None, chunks: _Chunks) -> _Decoded:
    """``_decode``, its failures as one-line ``TraceFormatError``s, a trace with no valid event refused."""
    try:
        top, repairs = _decode(path, progress, chunks)
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
    if chunks.n + chunks.dropped == 0:
        raise TraceFormatError("the trace holds no events (traceEvents is empty)", path)
    if chunks.n == 0:
        raise TraceFormatError(f"no valid event: all {chunks.dropped:,} were dropped", path)
    return top, repairs


def _build_spooled(
    spool: Spool, metadata: dict[str, Any], n: int, repairs: Repairs, path: Path, progress: ProgressCallback | None
) -> Trace:
    """The out-of-core build, with the same checks as the in-memory one; a progress bar that
    can say so (``progress.phase(text)``) names each of its steps."""
    out = spool.out_of_range(metadata["base_time_ns"])
    if out:
        repairs.add(checks.TS_OUT_OF_RANGE, DROPPED, out)
        if out == n:
            raise TraceFormatError(f"no valid event: all {n:,} start past {checks.MAX_TIME_NS:.0e} ns", path)
    repairs.record(metadata)
    return spool.build(metadata, phase=getattr(progress, "phase", None))


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
    """The file's JSON text, decompressed, within the bounds of ``input_limits`` (inflation,
    one string's length; a byte order mark dropped)."""
    return BoundedInput(path, _gzip.open)  # type: ignore[return-value]


_Decoded = tuple[dict[str, Any], Repairs]


def _decode(path: Path, progress: ProgressCallback | None, chunks: _Chunks) -> _Decoded:
    size = path.stat().st_size
    with _open_bytes(path) as fh:
        head = fh.read(STREAM_THRESHOLD)
        if len(head) < STREAM_THRESHOLD:
            if progress:
                progress(size, size)
            return _decode_whole(head, path, chunks)
        return _decode_stream(head, fh, path, size, progress, chunks)


def _decode_whole(data: bytes, path: Path, chunks: _Chunks) -> _Decoded:
    try:
        top, parts = _decode_whole_fast(data, path)
    except RecursionError:  # nested deeper than the decoder goes: the path that cuts it out
        return _decode_stream(data, io.BytesIO(b""), path, len(data), None, chunks)
    for part in parts:
        chunks.add(part)
    repairs = Repairs()
    if data.count(_EVENTS_KEY) > 1:  # (the scan below only when a duplicate is possible)
        repairs.add(DUPLICATE_EVENTS, IGNORED, len(json_depth.top_level_members(data, _EVENTS_KEY)) - 1)
    return top, repairs


def _decode_whole_fast(data: bytes, path: Path) -> tuple[dict[str, Any], list[RawEvents]]:
    stripped = data.lstrip()
    if not stripped:
        raise TraceFormatError("the file is empty", path)
    if stripped[:1] == b"[":  # the Chrome "JSON array format": events only
        return {}, [_columns(decode_events(data))]
    if stripped[:1] != b"{":
        raise TraceFormatError("not JSON (does not start with '{' or '[')", path)
    top = _top_decoder.decode(data)
    if "traceEvents" not in top:
        raise TraceFormatError("JSON, but not a trace: it has no 'traceEvents' list", path)
    raw = top.pop("traceEvents")
    if bytes(raw)[:1] != b"[":  # (the same words as a streamed file's)
        raise TraceFormatError(_NOT_A_LIST, path)
    events = decode_events(raw)
    meta = {k: msgspec.json.decode(v) for k, v in top.items()}
    return meta, [_columns(events)]


_EVENTS_KEY = b'"traceEvents"'
#: The repair said when the top-level object has ``traceEvents`` more than once: as in JSON
#: generally (and in ``json.loads``), the last one is the value, whatever the file's size.
DUPLICATE_EVENTS = "duplicate top-level traceEvents (the last one is used)"
_NOT_A_LIST = "not a Chrome/Kineto trace (traceEvents is not a list)"


def _first_events_list(head: bytes) -> tuple[int, int, int]:
    """(the key, the ``[`` of its value, duplicates before it) of the first top-level
    ``traceEvents`` member whose value is a list; (-1, -1, n) when the head holds none."""
    members = json_depth.top_level_members(head, _EVENTS_KEY)
    for i, (key, value) in enumerate(members):
        if head[value : value + 1] == b"[":
            return key, value, i
    return -1, -1, len(members)


def _decode_stream(
    head: bytes, fh: io.BufferedIOBase, path: Path, size: int, progress: ProgressCallback | None, chunks: _Chunks
) -> _Decoded:
    """Decode a large trace chunk by chunk; metadata before and after ``traceEvents`` is kept."""
    meta: dict[str, Any] = {}
    repairs = Repairs()
    if head.lstrip()[:1] == b"[":  # the JSON array format: events only
        buf = head.lstrip()[1:]
    else:
        # The key found by structure, not by text: "traceEvents" may also be a string value or
        # a nested key before the real list.
        key, bracket, earlier = _first_events_list(head)
        while key < 0 and len(head) < (256 << 20):  # metadata before the events can be long
            more = fh.read(max(CHUNK_BYTES, len(head)))  # (doubling: each rescan of the head pays for itself)
            if not more:
                break
            head += more
            key, bracket, earlier = _first_events_list(head)
        if key < 0:
            if earlier:  # (the last traceEvents is not a list: the in-memory path's error)
                raise TraceFormatError(_NOT_A_LIST, path)
            raise TraceFormatError("JSON, but not a trace: no 'traceEvents' list near the start", path)
        prefix = head[:key].rstrip().rstrip(b",")
        if prefix.strip() not in (b"{", b""):
            _update_metadata(meta, prefix + b"}", repairs, path)
            meta.pop("traceEvents", None)
        repairs.add(DUPLICATE_EVENTS, IGNORED, earlier)
        buf = head[bracket + 1 :]
    del head
    decoder = ChunkDecoder(_decode_chunk, _check_chunk)
    try:
        buf = _decode_chunks(buf, fh, size, progress, decoder, chunks)
        for part in decoder.results():
            chunks.add(part)
    finally:
        decoder.close()
    # The tail holds the last events, the closing bracket and any metadata after it.
    end, tail, deep = _array_end(buf)
    if end < 0:
        raise TraceFormatError("the traceEvents list never closes; is the file truncated?", path)
    if tail or deep:
        chunks.add(_with_issues(_columns(tail), deep))
    del tail
    rest = buf[end + 1 :].strip()
    if rest.startswith(b","):
        later = _update_metadata(meta, b"{" + rest[1:], repairs, path)
        if later is not None:  # the last top-level traceEvents wins, as at any size
            _replace_events(later, rest, chunks, repairs, path)
    elif rest not in (b"}", b""):
        raise TraceFormatError("invalid JSON after traceEvents; is the file truncated?", path)
    return meta, repairs


def _replace_events(later: bytes, rest: bytes, chunks: _Chunks, repairs: Repairs, path: Path) -> None:
    """The events of a ``traceEvents`` member after the streamed list replace its events."""
    repairs.add(DUPLICATE_EVENTS, IGNORED, len(json_depth.top_level_members(b"{" + rest[1:], _EVENTS_KEY)))
    chunks.reset()
    if later.lstrip()[:1] != b"[":
        raise TraceFormatError(_NOT_A_LIST, path)
    events, deep = _decode_events(later)
    chunks.add(_with_issues(_columns(events), deep))


def _update_metadata(meta: dict[str, Any], text: bytes, repairs: Repairs, path: Path) -> bytes | None:
    """Add the members of the object ``text`` to ``meta``; the raw text of its (last)
    ``traceEvents`` member, which is not metadata, is returned instead (None when absent)."""
    events: bytes | None = None
    if _EVENTS_KEY in text:
        try:
            top = _top_decoder.decode(text)
        except RecursionError:
            flat, stash = json_depth.shallow(text, 1)
            top = _top_decoder.decode(flat)
            for name, raw in top.items():  # (the deep values back: decode_metadata counts them)
                k = json_depth.placeholder_index(bytes(raw))
                if k is not None:
                    top[name] = msgspec.Raw(stash[k])
        if "traceEvents" in top:
            events = bytes(top.pop("traceEvents"))
            text = msgspec.json.encode({k: v for k, v in top.items()}) if top else b"{}"
    obj, deep = json_depth.decode_metadata(text)
    if not isinstance(obj, dict):
        raise TraceFormatError("JSON, but not a trace: the top level is not an object", path)
    meta.update(obj)
    repairs.add(json_depth.DEEP_METADATA, IGNORED, deep)
    return events


def _decode_chunks(
    buf: bytes,
    fh: io.BufferedIOBase,
    size: int,
    progress: ProgressCallback | None,
    decoder: ChunkDecoder,
    chunks: _Chunks,
) -> bytes:
    """Cut the events text into chunks of ~``CHUNK_BYTES`` at event boundaries and decode each
    (in order, here or in workers); returns the unread tail.

    Linear in the text however long an event (or the whitespace between two) is: the buffer
    grows in place, and a search for a boundary skips what an earlier search found without one
    (``clean``), so a text with no boundary for 1 GB costs one pass, not one per block read. A
    block of whitespace alone outside any string (``BoundedInput.outside_string``) is kept as
    one space: a whitespace bomb costs its decompression, not its size in memory."""
    raw_fh: Any = getattr(fh, "fileobj", None) or getattr(fh, "_fp", None)
    buf = bytearray(buf)
    clean = 0  # buf[:clean] holds no boundary
    while True:
        cut = _last_boundary(buf, len(buf), clean) if len(buf) >= CHUNK_BYTES else -1
        if cut < 0 and len(buf) >= CHUNK_BYTES:
            clean = max(0, len(buf) - _LOOKAHEAD)  # (a "}" near the end waits for what follows it)
        for _ in range(16):
            if cut < 0:
                break
            try:
                decoder.add(b"".join((b"[", memoryview(buf)[:cut], b"]")))
            except msgspec.ValidationError:  # an event of the wrong shape, not a wrong cut
                raise
            except msgspec.DecodeError:  # the cut fell inside an event: try an earlier one
                cut = _last_boundary(buf, cut - 1, clean)
                continue
            buf = bytearray(buf[cut:].lstrip().lstrip(b","))
            clean = 0
            decoder.throttle()  # (outside the try: a chunk's own DecodeError is no bad cut)
            for part in decoder.take_ready():
                chunks.add(part)
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
            return bytes(buf)
        if block.isspace() and getattr(fh, "outside_string", False):
            block = b" "  # (whitespace between tokens, however much: one space says the same)
        buf += block


def _tell(raw_fh: Any, fh: Any) -> int:
    try:
        return int((raw_fh or fh).tell())
    except (OSError, ValueError, AttributeError):
        return 0


#: Bytes after a ``}`` looked at for the ``,`` and ``{`` of the next event.
_LOOKAHEAD = 64


def _last_boundary(buf: bytes | bytearray, before: int, after: int = 0) -> int:
    """Index just past the last ``}``, in ``[after, before)``, that is followed by ``,`` and ``{``.

    Between two top-level events that sequence always appears; inside an event it appears only
    in an array of objects, where decoding the chunk fails and the caller tries an earlier one.
    """
    pos = before
    while True:
        close = buf.rfind(b"}", after, pos)
        if close < 0:
            return -1
        rest = buf[close + 1 : close + _LOOKAHEAD].lstrip()
        if rest[:1] == b"," and rest[1:].lstrip()[:1] == b"{":
            return close + 1
        pos = close


def _array_end(buf: bytes) -> tuple[int, list[_Event], dict[tuple[str, str], int]]:
    """Index of the ``]`` closing the events array in the final tail (-1 if none), the events
    before it and the repairs made decoding them."""
    idx = buf.rfind(b"]")
    if idx < 0:
        return -1, [], {}
    try:  # the usual file: nothing after the events but a few metadata keys without lists
        events, issues = _decode_events(b"".join((b"[", memoryview(buf)[:idx], b"]")))
        return idx, events, issues
    except msgspec.ValidationError:  # the events parse but one has the wrong shape
        raise
    except msgspec.DecodeError:  # not the closing bracket (or invalid JSON): find it by structure
        pass
    idx = json_depth.array_close(buf)
    if idx < 0:
        return -1, [], {}
    # (a DecodeError now is invalid JSON in the last events, said as such by the caller)
    events, issues = _decode_events(b"".join((b"[", memoryview(buf)[:idx], b"]")))
    return idx, events, issues


# ------------------------------------------------------------------------------- metadata
#: The most JSON text of the file's top-level metadata kept in ``trace_metadata`` (the Parquet
#: footer): pyarrow refuses to read a footer past ~100 MB, so a larger one would write a trace
#: that cannot be opened. Members past it (in file order) are ignored, counted as a repair.
METADATA_BYTES = 16 << 20
BIG_METADATA = f"top-level key past {METADATA_BYTES >> 20} MB of metadata (not kept)"


def _metadata(top: dict[str, Any], path: Path, repairs: Repairs) -> dict[str, Any]:
    return {
        "collector": "kineto_json",
        "source_file": os.path.abspath(path),
        **checks.trace_metadata(top, repairs),
        "trace_metadata": _bounded(top, repairs),
    }


def _bounded(top: dict[str, Any], repairs: Repairs) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    used = 0
    for key, value in top.items():
        size = 0
        with contextlib.suppress(TypeError, OverflowError, RecursionError):  # (kept, as before)
            size = len(key) + len(msgspec.json.encode(value))
        if used + size > METADATA_BYTES:
            repairs.add(BIG_METADATA, IGNORED)
            continue
        used += size
        kept[key] = value
    return kept


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:160]
