"""Read-only SQL over the served traces: an in-memory DuckDB that can see nothing else.

The sandbox registers Arrow tables (the events and the metrics tables) as views of an
in-memory DuckDB connection and then locks it down, in depth:

1. DuckDB itself: ``enable_external_access=false`` (no file, glob, ATTACH, COPY, EXPORT,
   INSTALL, network), no extension auto-install or auto-load, no community extensions, a
   memory limit and a thread count, and ``lock_configuration=true`` so no statement can turn
   any of that back on.
2. The statement, as DuckDB's own parser reads it (``extract_statements`` for the count and
   the type, ``json_serialize_sql`` for the parse tree): exactly one statement, a SELECT (or
   WITH, VALUES, DESCRIBE/SUMMARIZE of one), never EXPLAIN (``EXPLAIN ANALYZE`` runs what it
   wraps) nor DDL, DML, SET, PRAGMA, CALL, ATTACH, COPY. Every table it names is a served
   table or one of its own CTEs (so ``FROM '/etc/passwd'`` is refused), every table function
   is on ``TABLE_FUNCTIONS`` (``range``, ``unnest``, ...: no ``read_csv``, ``glob``,
   ``query``, ``duckdb_settings``), and every function is one DuckDB lists minus those that
   disclose the server (``current_setting``, ``duckdb_*``, ``getenv``, ...): an allow-list,
   so a function added by a new DuckDB or an extension is refused until reviewed.
3. The tables are views over Arrow data, which no INSERT or UPDATE can change anyway.

The answer has a budget in rows (``max_rows``) and in characters (``max_chars``), checked
while the result streams from DuckDB in Arrow batches: long values are cut in Arrow before
Python sees them, and fetching stops at the budget, so a 100 MB value or 5,000 rows of
100 KB come back cut in about a second, saying so and how to page (LIMIT/OFFSET). One
wall-clock limit covers execution, fetching and conversion: a timer interrupts DuckDB
(``connection.interrupt()``), and the conversion checks the same deadline.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.agents.budget import DEFAULT_MAX_CHARS, MAX_MAX_CHARS, check_max_chars, dumps, round_float
from neuron_explorer.trace.errors import NeuronExplorerError

MAX_ROWS = 5000
DEFAULT_TIMEOUT_S = 30.0
#: Rows per Arrow batch fetched from DuckDB: the budget is checked between batches.
BATCH_ROWS = 256
#: What ends a value cut to fit the budget.
CUT_MARK = "...[cut]"

#: Table functions a query may call: generators over its own arguments, none reads anything.
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "json_each", "json_tree", "repeat", "repeat_row"})
#: Functions DuckDB has that tell a query about the server rather than the traces.
_DISCLOSING = frozenset(
    {
        "getenv", "current_setting", "current_schema", "current_schemas", "current_database", "current_catalog",
        "current_user", "current_role", "session_user", "user", "current_connection_id", "current_transaction_id",
        "current_query_id", "txid_current", "in_search_path", "version", "write_log", "parse_duckdb_log_message",
        "which_secret", "json_execute_serialized_sql", "has_database_privilege", "has_schema_privilege",
        "getvariable", "current_query", "get_block_size", "col_description", "obj_description",
        "shobj_description", "format_pg_type", "format_type", "map_to_pg_oid", "map_type_id_to_pg_oid",
    }
)  # fmt: skip
#: (``current_*``, ``has_*_privilege`` and ``inet_*`` describe the session, the catalog or the network)
_DISCLOSING_PREFIXES = ("duckdb_", "pragma_", "pg_", "current_", "has_", "inet_")
#: Table references a parse tree may hold besides named tables and table functions.
_SHOW_TYPES = {"DESCRIBE", "SUMMARY"}


class SqlError(NeuronExplorerError):
    """A query was refused, failed, or ran past the time limit."""


class SqlTimeoutError(SqlError):
    """A query ran past the time limit and was interrupted."""


class SqlEngine:
    """One locked-down in-memory DuckDB connection over named Arrow tables; queries run one at a time.

    The server runs it in a worker process of its own (``agents.sql_process.SqlSandbox``), which
    holds the time and memory limits from outside: this class checks, runs and converts.
    """

    def __init__(
        self,
        tables: Mapping[str, pa.Table],
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_rows: int = MAX_ROWS,
        memory_limit: str = "4GB",
        threads: int | None = None,
        temp_directory: str | None = None,
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
                "threads": threads or max(1, min(4, os.cpu_count() or 1)),
                # Never spill: a read-only tool writes no file (DuckDB's default is `.tmp` in
                # the cwd, up to 90% of the free disk). A query past memory_limit fails instead.
                "max_temp_directory_size": "0B",
                **({"temp_directory": temp_directory} if temp_directory else {}),
            },
        )
        for name, table in tables.items():
            self._con.register(name, table)
        self._tables = {name.lower() for name in tables}
        self._functions = {
            name.lower()
            for (name,) in self._con.execute(
                "SELECT DISTINCT function_name FROM duckdb_functions() "
                "WHERE function_type IN ('scalar', 'aggregate', 'macro', 'window')"
            ).fetchall()
            if name.lower() not in _DISCLOSING and not name.lower().startswith(_DISCLOSING_PREFIXES)
        } | {"unnest"}  # a table function DuckDB also accepts in the SELECT list
        self._con.execute("SET enable_progress_bar = false")  # (DuckDB draws one on stderr for long queries)
        # Last: from here on no SET can change any option, including the ones above.
        self._con.execute("SET lock_configuration = true")
        self._lock = threading.Lock()

    def close(self) -> None:
        self._con.close()

    def query(self, sql: str, max_rows: int | None = None, max_chars: int | None = None) -> dict[str, Any]:
        """Run one read-only statement; the rows (as lists), their columns and DuckDB types, in budget."""
        limit = self.max_rows if max_rows is None else max(1, min(int(max_rows), self.max_rows))
        try:
            chars = check_max_chars(max_chars if max_chars is not None else DEFAULT_MAX_CHARS)
        except ValueError as exc:
            raise SqlError(str(exc)) from None
        with self._lock:  # a DuckDB connection serves one thread at a time, parsing included
            return self._run(self._check(sql), limit, chars)

    # ---------------------------------------------------------------------------- the check
    def _check(self, sql: str) -> str:
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
        if statement.type != duckdb.StatementType.SELECT:
            kind = getattr(statement.type, "name", str(statement.type))
            raise SqlError(
                f"refused: only read-only SELECT queries (WITH, VALUES, DESCRIBE, SUMMARIZE) are allowed, not {kind} "
                "statements. The tables are read-only views; nothing can be written, attached, installed or loaded."
            )
        try:
            (serialized,) = self._con.execute("SELECT json_serialize_sql(?::VARCHAR)", [statement.query]).fetchall()[0]
            tree = json.loads(serialized)
        except RecursionError:  # a parse tree deeper than Python's JSON reader goes: refuse, unchecked
            raise SqlError(
                "refused: the query nests too deeply to be checked; flatten it (fewer nested calls)"
            ) from None
        except (duckdb.Error, ValueError, TypeError) as exc:
            raise SqlError(f"refused: the query could not be checked ({_first_line(exc)})") from None
        if tree.get("error") or len(tree.get("statements") or []) != 1:
            raise SqlError(f"refused: the query could not be checked ({tree.get('error_message', 'not one SELECT')})")
        ctes = {name.lower() for name in _cte_names(tree)}
        allowed: set[int] = set()  # the call node of each allowed table function
        for node in _nodes(tree):
            self._check_node(node, ctes, allowed)
        return statement.query

    def _check_node(self, node: dict[str, Any], ctes: set[str], allowed: set[int]) -> None:
        kind = node.get("type")
        if kind == "BASE_TABLE":
            name = str(node.get("table_name", ""))
            where = (str(node.get("catalog_name") or "").lower(), str(node.get("schema_name") or "").lower())
            if (
                where[0] not in ("", "memory")
                or where[1] not in ("", "main")
                or (name.lower() not in self._tables and not (where == ("", "") and name.lower() in ctes))
            ):
                shown = ".".join(p for p in (*where, name) if p)
                raise SqlError(
                    f"refused: {shown!r} is not a served table; query only: {', '.join(self.table_names)} "
                    "(the schema tool lists their columns)"
                )
        elif kind == "TABLE_FUNCTION":
            function = node.get("function") or {}
            name = str(function.get("function_name", "")).lower()
            if name not in TABLE_FUNCTIONS:
                raise SqlError(
                    f"refused: table function {name}() is not allowed (it could read files or the server's "
                    f"settings); allowed: {', '.join(sorted(TABLE_FUNCTIONS))}"
                )
            allowed.add(id(function))  # (its call node is not a scalar function to look up)
        elif kind == "SHOW_REF" and node.get("show_type") not in _SHOW_TYPES:
            raise SqlError("refused: SHOW lists the server's catalog; the schema tool lists the served tables")
        if node.get("class") == "COLUMN_REF":
            # `SELECT current_user` is a column reference DuckDB answers as the function
            names = node.get("column_names") or []
            word = str(names[0]).lower() if len(names) == 1 else ""
            if word in _DISCLOSING or word.startswith(_DISCLOSING_PREFIXES):
                raise SqlError(
                    f"refused: {word} tells about the server rather than the traces (a column of that name: "
                    f"qualify it with its table, e.g. t.{word})"
                )
        if node.get("class") == "FUNCTION" and not node.get("is_operator") and id(node) not in allowed:
            name = str(node.get("function_name", "")).lower()
            if name not in self._functions or str(node.get("catalog") or "") not in ("", "system"):
                raise SqlError(
                    f"refused: function {name}() is not allowed here (it is unknown, or tells about the server "
                    "rather than the traces)"
                )

    # ---------------------------------------------------------------------------- the run
    def _run(self, query: str, limit: int, max_chars: int) -> dict[str, Any]:
        state = {"running": True, "timed_out": False}
        guard = threading.Lock()
        deadline = time.monotonic() + self.timeout_s

        def interrupt() -> None:
            # Only interrupt the query this timer belongs to, never a later one.
            with guard:
                if state["running"]:
                    state["timed_out"] = True
                    self._con.interrupt()

        timer = threading.Timer(self.timeout_s, interrupt)
        timer.daemon = True
        timer.start()
        reader: pa.RecordBatchReader | None = None
        try:
            # A relation is lazy: the LIMIT on top stops DuckDB after limit + 1 rows, and the
            # reader streams them in batches, so nothing beyond the budget is ever converted.
            relation = self._con.sql(query)
            columns = list(relation.columns)
            types = [str(t) for t in relation.types]
            reader = relation.limit(limit + 1).to_arrow_reader(BATCH_ROWS)
            header = len(dumps({"columns": columns, "types": types})) + 400
            rows, cut = _collect(reader, limit, max(200, max_chars - header), deadline)
        except duckdb.Error as exc:
            with guard:
                timed_out = state["timed_out"]
            if timed_out or isinstance(exc, duckdb.InterruptException):
                raise self._timeout() from None
            raise SqlError(_first_line(exc)) from None
        except TimeoutError:
            raise self._timeout() from None
        finally:
            with guard:
                state["running"] = False
            timer.cancel()
            if reader is not None:
                reader.close()
        result: dict[str, Any] = {
            "columns": columns,
            "types": types,
            "rows": rows,
            "row_count": len(rows),
            "truncated": cut is not None,
        }
        if cut == "rows":
            result["message"] = (
                f"more than {limit} rows: only the first {limit} are shown. Ask for an aggregate instead "
                "(GROUP BY with SUM/COUNT/AVG, ORDER BY ... LIMIT n) rather than raw events, or page with "
                f"LIMIT {limit} OFFSET {limit}."
            )
        elif cut is not None:
            result["message"] = (
                f"the answer is cut at max_chars={max_chars:,} characters after {len(rows)} row(s)"
                + (f" (long values cut, marked '{CUT_MARK}')" if cut == "values" else "")
                + f". Page with LIMIT {max(1, len(rows))} OFFSET {len(rows)}, select fewer columns, substr() long "
                f"values, aggregate, or raise max_chars (up to {MAX_MAX_CHARS:,})."
            )
        return result

    def _timeout(self) -> SqlTimeoutError:
        return timeout_error(self.timeout_s)


def timeout_error(timeout_s: float) -> SqlTimeoutError:
    """What a query past its time limit answers (the engine's interrupt or the worker's kill)."""
    return SqlTimeoutError(
        f"query stopped: it ran past the {timeout_s:g} s time limit. Aggregate earlier, filter "
        "with WHERE (kind, step, rank, start_ns), or avoid cross joins of the events table."
    )


def _nodes(tree: Any) -> Iterator[dict[str, Any]]:
    """Every object of a ``json_serialize_sql`` parse tree, depth first, without recursion."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _cte_names(tree: Any) -> list[str]:
    """The names the query's own WITH clauses define (anywhere in it)."""
    names = []
    for node in _nodes(tree):
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            names += [str(entry.get("key", "")) for entry in cte_map.get("map") or [] if isinstance(entry, dict)]
    return names


