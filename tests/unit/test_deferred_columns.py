"""A trace whose wide text columns are gathered in event order only when written or read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuron_explorer.collectors.build import deferred
from neuron_explorer.collectors.build.deferred import DeferredTrace
from neuron_explorer.trace import model
from neuron_explorer.trace.model import Trace, conform


def _chunked_args(n: int) -> pa.ChunkedArray:
    texts = [None if i % 7 == 3 else f'{{"i": {i}}}' for i in range(n)]
    return pa.chunked_array([pa.array(texts[lo : lo + 5], pa.string()) for lo in range(0, n, 5)])


def _traces(n: int) -> tuple[DeferredTrace, pa.Table]:
    order = np.random.default_rng(1).permutation(n)
    args = _chunked_args(n)
    # (a valid trace: the reader rejects rows without kind, name or start_ns)
    columns = {
        "event_id": pa.array(np.arange(n)),
        "kind": pa.array(["cpu_op"] * n).dictionary_encode(),
        "name": pa.array([f"op{i}" for i in range(n)]).dictionary_encode(),
        "start_ns": pa.array(np.arange(n) * 10),
        "dur_ns": pa.array(np.zeros(n, np.int64)),
    }
    full = conform(pa.table({**columns, "args": args.take(pa.array(order))}))
    partial = full.drop_columns(["args"])
    return DeferredTrace(partial, {"args": args}, order, {"rank": 0}), full


def test_written_row_groups_hold_the_same_events_as_the_whole_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deferred trace over a chunked args column, written in row groups of 8 rows
    monkeypatch.setattr(model, "ROW_GROUP_ROWS", 8)
    monkeypatch.setattr(deferred, "GATHER_ROWS", 3)
    trace, full = _traces(50)
    # When it is written, then read back
    path = trace.write(tmp_path / "t.parquet")
    # Then the file holds the events in order, in 7 row groups, and the trace is still whole
    assert pq.ParquetFile(path).metadata.num_row_groups == 7
    assert Trace.read(path).events.equals(full)
    assert trace.events.equals(full)
    assert trace.num_events == 50


def test_reading_the_events_gathers_the_deferred_columns_once() -> None:
    trace, full = _traces(23)
    assert trace.events.equals(full)
    assert trace.events.column("args").num_chunks == 1
