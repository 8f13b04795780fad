"""The SQL worker process: the locked-down engine over the tables its parent mapped for it.

Started by ``agents.sql_process.SqlSandbox`` as ``python -m neuron_explorer.agents.sql_worker``,
in the sandbox's private directory. The first line on stdin is the setup (the tables' Arrow
IPC files, the engine's settings); then each line is one query, and each reply one JSON line
on the original stdout. Whatever a library prints goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pyarrow as pa

from neuron_explorer.agents.sql import SqlEngine, SqlError, SqlTimeoutError


def serve() -> None:
    """Set up the engine from the first line, then answer one line per query until stdin ends."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed by a library goes to stderr, never into the replies
    requests = sys.stdin.buffer

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        out.flush()

    config = json.loads(requests.readline() or b"{}")
    try:
        tables = {
            name: pa.ipc.open_stream(pa.memory_map(path, "r")).read_all() for name, path in config["tables"].items()
        }
        engine = SqlEngine(
            tables,
            timeout_s=config["timeout_s"],
            max_rows=config["max_rows"],
            memory_limit=config["memory_limit"],
            threads=config["threads"],
            temp_directory=config["temp_directory"],
        )
    except Exception as exc:
        send({"error": f"{type(exc).__name__}: {exc}"})
        return
    send({"ready": True})
    for line in requests:
        request = json.loads(line)
        try:
            send({"result": engine.query(request["sql"], request["max_rows"], request["max_chars"])})
        except SqlTimeoutError as exc:
            send({"error": str(exc), "timeout": True})
        except SqlError as exc:
            send({"error": str(exc)})
        except Exception as exc:
            text = " ".join(str(exc).split())[:500]
            send({"error": f"query failed ({type(exc).__name__}: {text})"})


if __name__ == "__main__":
    serve()
