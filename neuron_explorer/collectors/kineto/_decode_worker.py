"""A decode worker (see ``parallel_decode``): reads length-prefixed chunks of JSON events on
stdin, writes each chunk's columns back pickled on stdout, until stdin closes."""

from __future__ import annotations

import pickle
import sys


def main() -> int:
    from neuron_explorer.collectors.build._conversion import conversion_settings
    from neuron_explorer.collectors.kineto.kineto_json import _decode_chunk
    from neuron_explorer.collectors.kineto.parallel_decode import receive, send

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
