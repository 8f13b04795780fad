"""JSON nested deeper than the decoder's recursion limit, handled without recursion.

msgspec (like every recursive decoder) gives up near 1,000 levels of nesting, even for a value
it only skips or keeps raw. A trace whose ``args`` nest 20,000 levels deep is still a trace:
such a value is cut out of the text before decoding (a flat scan of brackets and strings, only
run after the fast decode failed), replaced by a placeholder, and put back afterwards, so an
event's ``args`` text is kept byte for byte. A deep value in any other event field drops the
event; a deep top-level metadata value is ignored. Each is counted as a repair.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

#: Containers nested deeper than this inside one value get cut out (well under msgspec's ~1,000).
DEPTH_LIMIT = 200
DEEP_ARGS = f"args nested deeper than {DEPTH_LIMIT} levels (typed fields not read)"
DEEP_FIELD = f"a field other than args nested deeper than {DEPTH_LIMIT} levels"
DEEP_METADATA = f"top-level key nested deeper than {DEPTH_LIMIT} levels"

# (a string as "unrolled loop": runs of plain characters at C speed, not one alternation each)
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_SPACE = re.compile(rb"\s*")
_MARK = "\x00neuron-explorer:deep:"
_MARK_JSON = b'"\\u0000neuron-explorer:deep:'


def shallow(blob: bytes, level: int) -> tuple[bytes, list[bytes]]:
    """``blob`` with every container at stack index ``level`` (0: the outermost) that holds
    nesting deeper than ``DEPTH_LIMIT`` replaced by a placeholder string (``"\\u0000...:k"``),
    and the replaced texts (``k`` indexes them). Text it cannot balance is left as it is; a cut
    value that is not valid JSON raises ``msgspec.DecodeError``."""
    stack: list[int] = []
    deep_at_level: set[int] = set()
    spans: list[tuple[int, int]] = []
    for m in _TOKEN.finditer(blob):
        tok = m.group()
        c = tok[:1]
        if c == b'"':
            continue
        if c in b"[{":
            stack.append(m.start())
            if len(stack) > DEPTH_LIMIT + level and len(stack) > level:
                deep_at_level.add(stack[level])
        elif stack:
            start = stack.pop()
            if len(stack) == level and start in deep_at_level:
                spans.append((start, m.end()))
    if not spans:
        return blob, []
    out: list[bytes] = []
    stash: list[bytes] = []
    pos = 0
    for start, end in spans:
        if not valid_json(blob[start:end]):
            raise msgspec.DecodeError(f"invalid JSON in a value nested deeper than {DEPTH_LIMIT} levels")
        out.append(blob[pos:start])
        out.append(_MARK_JSON + str(len(stash)).encode() + b'"')
        stash.append(blob[start:end])
        pos = end
    out.append(blob[pos:])
    return b"".join(out), stash


def array_close(buf: bytes) -> int:
    """Index of the ``]`` that closes the array whose items ``buf`` starts among (the text
    begins at depth 1: after ``[`` or between two items), found in one flat scan of brackets
    and strings; -1 when it never closes (or a ``}`` closes it: not JSON)."""
    depth = 1
    for m in _TOKEN.finditer(buf):
        c = m.group()[:1]
        if c == b'"':
            continue
        if c in b"[{":
            depth += 1
            continue
        depth -= 1
        if depth == 0:
            return m.start() if c == b"]" else -1
    return -1


def placeholder_index(raw: bytes) -> int | None:
    """The stash index of a placeholder's raw JSON text, else None."""
    if raw.startswith(_MARK_JSON) and raw.endswith(b'"'):
        digits = raw[len(_MARK_JSON) : -1]
        return int(digits) if digits.isdigit() else None
    return None


def is_placeholder(value: Any) -> bool:
    return type(value) is str and value.startswith(_MARK)


def decode_metadata(text: bytes) -> tuple[dict[str, Any], int]:
    """A JSON object's members, each decoded; members nested too deep are left out (their
    count returned)."""
    try:
        return msgspec.json.decode(text), 0
    except RecursionError:
        pass
    flat, _ = shallow(text, 1)
    try:
        obj = msgspec.json.decode(flat)
    except RecursionError:
        raise msgspec.DecodeError(f"JSON nested deeper than {DEPTH_LIMIT} levels outside the events") from None
    if not isinstance(obj, dict):
        return obj, 0
    deep = [k for k, v in obj.items() if is_placeholder(v)]
    for k in deep:
        del obj[k]
    return obj, len(deep)


_LEX = re.compile(
    rb'\s*(?:("(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")'
    rb"|(-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?)|(true|false|null)|([\[\]{},:]))"
)


def valid_json(text: bytes) -> bool:
    """Whether ``text`` is one JSON value: a grammar check with an explicit stack (any depth)."""
    stack: list[bytes] = []
    state = "value"
    pos = 0
    while True:
        m = _LEX.match(text, pos)
        if m is None:
            return state == "end" and not text[pos:].strip()
        pos = m.end()
        punct = m.group(4)
        scalar = punct is None
        if state in ("value", "value_or_close"):
            if punct == b"]" and state == "value_or_close":
                stack.pop()
            elif punct in (b"[", b"{"):
                stack.append(punct)
                state = "value_or_close" if punct == b"[" else "key_or_close"
                continue
            elif not scalar:
                return False
        elif state in ("key", "key_or_close"):
            if m.group(1) is not None:
                state = "colon"
                continue
            if not (punct == b"}" and state == "key_or_close"):
                return False
            stack.pop()
        elif state == "colon":
            if punct != b":":
                return False
            state = "value"
            continue
        elif state == "comma_or_close":
            if punct == b",":
                state = "value" if stack[-1] == b"[" else "key"
                continue
            if punct != {b"[": b"]", b"{": b"}"}[stack[-1]]:
                return False
            stack.pop()
        else:  # "end": a second value
            return False
        state = "comma_or_close" if stack else "end"


def top_level_members(text: bytes, name: bytes) -> list[tuple[int, int]]:
    """(where the key starts, where its value starts) of each member named ``name`` (the key's
    JSON text, quotes included) of the object ``text`` begins with, in order; the text may be
    cut short (the members found so far). One flat scan of brackets and strings: a key of the
    same name nested in a value, or a string value equal to it, is not a member."""
    found: list[tuple[int, int]] = []
    start = len(text) - len(text.lstrip())
    if text[start : start + 1] != b"{":
        return found
    depth = 0
    for m in _TOKEN.finditer(text, start):
        tok = m.group()
        c = tok[:1]
        if c == b'"':
            if depth == 1 and tok == name:
                after = m.end()
                rest = text[after : after + 256].lstrip()
                if rest[:1] == b":":
                    colon = text.index(b":", after)
                    found.append((m.start(), _SPACE.match(text, colon + 1).end()))  # type: ignore[union-attr]
            continue
        depth += 1 if c in b"[{" else -1
        if depth <= 0:
            break
    return found
