"""The SQL tool's limits, held from outside: each query runs in a worker process of its own.

A limit DuckDB enforces from inside does not hold for one huge value: ``SELECT
len(range(100000000))`` or ``length(repeat('x', 3000000000))`` build the value in one function
call that neither ``memory_limit`` nor ``connection.interrupt()`` reaches (measured: 32-49 s and
6-7 GB under a 5 s limit and a 4 GB cap). So ``SqlSandbox`` keeps the locked-down engine
(``agents.sql.SqlEngine``) in a child process (``agents.sql_worker``) and watches it:

- **time**: past the limit (plus a grace for the engine's own interrupt to answer first) the
  child is killed and the query answers ``query stopped``; the next query starts a new child;
- **memory**: the child's anonymous resident memory (``RssAnon`` in ``/proc/PID/status``: the
  mapped tables are file pages and do not count) is read every 20 ms; past the cap, killed. The
  engine's own ``memory_limit`` is set below the cap so an ordinary big query fails politely
  first. (Where ``/proc`` is missing, only the time limit holds.)
- **files**: the tables reach the child as Arrow IPC stream files (a stream allows each batch its own dictionary) in a private temporary directory
  (mode 0700, removed at close), which it maps read-only; DuckDB's temp directory is a folder
  inside it and spilling is off, so no query writes a byte anywhere.

The child speaks one JSON line per message over its stdin/stdout (its own pipes, never the MCP
server's stdout); its stderr is the server's.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from neuron_explorer.agents.budget import DEFAULT_MAX_CHARS, check_max_chars
from neuron_explorer.agents.sql import DEFAULT_TIMEOUT_S, MAX_ROWS, SqlError, SqlTimeoutError, timeout_error

#: The memory a query may use (anonymous resident bytes of its worker): docs/agents.md.
DEFAULT_MEMORY_BYTES = 4 << 30
#: The engine's own limit, as a share of the cap: it refuses first, with DuckDB's message.
_ENGINE_SHARE = 0.75
#: How often the worker's memory is read while a query runs.
_POLL_S = 0.02
#: Seconds a worker may take to start and map the tables.
_START_S = 60.0


def _grace(timeout_s: float) -> float:
    """The hard deadline past the limit: the engine's interrupt answers first when it can."""
    return timeout_s * 0.25 + 0.5


class SqlSandbox:
    """Read-only SQL over named Arrow tables, each query in a watched worker process."""

    def __init__(
        self,
        tables: Mapping[str, pa.Table],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_rows: int = MAX_ROWS,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        threads: int | None = None,
    ) -> None:
        self.timeout_s = float(timeout_s)
        self.max_rows = int(max_rows)
        self.memory_bytes = int(memory_bytes)
        self.table_names = list(tables)
        self._threads = threads
        self._dir = tempfile.TemporaryDirectory(prefix="neuron-explorer-sql-")
        os.chmod(self._dir.name, 0o700)
        self._files: dict[str, str] = {}
        for i, (name, table) in enumerate(tables.items()):
            path = Path(self._dir.name) / f"table{i}.arrow"
            with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            self._files[name] = str(path)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._closed = False
        atexit.register(self.close)
        with self._lock:
            self._start()  # a setup that cannot work fails here, not on the first query

    # ------------------------------------------------------------------------ the worker
    def _start(self) -> None:
        config = {
            "tables": self._files,
            "timeout_s": self.timeout_s,
            "max_rows": self.max_rows,
            "memory_limit": f"{int(self.memory_bytes * _ENGINE_SHARE) >> 20}MB",
            "threads": self._threads,
            "temp_directory": str(Path(self._dir.name) / "duckdb_temp"),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "neuron_explorer.agents.sql_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
            cwd=self._dir.name,
            close_fds=True,
        )
        self._proc = proc
        try:
            reply = self._exchange(config, time.monotonic() + _START_S, watch_memory=False)
        except SqlError as exc:
            self._kill()
            raise SqlError(f"the SQL worker did not start: {exc}") from None
        if not reply.get("ready"):
            self._kill()
            raise SqlError(f"the SQL worker did not start: {reply.get('error', 'no answer')}")

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            proc.wait(5)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()

    def _exchange(self, message: dict[str, Any], deadline: float, watch_memory: bool = True) -> dict[str, Any]:
        """Send one message, read one reply line by ``deadline``; the worker's memory watched."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            raise SqlError("the SQL worker ended") from None
        fd = proc.stdout.fileno()
        chunks: list[bytes] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], min(_POLL_S, left))
            if ready:
                data = os.read(fd, 1 << 20)
                if not data:
                    raise SqlError("the SQL worker ended")
                chunks.append(data)
                if data.endswith(b"\n"):
                    return json.loads(b"".join(chunks))
            elif watch_memory and _anon_rss(proc.pid) > self.memory_bytes:
                raise MemoryError

    # ------------------------------------------------------------------------ the queries
    def query(self, sql: str, max_rows: int | None = None, max_chars: int | None = None) -> dict[str, Any]:
        """Run one read-only statement; the rows (as lists), their columns and DuckDB types, in budget."""
        try:
            chars = check_max_chars(max_chars if max_chars is not None else DEFAULT_MAX_CHARS)
        except ValueError as exc:
            raise SqlError(str(exc)) from None
        with self._lock:  # one query at a time, as one DuckDB connection serves
            if self._closed:
                raise SqlError("the SQL sandbox is closed")
            if self._proc is None or self._proc.poll() is not None:
                self._kill()
                self._start()
            request = {"sql": sql, "max_rows": max_rows, "max_chars": chars}
            try:
                reply = self._exchange(request, time.monotonic() + self.timeout_s + _grace(self.timeout_s))
            except TimeoutError:
                self._kill()
                raise timeout_error(self.timeout_s) from None
            except MemoryError:
                self._kill()
                raise SqlError(
                    f"query stopped: it used more than the {self.memory_bytes / (1 << 30):g} GiB memory limit. "
                    "Aggregate earlier, select fewer or shorter values, or avoid building huge lists and strings."
                ) from None
            except SqlError:
                self._kill()  # (ended: by the system's OOM killer, a signal, a crash)
                raise SqlError(
                    "query stopped: the SQL worker ended while running it (out of memory?); the next query "
                    "starts a new one"
                ) from None
        if "error" in reply:
            raise (SqlTimeoutError if reply.get("timeout") else SqlError)(str(reply["error"]))
        return reply["result"]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._kill()
        with contextlib.suppress(OSError):
            self._dir.cleanup()


def _anon_rss(pid: int) -> int:
    """Anonymous resident bytes of ``pid`` (0 where /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0
