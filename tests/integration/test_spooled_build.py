"""The out-of-core build (``collectors.kineto.spooled``) against the in-memory one (``build_trace``).

The spooled build computes the links with other methods (SQL joins in DuckDB, a call-tree walk
streamed batch by batch with the open stack carried between batches) than the in-memory one
(whole-column numpy); on every bundled Kineto trace, with batches small enough that the walk
crosses thousands of batch boundaries, both give the same events and metadata.
"""

from __future__ import annotations

import gc
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuron_explorer.collectors.build.nesting import enclosing_spans, nearest_marked_ancestor
from neuron_explorer.collectors.kineto import kineto_json, spool_assembly, spool_store, spool_tree, spooled
from neuron_explorer.environment import EnvironmentSettingError
from neuron_explorer.trace.model import Trace
from tests.conftest import BUNDLED_TRACES, KINETO, run_cli

SPOOL_ENV = "NEURON_EXPLORER_SPOOL_EVENTS"


def _plain(table: pa.Table) -> dict[str, pa.Array]:
    """Each column with dictionaries decoded: the two builds list dictionary words in other orders."""
    out = {}
    for f in table.schema:
        col = table.column(f.name)
        if pa.types.is_dictionary(f.type):
            col = col.cast(f.type.value_type)
        out[f.name] = col.combine_chunks()
    return out


