"""The bounds every JSON reader holds its input to, checked while the bytes are read.

``BoundedInput`` is the binary stream the Kineto and the Neuron JSON readers read a file
through (``.gz`` or not); past a bound it raises a one-line ``TraceFormatError`` naming the
file, the limit and the variable that lifts it, before the rest is decompressed or decoded:

- **inflation**: a ``.gz`` file decompresses to at most ``MAX_INFLATION`` times its own size,
  and never less than ``INFLATION_FLOOR`` (``NEURON_EXPLORER_MAX_INFLATION``). Measured on
  the 41 distinct real ``.json.gz`` traces of tests/data/ and /work/shared/fixtures/: 6.7x
  (hta/trace_compare_test) to 22.6x (the HTA rank_not_found family), median 12.9x; the
  hand-made fuzz inputs of tests/data/fuzz/kineto/ reach 158x (20,000 nested brackets, 141 KB
  of text), far below the floor. A 4 MB file of whitespace that inflates to 4 GiB stops at
  1 GiB (2 s).
- **one string**: no JSON string is longer than ``MAX_STRING`` bytes
  (``NEURON_EXPLORER_MAX_STRING``); in the same traces no two quotes are more than 5.1 KB
  apart (hta/alexnet_a100). A file holding one 1 GiB string stops after 64 MiB of it.

A UTF-8 byte order mark at the start of the text is dropped (JSON has none; Windows editors
write one). The string check follows the quotes of the text as it goes by (``bytes.count``
and ``find``, C speed); it needs no parse and starts outside a string, as every JSON text does.
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from neuron_explorer import environment
from neuron_explorer.trace.errors import TraceFormatError

try:  # ISA-L's gzip is 2-3x faster than zlib's; fall back to the standard library.
    from isal.igzip import open as _gzip_open
except ImportError:  # pragma: no cover - isal is a declared dependency
    _gzip_open = gzip.open

MAX_INFLATION = 200
INFLATION_FLOOR = 1 << 30
MAX_STRING = 64 << 20
BOM = b"\xef\xbb\xbf"
GZIP_MAGIC = b"\x1f\x8b"
#: Bytes read at a time by ``read()`` without a size (each piece checked before the next).
_PIECE = 16 << 20


class InputLimitError(TraceFormatError):
    """The input passes one of the bounds above: final, no other reader is tried on it."""


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n:,} bytes"


def inflation_limit(compressed_bytes: int) -> int | None:
    """The most bytes a ``.gz`` file of this size may decompress to (None: no limit)."""
    ratio = environment.max_inflation()
    if ratio is None:
        return None
    ratio = MAX_INFLATION if ratio == "unset" else int(ratio)
    return max(INFLATION_FLOOR, ratio * compressed_bytes)


def string_limit() -> int | None:
    """The longest JSON string a reader takes, in bytes (None: no limit)."""
    value = environment.max_string()
    return MAX_STRING if value == "unset" else value  # type: ignore[return-value]


class StringScan:
    """Follows the string state of a JSON text fed piece by piece, and raises (through
    ``too_long``) as soon as one string passes ``limit`` bytes, even before it closes.

    Pieces longer than the limit are fed in parts, so that only a string crossing a part's
    edge can pass the limit: what each part needs is then its number of unescaped quotes and
    the first and last of them, found with ``count``/``find``; a part with a quote after two
    or more backslashes is counted exactly with a regular expression."""

    def __init__(self, limit: int, too_long: Callable[[int], None]) -> None:
        self.limit = limit
        self._too_long = too_long
        self.inside = False
        self.run = 0  # bytes of the open string so far
        self.seen = 0  # bytes fed before the current part
        self._odd = False  # the previous part ended in an odd run of backslashes

    def feed(self, data: bytes) -> None:
        step = max(1, self.limit)
        if len(data) <= step:
            self._part(data)
            return
        view = memoryview(data)
        for at in range(0, len(data), step):
            self._part(bytes(view[at : at + step]))

    def _part(self, part: bytes) -> None:
        n = len(part)
        # An escape that crosses the edge: the part is read after the one backslash that matters.
        text = b"\\" + part if self._odd else part
        shift = len(text) - n
        quotes = _unescaped_quotes(text)
        if quotes is None:
            if self.inside:
                self.run += n
                self._check()
        else:
            first, last, count = quotes
            if self.inside:
                self.run += first - shift
                self._check()
            if count % 2:
                self.inside = not self.inside
            if self.inside:
                self.run = len(text) - last - 1
                self._check()
        self.seen += n
        tail = n - len(part.rstrip(b"\\"))
        self._odd = (tail % 2 == 1) if tail < n else (self._odd != (n % 2 == 1))

    def _check(self) -> None:
        if self.run > self.limit:
            self._too_long(self.seen)


def _unescaped_quotes(text: bytes) -> tuple[int, int, int] | None:
    """(first, last, count) of the quotes of ``text`` that open or close a string (a quote
    after an odd run of backslashes is escaped); None when there are none. C speed: a count
    and a ``find`` (numpy where the text holds backslashes), about one copy of the text's time."""
    count = text.count(b'"')
    if not count:
        return None
    if text.find(b"\\") < 0:  # (memchr: the usual text, without escapes)
        return text.find(b'"'), text.rfind(b'"'), count
    arr = np.frombuffer(text, np.uint8)
    quote, slash = arr == 0x22, arr == 0x5C
    after = np.flatnonzero(quote[1:] & slash[:-1]) + 1  # quotes right after a backslash
    if not len(after):
        return text.find(b'"'), text.rfind(b'"'), count
    longer = after[after >= 2]
    if len(longer) and slash[longer - 2].any():  # runs of two or more: their lengths by a cumsum
        run = np.cumsum(slash, dtype=np.int64)
        run -= np.maximum.accumulate(np.where(slash, 0, run))
        escaped = after[run[after - 1] % 2 == 1]
    else:
        escaped = after
    count -= len(escaped)
    if not count:
        return None
    if len(escaped) <= 64:
        skip = set(escaped.tolist())
        first = text.find(b'"')
        while first in skip:
            first = text.find(b'"', first + 1)
        last = text.rfind(b'"')
        while last in skip:
            last = text.rfind(b'"', 0, last)
        return first, last, count
    real = np.setdiff1d(np.flatnonzero(quote), escaped, assume_unique=True)
    return int(real[0]), int(real[-1]), count


