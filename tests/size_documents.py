"""Kineto JSON documents that must import the same way at any size (issue 26).

Each is ``tests/data/fuzz/kineto/clean.json``'s metadata and 8 events, shaped so that a reader
that looks for ``"traceEvents"`` as text, or takes the first of two, goes wrong, and padded to
``size`` bytes: below and above ``kineto_json.STREAM_THRESHOLD`` (where a file stops being
decoded whole and is streamed) the trace must be the same. ``python -m tests.size_documents
SHAPE SIZE OUT`` writes one (a 100 MB check by hand).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

CLEAN = Path(__file__).parent / "data" / "fuzz" / "kineto" / "clean.json"
#: An event of the padding list (valid: a reader that keeps the wrong list keeps these).
DECOY = b'{"ph": "X", "cat": "cpu_op", "name": "decoy", "pid": 99, "tid": 99, "ts": 1, "dur": 1}'

SHAPES = ("key_in_values", "duplicate_padded_first", "duplicate_padded_between", "nonstandard_fields")


def _parts() -> tuple[bytes, bytes]:
    seed = json.loads(CLEAN.read_text())
    events = json.dumps(seed.pop("traceEvents")).encode()
    meta = json.dumps(seed).encode()[1:-1]  # the members, without the braces
    return meta, events


def document(shape: str, size: int) -> bytes:
    """The document ``shape`` padded to about ``size`` bytes (at least its unpadded size)."""
    meta, events = _parts()
    if shape == "clean":  # (the reference: clean.json as these documents write its events)
        return b"{" + meta + b', "traceEvents": ' + events + b"}"
    if shape == "key_in_values":
        # "traceEvents" as a string value, a nested key, a key nested in a list, before the list
        head = b'{"note": "traceEvents", "nested": {"traceEvents": [1, 2], "x": ["traceEvents"]}, '
        filler = b'"pad": "' + b"p" * max(size - 400, 0) + b'", '
        return head + filler + meta + b', "traceEvents": ' + events + b"}"
    if shape == "duplicate_padded_first":
        # two top-level traceEvents: a long one of decoys, then the real one (the last wins)
        n = max((size - 400) // (len(DECOY) + 2), 1)
        decoys = b"[" + b", ".join([DECOY] * n) + b"]"
        return b"{" + meta + b', "traceEvents": ' + decoys + b', "traceEvents": ' + events + b"}"
    if shape == "duplicate_padded_between":
        # a short decoy list, padding metadata, the real list
        filler = b'"pad": "' + b"p" * max(size - 400, 0) + b'"'
        return b'{"traceEvents": [' + DECOY + b"], " + filler + b", " + meta + b', "traceEvents": ' + events + b"}"
    if shape == "nonstandard_fields":
        # every event carries a field no Chrome reader knows; padding after the list
        extra = events.replace(b'"ph":', b'"my_field": {"k": [1, "v"]}, "ph":')
        filler = b'"pad": "' + b"p" * max(size - 400, 0) + b'"'
        return b"{" + meta + b', "traceEvents": ' + extra + b", " + filler + b"}"
    raise ValueError(shape)


if __name__ == "__main__":
    Path(sys.argv[3]).write_bytes(document(sys.argv[1], int(float(sys.argv[2]))))
