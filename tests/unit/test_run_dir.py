"""Run directories of Kineto JSON rank traces: load, convert to rank=N/ Parquet on every executor
(one process, a process pool, a local Dask cluster) with identical results, and clean errors."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers.ranks.run_ranks import run_tables
from neuron_explorer.cli import main
from neuron_explorer.collectors.kineto.run_dir import convert_run
from neuron_explorer.parallel import Executor, ExecutorError, PoolExecutor, make_executor
from neuron_explorer.trace.errors import TraceFormatError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import synth_ranks

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto" / "hta"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "run"
    synth_ranks.write_run(out, 3, steps=2, slow_rank=1, seed=5)
    return out


def _tables(out: Path) -> dict[str, object]:
    files = sorted(out.rglob("*.parquet"))
    return {str(f.relative_to(out)): pq.read_table(f) for f in files}


def test_load_run_dir_is_the_concatenation_of_its_ranks(run: Path) -> None:
    t = ne.load(run)
    assert t.ranks == [0, 1, 2]
    assert sorted(t.rank_metadata) == [0, 1, 2]
    single = [ne.load(run / f"rank_{r}.json.gz") for r in range(3)]
    assert t.num_events == sum(s.num_events for s in single)
    for r, s in enumerate(single):
        mine = t.events.filter(t.events["rank"].to_numpy() == r)
        assert mine.column("start_ns").to_pylist() == s.events.column("start_ns").to_pylist()


@pytest.mark.slow
def test_convert_is_identical_serial_pool_and_dask(run: Path, tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    outs, tables = {}, {}
    for name, ex in (("serial", Executor()), ("pool", PoolExecutor(2)), ("dask", make_executor(workers=2))):
        with ex:
            results = convert_run(run, tmp_path / name, ex)
            tables[name] = run_tables(tmp_path / name, ex)
        assert [r["rank"] for r in results] == [0, 1, 2]
        outs[name] = _tables(tmp_path / name)
    assert list(outs["serial"]) == [f"rank={r}/trace.parquet" for r in range(3)]
    for name in ("pool", "dask"):
        assert list(outs[name]) == list(outs["serial"])
        for key, table in outs["serial"].items():
            assert outs[name][key].equals(table), (name, key)
    # the analysis of the converted run equals the one of the JSON run
    from neuron_explorer.analyzers import analyze

    a = analyze(ne.load(tmp_path / "dask"), rules=["culprit_rank"])
    b = analyze(ne.load(run), rules=["culprit_rank"])
    assert a.collectives.equals(b.collectives)
    assert [f.rank for f in a.findings] == [f.rank for f in b.findings] == [1]
    # the cross-rank tables computed rank by rank on each executor equal the in-process analysis
    for name, t in tables.items():
        assert t.collectives.equals(a.collectives), name
        assert t.collective_ranks.equals(a.collective_ranks), name
        assert t.rank_steps.equals(a.rank_steps), name
        assert t.culprit == 1
        (f,) = a.findings
        assert t.late is not None and t.late["lines"][0]["line"] == synth_ranks.PLANTED_LINE
        assert [ln for ln in t.late["lines"] if ln["file"]] == [
            {k: v for k, v in ln.items()} for ln in f.source_lines
        ], name
        assert {c: t.late["extra_ns"][c] for c in ("compute", "copy", "other")} == {
            c: f.metrics[f"extra_{c}_ns"]["value"] for c in ("compute", "copy", "other")
        }, name


def test_cli_convert_run_dir(run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pq"
    assert main(["convert", str(run), "-o", str(out)]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.parquet")) == [
        f"rank={r}/trace.parquet" for r in range(3)
    ]
    assert "3 ranks" in capsys.readouterr().err
    # a second convert into the same, now full, directory: one line, exit 3, nothing changed
    before = _tables(out)
    assert main(["convert", str(run), "-o", str(out)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not empty" in err[0]
    assert all(before[k].equals(v) for k, v in _tables(out).items())


def test_duplicate_rank_is_an_error_and_leaves_no_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "dup"
    run.mkdir()
    shutil.copy(DATA / "sampled_rank-0.json.gz", run / "a.json.gz")
    shutil.copy(DATA / "sampled_rank-0.json.gz", run / "b.json.gz")
    with pytest.raises(TraceFormatError, match="both claim rank 0"):
        ne.load(run)
    out = tmp_path / "out"
    assert main(["convert", str(run), "-o", str(out), "-q"]) == 3
    assert "both claim rank 0" in capsys.readouterr().err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no temporary left


def test_rank_missing_from_a_multi_file_run_is_an_error(tmp_path: Path) -> None:
    run = tmp_path / "norank"
    run.mkdir()
    shutil.copy(DATA / "sampled_rank-0.json.gz", run / "a.json.gz")
    with gzip.open(DATA / "sampled_rank-1.json.gz", "rt") as fh:
        d = json.load(fh)
    del d["distributedInfo"]
    with gzip.open(run / "b.json.gz", "wt") as fh:
        json.dump(d, fh)
    with pytest.raises(TraceFormatError, match="no rank in the trace"):
        ne.load(run)


def test_workers_must_be_positive() -> None:
    with pytest.raises(ExecutorError, match="at least 1"):
        make_executor(workers=0)


def test_cli_ranks_names_the_culprit_rank_by_rank(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pq"
    assert main(["convert", str(run), "-o", str(out), "-q"]) == 0
    capsys.readouterr()
    assert main(["ranks", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ranks"] == 3 and doc["matched_collectives"] == 2 * 4
    assert doc["culprit"]["rank"] == 1
    assert doc["culprit"]["lines"][0]["line"] == synth_ranks.PLANTED_LINE
    assert main(["ranks", str(out)]) == 0
    assert "Rank 1 delays the collectives" in capsys.readouterr().out
    # a balanced run: nobody is named
    flat = tmp_path / "flat"
    synth_ranks.write_run(flat, 3, steps=2, seed=5)
    assert main(["convert", str(flat), "-o", str(tmp_path / "flat_pq"), "-q"]) == 0
    capsys.readouterr()
    assert main(["ranks", str(tmp_path / "flat_pq"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["culprit"] is None
    # a JSON run must be converted first: one line, exit 3
    assert main(["ranks", str(run)]) == 3
    assert "convert it first" in capsys.readouterr().err
