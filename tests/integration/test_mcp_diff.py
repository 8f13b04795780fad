"""The MCP ``diff`` tool, through the official client: two served traces compared, the same
numbers as ``diff_traces`` gives in process."""

from __future__ import annotations

from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers.diff import diff_traces
from tests.integration.mcp_client import McpServer

pytestmark = pytest.mark.slow  # a server subprocess

PAIR = Path(__file__).resolve().parents[1] / "data" / "kineto" / "hta" / "trace_compare"


@pytest.fixture(scope="module")
def server():
    with McpServer(PAIR / "base.json.gz", PAIR / "test.json.gz") as s:
        yield s


def test_diff_tool_answers_with_the_in_process_numbers(server):
    answer = server.data("diff", {"base": "base", "new": "test", "limit": 5, "fail_on_regression_pct": 5})
    expected = diff_traces(ne.load(PAIR / "base.json.gz"), ne.load(PAIR / "test.json.gz"))
    assert answer["base"]["trace"] == "base" and answer["new"]["trace"] == "test"
    ops = {r["name"]: r for r in answer["tables"]["ops"]}
    for r in expected.tables["ops"].head(5).itertuples():
        assert ops[r.name]["delta_ns"] == r.delta_ns and ops[r.name]["status"] == r.status
    assert answer["enough_steps"] is False and answer["gate"]["failed"] is False
    assert len(answer["tables"]["ops"]) <= 5


def test_diff_tool_names_unknown_traces(server):
    err = server.error("diff", {"base": "base", "new": "nope"})
    assert "nope" in err