class BoundedInput(io.RawIOBase):
    """A file's JSON text, decompressed when it is a ``.gz``, read within the bounds above.

    ``opener`` opens a gzip stream over the open file (the Kineto reader passes ISA-L's).
    Errors of the file itself (``OSError``, ``EOFError``, ``zlib.error``) pass through for the
    reader to word."""

    def __init__(self, path: str | Path, opener: Callable[..., Any] = gzip.open) -> None:
        super().__init__()
        self.path = Path(path)
        #: The file on disk (its ``tell()``: the progress of a compressed read).
        self.fileobj: Any = open(self.path, "rb")  # noqa: SIM115 (closed by ``close``)
        try:
            self.compressed = self.fileobj.read(2) == GZIP_MAGIC
            self.fileobj.seek(0)
            self.size = os.fstat(self.fileobj.fileno()).st_size
            self._fh: Any = opener(self.fileobj, "rb") if self.compressed else self.fileobj
        except BaseException:
            self.fileobj.close()
            raise
        self.limit = inflation_limit(self.size) if self.compressed else None
        strings = string_limit()
        self._scan = StringScan(strings, self._string_too_long) if strings else None
        self.total = 0
        self._started = False

    def readable(self) -> bool:
        return True

    @property
    def outside_string(self) -> bool:
        """Whether the text read so far ends outside any string (False when not followed)."""
        return self._scan is not None and not self._scan.inside

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(_PIECE), b""))
        return self._read(size)

    def readall_bounded(self) -> bytearray:
        """The rest of the text, in one buffer (no second copy), each piece checked as read."""
        out = bytearray()
        while piece := self._read(_PIECE):
            out += piece
        return out

    def _read(self, size: int) -> bytes:
        data = self._fh.read(size)
        if not self._started and data:
            while len(data) < len(BOM) and BOM.startswith(data):  # (a read shorter than the mark)
                more = self._fh.read(len(BOM) - len(data))
                if not more:
                    break
                data += more
            self._started = True
            if data.startswith(BOM):
                data = data[len(BOM) :]
                self.total += len(BOM)
        self.total += len(data)
        if self.limit is not None and self.total > self.limit:
            ratio = environment.max_inflation()
            ratio = MAX_INFLATION if ratio == "unset" else ratio
            raise InputLimitError(
                f"decompresses to more than {_size(self.limit)} ({ratio}x its {self.size:,} bytes, at least "
                f"{_size(INFLATION_FLOOR)}): not a trace this size; set {environment.MAX_INFLATION} higher "
                "(or off) to read it",
                self.path,
            )
        if self._scan is not None:
            self._scan.feed(data)
        return data

    def _string_too_long(self, at: int) -> None:
        limit = self._scan.limit if self._scan else 0
        raise InputLimitError(
            f"a JSON string longer than {_size(limit)} (near byte {at:,} of the text); "
            f"set {environment.MAX_STRING} higher (or off) to read it",
            self.path,
        )

    def close(self) -> None:
        try:
            fh = getattr(self, "_fh", None)
            if fh is not None and fh is not self.fileobj:
                fh.close()
        finally:
            self.fileobj.close()
            super().close()


def read_text(path: str | Path) -> bytearray:
    """The whole JSON text of a file (decompressed, without a byte order mark), within the bounds."""
    with BoundedInput(path, _gzip_open) as fh:
        return fh.readall_bounded()


def strip_bom(data: bytes) -> bytes:
    return data[len(BOM) :] if data.startswith(BOM) else data
