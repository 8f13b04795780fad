"""Step 5 of the out-of-core build: the trace written row group by row group.

The event table and the link table are read zipped by position (``POSITIONAL JOIN``) and each
row group's ``EVENTS_SCHEMA`` columns are assembled from them (steps, device types,
dictionaries), never the whole trace's (``_Assembly``); ``_check_order`` guards the one thing
taken from DuckDB on trust, that a sorted table keeps its order. ``SpooledTrace`` is the trace
whose events stay in the spool until written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from neuron_explorer.collectors.build._conversion import conversion_settings, release_freed_memory
from neuron_explorer.collectors.build.event_columns import _narrow_int32, _nullable, schema_table
from neuron_explorer.collectors.build.event_kinds import _ON_DEVICE_CODES
from neuron_explorer.collectors.build.raw_events import KINDS, K
from neuron_explorer.collectors.build.source_attribution import _PRECISIONS
from neuron_explorer.collectors.build.steps import StepTimes
from neuron_explorer.collectors.kineto.spool_store import SpoolStore, _reader, _spool_errors
from neuron_explorer.trace.arrow import dictionary_from_codes, from_numpy, string_array, to_numpy
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import EVENTS_SCHEMA, Kind

#: Events per row group of a spooled trace's Parquet file (the in-memory build writes 1M).
WRITE_ROWS = 1 << 17


class _Steps(StepTimes):
    """The step spans not demoted (their event ids and own numbers), and each instant's step."""

    def __init__(self, eid: np.ndarray, start: np.ndarray, dur: np.ndarray, numbers: np.ndarray) -> None:
        super().__init__(start, dur, numbers)
        self.eid = eid
        self.own = numbers


class _Assembly:
    """Builds the ``EVENTS_SCHEMA`` tables of a spooled trace, row group by row group."""

    def __init__(
        self,
        spool: SpoolStore,
        dtypes: list[str],
        steps: _Steps,
        demoted: np.ndarray,
        rank: int,
        module_words: list[str],
        frames: list[Any],
        batch: int,
    ) -> None:
        self.dtypes = dtypes
        self.steps = steps
        self.demoted = demoted
        self.rank = rank
        self.module_words = module_words
        words = spool.name.words
        self.file_words = [f[0] if f else None for f in frames]
        self.func_words = [f[2] if f else None for f in frames]
        self.ph_words, self.cat_words, self.name_words = spool.ph.words, spool.cat.words, words
        self.issues: dict[tuple[str, str], int] = {}
        self._last = None
        self.batch = batch  # events per batch read back (``spooled.BATCH_EVENTS``)

    def tables(self, con: Any, rows: int = WRITE_ROWS, steps_only: bool = False) -> Iterator[pa.Table]:
        """The trace's rows as ``EVENTS_SCHEMA`` tables of ``rows`` rows, in event order."""
        reader = _reader(con, "SELECT * FROM ev POSITIONAL JOIN lk", min(rows, self.batch))
        self._last: list[np.ndarray] | None = None
        pending: list[pa.RecordBatch] = []
        count = 0
        for batch in reader:
            pending.append(batch)
            count += batch.num_rows
            if count >= rows:
                yield self._table(pa.Table.from_batches(pending), steps_only)
                pending, count = [], 0
        if pending:
            yield self._table(pa.Table.from_batches(pending), steps_only)

    def _table(self, t: pa.Table, steps_only: bool) -> pa.Table:
        n = t.num_rows

        def col(name: str, fill: Any = None) -> np.ndarray:
            return to_numpy(t.column(name), fill=fill)

        eid = col("eid")
        if not np.array_equal(eid, col("lk_eid")):
            raise RuntimeError("spooled trace: the event and link tables are out of step")
        keys = [eid, col("start"), col("dur"), col("row")]
        last = self._last if self._last is not None else [np.array([-1], np.int64)] + [k[:0] for k in keys[1:]]
        _check_order(*(np.concatenate([a, b]) for a, b in zip(last, keys)))
        self._last = [k[-1:] for k in keys]
        kind = col("kind").astype(np.int8)
        on_device = np.isin(kind, _ON_DEVICE_CODES)
        start = col("start")
        steps = self.steps
        by_time = steps.by_time(start)
        op, launch = col("op"), col("launch")
        step = np.where(~on_device, by_time, -1)
        is_step = np.isin(eid, steps.eid)
        if is_step.any():  # a step span's own number (steps.eid is in event order)
            step[is_step] = steps.own[np.searchsorted(steps.eid, eid[is_step])]
        dev_step = np.where(op >= 0, steps.by_time(col("op_start")), -1)
        dev_step = np.where((dev_step < 0) & (launch >= 0), steps.by_time(col("launch_start")), dev_step)
        dev_step = np.where(dev_step < 0, by_time, dev_step)
        step = _narrow_int32(np.where(on_device, dev_step, step), "step number", self.issues)
        if steps_only:
            return pa.table({"step": _nullable(step, pa.int32())})
        if self.demoted.size:
            kind = np.where(np.isin(eid, self.demoted), K[Kind.ANNOTATION], kind).astype(np.int8)
        sname = col("sname")
        cols: dict[str, Any] = {
            "event_id": from_numpy(eid, pa.int64()),
            "rank": from_numpy(np.full(n, self.rank, np.int32), pa.int32()),
            "kind": pa.DictionaryArray.from_arrays(
                from_numpy(kind.astype(np.int32), pa.int32()), string_array(list(KINDS))
            ),
            "category": dictionary_from_codes(col("cat"), self.cat_words),
            "ph": dictionary_from_codes(col("ph"), self.ph_words),
            "name": dictionary_from_codes(col("name"), self.name_words),
            "device_type": dictionary_from_codes(col("dtype").astype(np.int64), self.dtypes),
            "device": _nullable(col("device"), pa.int32()),
            "stream": _nullable(col("stream"), pa.int64()),
            "pid": t.column("pid"),
            "tid": t.column("tid"),
            "start_ns": t.column("start"),
            "dur_ns": t.column("dur"),
            "parent_id": _nullable(col("parent"), pa.int64()),
            "correlation_id": _nullable(col("lk_corr"), pa.int64()),
            "external_id": _nullable(col("ext"), pa.int64()),
            "launch_id": _nullable(launch, pa.int64()),
            "op_id": _nullable(op, pa.int64()),
            "fwd_id": _nullable(col("fwd"), pa.int64()),
            "capture_op_id": _nullable(col("capture_op"), pa.int64()),
            "step": _nullable(step, pa.int32()),
            "cycle": from_numpy(np.zeros(n, np.int32), pa.int32()),
            "src_file": dictionary_from_codes(sname, self.file_words),
            "src_line": from_numpy(col("sline"), pa.int32(), col("sline") < 0),
            "src_func": dictionary_from_codes(sname, self.func_words),
            "src_module": dictionary_from_codes(col("smod"), self.module_words),
            "src_precision": dictionary_from_codes(col("sprec").astype(np.int64), list(_PRECISIONS)),
        }
        for f in EVENTS_SCHEMA:  # the typed argument and text columns, as spooled
            if f.name not in cols and f.name in t.column_names:
                cols[f.name] = t.column(f.name)
        return schema_table(cols, n)


