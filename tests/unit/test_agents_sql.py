"""The agents' SQL sandbox: read-only SELECTs over the served tables, and nothing else."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from neuron_explorer.agents.sql import SqlError, SqlSandbox, SqlTimeoutError


@pytest.fixture
def sandbox() -> SqlSandbox:
    events = pa.table(
        {
            "event_id": pa.array(range(6000), pa.int64()),
            "kind": pa.array(["kernel", "cpu_op"] * 3000).dictionary_encode(),
            "dur_ns": pa.array([10, 20] * 3000, pa.int64()),
        }
    )
    box = SqlSandbox({"events": events, "ops": pa.table({"name": ["aten::mm"], "device_ns": [5]})}, timeout_s=1.0)
    yield box
    box.close()


def test_a_select_returns_columns_types_and_rows(sandbox: SqlSandbox) -> None:
    result = sandbox.query(
        "SELECT kind, count(*) AS n, sum(dur_ns) AS total_ns FROM events GROUP BY kind ORDER BY kind"
    )

    assert result["columns"] == ["kind", "n", "total_ns"]
    assert result["types"][1] == "BIGINT"
    assert result["rows"] == [["cpu_op", 3000, 60000], ["kernel", 3000, 30000]]
    assert result["truncated"] is False


def test_more_than_5000_rows_are_cut_with_a_message_asking_for_an_aggregate(sandbox: SqlSandbox) -> None:
    result = sandbox.query("SELECT * FROM events")

    assert result["row_count"] == 5000 and len(result["rows"]) == 5000
    assert result["truncated"] is True
    assert "aggregate" in result["message"]


def test_a_smaller_max_rows_is_honoured_but_never_above_the_cap(sandbox: SqlSandbox) -> None:
    assert sandbox.query("SELECT * FROM events", max_rows=3)["row_count"] == 3
    assert sandbox.query("SELECT * FROM events", max_rows=10**9)["row_count"] == 5000


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
def test_reading_any_file_is_refused(sandbox: SqlSandbox, query: str) -> None:
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
def test_writes_attach_install_load_and_settings_are_refused(sandbox: SqlSandbox, tmp_path: Path, query: str) -> None:
    with pytest.raises(SqlError):
        sandbox.query(query.format(tmp=tmp_path))

    assert list(tmp_path.iterdir()) == []  # nothing was written
    assert sandbox.query("SELECT count(*) FROM events")["rows"] == [[6000]]  # and nothing changed


def test_the_lockdown_cannot_be_undone_from_inside_a_select(sandbox: SqlSandbox) -> None:
    settings = dict(
        sandbox.query(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('enable_external_access', 'lock_configuration', 'autoload_known_extensions', 'autoinstall_known_extensions')"
        )["rows"]
    )

    assert settings == {
        "enable_external_access": "false",
        "lock_configuration": "true",
        "autoload_known_extensions": "false",
        "autoinstall_known_extensions": "false",
    }


def test_a_runaway_query_is_stopped_by_the_time_limit_and_the_next_query_runs(sandbox: SqlSandbox) -> None:
    started = time.monotonic()
    with pytest.raises(SqlTimeoutError, match="time limit"):
        sandbox.query("SELECT count(*) FROM events a, events b, events c")
    elapsed = time.monotonic() - started

    assert elapsed < 10  # the 1 s limit, not the hours the cross join would take
    assert sandbox.query("SELECT 42")["rows"] == [[42]]


def test_a_bad_query_reports_duckdbs_reason_in_one_message(sandbox: SqlSandbox) -> None:
    with pytest.raises(SqlError, match="does not parse"):
        sandbox.query("SELEC 1")
    with pytest.raises(SqlError, match="no_such_table"):
        sandbox.query("SELECT * FROM no_such_table")
    with pytest.raises(SqlError, match="give a SQL query"):
        sandbox.query("   ")


def test_values_come_back_as_plain_json(sandbox: SqlSandbox) -> None:
    row = sandbox.query(
        "SELECT 1.5::DECIMAL(4,2) AS d, DATE '2024-01-02' AS day, [1, 2] AS xs, {'a': 1} AS s, 'inf'::DOUBLE AS inf"
    )["rows"][0]

    assert row == [1.5, "2024-01-02", [1, 2], {"a": 1}, None]
