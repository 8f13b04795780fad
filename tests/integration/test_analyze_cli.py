"""`neuron-explorer analyze` and `neuron-explorer metrics` end to end, through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.slow  # one subprocess per test

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto"
ALEXNET = DATA / "hta" / "alexnet_a100.json.gz"
MI250 = DATA / "hta" / "amd_mi250.json.gz"
CPU_MLP = DATA / "local" / "cpu_mlp_step4.json"


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neuron_explorer", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def test_analyze_text_shows_verdict_findings_and_fixes():
    r = cli("analyze", ALEXNET)
    assert r.returncode == 0, r.stderr
    assert "Verdict:" in r.stdout
    assert "device_idle" in r.stdout and "Fix:" in r.stdout
    assert "Where the profiled time went" in r.stdout


def test_analyze_json_is_the_documented_document():
    r = cli("analyze", ALEXNET, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == "2.6.0"
    assert all(f["cost_method"] in ("replay", "attribution") for f in doc["findings"])
    assert "fixes" in doc and "critical_path" in doc["summary"]
    ids = [f["rule_id"] for f in doc["findings"]]
    assert "device_idle" in ids
    assert all(s["reason"].startswith("skipped: needs") for s in doc["skipped"])


def test_analyze_markdown_for_pull_requests():
    r = cli("analyze", MI250, "--format", "markdown", "--min-severity", "error")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("## Neuron Explorer analysis")
    # its one step's steady part is host-bound on short kernels: an error by its cost
    assert "(`launch_bound`)" in r.stdout and "**Fix:**" in r.stdout
    # alexnet's 43 s are CUDA context creation and a first forward: one-time work, called that,
    # with no steady-state error (before: "host-bound, error")
    r = cli("analyze", ALEXNET, "--format", "markdown", "--min-severity", "error")
    assert "**Verdict:** Only one-time work: " in r.stdout and "(`host_bound`)" not in r.stdout


@pytest.mark.parametrize(
    ("trace", "fail_on", "code"),
    [(MI250, "error", 1), (MI250, "warning", 1), (ALEXNET, "warning", 0), (CPU_MLP, "warning", 0)],
)
def test_fail_on_sets_the_exit_code_for_ci(trace, fail_on, code):
    r = cli("analyze", trace, "--format", "json", "--fail-on", fail_on)
    assert r.returncode == code, (r.stdout[-500:], r.stderr)


def test_rules_and_threshold_options_select_and_tune_rules():
    r = cli(
        "analyze", ALEXNET, "--format", "json", "--rules", "device_idle", "--threshold", "device_idle.min_busy_pct=0"
    )
    doc = json.loads(r.stdout)
    assert doc["rules_run"] == ["device_idle"]
    assert doc["findings"] == []  # nothing is busy less than 0% of the time


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--rules", "nope"), "unknown rule or family: nope"),
        (("--threshold", "device_idle=3"), "expected RULE.NAME=VALUE"),
        (("--threshold", "device_idle.bogus=3"), "has no threshold 'bogus'"),
    ],
)
def test_bad_options_give_one_line_errors(args, message):
    r = cli("analyze", ALEXNET, *args)
    assert r.returncode == 3
    assert message in r.stderr and "Traceback" not in r.stderr


def test_missing_trace_is_a_clear_error(tmp_path):
    r = cli("analyze", tmp_path / "nope.parquet")
    assert r.returncode == 3 and "no such file" in r.stderr and "Traceback" not in r.stderr


def test_output_file_is_written_whole(tmp_path):
    out = tmp_path / "sub" / "report.md"
    r = cli("analyze", ALEXNET, "--format", "markdown", "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("## Neuron Explorer analysis")
    assert [p.name for p in out.parent.iterdir()] == ["report.md"]


def test_analyze_a_parquet_run_directory(tmp_path):
    for rank, name in ((0, "sampled_rank-0.json.gz"), (1, "sampled_rank-1.json.gz")):
        assert cli("convert", DATA / "hta" / name, "-o", tmp_path / f"rank={rank}" / "trace.parquet").returncode == 0
    r = cli("analyze", tmp_path, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["summary"]["ranks"] == [0, 1]
    assert {row["rank"] for row in doc["tables"]["breakdown"]} == {0, 1}


def test_metrics_export_writes_every_family_and_the_fields_table(tmp_path):
    out = tmp_path / "metrics"
    r = cli("metrics", ALEXNET, "-o", out)
    assert r.returncode == 0, r.stderr
    names = {p.name for p in out.iterdir()}
    for family in ("steps", "breakdown", "kernels", "ops", "source_lines", "findings", "fields"):
        assert f"{family}.parquet" in names
    fields = pq.read_table(out / "fields.parquet").to_pandas()
    for family in ("steps", "breakdown", "kernels", "ops", "source_lines", "findings"):
        schema = pq.read_schema(out / f"{family}.parquet")
        described = set(fields.loc[fields["table"] == family, "field"])
        assert set(schema.names) == described
    assert (fields["description"].str.len() > 0).all()
    kernels = pq.read_table(out / "kernels.parquet").to_pandas()
    assert kernels["pct"].sum() == pytest.approx(100.0)
    findings = pq.read_table(out / "findings.parquet").to_pandas()
    assert "device_idle" in set(findings["rule_id"])
    assert json.loads(findings.loc[findings["rule_id"] == "device_idle", "metrics"].iloc[0])["busy_pct"]["unit"] == "%"
    # a second export replaces the first atomically, leaving no temporary directories behind
    assert cli("metrics", CPU_MLP, "-o", out).returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["metrics"]


def test_metrics_refuses_to_replace_an_unrelated_directory(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    r = cli("metrics", ALEXNET, "-o", tmp_path)
    assert r.returncode == 3 and "refusing to replace" in r.stderr
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_analyze_folds_rules_that_did_not_apply_into_one_line_and_verbose_lists_them():
    short = cli("analyze", CPU_MLP)
    full = cli("analyze", CPU_MLP, "--verbose")
    assert short.returncode == 0 and full.returncode == 0, short.stderr + full.stderr
    folded = " ".join(short.stdout.split())  # the one summary, however the terminal wraps it
    assert "rules did not apply, for lack of: " in folded and "--verbose lists them" in folded
    assert "skipped: needs" not in short.stdout
    assert full.stdout.count("skipped: needs") >= 10  # one line per rule, with what it needs
    assert "device_idle: skipped: needs " in full.stdout
