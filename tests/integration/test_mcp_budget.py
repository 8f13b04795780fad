"""Every MCP tool answer fits its size budget, is compact JSON with rounded figures, is sent once,
and says how to page when cut: through the official client, on the largest bundled trace.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from neuron_explorer.agents.budget import DEFAULT_MAX_CHARS
from neuron_explorer.agents.tools import TOOLS
from tests.conftest import KINETO
from tests.integration.mcp_client import McpServer

pytestmark = pytest.mark.slow

#: The largest bundled trace (69k events, V100); served twice so that `diff` has a pair.
LARGEST = KINETO / "hta" / "ns_resolution_rank0.json.gz"
A, B = "ns_resolution_rank0", "ns_resolution_rank0-2"

#: Every tool with the arguments that give its biggest answer short of raising max_chars.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_traces", {}),
    ("trace_summary", {"trace": A}),
    ("findings", {"trace": A, "limit": 500}),
    ("top_kernels", {"trace": A, "limit": 500}),
    ("top_ops", {"trace": A, "limit": 500}),
    ("op_perf", {"trace": A, "limit": 500}),
    ("top_source_lines", {"trace": A, "limit": 500}),
    ("memory_at_peak", {"trace": A, "limit": 500}),
    ("step_breakdown", {"trace": A, "limit": 500}),
    ("critical_path", {"trace": A, "limit": 500}),
    ("diff", {"base": A, "new": B, "limit": 500}),
    ("source_context", {"trace": A, "file": "README.md", "line": 1, "context": 200}),
    ("schema", {}),
    ("schema", {"table": "events"}),
    ("sql", {"query": "SELECT * FROM events"}),
    ("sql", {"query": "SELECT list(name) AS names FROM events"}),
]


@pytest.fixture(scope="module")
def server() -> McpServer:
    with McpServer(LARGEST, LARGEST) as s:  # the source root: the checkout (the current directory)
        yield s


def test_every_tool_is_tried_here() -> None:
    assert {tool for tool, _ in CALLS} == set(TOOLS)


def _floats(value: Any) -> list[float]:
    if isinstance(value, float):
        return [value]
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return []


@pytest.mark.parametrize(("tool", "arguments"), CALLS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CALLS)])
def test_every_answer_fits_the_default_budget_as_compact_json_sent_once(
    server: McpServer, tool: str, arguments: dict[str, Any]
) -> None:
    text = server.text(tool, arguments)  # checks: one text block, no structured copy
    doc = json.loads(text)

    assert len(text) <= DEFAULT_MAX_CHARS
    assert text == json.dumps(doc, separators=(",", ":"), ensure_ascii=False)  # compact: no indentation, no spaces
    assert all(float(f"{f:.4g}") == f for f in _floats(doc)), "floats carry at most 4 significant digits"
    if doc.get("truncated") is True and tool != "sql":
        assert doc["truncation"]["how_to_page"]


def test_a_smaller_budget_is_honoured_and_the_next_offset_pages_on(server: McpServer) -> None:
    whole = server.data("top_kernels", {"trace": A, "limit": 500, "max_chars": 1_000_000})
    assert whole.get("truncated") is None and whole["total_rows"] > 30

    first = server.text("top_kernels", {"trace": A, "limit": 500, "max_chars": 3_000})
    page1 = json.loads(first)
    step = page1["truncation"]["next_offset"]
    page2 = server.data("top_kernels", {"trace": A, "limit": 500, "max_chars": 3_000, "offset": step})

    assert len(first) <= 3_000 and page1["truncated"] is True
    assert page1["truncation"]["lists"]["rows"]["shown"] == step == len(page1["rows"])
    assert [r["name"] for r in page1["rows"] + page2["rows"]] == [
        r["name"] for r in whole["rows"][: step + len(page2["rows"])]
    ]


def test_a_finding_with_many_event_ids_keeps_its_place_and_says_where_the_rest_are(server: McpServer) -> None:
    whole = server.data("findings", {"trace": A, "limit": 500, "max_chars": 1_000_000})
    cut = server.data("findings", {"trace": A, "limit": 500, "max_chars": 2_000})

    assert cut["truncated"] is True and cut["total"] == whole["total"]
    assert [f["rule_id"] for f in cut["findings"]] == [f["rule_id"] for f in whole["findings"]][: len(cut["findings"])]
    assert "sql" in cut["truncation"]["how_to_page"]


@pytest.mark.parametrize("max_chars", [999, 1_000_001, "lots"])
def test_a_budget_out_of_range_is_a_tool_error(server: McpServer, max_chars: Any) -> None:
    assert "max_chars" in server.error("trace_summary", {"trace": A, "max_chars": max_chars})
