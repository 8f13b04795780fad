"""A decode worker (see ``parallel_decode``): reads length-prefixed chunks of JSON events on
stdin, writes each chunk's columns back pickled on stdout, until stdin closes.

The framing (``send``, ``receive``) lives here, with the worker that speaks it; the main
process's side (``parallel_decode``) imports it from here and starts this module by name, so
this module imports nothing of that side. Everything else is imported in ``main``: importing
the framing costs the main process nothing."""

from __future__ import annotations

import pickle
import sys
from typing import IO

_HEADER = 8  # bytes of a message's length prefix (little-endian)


def send(stream: IO[bytes], payload: bytes) -> None:
    stream.write(len(payload).to_bytes(_HEADER, "little"))
    stream.write(payload)
    stream.flush()


def receive(stream: IO[bytes]) -> bytes | None:
    """One length-prefixed message, or None at end of stream."""
    header = stream.read(_HEADER)
    if len(header) < _HEADER:
        return None
    size = int.from_bytes(header, "little")
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return payload


def main() -> int:
    from neuron_explorer.collectors.build._conversion import conversion_settings
    from neuron_explorer.collectors.kineto.chunk_decode import _decode_chunk

    inp, out = sys.stdin.buffer, sys.stdout.buffer
    with conversion_settings():
        while (blob := receive(inp)) is not None:
            try:
                reply = pickle.dumps((True, _decode_chunk(blob)), protocol=5)
            except Exception as exc:  # the chunk's own error, re-raised by the main process
                try:
                    reply = pickle.dumps((False, exc), protocol=5)
                except Exception:
                    reply = pickle.dumps((False, ValueError(str(exc))), protocol=5)
            send(out, reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