def _collect(
    reader: pa.RecordBatchReader, limit: int, budget: int, deadline: float
) -> tuple[list[list[Any]], str | None]:
    """Rows from ``reader`` while they fit ``limit`` rows and ``budget`` characters of JSON.

    Returns the rows and why they stopped early: None (all came), "rows", "chars" (the next
    row did not fit) or "values" (the first row alone did not fit and its long values were cut).
    """
    rows: list[list[Any]] = []
    used = 2  # the brackets of the rows list
    for batch in _batches(reader, deadline):
        # Cut long text and bytes in Arrow first: a 100 MB value never becomes a Python string.
        batch = _cap_values(batch, budget - used + 1)
        for row in zip(*(_python_values(column) for column in batch.columns)):
            if time.monotonic() > deadline:
                raise TimeoutError
            if len(rows) == limit:
                return rows, "rows"
            values = [_json_value(v) for v in row]
            size = len(dumps(values)) + 1
            if used + size > budget:
                if rows:
                    return rows, "chars"
                rows.append(_cut_row(values, budget - used))
                return rows, "values"
            rows.append(values)
            used += size
    return rows, None


def _batches(reader: pa.RecordBatchReader, deadline: float) -> Iterator[pa.RecordBatch]:
    while True:
        if time.monotonic() > deadline:
            raise TimeoutError
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return


