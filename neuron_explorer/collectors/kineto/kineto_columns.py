"""Decoded Kineto events to ``RawEvents`` columns, with the field rules of ``kineto_checks``.

Per-event Python work is limited to attribute reads and C-level ``map``s; no Arrow array is
built through ``pa.array``. Events that break a rule are dropped here and counted in
``RawEvents.issues``; columns a Chrome export of ours carried in ``args`` are taken back
(``kineto_carry``).
"""

from __future__ import annotations

import zlib
from itertools import compress
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.build.raw_events import RawEvents
from neuron_explorer.collectors.kineto import kineto_checks as checks
from neuron_explorer.collectors.kineto.kineto_args import typed_args
from neuron_explorer.collectors.kineto.kineto_carry import take_carried
from neuron_explorer.trace import carry
from neuron_explorer.trace.arrow import dictionary_array, from_numpy, string_array, to_numpy
from neuron_explorer.trace.repairs import DROPPED, REPLACED


class _MalformedEventsError(ValueError):
    """Events that lack the fields every trace event has (ph, and ts for timed events)."""


#: ``args`` of an event that has none. A decoded raw value never ends in whitespace, so this
#: default is told apart from a real ``"args": {}`` by its trailing space, with no per-event
#: Python; it decodes as an empty object, so the typed-args pass needs no scatter.
_NO_ARGS = msgspec.Raw(b"{} ")


# gc=False: decoded events hold no reference cycles; tracking millions of them only makes the
# cyclic collector walk them again and again (a third of the decode time).
_UNKNOWN_NAME = "neuron_explorer:unknown_fields"


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
    #: The event's other fields, ``{name: raw JSON}`` (kept in ``extra``), set by
    #: ``decode_events``. (A file's own field of this name is kept like any other: ``_unknown``.)
    unknown: Any = msgspec.field(default=None, name=_UNKNOWN_NAME)


class _KnownFieldsEvent(_Event, forbid_unknown_fields=True, gc=False):
    """An event with no field outside ``_Event``'s: the usual case, decoded in one pass."""


_EXTRA_FIELDS = ("bp", "s", "cname", "tts")
_KNOWN_FIELDS = frozenset(f for f in _Event.__struct_fields__ if f != "unknown")
_events_decoder = msgspec.json.Decoder(list[_Event])
_known_fields_decoder = msgspec.json.Decoder(list[_KnownFieldsEvent])
_members_decoder = msgspec.json.Decoder(list[dict[str, msgspec.Raw]])


def _compact(raw: bytes) -> bytes:
    """A field's JSON as ``extra``'s other fields are written (msgspec's compact form), so that
    export and import give the same text back; as it was when it cannot be decoded."""
    try:
        return msgspec.json.encode(msgspec.json.decode(raw))
    except (msgspec.DecodeError, RecursionError, OverflowError, ValueError):
        return raw


def decode_events(blob: bytes) -> list[_Event]:
    """A JSON list of events; fields outside the standard ones are kept on each event
    (``unknown``) for the ``extra`` column. A file without such fields is decoded once; one
    with them pays a second pass for the fields' names."""
    try:
        return _known_fields_decoder.decode(blob)  # type: ignore[return-value]
    except msgspec.ValidationError as exc:
        if "unknown field" not in str(exc):
            raise
    events = _events_decoder.decode(blob)
    for event, members in zip(events, _members_decoder.decode(blob)):
        unknown = {k: _compact(bytes(v)) for k, v in members.items() if k not in _KNOWN_FIELDS}
        if unknown:
            event.unknown = unknown
    return events


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
    args = _args_text(args_raw, data, issues)
    typed = typed_args(args_raw, to_numpy(cat.indices, fill=-1))
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

    Built column-wise: each standard field's ``"key": value`` fragment comes from encoding its
    distinct values once, and the fragments are joined by Arrow, not per event in Python. The
    fields no Chrome reader knows are one fragment, built only for the events that have any
    (``_unknown_text``): one event with K such keys in E events costs O(E + K), not O(E * K).
    """
    n = len(events)
    fragments: list[pa.Array] = []
    sources = [(k, x) for k, x in (("pid", pid_x), ("tid", tid_x), ("id", id_x)) if x is not None]
    sources[:0] = [(f, values) for f in _EXTRA_FIELDS if (values := list(map(attrgetter(f), events))).count(None) != n]
    enc = msgspec.json.encode
    unknown = list(map(attrgetter("unknown"), events))
    if unknown.count(None) != n:
        fragments.append(_unknown_text(unknown))
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


def _unknown_text(unknown: list[Any]) -> pa.Array:
    """The ``"key": value, ...`` text of each event's non-standard fields (null where none), the
    keys in the order of their first appearance in the chunk (as when each key was a column of
    its own). Only the events that have such fields are visited, each for its own keys."""
    rows = [i for i, u in enumerate(unknown) if u is not None]
    fields = [_unknown(unknown[i]) or {} for i in rows]  # fields no Chrome reader knows: kept as written
    rank: dict[str, int] = {}
    for u in fields:
        for k in u:
            rank.setdefault(k, len(rank))
    prefix = {k: msgspec.json.encode(k).decode() + ": " for k in rank}
    texts: list[str | None] = [None] * len(unknown)
    for i, u in zip(rows, fields):
        if u:
            keys = sorted(u, key=rank.__getitem__)
            texts[i] = ", ".join(prefix[k] + u[k].decode("utf-8", "replace") for k in keys)
    return string_array(texts)


def _unknown(value: Any) -> dict[str, bytes] | None:
    """An event's non-standard fields as ``decode_events`` left them; a value the file itself
    gave under ``_UNKNOWN_NAME`` is that field's."""
    if value is None or (type(value) is dict and all(type(v) is bytes for v in value.values())):
        return value
    return {_UNKNOWN_NAME: msgspec.json.encode(value)}


def _text_scalar(text: str) -> pa.Scalar:
    """A string scalar built without ``pa.scalar`` (which imports pandas)."""
    return string_array([text])[0]


_EMPTY, _COMMA, _OPEN, _CLOSE = (_text_scalar(t) for t in ("", ", ", "{", "}"))


def _args_text(raws: list[msgspec.Raw], data: bytes, issues: dict[tuple[str, str], int]) -> pa.Array:
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
        # Invalid UTF-8 inside args: keep the text, replacing the bad bytes (counted).
        texts = [bytes(r).decode("utf-8", "replace") if ok else None for r, ok in zip(raws, valid.tolist())]
        bad = sum(_not_utf8(r) for r, ok in zip(raws, valid.tolist()) if ok)
        issues[(checks.ARGS_NOT_UTF8, REPLACED)] = issues.get((checks.ARGS_NOT_UTF8, REPLACED), 0) + bad
        return string_array(texts)


def _not_utf8(raw: msgspec.Raw) -> bool:
    try:
        bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _parse_ts(raws: list[msgspec.Raw]) -> np.ndarray:
    """Microsecond timestamps (JSON numbers) to int64 ns (0 where not valid; see
    ``kineto_checks.parse_times`` for the mask)."""
    return checks.parse_times(raws)[0]
