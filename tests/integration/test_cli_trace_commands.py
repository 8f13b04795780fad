"""convert / info / export as a user runs them, including every kind of bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neuron_explorer as ne
from tests.conftest import KINETO, run_cli

SAMPLE = KINETO / "hta" / "sampled_rank-0.json.gz"


def test_convert_info_export_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "rank0.json.gz"
    shutil.copy(SAMPLE, src)
    r = run_cli("convert", str(src))
    assert r.returncode == 0, r.stderr
    out = tmp_path / "rank0.parquet"
    assert out.exists()
    info = run_cli("info", str(out), "--format", "json")
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert data["events"] == 4855
    assert data["by_kind"]["kernel"] > 0
    assert data["links"]["launch_linked"] == data["links"]["device_events"]
    assert data["steps"] and data["ranks"] == [0]
    exp = run_cli("export", str(out), "--format", "chrome", "-o", str(tmp_path / "back.json.gz"))
    assert exp.returncode == 0, exp.stderr
    with gzip.open(tmp_path / "back.json.gz", "rt") as fh:
        assert len(json.load(fh)["traceEvents"]) == 4855
    assert ne.load(tmp_path / "back.json.gz").events.equals(ne.load(out).events)


def test_info_text_reads_a_json_trace_directly() -> None:
    r = run_cli("info", str(KINETO / "local" / "cpu_mlp_step4.json"))
    assert r.returncode == 0, r.stderr
    assert "Events by kind" in r.stdout and "Steps" in r.stdout and "Source lines" in r.stdout


def test_help_lists_the_commands() -> None:
    r = run_cli("--help")
    assert r.returncode == 0
    for command in ("convert", "info", "export"):
        assert command in r.stdout


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    good = SAMPLE.read_bytes()
    future = tmp / "future.parquet"
    trace = ne.load(KINETO / "hta" / "backward_thread.json")
    trace.write(future)
    table = pq.read_table(future)
    meta = json.loads(table.schema.metadata[b"neuron_explorer"])
    meta["schema_version"] = "9.0.0"
    pq.write_table(table.replace_schema_metadata({b"neuron_explorer": json.dumps(meta).encode()}), future)
    plain = tmp / "plain.parquet"
    pq.write_table(pa.table({"x": [1]}), plain)
    return {
        "missing file": (tmp / "nope.json.gz", "no such file"),
        "truncated gz": (_write(tmp / "trunc.json.gz", good[: len(good) // 2]), "truncated"),
        "invalid json": (_write(tmp / "bad.json", b'{"traceEvents": [{"ph": "X",'), "invalid JSON"),
        "json not a trace": (_write(tmp / "cfg.json", b'{"model": "resnet"}'), "not a trace"),
        "empty trace": (_write(tmp / "empty.json", b'{"traceEvents": []}'), "no events"),
        "empty file": (_write(tmp / "zero.json", b""), "empty"),
        "events missing fields": (_write(tmp / "nots.json", b'{"traceEvents": [{"ph": "X", "name": "a"}]}'), "no 'ts'"),
        "parquet not a trace": (plain, "not a Neuron Explorer trace"),
        "newer schema": (future, "newer than this tool"),
    }


_BAD_CASES = [
    "missing file",
    "truncated gz",
    "invalid json",
    "json not a trace",
    "empty trace",
    "empty file",
    "events missing fields",
    "parquet not a trace",
    "newer schema",
]


@pytest.mark.parametrize("case", _BAD_CASES)
@pytest.mark.parametrize("command", ["convert", "info"])
def test_bad_input_gets_one_clear_line_and_no_output(case: str, command: str, tmp_path: Path) -> None:
    path, message = _bad_inputs(tmp_path)[case]
    out = tmp_path / "out.parquet"
    args = ["convert", str(path), "-o", str(out)] if command == "convert" else ["info", str(path)]
    r = run_cli(*args)
    assert r.returncode == 3, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert path.name in lines[0] and message.lower() in lines[0].lower()
    assert "Traceback" not in r.stderr
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.parquet")]


def test_command_summaries_match_their_module_docstrings() -> None:
    import importlib

    from neuron_explorer.cli import COMMANDS

    for name, (module_name, summary) in COMMANDS.items():
        module = importlib.import_module(module_name)
        assert summary == (module.__doc__ or "").strip().splitlines()[0], name
