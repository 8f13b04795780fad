"""Text from outside made safe for a one-line message on a terminal.

``printable`` is the one place a file name (or any text that came from outside: a message
holding one) is made safe for a one-line message on a terminal: a newline in a name must not
split the line, and an escape sequence must not reach the terminal raw. It imports nothing of
the package, so the errors (``trace.errors``) and everything above them can use it.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: Characters that move the cursor, change the text direction or separate lines without being
#: C0/C1 controls (bidirectional overrides and isolates, line and paragraph separators).
_INVISIBLE = frozenset("\u2028\u2029\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\ufeff")


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if 0xDC80 <= code <= 0xDCFF:  # a byte of a file name that is not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def printable(text: object) -> str:
    """``text`` with every control character (C0, DEL, C1), lone surrogate and invisible
    direction or line-separator character written as an escape (``\\n``, ``\\x1b``,
    ``\\u202e``); other text, backslashes included, is unchanged, so applying it twice is the
    same as once."""
    s = str(text)
    if s.isprintable() and not any(ch in _INVISIBLE for ch in s):
        return s
    return "".join(
        _escape(ch) if (not ch.isprintable() and ch != " ") or ch in _INVISIBLE or 0xD800 <= ord(ch) <= 0xDFFF else ch
        for ch in s
    )
