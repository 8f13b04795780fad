"""The agent server as a security boundary, tried as an attacker would: through the official MCP
client, over stdio, against a real `neuron-explorer mcp` subprocess.

The attacker controls the trace (a crafted Parquet file whose events name /etc/passwd,
/etc/shadow, /proc/self/status and a secret beside the source root) and every tool argument;
the user controls only the command line. Each escape of issue 26 is kept here as a regression
test, with more: nothing outside the served tables and the user's source roots may be read,
written or listed, and no answer may run away in size or time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

import neuron_explorer as ne
from neuron_explorer.trace.model import Trace
from tests.conftest import KINETO
from tests.integration.mcp_client import McpServer

pytestmark = pytest.mark.slow  # server subprocesses

CPU_TRACE = KINETO / "local" / "cpu_mlp_step4.json"
SECRET_TEXT = "do not show"
#: What any of the files an attacker aims at would put in an answer.
LEAKS = ("root:", SECRET_TEXT, "API_KEY", "Pid:", "PATH=", "TracerPid")


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A source root with the traps an attacker would plant, a secret beside it, a crafted trace."""
    base = tmp_path_factory.mktemp("escape")
    root = base / "src"
    root.mkdir()
    (root / "model.py").write_text("import torch\n\n\ndef step(x):\n    return x @ x\n")
    secret = base / "secret.txt"
    secret.write_text(SECRET_TEXT + "\n")
    (root / "link_out.py").symlink_to(secret)
    os.link(secret, root / "hard_link.py")  # same inode as the secret, inside the root
    (root / ".env").write_text(f"API_KEY={SECRET_TEXT}\n")
    (root / "etc").symlink_to("/etc")
    os.mkfifo(root / "pipe.py")
    named = ["/etc/passwd", "/etc/shadow", "/proc/self/status", str(secret), "/etc/hostname"]
    trace = ne.load(CPU_TRACE)
    events = trace.events
    column = events.column_names.index("src_file")
    files = events["src_file"].to_pylist()
    files[: len(named)] = named
    events = events.set_column(
        column, "src_file", pa.array(files).dictionary_encode().cast(events.schema.field(column).type)
    )
    crafted = base / "crafted.parquet"
    Trace(events, trace.metadata).write(crafted)
    return {"base": base, "root": root, "secret": secret, "trace": crafted}


@pytest.fixture(scope="module")
def server(box: dict[str, Path]) -> McpServer:
    with McpServer(box["trace"], "--source-root", box["root"], "--sql-timeout", "30", cwd=str(box["base"])) as s:
        yield s


def _no_leak(text: str) -> None:
    for leak in LEAKS:
        assert leak not in text, f"{leak!r} leaked: {text[:300]}"


# ------------------------------------------------------------------------------ source files
def test_a_trace_naming_etc_files_does_not_make_etc_a_root(server: McpServer, box: dict[str, Path]) -> None:
    assert server.data("list_traces")["source_roots"] == [os.path.realpath(box["root"])]


@pytest.mark.parametrize(
    "file",
    [
        "/etc/passwd",  # named by the crafted trace
        "/etc/shadow",
        "/proc/self/status",
        "/proc/self/environ",
        "{secret}",  # an absolute path the trace names, outside the root
        "../secret.txt",
        "../../../../../../etc/passwd",
        "src/../../secret.txt",
        "link_out.py",  # a symlink out of the root
        "hard_link.py",  # a hard link to the secret
        ".env",
        "etc/passwd",  # a symlinked directory out of the root
        "pipe.py",  # a FIFO: opening it would hang the server
        "/dev/zero",
        "/dev/stdin",
    ],
)
def test_source_context_serves_nothing_outside_the_users_roots(
    server: McpServer, box: dict[str, Path], file: str
) -> None:
    file = file.format(secret=box["secret"])

    result = server.call("source_context", {"file": file, "line": 1})
    text = " ".join(c.text for c in result.content if hasattr(c, "text"))

    _no_leak(text)
    assert "refused" in text or "no file" in text
    if not result.is_error:  # the crafted trace attributes events to the file: cost, but no code
        answer = server.data("source_context", {"file": file, "line": 1})
        assert answer["code"] is None and answer["code_error"]


