"""One chunk of a Kineto file's events text to columns: what the importer and its parallel
decode workers (``_decode_worker``) both run on each chunk.

A chunk is a JSON list of events cut at event boundaries (``kineto_json._decode_chunks``).
Values nested deeper than the decoder goes are cut out first (``json_depth``) and put back or
counted; the events then become ``RawEvents`` columns (``kineto_columns``). Kept apart from
``kineto_json`` so a worker imports the decoding alone, not the importer that starts it.
"""

from __future__ import annotations

import msgspec

from neuron_explorer.collectors.build.raw_events import RawEvents
from neuron_explorer.collectors.kineto import json_depth
from neuron_explorer.collectors.kineto.kineto_columns import _columns, _Event, decode_events
from neuron_explorer.trace.repairs import DROPPED, KEPT_AS_TEXT

#: Checks a chunk's JSON syntax without building its events (~5% of decoding them).
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])


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
        return decode_events(blob), {}
    except RecursionError:
        pass
    flat, stash = json_depth.shallow(blob, 2)
    try:
        events = decode_events(flat)
    except RecursionError:
        raise msgspec.DecodeError(f"JSON nested deeper than {json_depth.DEPTH_LIMIT} levels outside args") from None
    issues: dict[tuple[str, str], int] = {}
    kept: list[_Event] = []
    for e in events:
        if e.unknown:  # (a deep value of a non-standard field: back as it was)
            for name, raw in e.unknown.items():
                i = json_depth.placeholder_index(raw)
                if i is not None:
                    e.unknown[name] = stash[i]
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