def _cap_values(batch: pa.RecordBatch, chars: int) -> pa.RecordBatch:
    """``batch`` with every string longer than ``chars`` cut to ``chars`` + 1 (still over: it is
    marked later), and every list or map to ``chars // 2`` + 1 items, at any depth (a list of
    10^8 numbers or of huge strings never becomes Python objects either)."""
    chars = max(1, chars)
    return pa.RecordBatch.from_arrays([_cap(c, chars) for c in batch.columns], names=batch.schema.names)


def _cap(column: pa.Array, chars: int) -> pa.Array:
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return pc.utf8_slice_codeunits(column, 0, chars + 1)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return pc.binary_slice(column, 0, chars // 2 + 1)  # hex doubles the length
    if pa.types.is_map(kind):
        pairs = pa.StructArray.from_arrays([column.keys, column.items], names=["key", "value"])
        column = pa.ListArray.from_arrays(column.offsets, pairs, mask=column.is_null())
        kind = column.type
    if pa.types.is_fixed_size_list(kind) or pa.types.is_large_list(kind):
        column = column.cast(pa.list_(kind.value_type))
        kind = column.type
    if pa.types.is_list(kind):
        cut = pc.list_slice(column, 0, chars // 2 + 1)
        if not isinstance(cut, pa.ListArray):  # (a chunked result from a compute kernel)
            cut = pa.concat_arrays(cut.chunks) if isinstance(cut, pa.ChunkedArray) else cut
        offsets = pc.subtract(cut.offsets, cut.offsets[0])
        values = cut.values.slice(cut.offsets[0].as_py(), cut.offsets[-1].as_py() - cut.offsets[0].as_py())
        return pa.ListArray.from_arrays(offsets, _cap(values, chars), mask=cut.is_null())
    if pa.types.is_struct(kind):
        fields = [_cap(column.field(i), chars) for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(fields, names=[f.name for f in kind], mask=column.is_null())
    if pa.types.is_dictionary(kind):
        return _cap(column.cast(kind.value_type), chars)
    return column


def _python_values(column: pa.Array) -> list[Any]:
    """``column`` as Python values; one Python cannot hold (an infinite DATE, a year past 9999)
    as DuckDB's text for it."""
    try:
        return column.to_pylist()
    except (OverflowError, ValueError, pa.ArrowException):
        pass
    if pa.types.is_temporal(column.type):  # DuckDB's infinite dates and times are the int extremes
        raw = (
            column.cast(pa.int64()).to_pylist() if column.type.bit_width == 64 else column.cast(pa.int32()).to_pylist()
        )
        top = (1 << (column.type.bit_width - 1)) - 1
        words = {top: "infinity", -top: "-infinity", -top - 1: "-infinity"}
        out = []
        for value, scalar in zip(raw, column):  # (per value: only on a column Python cannot hold)
            try:
                out.append(None if value is None else words.get(value) or scalar.as_py())
            except (OverflowError, ValueError):
                out.append(str(scalar))
        return out
    try:
        return column.cast(pa.string()).to_pylist()
    except pa.ArrowException:
        return [None if v is None else str(v) for v in column]


def _cut_row(values: list[Any], budget: int) -> list[Any]:
    """One row too long for ``budget``: its long values (their JSON text, for nested ones) cut
    to share the budget, each marked ``...[cut]``."""
    share = max(20, budget // max(1, len(values)) - 40)
    while True:
        out = []
        for value in values:
            text = value if isinstance(value, str) else dumps(value)
            if isinstance(value, (str, dict, list)) and len(text) > share:
                out.append(text[:share] + CUT_MARK)
            else:
                out.append(value)
        if len(dumps(out)) <= budget or share <= 20:
            return out
        share //= 2  # escapes (quotes in nested JSON) made it longer than counted


def _json_value(value: Any) -> Any:
    """A DuckDB result value as something JSON can carry without loss of meaning."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return round_float(value)
    if isinstance(value, decimal.Decimal):
        # sum() of BIGINT is a HUGEINT, which Arrow carries as a whole decimal: keep it exact.
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        return round_float(float(value))
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