def test_code_inside_the_root_is_still_served(server: McpServer) -> None:
    answer = server.data("source_context", {"file": "model.py", "line": 5, "context": 0})

    assert answer["code"]["lines"] == [{"line": 5, "text": "    return x @ x", "is_target": True}]


def test_without_source_root_the_root_is_the_current_directory_only(box: dict[str, Path]) -> None:
    with McpServer(box["trace"], cwd=str(box["root"])) as server:
        assert server.data("list_traces")["source_roots"] == [os.path.realpath(box["root"])]
        assert server.data("source_context", {"file": "model.py", "line": 4, "context": 0})["code"]
        result = server.call("source_context", {"file": "/etc/passwd", "line": 1})
        _no_leak(" ".join(c.text for c in result.content if hasattr(c, "text")))


# ------------------------------------------------------------------------------ SQL
@pytest.mark.parametrize(
    "query",
    [
        "EXPLAIN ANALYZE CREATE TABLE stolen AS SELECT 1",
        "EXPLAIN ANALYZE DROP VIEW events",
        "EXPLAIN ANALYZE COPY (SELECT 1) TO '{out}'",
        "EXPLAIN SELECT 1",
        "COPY events TO '{out}'",
        "COPY (SELECT * FROM events) TO '{out}' (FORMAT parquet)",
        "EXPORT DATABASE '{base}/export'",
        "ATTACH '{db}' AS other",
        "PRAGMA enable_profiling",
        "PRAGMA database_list",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "INSTALL httpfs",
        "LOAD httpfs",
        "CREATE MACRO leak() AS 1",
        "CALL pragma_version()",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('{secret}')",
        "SELECT * FROM read_blob('/proc/self/environ')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM '{secret}'",
        "SELECT * FROM glob('/*')",
        "SELECT * FROM duckdb_settings()",
        "SELECT current_setting('home_directory')",
        "SELECT current_setting('temp_directory')",
        "SELECT getenv('HOME')",
        "SELECT * FROM query('SELECT * FROM read_text(''/etc/passwd'')')",
        "SELECT * FROM information_schema.tables",
        "SHOW TABLES",
        "SELECT 1; DROP VIEW events",
        "SELECT 1 /* a comment */; DROP VIEW events",
        "SELECT 1 -- a comment\n; DROP VIEW events",
        "SELECT count(*) FROM events; COPY events TO '{out}'",
    ],
)
def test_sql_cannot_read_write_list_or_disclose_anything_outside_the_served_tables(
    server: McpServer, box: dict[str, Path], query: str
) -> None:
    out, db = box["base"] / "stolen.csv", box["base"] / "other.duckdb"
    before = server.data("sql", {"query": "SELECT count(*) FROM events"})["rows"]

    message = server.error("sql", {"query": query.format(out=out, db=db, base=box["base"], secret=box["secret"])})

    _no_leak(message)
    assert "Traceback" not in message and "\n" not in message.strip()
    assert os.path.expanduser("~") not in message.replace(str(box["base"]), "")
    assert not out.exists() and not db.exists() and not (box["base"] / "export").exists()
    assert server.data("sql", {"query": "SELECT count(*) FROM events"})["rows"] == before  # the view is still there


@pytest.mark.parametrize(
    "query", ["SELECT repeat('x', 100000000) AS v", "SELECT repeat('x', 100000) AS v FROM range(5000)"]
)
def test_huge_values_come_back_cut_to_the_budget_quickly(server: McpServer, query: str) -> None:
    started = time.monotonic()
    text = server.text("sql", {"query": query})
    elapsed = time.monotonic() - started

    assert elapsed < 30  # before: minutes, and 100-500 MB answers sent twice
    assert len(text) <= 16_000
    assert '"truncated":true' in text and "OFFSET" in text


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("sql", {"query": "x" * 1_000_000}),
        ("sql", {"query": "SELECT '" + "y" * 100_000 + "' FROM nope"}),
        ("findings", {"rules": ["z" * 100_000]}),
        ("source_context", {"file": "w" * 100_000 + ".py", "line": 1}),
        ("top_kernels", {"offset": 10**30, "sort_by": "v" * 100_000}),
    ],
)
def test_an_error_is_one_bounded_line_however_long_the_input(server: McpServer, tool: str, arguments: dict) -> None:
    message = server.error(tool, arguments)

    assert len(message) <= 1_100 and "\n" not in message
