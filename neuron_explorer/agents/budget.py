"""The size budget of every agent answer: compact JSON, rounded figures, cut to fit, said so.

An agent pays for every character it reads (its context window, its bill), so each tool answer
is serialized once, as compact JSON (no indentation, ``separators=(",", ":")``), with floats
rounded to ``FLOAT_DIGITS`` significant digits (integers such as ``*_ns`` stay exact), and
must fit ``max_chars`` characters (``DEFAULT_MAX_CHARS`` unless the caller raises it). An
answer that does not fit is cut, never silently: first long lists nested inside list items
(a finding's event ids) are shortened, then the longest list, then long strings, and the
answer says what was cut (``truncated``), how much of each list it shows, and how to get the
rest (``truncation.how_to_page``: the next ``offset``, a narrower filter, or a larger
``max_chars``).
"""

from __future__ import annotations

import json
import math
from typing import Any

#: About 4k tokens: what one answer may cost an agent unless it asks for more.
DEFAULT_MAX_CHARS = 16_000
#: The most an agent may ask for in one answer (about 250k tokens).
MAX_MAX_CHARS = 1_000_000
#: The least: below this not even the truncation note fits.
MIN_MAX_CHARS = 1_000
FLOAT_DIGITS = 4
#: Lists nested in list items (a finding's event ids) are cut to this many items first.
NESTED_LIST_ITEMS = 10
#: Strings are never cut below this many characters.
MIN_STRING_CHARS = 200
#: Room kept for the truncation note itself.
_NOTE_ROOM = 600


class BudgetError(ValueError):
    """``max_chars`` is out of range."""


def check_max_chars(max_chars: int | None) -> int:
    """``max_chars`` as an int within the allowed range (the default when None)."""
    if max_chars is None:
        return DEFAULT_MAX_CHARS
    if isinstance(max_chars, bool) or not isinstance(max_chars, int):
        raise BudgetError(f"max_chars must be a whole number of characters, not {max_chars!r}")
    if not MIN_MAX_CHARS <= max_chars <= MAX_MAX_CHARS:
        raise BudgetError(f"max_chars must be between {MIN_MAX_CHARS:,} and {MAX_MAX_CHARS:,}, not {max_chars:,}")
    return max_chars


def round_float(value: float, digits: int = FLOAT_DIGITS) -> float | int | None:
    """``value`` to ``digits`` significant digits; NaN and infinities (not JSON) as None."""
    if not math.isfinite(value):
        return None
    if value == 0:
        return 0.0
    rounded = float(f"{value:.{digits}g}")
    # A whole number of 16+ digits printed as a float loses nothing by becoming an int.
    return int(rounded) if rounded.is_integer() and abs(rounded) >= 1e15 else rounded


