"""``neuron-explorer report``: one HTML file from any trace, end to end through the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer.reports.html import write_report
from tests.conftest import BUNDLED_TRACES, KINETO, run_cli

SMALL = KINETO / "hta" / "triton_example.json.gz"


def page_data(page: Path) -> dict:
    text = page.read_text(encoding="utf-8")
    body = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.DOTALL)
    assert body, "no report data in the page"
    return json.loads(body.group(1))


def test_report_writes_one_self_contained_html_file(tmp_path: Path) -> None:
    # When the user asks for a report of a Kineto trace
    out = tmp_path / "out" / "report.html"
    result = run_cli("report", str(SMALL), "-o", str(out))
    # Then one HTML file is written (its folder created), with Plotly inside and no external URL
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stderr  # (stdout holds only output data)
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "Plotly" in text and len(text) > 3_000_000
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=["\']?https?:', text)
    assert [p.name for p in out.parent.iterdir()] == ["report.html"]  # no temporary file left
    assert page_data(out)["header"]["workload"] == "triton_example"


def test_report_defaults_to_trace_name_in_the_current_directory(tmp_path: Path) -> None:
    result = run_cli("report", str(SMALL), "--title", "My model", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = tmp_path / "triton_example.html"
    assert page.exists()
    assert page_data(page)["header"]["workload"] == "My model"


def test_report_shows_the_same_numbers_as_analyze_json(tmp_path: Path) -> None:
    trace = KINETO / "hta" / "sampled_rank-0.json.gz"
    assert run_cli("report", str(trace), "-o", str(tmp_path / "r.html"), "-q").returncode == 0
    analyzed = run_cli("analyze", str(trace), "--format", "json")
    if analyzed.returncode not in (0, 1):
        pytest.skip(f"analyze --format json unavailable: {analyzed.stderr.strip()[:200]}")
    doc = json.loads(analyzed.stdout)
    data = page_data(tmp_path / "r.html")
    assert data["header"]["verdict"] == doc["summary"]["verdict"]
    assert data["header"]["wall_ns"] == doc["summary"]["wall_ns"]
    assert [f["rule_id"] for f in data["findings"]] == [f["rule_id"] for f in doc["findings"]]
    assert [f["cost_ns"] for f in data["findings"]] == [f["cost_ns"] for f in doc["findings"]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.json"], "missing.json: no such file or directory"),
        (["not_a_trace.json"], "not_a_trace.json"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_3(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "not_a_trace.json").write_text("this is not json")
    result = run_cli("report", *args, "-o", str(tmp_path / "r.html"), cwd=tmp_path)
    assert result.returncode == 3
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_output_that_is_a_directory_is_refused(tmp_path: Path) -> None:
    result = run_cli("report", str(SMALL), "-o", str(tmp_path))
    assert result.returncode == 3
    assert "is a directory" in result.stderr and "Traceback" not in result.stderr


def test_unwritable_output_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run_cli("report", str(SMALL), "-o", str(blocker / "r.html"))
    assert result.returncode == 3
    assert "cannot write here" in result.stderr and "Traceback" not in result.stderr
    assert f"{blocker} is a regular file, not a directory" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("trace", BUNDLED_TRACES, ids=lambda p: p.name)
def test_every_bundled_trace_gives_a_report(trace: Path, tmp_path: Path) -> None:
    # Smoke: every real trace in tests/data (GPU, AMD, CPU-only, tiny, old formats) renders
    page = write_report(ne.load(trace), tmp_path / "r.html")
    data = page_data(page)
    assert data["header"]["verdict"]
    assert data["header"]["events"] > 0
    if data["header"]["device_types"] in (["cpu"], []):
        assert data["figures"]["kernels"] is None  # the page says so instead of drawing nothing
