"""Columns with no Chrome trace field, carried through a Chrome JSON export inside ``args``.

A Chrome event has ph, cat, name, pid, tid, ts, dur, id and args; a trace row has ~50 columns.
The export puts the others (source file, line, function, module and precision always, so
Perfetto shows them; any other column the importer would not derive back the same) into one
leading member of the event's ``args``::

    "args": {"neuron_explorer": {"src_file": "train.py", "src_line": 13, ...}, "External id": 5}

and the importer takes it out again, restoring the original ``args`` text byte for byte
(``split``): the member is spliced in front of the original members, or, when the original
text cannot be spliced (no args, an empty or non-object value), the original is kept in the
member as ``"_args"`` (its JSON text, or null for no args).
"""

from __future__ import annotations

from typing import Any

import msgspec

KEY = "neuron_explorer"
PREFIX = b'{"' + KEY.encode() + b'": '
#: Carried for every event that has them (so Perfetto users see the source lines).
ALWAYS = ("src_file", "src_line", "src_func", "src_module", "src_precision")
#: Columns that have a Chrome field (or are the row number or file-level), never carried.
NATIVE = ("event_id", "rank", "ph", "category", "name", "pid", "tid", "start_ns", "dur_ns", "flow_id", "args", "extra")
_ORIGINAL = "_args"


class _Head(msgspec.Struct):
    neuron_explorer: msgspec.Raw


_head_decoder = msgspec.json.Decoder(_Head)
_enc = msgspec.json.Encoder()


def join(carried: dict[str, Any], args: str | None) -> str:
    """The exported ``args`` text: ``carried`` in front of the original ``args`` (None: none)."""
    if args is not None and args.startswith("{") and args != "{}" and args[1:].lstrip()[:1] not in ("}", ""):
        return PREFIX.decode() + _enc.encode(carried).decode() + ", " + args[1:]
    if args != "{}":
        carried = {**carried, _ORIGINAL: args}
    return PREFIX.decode() + _enc.encode(carried).decode() + "}"


def split(raw: bytes) -> tuple[dict[str, Any], bytes | None] | None:
    """(carried values, original args text or None for no args) of an exported ``args``; None
    when ``raw`` carries nothing (or is not in the exported form)."""
    if not raw.startswith(PREFIX):
        return None
    try:
        head = _head_decoder.decode(raw)
        carried = msgspec.json.decode(head.neuron_explorer)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    if not isinstance(carried, dict):
        return None
    after = raw[len(PREFIX) + len(head.neuron_explorer) :]
    if _ORIGINAL in carried:
        original = carried.pop(_ORIGINAL)
        if after != b"}" or not (original is None or isinstance(original, str)):
            return None
        return carried, (None if original is None else original.encode())
    if after == b"}":
        return carried, b"{}"
    if after.startswith(b", "):
        return carried, b"{" + after[2:]
    return None
