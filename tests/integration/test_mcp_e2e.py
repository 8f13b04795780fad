"""End to end: an agent answers "which source line costs the most device time, and why" through
the MCP tools alone, and the answer is checked against the analyzers' own result.

Run on real GPU traces of the same model on two vendors: the bundled H100 inference trace
(python_function frames, cuBLAS kernels) and the MI300X one (both in tests/data).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.trace.schema import DEVICE_KINDS
from tests.conftest import KINETO
from tests.integration.mcp_client import McpServer

pytestmark = pytest.mark.slow  # a server subprocess per trace

H100 = KINETO / "tracelens" / "qwen_h100.json.gz"
MI300 = KINETO / "tracelens" / "qwen_mi300.json.gz"


def ask_which_line_costs_most_device_time(server: McpServer) -> dict:
    """What an agent does: summary, the top line, the code and cost behind it, the kernel's category, SQL to confirm."""
    summary = server.data("trace_summary")
    top = server.data("top_source_lines", {"sort_by": "device_ns", "limit": 1})["rows"][0]
    context = server.data("source_context", {"file": top["src_file"], "line": top["src_line"], "context": 3})
    culprit = context["attribution"]["kernels"][0]
    kernels = server.data("top_kernels", {"limit": 500})["rows"]
    category = next(k["category"] for k in kernels if k["name"] == culprit["name"])
    file_sql = top["src_file"].replace("'", "''")
    confirmed = server.data(
        "sql",
        {
            "query": "SELECT name, sum(dur_ns) AS device_ns, count(*) AS n FROM events "
            f"WHERE src_file = '{file_sql}' AND src_line = {top['src_line']} "
            "AND kind IN ('kernel', 'collective', 'memcpy', 'memset') GROUP BY name ORDER BY device_ns DESC"
        },
    )
    return {
        "verdict": summary["summary"]["verdict"],
        "line": top,
        "code": context["code"],
        "code_error": context["code_error"],
        "culprit": culprit,
        "culprit_category": category,
        "ops": context["attribution"]["ops"],
        "sql_rows": confirmed["rows"],
        "answer": (
            f"{top['src_file']}:{top['src_line']} ({top['src_func']}) costs {top['device_ns'] / 1e6:.2f} ms of device "
            f"time in {top['kernel_count']} device events, mostly {culprit['count']} x {culprit['name'][:60]} "
            f"({category}, {culprit['device_ns'] / 1e6:.2f} ms), issued by {context['attribution']['ops'][0]['name']}."
        ),
    }


def expected_from_the_analyzers(path: Path) -> dict:
    """The same question answered in-process: the analyzers' table, and the trace's own events."""
    trace = ne.load(path)
    a = analyze(trace)
    top = a.source_lines.sort_values("device_ns", ascending=False, kind="stable").iloc[0]
    ev = trace.to_pandas(columns=["kind", "name", "dur_ns", "src_file", "src_line"])
    at_line = ev[
        ev["kind"].astype(str).isin(DEVICE_KINDS)
        & (ev["src_file"].astype(str) == str(top["src_file"]))
        & (ev["src_line"] == int(top["src_line"]))
    ]
    per_kernel = (
        at_line.assign(name=at_line["name"].astype(str)).groupby("name")["dur_ns"].sum().sort_values(ascending=False)
    )
    culprit = per_kernel.index[0]
    return {
        "file": str(top["src_file"]),
        "line": int(top["src_line"]),
        "device_ns": int(top["device_ns"]),
        "kernel_count": int(top["kernel_count"]),
        "culprit": culprit,
        "culprit_ns": int(per_kernel.iloc[0]),
        "culprit_category": str(a.kernels.loc[a.kernels["name"].astype(str) == culprit, "category"].iloc[0]),
        "verdict": a.summary["verdict"],
    }


def assert_answer_matches(answer: dict, expected: dict) -> None:
    line = answer["line"]
    assert (line["src_file"], line["src_line"]) == (expected["file"], expected["line"])
    assert line["device_ns"] == expected["device_ns"] and line["kernel_count"] == expected["kernel_count"]
    assert (answer["culprit"]["name"], answer["culprit"]["device_ns"]) == (expected["culprit"], expected["culprit_ns"])
    assert answer["culprit_category"] == expected["culprit_category"]
    assert answer["verdict"] == expected["verdict"]
    # SQL over the raw events tells the same story as the tools.
    assert answer["sql_rows"][0][:2] == [expected["culprit"], expected["culprit_ns"]]
    assert sum(row[1] for row in answer["sql_rows"]) == expected["device_ns"]


def test_an_agent_finds_the_costliest_line_of_an_h100_inference_and_why(tmp_path: Path) -> None:
    with McpServer(H100, "--source-root", str(tmp_path)) as server:
        answer = ask_which_line_costs_most_device_time(server)

    expected = expected_from_the_analyzers(H100)
    assert_answer_matches(answer, expected)
    # On this trace: the model hub's run_on_input (a user function; torch and transformers frames
    # are library code) issues every kernel, the costliest being cuBLAS bf16 GEMMs.
    assert expected["file"].endswith("text_base_model.py") and expected["culprit_category"] == "gemm"
    assert expected["file"] in answer["answer"] and "gemm" in answer["answer"]
    # The trace was recorded elsewhere: the file is not under the server's source root.
    assert "no file" in answer["code_error"]


def test_an_agent_finds_the_costliest_line_of_the_same_model_on_mi300_and_why() -> None:
    with McpServer(MI300) as server:
        answer = ask_which_line_costs_most_device_time(server)

    assert_answer_matches(answer, expected_from_the_analyzers(MI300))
    assert answer["answer"].startswith(f"{answer['line']['src_file']}:{answer['line']['src_line']}")