def rounded(value: Any) -> Any:
    """A JSON-able value with every float rounded (booleans and integers unchanged)."""
    if isinstance(value, float):
        return round_float(value)
    if isinstance(value, dict):
        return {str(k): rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """Compact JSON: no spaces, no indentation, non-ASCII kept as is (fewer characters than escapes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)


def fit(
    answer: dict[str, Any],
    max_chars: int,
    how_to_page: str = "",
    offset: int | None = None,
    pages: tuple[str, ...] = (),
) -> str:
    """``answer`` as compact JSON of at most ``max_chars`` characters, cut (and saying so) when needed.

    ``pages`` names the top-level lists that started at ``offset`` (the tool's paged rows), so
    the note can name the offset of the next page; ``how_to_page`` is the tool's own advice.
    """
    doc = rounded(answer)
    text = dumps(doc)
    if len(text) <= max_chars:
        return text
    whole = len(text)
    budget = max_chars - _NOTE_ROOM - len(how_to_page)
    cuts: dict[str, dict[str, int]] = {}
    nested: dict[str, int] = {}
    _cut_nested_lists(doc, "", nested)
    text = dumps(doc)
    while len(text) > budget:
        target = _largest_list(doc, "")
        if target is None:
            break
        path, items = target
        keep = _items_that_fit(items, len(text) - budget)
        total = cuts.get(path, {}).get("total", len(items))
        cuts[path] = {"shown": keep, "total": total}
        del items[keep:]
        text = dumps(doc)
    strings_cut = 0
    if len(text) > budget:
        strings_cut = _cut_strings(doc, len(text) - budget)
        text = dumps(doc)
    note: dict[str, Any] = {"max_chars": max_chars, "whole_answer_chars": whole}
    lists = cuts
    if lists:
        note["lists"] = lists
    if nested:
        note["nested_lists"] = {p: {"shown_each": NESTED_LIST_ITEMS, "longest": n} for p, n in nested.items()}
    if strings_cut:
        note["strings_cut"] = strings_cut
    advice = [how_to_page] if how_to_page else []
    paged = [cut["shown"] for path, cut in lists.items() if path in pages]
    if offset is not None and paged:
        note["next_offset"] = offset + min(paged)  # every paged list goes on from there
        advice.insert(0, f"for the next page call again with offset={note['next_offset']}")
    advice.append(f"or raise max_chars (up to {MAX_MAX_CHARS:,})")
    note["how_to_page"] = "; ".join(advice)
    doc["truncated"] = True
    doc["truncation"] = note
    text = dumps(doc)
    if len(text) > max_chars:  # a tiny max_chars: only the note itself fits
        text = dumps({"truncated": True, "truncation": note})
    return text


def _cut_nested_lists(value: Any, path: str, cut: dict[str, int], depth: int = 0) -> None:
    """Cut every list found inside a list item to ``NESTED_LIST_ITEMS``; ``cut``: path -> longest."""
    if isinstance(value, dict):
        for key, child in value.items():
            _cut_nested_lists(child, f"{path}.{key}" if path else key, cut, depth)
    elif isinstance(value, list):
        if depth >= 1 and len(value) > NESTED_LIST_ITEMS:
            cut[path] = max(cut.get(path, 0), len(value))
            del value[NESTED_LIST_ITEMS:]
        for child in value:
            _cut_nested_lists(child, f"{path}[]", cut, depth + 1)


def _largest_list(value: Any, path: str) -> tuple[str, list[Any]] | None:
    """The non-empty list (at any depth) whose JSON is the longest, and its path."""
    best: tuple[int, str, list[Any]] | None = None
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((f"{where}.{k}" if where else k, v) for k, v in node.items())
        elif isinstance(node, list) and node:
            size = len(dumps(node))
            if best is None or size > best[0]:
                best = (size, where, node)
            stack.extend((f"{where}[]", v) for v in node)
    return (best[1], best[2]) if best else None


def _items_that_fit(items: list[Any], excess: int) -> int:
    """How many leading items to keep so that the list shrinks by at least ``excess`` characters."""
    sizes = [len(dumps(item)) + 1 for item in items]
    removed, keep = 0, len(items)
    while keep > 0 and removed < excess:
        keep -= 1
        removed += sizes[keep]
    return keep


def _cut_strings(value: Any, excess: int) -> int:
    """Shorten the longest strings until ``excess`` characters are gone; how many were cut."""
    refs: list[tuple[int, Any, Any]] = []
    stack = [value]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in items:
            if isinstance(child, str) and len(child) > MIN_STRING_CHARS:
                refs.append((len(child), node, key))
            elif isinstance(child, (dict, list)):
                stack.append(child)
    refs.sort(key=lambda r: r[0], reverse=True)
    cut = 0
    for length, node, key in refs:
        if excess <= 0:
            break
        keep = max(MIN_STRING_CHARS, length - excess - 40)
        marker = f"...[{length - keep:,} chars cut]"
        node[key] = node[key][:keep] + marker
        excess -= length - keep - len(marker)
        cut += 1
    return cut
