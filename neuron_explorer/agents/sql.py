"""Read-only SQL over the served traces: an in-memory DuckDB that can see nothing else.

The sandbox registers Arrow tables (the events and the metrics tables) as views of an
in-memory DuckDB connection and then locks it down, in depth:

1. DuckDB itself: ``enable_external_access=false`` (no file, glob, ATTACH, COPY, EXPORT,
   INSTALL, network), no extension auto-install or auto-load, no community extensions, and
   ``lock_configuration=true`` so no statement can turn any of that back on.
2. The statement: exactly one statement, and it must be a SELECT (or EXPLAIN of one); DDL,
   DML, SET, PRAGMA, CALL, ATTACH, COPY, ... are refused before DuckDB runs them.
3. The tables are views over Arrow data, which no INSERT or UPDATE can change anyway.

Each query runs under a wall-clock limit (a timer thread calls ``connection.interrupt()``) and
returns at most ``max_rows`` rows, with a message asking for an aggregate when it had more.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import threading
import uuid
from collections.abc import Mapping
from typing import Any

import duckdb
import pyarrow as pa

from neuron_explorer.trace.errors import NeuronExplorerError

MAX_ROWS = 5000
DEFAULT_TIMEOUT_S = 30.0

_ALLOWED = {duckdb.StatementType.SELECT: "SELECT", duckdb.StatementType.EXPLAIN: "EXPLAIN"}


class SqlError(NeuronExplorerError):
    """A query was refused, failed, or ran past the time limit."""


class SqlTimeoutError(SqlError):
    """A query ran past the time limit and was interrupted."""


class SqlSandbox:
    """One locked-down in-memory DuckDB connection over named Arrow tables; queries run one at a time."""

    def __init__(
        self,
        tables: Mapping[str, pa.Table],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_rows: int = MAX_ROWS,
        memory_limit: str = "4GB",
    ) -> None:
        self.timeout_s = float(timeout_s)
        self.max_rows = int(max_rows)
        self.table_names = list(tables)
        self._con = duckdb.connect(
            ":memory:",
            config={
                "enable_external_access": False,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "allow_community_extensions": False,
                "memory_limit": memory_limit,
            },
        )
        for name, table in tables.items():
            self._con.register(name, table)
        # Last: from here on no SET can change any option, including the ones above.
        self._con.execute("SET lock_configuration = true")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._con.close()

    def query(self, sql: str, max_rows: int | None = None) -> dict[str, Any]:
        """Run one read-only statement; the rows (as lists), their columns and DuckDB types."""
        limit = self.max_rows if max_rows is None else max(1, min(int(max_rows), self.max_rows))
        with self._lock:  # a DuckDB connection serves one thread at a time, parsing included
            return self._run(self._check(sql), limit)

    def _check(self, sql: str) -> Any:
        text = (sql or "").strip()
        if not text:
            raise SqlError("give a SQL query, e.g. SELECT kind, count(*) FROM events GROUP BY kind")
        try:
            statements = self._con.extract_statements(text)
        except duckdb.Error as exc:
            raise SqlError(f"SQL does not parse: {_first_line(exc)}") from None
        if len(statements) != 1:
            raise SqlError(f"send exactly one statement per call ({len(statements)} were given)")
        statement = statements[0]
        if statement.type not in _ALLOWED:
            kind = getattr(statement.type, "name", str(statement.type))
            raise SqlError(
                f"refused: only read-only SELECT (or EXPLAIN) queries are allowed, not {kind} statements. "
                "The tables are read-only views; nothing can be written, attached, installed or loaded."
            )
        return statement

    def _run(self, statement: Any, limit: int) -> dict[str, Any]:
        state = {"running": True, "timed_out": False}
        guard = threading.Lock()

        def interrupt() -> None:
            # Only interrupt the query this timer belongs to, never a later one.
            with guard:
                if state["running"]:
                    state["timed_out"] = True
                    self._con.interrupt()

        timer = threading.Timer(self.timeout_s, interrupt)
        timer.daemon = True
        timer.start()
        try:
            if statement.type == duckdb.StatementType.SELECT:
                # A relation is lazy: the LIMIT on top stops DuckDB after limit + 1 rows,
                # so `SELECT * FROM events` does not materialize millions of rows.
                relation = self._con.sql(statement.query)
                columns = list(relation.columns)
                types = [str(t) for t in relation.types]
                rows = relation.limit(limit + 1).fetchall()
            else:
                cursor = self._con.execute(statement.query)
                columns = [d[0] for d in cursor.description or []]
                types = [str(d[1]) for d in cursor.description or []]
                rows = cursor.fetchmany(limit + 1)
        except duckdb.Error as exc:
            with guard:
                timed_out = state["timed_out"]
            if timed_out or isinstance(exc, duckdb.InterruptException):
                raise SqlTimeoutError(
                    f"query stopped: it ran past the {self.timeout_s:g} s time limit. Aggregate earlier, filter "
                    "with WHERE (kind, step, rank, start_ns), or avoid cross joins of the events table."
                ) from None
            raise SqlError(_first_line(exc)) from None
        finally:
            with guard:
                state["running"] = False
            timer.cancel()
        truncated = len(rows) > limit
        rows = rows[:limit]
        result: dict[str, Any] = {
            "columns": columns,
            "types": types,
            "rows": [[_json_value(v) for v in row] for row in rows],
            "row_count": len(rows),
            "truncated": truncated,
        }
        if truncated:
            result["message"] = (
                f"more than {limit} rows: only the first {limit} are shown. Ask for an aggregate instead "
                "(GROUP BY with SUM/COUNT/AVG, ORDER BY ... LIMIT n) rather than raw events."
            )
        return result


def _json_value(value: Any) -> Any:
    """A DuckDB result value as something JSON can carry without loss of meaning."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return str(value)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    # DuckDB puts the useful part first and a caret diagram after; keep the message and the LINE hint.
    return " ".join(lines[:3])[:600] if lines else type(exc).__name__