def _import(path: Path, monkeypatch: pytest.MonkeyPatch, spool: bool) -> Trace:
    if spool:
        monkeypatch.setenv(SPOOL_ENV, "0")
    else:
        monkeypatch.delenv(SPOOL_ENV, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (repair warnings: compared through the metadata)
        return kineto_json.import_kineto_json(path)


def _assert_same(a: Trace, b: Trace) -> None:
    ta, tb = _plain(a.events), _plain(b.events)
    assert list(ta) == list(tb)
    differ = [name for name in ta if not ta[name].equals(tb[name])]
    assert not differ, f"columns differ: {differ}"
    assert a.metadata == b.metadata


def _same_outcome_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> str:
    """Import ``path`` in memory and spooled: the same trace, or the same one-line error."""
    from neuron_explorer.trace.errors import TraceFormatError

    results: list[Any] = []
    for spool in (False, True):
        try:
            results.append(_import(path, monkeypatch, spool=spool))
        except TraceFormatError as exc:
            results.append(str(exc))
    memory, spool_built = results
    if isinstance(memory, str):
        assert spool_built == memory, what
        return "same error"
    assert isinstance(spool_built, spooled.SpooledTrace), (what, spool_built)
    _assert_same(memory, spool_built)
    spool_built.close()
    return "same trace"


@pytest.mark.parametrize("path", BUNDLED_TRACES, ids=lambda p: p.name)
def test_spooled_build_equals_the_in_memory_build(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spooled, "BATCH_EVENTS", 97)  # thousands of batch boundaries in the walk
    monkeypatch.setattr(spool_assembly, "WRITE_ROWS", 300)
    memory = _import(path, monkeypatch, spool=False)
    spool = _import(path, monkeypatch, spool=True)
    assert type(memory).__name__ == "DeferredTrace" and isinstance(spool, spooled.SpooledTrace)
    _assert_same(memory, spool)
    spool.close()


def test_convert_writes_the_same_parquet_file_either_way(tmp_path: Path) -> None:
    """Through the CLI, as a user converts a trace past the spool threshold."""
    src = KINETO / "tracelens" / "qwen_h100.json.gz"
    a, b = tmp_path / "memory.parquet", tmp_path / "spooled.parquet"
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    r = run_cli("convert", str(src), "-o", str(a), "-q")
    assert r.returncode == 0, r.stderr
    r = run_cli(
        "convert", str(src), "-o", str(b), "-q", env={SPOOL_ENV: "1000", "NEURON_EXPLORER_SPOOL_DIR": str(spool_dir)}
    )
    assert r.returncode == 0, r.stderr
    ta, tb = Trace.read(a), Trace.read(b)
    _assert_same(ta, tb)
    assert ta.num_events == 18221
    assert pq.ParquetFile(b).metadata.num_row_groups == 1  # (18k events: one row group either way)
    assert list(spool_dir.iterdir()) == []  # the spool is removed when the command ends
    r = run_cli("analyze", str(b), "--format", "json", "-o", str(tmp_path / "a.json"))
    assert r.returncode == 0, r.stderr


def test_an_export_of_ours_with_carried_columns_is_built_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from neuron_explorer.reports.chrome_trace import write_chrome_trace

    trace = _import(KINETO / "local" / "cpu_mlp_step4.json", monkeypatch, spool=False)
    exported = write_chrome_trace(trace, tmp_path / "export.json")
    memory = _import(exported, monkeypatch, spool=False)
    again = _import(exported, monkeypatch, spool=True)
    assert not isinstance(again, spooled.SpooledTrace)  # the carried columns need the in-memory build
    _assert_same(memory, again)


def test_a_bad_file_past_the_threshold_fails_in_one_line_and_leaves_no_spool(tmp_path: Path) -> None:
    data = (KINETO / "hta" / "nccl_data.json.gz").read_bytes()
    bad = tmp_path / "truncated.json.gz"
    bad.write_bytes(data[: len(data) // 2])
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    out = tmp_path / "out.parquet"
    r = run_cli("convert", str(bad), "-o", str(out), env={SPOOL_ENV: "0", "NEURON_EXPLORER_SPOOL_DIR": str(spool_dir)})
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and str(bad) in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
    assert list(spool_dir.iterdir()) == []


def test_the_spool_directory_goes_with_the_trace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NEURON_EXPLORER_SPOOL_DIR", str(tmp_path))
    trace = _import(KINETO / "local" / "example_cpu_small.json", monkeypatch, spool=True)
    assert isinstance(trace, spooled.SpooledTrace)
    assert len(list(tmp_path.iterdir())) == 1
    trace.write(tmp_path / "t.parquet")
    assert Trace.read(tmp_path / "t.parquet").num_events == trace.num_events == 192
    del trace
    gc.collect()
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


# ------------------------------------------------------------------- the streamed call-tree walk
def _random_threads(rng: np.random.Generator, n: int) -> dict[str, Any]:
    """Host events of a few threads, spans nested, overlapping and zero-length, in walk order."""
    pid = rng.integers(0, 2, n)
    tid = rng.integers(0, 3, n)
    start = np.sort(rng.integers(0, n * 5, n))
    longest = int(rng.choice([3, 20, n * 3]))  # (short spans: batches end outside every span)
    dur = np.where(rng.random(n) < 0.2, 0, rng.integers(1, longest + 1, n))
    order = np.lexsort((np.arange(n), -dur, start))  # event order
    eid = np.arange(n)
    pid, tid, start, dur = pid[order], tid[order], start[order], dur[order]
    walk = np.lexsort((eid, tid, pid))  # thread order, as the spooled build streams it
    return {
        "pid": pid[walk],
        "tid": tid[walk],
        "eid": eid[walk],
        "start": start[walk],
        "end": (start + dur)[walk],
        "span": (dur > 0)[walk] & (rng.random(n) < 0.9),
        "mark": np.where(rng.random(n) < 0.1, rng.integers(0, 50, n), -1),
    }


@pytest.mark.parametrize("seed", range(30))
def test_the_streamed_walk_finds_the_parents_and_marks_of_the_whole_thread(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 600))
    rows = _random_threads(rng, n)
    # the whole-array answer (as build_trace computes it)
    new_group = np.ones(n, bool)
    new_group[1:] = (rows["pid"][1:] != rows["pid"][:-1]) | (rows["tid"][1:] != rows["tid"][:-1])
    local = enclosing_spans(rows["start"], rows["end"], rows["span"], new_group)
    want_parent = np.where(local >= 0, rows["eid"][np.maximum(local, 0)], -1)
    want_mark = nearest_marked_ancestor(local, rows["mark"])
    # an independent check of that answer: a stack per thread, as a profiler nests (pop the
    # spans that ended at or before the row's start; the parent is the span left on top)
    stacks: dict[tuple[int, int], list[int]] = {}
    by_stack = np.full(n, -1, np.int64)
    for i in range(n):
        s = stacks.setdefault((int(rows["pid"][i]), int(rows["tid"][i])), [])
        while s and rows["end"][s[-1]] <= rows["start"][i]:
            s.pop()
        by_stack[i] = s[-1] if s else -1
        if rows["span"][i]:
            s.append(i)
    np.testing.assert_array_equal(local, by_stack)
    for i in range(n):  # the nearest marked row at or above, up the parent pointers
        j = i
        while j >= 0 and rows["mark"][j] < 0:
            j = by_stack[j]
        assert want_mark[i] == (rows["mark"][j] if j >= 0 else -1)
    # streamed in batches of random sizes
    walk = spool_tree._TreeWalk()
    got_parent, got_mark = [], []
    lo = 0
    while lo < n:
        hi = min(n, lo + int(rng.integers(1, 40)))
        part = {k: v[lo:hi] for k, v in rows.items()}
        m, _, _, parent, (mark,), _ = walk.step(
            part["pid"], part["tid"], part["eid"], part["start"], part["end"], part["span"], [part["mark"]]
        )
        got_parent.append(parent[m:])
        got_mark.append(mark[m:])
        lo = hi
    np.testing.assert_array_equal(np.concatenate(got_parent), want_parent)
    np.testing.assert_array_equal(np.concatenate(got_mark), want_mark)


def test_spool_threshold_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SPOOL_ENV, raising=False)
    assert spooled.spool_events() == spooled.SPOOL_EVENTS
    monkeypatch.setenv(SPOOL_ENV, "5000")
    assert spooled.spool_events() == 5000
    monkeypatch.setenv(SPOOL_ENV, "many")  # (refused, not ignored: issue 26)
    with pytest.raises(EnvironmentSettingError, match=f"{SPOOL_ENV}='many': expected a whole number"):
        spooled.spool_events()


# ------------------------------------------------------------------- mutated inputs, both ways
def test_mutated_traces_give_the_same_trace_or_the_same_error_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Differential fuzzing: each mutated real trace (tests/_fuzz.py) is imported in memory and
    spooled; both give equal traces, or both the same one-line error."""
    import random

    from tests import _fuzz

    monkeypatch.setattr(spooled, "BATCH_EVENTS", 7)
    seeds = [_fuzz.load_seed(p, 40) for p in _fuzz.SEEDS]
    rng = random.Random(16)
    outcomes = {"same trace": 0, "same error": 0}
    for i in range(60):
        data, mutation, gz = _fuzz.kineto_input(rng, seeds)
        src = tmp_path / (f"in{i}.json.gz" if gz else f"in{i}.json")
        src.write_bytes(data)
        outcomes[_same_outcome_both_ways(src, monkeypatch, mutation)] += 1
    assert outcomes["same trace"] > 20 and outcomes["same error"] > 5, outcomes


FUZZ_KINETO = sorted((Path(__file__).resolve().parents[1] / "data" / "fuzz" / "kineto").iterdir())


@pytest.mark.parametrize("path", FUZZ_KINETO, ids=lambda p: p.name)
def test_every_kept_bad_input_gives_the_same_outcome_either_way(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inputs the fuzzers ever broke on (tests/data/fuzz/), both ways: the same trace, or the
    same one-line error."""
    monkeypatch.setattr(spooled, "BATCH_EVENTS", 5)
    _same_outcome_both_ways(path, monkeypatch, path.name)


def test_a_spool_directory_that_cannot_be_used_is_one_line_naming_it(tmp_path: Path) -> None:
    src = KINETO / "local" / "cpu_mlp_step4.json"
    missing = tmp_path / "no" / "such" / "dir"
    out = tmp_path / "out.parquet"
    r = run_cli("convert", str(src), "-o", str(out), env={SPOOL_ENV: "0", "NEURON_EXPLORER_SPOOL_DIR": str(missing)})
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert str(missing) in r.stderr and "NEURON_EXPLORER_SPOOL_DIR" in r.stderr
    assert not out.exists()


def test_the_assembly_refuses_rows_out_of_event_order() -> None:
    """The guard on DuckDB keeping a sorted table's order: consecutive ids, and (start, longer
    first, input order) rising across a batch boundary."""
    ids = np.array([-1, 0, 1, 2])
    start, dur, row = np.array([5, 5, 6]), np.array([9, 2, 0]), np.array([3, 1, 0])
    spool_assembly._check_order(ids, start, dur, row)  # the first batch
    with pytest.raises(RuntimeError):
        spool_assembly._check_order(ids, np.array([5, 5, 4]), dur, row)  # a start goes back
    with pytest.raises(RuntimeError):
        spool_assembly._check_order(ids, start, np.array([2, 9, 0]), row)  # the shorter first
    with pytest.raises(RuntimeError):
        spool_assembly._check_order(np.array([-1, 1, 2, 3]), start, dur, row)  # not from event 0
    # the next batch, after the last row (event 2: start 6, dur 0, row 0)
    spool_assembly._check_order(np.array([2, 3]), np.array([6, 7]), np.array([0, 1]), np.array([0, 9]))
    with pytest.raises(RuntimeError):
        spool_assembly._check_order(np.array([2, 3]), np.array([6, 6]), np.array([0, 0]), np.array([5, 4]))


def test_the_out_of_core_steps_are_named_to_the_progress_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    """After the bytes are read the bar has no count to show; it is told each step instead."""
    seen: list[str] = []

    def progress(done: int, total: int) -> None:
        seen.append("bytes")

    progress.phase = seen.append  # type: ignore[attr-defined]
    monkeypatch.setenv(SPOOL_ENV, "0")
    trace = kineto_json.import_kineto_json(KINETO / "local" / "cpu_mlp_step4.json", progress=progress)
    assert seen[0] == "bytes"
    assert [s for s in seen if s != "bytes"] == ["sorting 835 events on disk", "call tree", "links and source lines"]
    assert isinstance(trace, spooled.SpooledTrace)


def test_a_spool_left_by_a_killed_process_is_removed_by_the_next_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conversion killed by a signal cannot remove its spool (gigabytes on a large trace); the
    next out-of-core import in that directory does, and leaves a running process's alone."""
    import signal
    import subprocess
    import sys

    monkeypatch.setenv("NEURON_EXPLORER_SPOOL_DIR", str(tmp_path))
    src = KINETO / "tracelens" / "qwen_h100.json.gz"
    # a real convert, killed once its spool exists
    proc = subprocess.Popen(
        [sys.executable, "-m", "neuron_explorer", "convert", str(src), "-o", str(tmp_path / "x.parquet"), "-q"],
        env={**os.environ, SPOOL_ENV: "0"},
    )
    for _ in range(600):
        if list(tmp_path.glob(spool_store.SPOOL_PREFIX + "*/" + spool_store.OWNER_FILE)) or proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stale = list(tmp_path.glob(spool_store.SPOOL_PREFIX + "*"))
    assert len(stale) == 1 and not (tmp_path / "x.parquet").exists()
    running = tmp_path / (spool_store.SPOOL_PREFIX + "running")
    running.mkdir()
    (running / spool_store.OWNER_FILE).write_text(str(os.getppid()))  # (a live process: this one's parent)
    trace = _import(KINETO / "local" / "example_cpu_small.json", monkeypatch, spool=True)
    left = sorted(p.name for p in tmp_path.glob(spool_store.SPOOL_PREFIX + "*"))
    assert stale[0].name not in left and running.name in left and len(left) == 2  # (the new one, and the live one)
    trace.close()
