"""Large traces are decoded in worker processes: same table as in one process, the same errors
for bad events, and a dead worker costs nothing but time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import neuron_explorer.collectors.kineto.kineto_json as kineto_json
import neuron_explorer.collectors.kineto.parallel_decode as parallel_decode
from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json
from neuron_explorer.trace.errors import TraceFormatError


def _trace(tmp_path: Path, n: int = 600, bad: dict | None = None, at: int = 50) -> Path:
    # args with arrays of objects: "},{" inside an event, where a chunk must not be cut
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1 + i % 3, "ts": i, "dur": 1,
         "args": {"External id": i, "l": [{"a": i}, {"b": [1, {"c": 2}]}]}}
        for i in range(n)
    ]  # fmt: skip
    if bad is not None:
        events[n - at] = bad  # late in the file: in a worker's chunk, or in the tail (at=1)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"meta": 1, "traceEvents": events, "after": {"x": [1]}}, indent=1))
    return path


def _in_one_process(path: Path):
    """The reference: the whole file decoded at once, in this process."""
    saved = kineto_json.STREAM_THRESHOLD
    kineto_json.STREAM_THRESHOLD = 1 << 30
    try:
        return import_kineto_json(path)
    finally:
        kineto_json.STREAM_THRESHOLD = saved


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Tiny chunks, workers from the third chunk on; returns the workers started."""
    monkeypatch.setattr(kineto_json, "STREAM_THRESHOLD", 500)
    monkeypatch.setattr(kineto_json, "CHUNK_BYTES", 2000)
    monkeypatch.setattr(parallel_decode, "START_AFTER_CHUNKS", 2)
    monkeypatch.setenv("NEURON_EXPLORER_WORKERS", "2")
    started: list[object] = []
    init = parallel_decode._Worker.__init__

    def counting_init(self: parallel_decode._Worker) -> None:
        init(self)
        started.append(self)

    monkeypatch.setattr(parallel_decode._Worker, "__init__", counting_init)
    return started


def test_workers_decode_the_same_table_as_one_process(tmp_path: Path, small_chunks: list[object]) -> None:
    path = _trace(tmp_path)
    whole = _in_one_process(path)
    streamed = import_kineto_json(path)
    assert len(small_chunks) == 2, "the chunks were not decoded by workers"
    assert all(w.proc.poll() == 0 for w in small_chunks), "workers must exit cleanly"
    assert streamed.events.equals(whole.events)
    assert streamed.metadata["trace_metadata"] == {"meta": 1, "after": {"x": [1]}}


@pytest.mark.parametrize("at", [50, 1], ids=["worker-chunk", "tail"])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"ph": 5, "name": "x", "ts": 1}, "not a Chrome/Kineto trace"),
        ({"ph": "X", "cat": "cpu_op", "name": "no-ts", "pid": 1, "tid": 1, "dur": 1}, "have no 'ts'"),
    ],
)
def test_a_bad_event_late_in_the_file_fails_the_import_as_in_one_process(
    tmp_path: Path, small_chunks: list[object], bad: dict, message: str, at: int
) -> None:
    path = _trace(tmp_path, bad=bad, at=at)
    with pytest.raises(TraceFormatError, match=message):
        _in_one_process(path)
    with pytest.raises(TraceFormatError, match=message):
        import_kineto_json(path)
    assert len(small_chunks) == 2
    assert all(w.proc.poll() is not None for w in small_chunks), "workers are stopped after a failure"


def test_workers_that_die_leave_the_chunks_to_this_process(
    tmp_path: Path, small_chunks: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _trace(tmp_path)
    whole = _in_one_process(path)
    monkeypatch.setattr(parallel_decode._Worker, "command", (sys.executable, "-c", "import sys; sys.exit(3)"))
    streamed = import_kineto_json(path)
    assert small_chunks and all(w.proc.returncode == 3 for w in small_chunks)
    assert streamed.events.equals(whole.events)


def test_worker_count_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_EXPLORER_WORKERS", "0")
    assert parallel_decode.worker_count() == 0
    monkeypatch.setenv("NEURON_EXPLORER_WORKERS", "3")
    assert parallel_decode.worker_count() == 3
    monkeypatch.delenv("NEURON_EXPLORER_WORKERS")
    assert 1 <= parallel_decode.worker_count() <= parallel_decode.MAX_WORKERS
