"""The MCP server's limits through a real client (issue 43): every tool answers within its
time limit in one line, a hostile trace cannot hang it, validation errors stay in budget, and
the SQL tool's worker is killed and replaced past its limits while the server lives."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import KINETO, REPO, run_cli
from tests.integration.mcp_client import McpServer

#: What docs/agents.md promises for every error: one line of at most 1,000 characters.
MAX_ERROR_CHARS = 1000


def _one_line(text: str) -> str:
    assert "\n" not in text and 0 < len(text) <= MAX_ERROR_CHARS, text[:300]
    assert "Traceback" not in text and "https://" not in text
    return text


def test_a_tool_past_its_time_limit_answers_one_line_and_the_analysis_serves_the_next_call() -> None:
    trace = KINETO / "h200/eager_train.json.gz"  # its analysis takes about a second: past 0.05 s
    with McpServer(trace, "--tool-timeout", "0.05") as server:
        line = _one_line(server.error("trace_summary"))
        assert "ran past the 0.05 s tool time limit" in line
        assert server.data("list_traces")["traces"][0]["name"] == "eager_train"  # the server lives
        for _ in range(120):  # the analysis goes on in the background and is cached when done
            time.sleep(0.5)
            result = server.call("trace_summary")
            if not result.is_error:
                break
        assert not result.is_error
        assert json.loads(result.content[0].text)["summary"]["verdict"]


def test_a_copy_stamped_at_ts_0_cannot_hang_the_server(tmp_path: Path) -> None:
    """The audit's 1,348-event trace looped in the critical-path walk at 6.85 GB after 68 s."""
    data = json.loads(gzip.decompress((KINETO / "hta/alexnet_a100.json.gz").read_bytes()))
    [e for e in data["traceEvents"] if e.get("name") == "cudaMemcpyAsync"][2]["ts"] = 0
    trace = tmp_path / "ts0.json"
    trace.write_text(json.dumps(data))
    with McpServer(trace, "--tool-timeout", "60") as server:
        t0 = time.monotonic()
        assert server.data("trace_summary")["summary"]["verdict"]
        assert server.data("critical_path")["rows"]
        assert time.monotonic() - t0 < 60


def test_a_200_kb_device_name_keeps_the_verdict_in_the_summary(tmp_path: Path) -> None:
    data = json.loads((KINETO / "local/example_cpu_small.json").read_text())
    data.setdefault("deviceProperties", []).append({"id": 0, "name": "G" * 200_000})
    data["distributedInfo"] = {"backend": "x" * 200_000, "rank": 0, "world_size": 1}
    trace = tmp_path / "long_names.json"
    trace.write_text(json.dumps(data))
    with McpServer(trace) as server:
        answer = server.data("trace_summary")
        assert answer["summary"]["verdict"]
        assert len(json.dumps(answer)) <= 16_000


@pytest.mark.parametrize(
    "arguments",
    [
        {"rules": [1] * 10000, "max_chars": 1000},
        {"rules": [{"a": 1}] * 10000},
        {"limit": "x" * 100_000},
        {"max_chars": -5},
        {"min_severity": ["x"] * 50},
    ],
)
def test_validation_errors_are_one_line_within_the_budget(arguments: dict) -> None:
    with McpServer(KINETO / "local/example_cpu_small.json") as server:
        line = _one_line(server.error("findings", arguments))
        assert "findings" in line


def test_the_sql_tool_stops_one_huge_value_within_twice_its_limit_and_runs_the_next_query() -> None:
    with McpServer(KINETO / "local/example_cpu_small.json", "--sql-timeout", "3") as server:
        server.data("sql", {"query": "SELECT 1"})  # (the first call builds the tables)
        t0 = time.monotonic()
        line = _one_line(server.error("sql", {"query": "SELECT len(range(100000000))"}))
        # Whichever bound it reaches first stops it (which one depends on the machine's speed):
        # the guarantee is the answer within twice the time limit and a server that lives on.
        assert "ran past the 3 s time limit" in line or "memory limit" in line
        assert time.monotonic() - t0 < 6
        assert server.data("sql", {"query": "SELECT count(*) AS n FROM events"})["rows"][0][0] > 0
        assert server.data("sql", {"query": "SELECT 'infinity'::DATE AS d"})["rows"] == [["infinity"]]


def test_the_memory_limit_bounds_what_the_tools_may_add_and_allocation_past_it_fails_in_python() -> None:
    """``mcp --memory-limit``: RLIMIT_AS above what the server maps once its traces are loaded.
    Past it an allocation raises MemoryError (which a tool call answers in one line, the server
    living on); below it the same process allocates normally."""
    code = (
        "from neuron_explorer.cli.mcp import limit_memory\n"
        "big = bytearray(64 << 20); del big\n"
        "limit_memory(0.25)\n"
        "small = bytearray(64 << 20)\n"
        "try:\n"
        "    bytearray(1 << 30)\n"
        "except MemoryError:\n"
        "    print('refused')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused"
    bad = run_cli("mcp", str(KINETO / "local/example_cpu_small.json"), "--memory-limit", "0", timeout=60)
    assert bad.returncode != 0
    assert _one_line(bad.stderr.strip()).endswith("--memory-limit must be a positive number of GiB, not 0.0")
