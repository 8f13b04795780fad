"""`neuron-explorer mcp` as an agent meets it: a subprocess spoken to by the official MCP client.

One server per module serves two real traces (a GPU one and a CPU one) with a source root
that holds a file, a symlink out of the root and a secret beside it, and a 1 s SQL limit.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer import __version__
from neuron_explorer.analyzers import analyze
from neuron_explorer.trace.schema import COLUMNS
from tests.conftest import KINETO, run_cli
from tests.integration.mcp_client import McpServer

pytestmark = pytest.mark.slow  # a server subprocess, a few seconds to start

# a GPU trace with user source lines holding device time (the vLLM one has no user code)
GPU_TRACE = KINETO / "tracelens" / "qwen_h100.json.gz"
CPU_TRACE = KINETO / "local" / "cpu_mlp_step4.json"
GPU, CPU = "qwen_h100", "cpu_mlp_step4"
TOOLS = {
    "list_traces", "trace_summary", "findings", "top_kernels", "top_ops", "top_source_lines",
    "step_breakdown", "source_context", "schema", "sql", "diff", "op_perf", "memory_at_peak", "critical_path",
}  # fmt: skip


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("mcp")
    root = base / "src"
    root.mkdir()
    (root / "model.py").write_text("import torch\n\n\ndef step(x):\n    return x @ x\n")
    secret = base / "secret.txt"
    secret.write_text("do not show\n")
    (root / "link_out.py").symlink_to(secret)
    return {"root": root, "secret": secret}


@pytest.fixture(scope="module")
def server(roots: dict[str, Path]) -> McpServer:
    with McpServer(GPU_TRACE, CPU_TRACE, "--source-root", roots["root"], "--sql-timeout", "1") as s:
        yield s


@pytest.fixture(scope="module")
def gpu_analysis():
    return analyze(ne.load(GPU_TRACE))


# ------------------------------------------------------------------------------ handshake
def test_initialize_names_the_server_and_tells_the_agent_where_to_start(server: McpServer) -> None:
    assert server.init.server_info.name == "neuron-explorer"
    assert server.init.server_info.version == __version__
    assert "trace_summary" in server.init.instructions


def test_every_tool_is_listed_as_read_only_with_a_description_and_documented_arguments(server: McpServer) -> None:
    tools = {t.name: t for t in server.run(server.session.list_tools).tools}

    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.annotations.read_only_hint is True and tool.annotations.destructive_hint is False
        assert len(tool.description) > 150, tool.name
        for name, prop in tool.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    assert tools["source_context"].input_schema["required"] == ["file", "line"]
    assert tools["sql"].input_schema["required"] == ["query"]
    assert "1 s per query" in tools["sql"].description


# ------------------------------------------------------------------------------ every tool
def test_list_traces_names_each_trace_and_the_source_roots(server: McpServer, roots: dict[str, Path]) -> None:
    answer = server.data("list_traces")

    by_name = {t["name"]: t for t in answer["traces"]}
    assert list(by_name) == [GPU, CPU]
    assert by_name[GPU]["events"] == ne.load(GPU_TRACE).num_events
    assert set(by_name[GPU]["device_types"]) - {"cpu"}  # a GPU trace
    assert os.path.realpath(roots["root"]) in answer["source_roots"]


def test_trace_summary_gives_the_analyzers_verdict(server: McpServer, gpu_analysis) -> None:
    answer = server.data("trace_summary", {"trace": GPU})

    assert answer["summary"]["verdict"] == gpu_analysis.summary["verdict"]
    assert answer["summary"]["wall_ns"] == gpu_analysis.summary["wall_ns"]
    assert answer["num_findings"] == len(gpu_analysis.findings)
    assert answer["trace_facts"]["by_kind"]["kernel"] > 0


def test_findings_filter_by_severity_and_say_which_rules_were_skipped(server: McpServer, gpu_analysis) -> None:
    everything = server.data("findings", {"trace": GPU, "limit": 500})
    warnings = server.data("findings", {"trace": GPU, "min_severity": "warning", "limit": 500})

    assert [f["rule_id"] for f in everything["findings"]] == [f.rule_id for f in gpu_analysis.findings]
    assert all(f["severity"] in ("warning", "error") for f in warnings["findings"])
    assert len(everything["skipped"]) == len(gpu_analysis.skipped)
    for f in everything["findings"]:
        assert {"rule_id", "severity", "title", "metrics", "cost_ns", "source_lines", "recommendation"} <= set(f)


def test_top_kernels_ops_and_source_lines_honour_their_limits(server: McpServer, gpu_analysis) -> None:
    kernels = server.data("top_kernels", {"trace": GPU, "limit": 3})
    ops = server.data("top_ops", {"trace": GPU, "limit": 2, "sort_by": "host_self_ns"})
    lines = server.data("top_source_lines", {"trace": GPU, "limit": 1})
    assert gpu_analysis.source_lines["device_ns"].max() > 0

    assert [r["name"] for r in kernels["rows"]] == list(gpu_analysis.kernels["name"].astype(str).head(3))
    assert kernels["total_rows"] == len(gpu_analysis.kernels)
    expected_ops = gpu_analysis.ops.sort_values("host_self_ns", ascending=False, kind="stable")
    assert [r["name"] for r in ops["rows"]] == list(expected_ops["name"].head(2))
    assert len(lines["rows"]) == 1
    assert lines["rows"][0]["device_ns"] == int(gpu_analysis.source_lines["device_ns"].max())


def test_step_breakdown_categories_sum_to_wall_time(server: McpServer) -> None:
    answer = server.data("step_breakdown", {"trace": CPU})

    assert answer["steps_total"] >= 1 and answer["attribution"]
    parts = [f"{c}_ns" for c in answer["categories"]]
    assert len(parts) == 10  # one_time first, then the nine steady-state categories
    for row in answer["attribution"]:
        assert sum(row[p] for p in parts) == row["wall_ns"]


def test_critical_path_sums_to_the_steps_and_names_what_it_is_made_of(server: McpServer, gpu_analysis) -> None:
    answer = server.data("critical_path", {"trace": GPU, "limit": 500})
    steps = gpu_analysis.steps
    wall = int(steps["dur_ns"].sum()) if len(steps) else int(gpu_analysis.summary["wall_ns"])
    # one trace, its steps' critical paths: the rows sum to the steps' wall time
    assert answer["path_ns"] == sum(r["ns"] for r in answer["rows"]) == wall
    assert sum(c["ns"] for c in answer["by_category"]) == answer["path_ns"]
    assert answer["summary"].startswith("the critical path is")
    assert answer["summary"] in gpu_analysis.summary["verdict"]
    assert {"all_fixes_ns", "priced"} <= set(answer["fixes"])
    one = server.data("critical_path", {"trace": GPU, "limit": 1, "offset": 1})
    assert one["rows"] == answer["rows"][1:2]


def test_source_context_shows_code_from_inside_the_roots(server: McpServer) -> None:
    answer = server.data("source_context", {"trace": CPU, "file": "model.py", "line": 5, "context": 1})

    assert [(x["line"], x["text"]) for x in answer["code"]["lines"]] == [(4, "def step(x):"), (5, "    return x @ x")]
    assert answer["attribution"]["kernels"] == []  # this file is not in the trace


def test_source_context_of_a_traced_line_not_on_this_machine_still_gives_its_cost(
    server: McpServer, gpu_analysis
) -> None:
    top = gpu_analysis.source_lines.sort_values("device_ns", ascending=False).iloc[0]

    answer = server.data("source_context", {"trace": GPU, "file": str(top["src_file"]), "line": int(top["src_line"])})

    assert answer["code"] is None and "no file" in answer["code_error"]
    assert answer["attribution"]["source_line"]["device_ns"] == int(top["device_ns"])


def test_schema_lists_the_events_columns_and_the_metrics_tables(server: McpServer) -> None:
    overview = server.data("schema")
    events = server.data("schema", {"table": "events"})["tables"][0]

    tables = {t["name"]: t for t in overview["tables"]}
    assert {"events", "steps", "breakdown", "kernels", "ops", "source_lines", "findings"} <= set(tables)
    assert tables["events"]["columns"][1:] == [c.name for c in COLUMNS]  # the overview: names only
    assert [c["name"] for c in events["columns"]][1:] == [c.name for c in COLUMNS]
    assert {c["name"]: c["unit"] for c in events["columns"]}["dur_ns"] == "ns"
    assert server.data("schema", {"table": "ops"})["tables"][0]["name"] == "ops"


def test_sql_answers_an_aggregate_over_events_of_both_traces(server: McpServer) -> None:
    answer = server.data(
        "sql", {"query": "SELECT trace, count(*) AS n FROM events WHERE kind = 'kernel' GROUP BY trace ORDER BY trace"}
    )

    expected = {}
    for name, path in ((GPU, GPU_TRACE), (CPU, CPU_TRACE)):
        kinds = ne.load(path).to_pandas(columns=["kind"])["kind"].astype(str)
        if (kinds == "kernel").any():
            expected[name] = int((kinds == "kernel").sum())
    assert dict(map(tuple, answer["rows"])) == expected


def test_sql_joins_a_metrics_table_to_the_events(server: McpServer, gpu_analysis) -> None:
    answer = server.data(
        "sql",
        {"query": f"SELECT name, total_ns FROM kernels WHERE trace = '{GPU}' ORDER BY total_ns DESC LIMIT 1"},
    )

    assert answer["rows"] == [
        [str(gpu_analysis.kernels["name"].iloc[0]), int(gpu_analysis.kernels["total_ns"].iloc[0])]
    ]


def test_sql_caps_rows_and_asks_for_an_aggregate(server: McpServer) -> None:
    # 2,800 events: a self-join makes millions of rows, of which only 5,001 are ever computed.
    query = "SELECT a.event_id, b.event_id AS other FROM events a CROSS JOIN events b"
    answer = server.data("sql", {"query": query, "max_chars": 1_000_000})

    assert answer["row_count"] == 5000 and answer["truncated"] is True
    assert "aggregate" in answer["message"]


# ------------------------------------------------------------------------------ bad calls
@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("no_such_tool", {}, "Unknown tool"),
        ("trace_summary", {}, "pass `trace` as one of: qwen_h100, cpu_mlp_step4"),
        ("trace_summary", {"trace": "nope"}, "no trace named 'nope'"),
        ("top_kernels", {"trace": GPU, "limit": "many"}, "limit"),
        ("top_kernels", {"trace": GPU, "sort_by": "name"}, "sort by one of"),
        ("top_ops", {"trace": GPU, "limit": 0}, "limit must be 1 or more"),
        ("findings", {"trace": GPU, "min_severity": "fatal"}, "min_severity must be one of"),
        ("source_context", {"file": "model.py"}, "line"),
        ("source_context", {"trace": CPU, "file": "model.py", "line": 0}, "line must be between 1 and"),
        ("source_context", {"trace": CPU, "file": "model.py", "line": 10**30}, "line must be between 1 and"),
        ("schema", {"table": "passwords"}, "no table 'passwords'"),
        ("sql", {"query": "SELEC 1"}, "does not parse"),
        ("sql", {"query": "SELECT * FROM nope"}, "nope"),
    ],
)
def test_a_bad_call_is_a_tool_error_that_says_what_to_do(
    server: McpServer, tool: str, arguments: dict, message: str
) -> None:
    assert message in server.error(tool, arguments)


# ------------------------------------------------------------------------------ security
@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('{secret}')",
        "COPY events TO '{out}'",
        "ATTACH '{db}' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "CREATE TABLE x AS SELECT 1",
        "DROP VIEW events",
        "SET enable_external_access = true",
    ],
)
def test_sql_cannot_read_files_write_attach_or_install(server: McpServer, roots: dict[str, Path], query: str) -> None:
    out = roots["root"].parent / "stolen.csv"
    db = roots["root"].parent / "other.duckdb"

    message = server.error("sql", {"query": query.format(secret=roots["secret"], out=out, db=db)})

    assert "root:x" not in message and "do not show" not in message
    assert not out.exists() and not db.exists()
    assert server.data("sql", {"query": "SELECT count(*) FROM events"})["rows"][0][0] > 0


def test_a_runaway_query_is_stopped_by_the_time_limit(server: McpServer) -> None:
    message = server.error("sql", {"query": "SELECT count(*) FROM events a, events b, events c"})

    assert "time limit" in message
    assert server.data("sql", {"query": "SELECT 1 AS one"})["rows"] == [[1]]


@pytest.mark.parametrize("file", ["../../etc/passwd", "../secret.txt", "/etc/passwd", "link_out.py"])
def test_source_context_refuses_paths_outside_the_roots(server: McpServer, file: str) -> None:
    message = server.error("source_context", {"trace": CPU, "file": file, "line": 1})

    assert "refused" in message and "outside the source roots" in message
    assert "do not show" not in message and "root:x" not in message


# ------------------------------------------------------------------------------ resources
def test_the_schema_and_rules_docs_are_resources(server: McpServer) -> None:
    listed = {str(r.uri) for r in server.run(server.session.list_resources).resources}
    assert {"neuron-explorer://docs/schema.md", "neuron-explorer://docs/rules.md"} <= listed

    schema = server.run(server.session.read_resource, "neuron-explorer://docs/schema.md").contents[0]
    rules = server.run(server.session.read_resource, "neuron-explorer://docs/rules.md").contents[0]

    assert schema.mime_type == "text/markdown" and "src_precision" in schema.text
    assert rules.text.startswith("#")


# ------------------------------------------------------------------------------ the command
def test_a_missing_trace_is_a_one_line_error_before_any_server_starts(tmp_path: Path) -> None:
    result = run_cli("mcp", str(tmp_path / "missing.parquet"), timeout=60)

    assert result.returncode == 3
    assert "missing.parquet" in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_source_root_that_is_not_a_directory_is_refused(tmp_path: Path) -> None:
    result = run_cli("mcp", str(CPU_TRACE), "--source-root", str(tmp_path / "nope"), timeout=60)

    assert result.returncode == 3 and "--source-root is not a directory" in result.stderr


def test_mcp_help_lists_every_tool_the_server_serves(server: McpServer) -> None:
    served = {t.name: t.title for t in server.run(server.session.list_tools).tools}

    result = run_cli("mcp", "--help", timeout=60)

    assert result.returncode == 0 and "--sql-timeout" in result.stdout
    listed = result.stdout.split("tools:", 1)[1]
    for name, title in served.items():
        assert re.search(rf"^  {name} +{re.escape(title)}$", listed, re.MULTILINE), name
    assert {"op_perf", "diff"} <= set(served)