def _check_order(eid: np.ndarray, start: np.ndarray, dur: np.ndarray, row: np.ndarray) -> None:
    """Raise unless the rows are consecutive event ids in event order (start, longer first,
    input order): the guard on the one thing the build takes from DuckDB on trust, that a
    table keeps the order it was sorted into. ``eid``: the previous batch's last event id (-1
    before the first batch: it starts at 0) then the batch's; the other keys: the previous
    batch's last row (none before the first) then the batch's."""
    ok = bool(np.array_equal(eid, np.arange(eid[0], eid[0] + len(eid))))
    if ok and len(start) > 1:
        s0, s1, d0, d1, r0, r1 = start[:-1], start[1:], dur[:-1], dur[1:], row[:-1], row[1:]
        ok = bool(((s0 < s1) | ((s0 == s1) & ((d0 > d1) | ((d0 == d1) & (r0 < r1))))).all())
    if not ok:
        raise RuntimeError("spooled trace: the sorted events lost their order")


class SpooledTrace(Trace):
    """A trace whose events are in a spool on disk: ``write`` assembles them one row group at a
    time; reading ``events`` assembles the whole table once (in memory, as any trace)."""

    def __init__(self, spool: SpoolStore, assembly: _Assembly, n: int, metadata: dict[str, Any]) -> None:
        self._spool = spool
        self._assembly = assembly
        self._n = n
        self._table: pa.Table | None = None
        super().__init__(None, metadata)  # type: ignore[arg-type]

    @property
    def events(self) -> pa.Table:
        if self._table is None:
            with _spool_errors(self._spool.dir):
                parts = list(self._assembly.tables(self._spool.con))
            self._table = pa.concat_tables(parts) if parts else schema_table({}, 0)
        return self._table

    @events.setter
    def events(self, table: pa.Table | None) -> None:
        self._table = table

    @property
    def num_events(self) -> int:
        return self._n if self._table is None else self._table.num_rows

    def _row_group_tables(self, rows: int) -> Iterator[pa.Table]:
        if self._table is not None:
            yield from super()._row_group_tables(rows)
            return
        with _spool_errors(self._spool.dir), conversion_settings():
            for part in self._assembly.tables(self._spool.con):
                yield part
                del part
                release_freed_memory()

    def close(self) -> None:
        """Remove the spool (also done when the trace is garbage-collected)."""
        self._spool.close()
