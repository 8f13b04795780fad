"""The agents' SQL sandbox: read-only SELECTs over the served tables, and nothing else."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from neuron_explorer.agents.sql import CUT_MARK, SqlEngine, SqlError, SqlTimeoutError, _collect


@pytest.fixture
def sandbox() -> SqlEngine:
    events = pa.table(
        {
            "event_id": pa.array(range(6000), pa.int64()),
            "kind": pa.array(["kernel", "cpu_op"] * 3000).dictionary_encode(),
            "dur_ns": pa.array([10, 20] * 3000, pa.int64()),
        }
    )
    box = SqlEngine({"events": events, "ops": pa.table({"name": ["aten::mm"], "device_ns": [5]})}, timeout_s=1.0)
    yield box
    box.close()


def test_a_select_returns_columns_types_and_rows(sandbox: SqlEngine) -> None:
    result = sandbox.query(
        "SELECT kind, count(*) AS n, sum(dur_ns) AS total_ns FROM events GROUP BY kind ORDER BY kind"
    )

    assert result["columns"] == ["kind", "n", "total_ns"]
    assert result["types"][1] == "BIGINT"
    assert result["rows"] == [["cpu_op", 3000, 60000], ["kernel", 3000, 30000]]
    assert result["truncated"] is False


def test_more_than_5000_rows_are_cut_with_a_message_asking_for_an_aggregate(sandbox: SqlEngine) -> None:
    result = sandbox.query("SELECT * FROM events", max_chars=1_000_000)

    assert result["row_count"] == 5000 and len(result["rows"]) == 5000
    assert result["truncated"] is True
    assert "aggregate" in result["message"]


def test_a_smaller_max_rows_is_honoured_but_never_above_the_cap(sandbox: SqlEngine) -> None:
    assert sandbox.query("SELECT * FROM events", max_rows=3)["row_count"] == 3
    assert sandbox.query("SELECT * FROM events", max_rows=10**9, max_chars=1_000_000)["row_count"] == 5000


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM read_parquet('/etc/*.parquet')",
        "SELECT * FROM glob('/etc/*')",
    ],
)
def test_reading_any_file_is_refused(sandbox: SqlEngine, query: str) -> None:
    with pytest.raises(SqlError) as err:
        sandbox.query(query)
    assert "root:" not in str(err.value)  # no byte of the file leaks into the message


@pytest.mark.parametrize(
    "query",
    [
        "COPY events TO '{tmp}/out.csv'",
        "COPY (SELECT 1) TO '{tmp}/out.parquet' (FORMAT parquet)",
        "EXPORT DATABASE '{tmp}/export'",
        "ATTACH '{tmp}/other.duckdb' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "CREATE TABLE stolen AS SELECT * FROM events",
        "INSERT INTO events VALUES (1, 'kernel', 1)",
        "UPDATE events SET dur_ns = 0",
        "DELETE FROM events",
        "DROP VIEW events",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "PRAGMA enable_profiling",
        "CALL pragma_version()",
        "SELECT 1; DROP VIEW events",
    ],
)
def test_writes_attach_install_load_and_settings_are_refused(sandbox: SqlEngine, tmp_path: Path, query: str) -> None:
    with pytest.raises(SqlError):
        sandbox.query(query.format(tmp=tmp_path))

    assert list(tmp_path.iterdir()) == []  # nothing was written
    assert sandbox.query("SELECT count(*) FROM events")["rows"] == [[6000]]  # and nothing changed


def test_the_connection_itself_is_locked_even_behind_the_checks(sandbox: SqlEngine) -> None:
    # Below the statement checks, DuckDB's own lock holds: no SET reaches the options.
    con = sandbox._con
    settings = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
            "'lock_configuration', 'autoload_known_extensions', 'autoinstall_known_extensions')"
        ).fetchall()
    )
    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoload_known_extensions": "false",
        "autoinstall_known_extensions": "false",
    }
    with pytest.raises(duckdb.Error, match="locked"):
        con.execute("SET enable_external_access = true")
    with pytest.raises(duckdb.Error):
        con.execute("SELECT * FROM read_text('/etc/passwd')").fetchall()


@pytest.mark.parametrize(
    "query",
    [
        "EXPLAIN SELECT 1",
        "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
        "EXPLAIN ANALYZE DROP VIEW events",
        "EXPLAIN ANALYZE INSERT INTO events VALUES (1, 'kernel', 1)",
        "SELECT 1 /* looks like one statement */; DROP VIEW events",
        "SELECT 1 -- a comment\n; DROP VIEW events",
        "PIVOT events ON kind USING sum(dur_ns)",
        "SHOW TABLES",
        "SHOW ALL TABLES",
    ],
)
def test_explain_pivot_show_and_hidden_second_statements_are_refused(sandbox: SqlEngine, query: str) -> None:
    with pytest.raises(SqlError, match=r"refused|exactly one statement"):
        sandbox.query(query)

    assert sandbox.query("SELECT count(*) FROM events")["rows"] == [[6000]]
    assert sandbox.query("SELECT count(*) FROM ops")["rows"] == [[1]]


@pytest.mark.parametrize(
    ("query", "refusal"),
    [
        ("SELECT * FROM duckdb_settings()", "table function duckdb_settings"),
        ("SELECT current_setting('home_directory')", "function current_setting"),
        ("SELECT current_setting('temp_directory') AS t", "function current_setting"),
        ("SELECT getenv('HOME')", "function getenv"),
        ("SELECT * FROM glob('/*')", "table function glob"),
        ("SELECT * FROM query('SELECT 1')", "table function query"),
        ("SELECT * FROM query_table('events')", "table function query_table"),
        ("SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))", "json_execute_serialized_sql"),
        ("SELECT * FROM duckdb_tables()", "table function duckdb_tables"),
        ("SELECT * FROM pragma_version()", "table function pragma_version"),
        ("SELECT * FROM which_secret('s3://x', 's3')", "table function which_secret"),
        ("SELECT version()", "function version"),
        ("SELECT * FROM information_schema.tables", "not a served table"),
        ("SELECT * FROM sqlite_master", "not a served table"),
        ("SELECT * FROM '/etc/passwd'", "not a served table"),
        ("SELECT * FROM events, '/etc/hostname'", "not a served table"),
        ("WITH x AS (SELECT 1) SELECT * FROM x, (SELECT * FROM read_csv('/etc/passwd'))", "read_csv"),
        ("SELECT (SELECT max(name) FROM duckdb_functions())", "duckdb_functions"),
        ("SELECT k FROM events, LATERAL (SELECT current_setting('home_directory') AS k)", "current_setting"),
    ],
)
def test_functions_and_tables_that_tell_about_the_server_or_its_files_are_refused(
    sandbox: SqlEngine, query: str, refusal: str
) -> None:
    with pytest.raises(SqlError, match="refused") as err:
        sandbox.query(query)

    assert refusal in str(err.value)
    assert os.path.expanduser("~") not in str(err.value) and "root:" not in str(err.value)


@pytest.mark.parametrize(
    "query",
    [
        "WITH k AS (SELECT * FROM events WHERE kind = 'kernel') SELECT count(*) FROM k",
        "FROM events LIMIT 1",
        "DESCRIBE events",
        "SUMMARIZE ops",
        "SELECT row_number() OVER (ORDER BY dur_ns), lag(dur_ns) OVER () FROM events LIMIT 1",
        "SELECT * FROM range(3)",
        "SELECT unnest([1, 2]) AS x",
        "SELECT count(*) FILTER (WHERE kind = 'kernel'), quantile_cont(dur_ns, 0.5) FROM events",
        "SELECT a.event_id FROM events a JOIN events b USING (event_id) WHERE a.kind::VARCHAR LIKE 'k%' LIMIT 1",
        "SELECT json_extract('{\"a\": 1}', '$.a'), from_json('[1]', '[\"BIGINT\"]'), regexp_matches('ab', 'b')",
        "SELECT 1 UNION ALL SELECT 2",
        "VALUES (1, 'a')",
    ],
)
def test_ordinary_analysis_sql_still_runs(sandbox: SqlEngine, query: str) -> None:
    assert sandbox.query(query)["rows"]


@pytest.fixture
def roomy(sandbox: SqlEngine) -> SqlEngine:
    """The same tables with a 60 s limit: DuckDB alone takes about a second to build 100 MB."""
    sandbox.timeout_s = 60.0
    return sandbox


def test_a_100_mb_value_comes_back_cut_to_the_budget_quickly(roomy: SqlEngine) -> None:
    sandbox = roomy
    started = time.monotonic()
    result = sandbox.query("SELECT repeat('x', 100000000) AS v", max_chars=16_000)
    elapsed = time.monotonic() - started

    assert elapsed < 10  # before: minutes of conversion and a 100 MB answer sent twice
    assert result["truncated"] is True and result["row_count"] == 1
    assert result["rows"][0][0].endswith(CUT_MARK)
    assert len(json.dumps(result, separators=(",", ":"))) <= 16_000
    assert "OFFSET" in result["message"] and "substr" in result["message"]


def test_5000_rows_of_100_kb_come_back_cut_to_the_budget_quickly(roomy: SqlEngine) -> None:
    sandbox = roomy
    started = time.monotonic()
    result = sandbox.query("SELECT repeat('y', 100000) AS v FROM range(5000)", max_chars=50_000)

    assert time.monotonic() - started < 10
    assert result["truncated"] is True
    assert len(json.dumps(result, separators=(",", ":"))) <= 50_000


def test_raw_rows_stop_at_the_character_budget_and_the_next_page_follows_on(sandbox: SqlEngine) -> None:
    first = sandbox.query("SELECT event_id, kind FROM events ORDER BY event_id", max_chars=2_000)
    n = first["row_count"]
    assert first["truncated"] is True and 10 < n < 5000
    assert f"LIMIT {n} OFFSET {n}" in first["message"]

    page = sandbox.query(f"SELECT event_id, kind FROM events ORDER BY event_id LIMIT {n} OFFSET {n}", max_chars=2_000)

    ids = [r[0] for r in first["rows"] + page["rows"]]
    assert ids == list(range(len(ids))) and len(ids) > n  # the page starts where the first answer stopped


def test_a_huge_nested_value_is_cut_too(sandbox: SqlEngine) -> None:
    result = sandbox.query("SELECT list(kind) AS kinds, 1 AS one FROM events", max_chars=3_000)

    assert result["truncated"] is True and result["rows"][0][1] == 1
    assert len(json.dumps(result, separators=(",", ":"))) <= 3_000


def test_max_chars_out_of_range_is_refused(sandbox: SqlEngine) -> None:
    with pytest.raises(SqlError, match="max_chars must be between"):
        sandbox.query("SELECT 1", max_chars=10)


def test_a_runaway_query_is_stopped_by_the_time_limit_and_the_next_query_runs(sandbox: SqlEngine) -> None:
    started = time.monotonic()
    with pytest.raises(SqlTimeoutError, match="time limit"):
        sandbox.query("SELECT count(*) FROM events a, events b, events c")
    elapsed = time.monotonic() - started

    assert elapsed < 10  # the 1 s limit, not the hours the cross join would take
    assert sandbox.query("SELECT 42")["rows"] == [[42]]


def test_a_bad_query_reports_duckdbs_reason_in_one_message(sandbox: SqlEngine) -> None:
    with pytest.raises(SqlError, match="does not parse"):
        sandbox.query("SELEC 1")
    with pytest.raises(SqlError, match="no_such_table"):
        sandbox.query("SELECT * FROM no_such_table")
    with pytest.raises(SqlError, match="give a SQL query"):
        sandbox.query("   ")


def test_values_come_back_as_plain_json_with_floats_rounded_and_integers_exact(sandbox: SqlEngine) -> None:
    row = sandbox.query(
        "SELECT 1.5::DECIMAL(4,2) AS d, DATE '2024-01-02' AS day, [1, 2] AS xs, {'a': 1} AS s, 'inf'::DOUBLE AS inf, "
        "1/3 AS third, 1733240000123456789::BIGINT AS start_ns, 123456789.0::DOUBLE AS big, "
        "sum(1733240000123456789::BIGINT) * 3 AS hugeint_sum, 12345.678::DECIMAL(10,3) AS dec"
    )["rows"][0]

    assert row == [
        1.5, "2024-01-02", [1, 2], {"a": 1}, None, 0.3333, 1733240000123456789, 123500000.0, 5199720000370370367, 12350.0
    ]  # fmt: skip


def test_the_deadline_covers_converting_the_rows_not_only_duckdb() -> None:
    table = pa.table({"v": pa.array(["x" * 100] * 1000)})
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=100))

    with pytest.raises(TimeoutError):
        _collect(reader, limit=5000, budget=10**6, deadline=time.monotonic() - 1)  # past: stops at once
    assert len(_collect(table.to_reader(), 5000, 10**6, time.monotonic() + 60)[0]) == 1000


@pytest.mark.parametrize("query", ["SELECT " + "abs(" * 990 + "1" + ")" * 990, "SELECT " + " + ".join(["1"] * 990)])
def test_a_query_too_deep_to_check_is_refused_in_one_line(sandbox: SqlEngine, query: str) -> None:
    with pytest.raises(SqlError, match="nests too deeply"):
        sandbox.query(query)
    assert sandbox.query("SELECT 1 + 1")["rows"] == [[2]]
