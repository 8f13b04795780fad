"""A ``Trace`` whose widest columns are put in event order only when they are needed.

``build_trace`` sorts the events by time. Reordering a text column such as ``args`` (~135
bytes per event, a third of the table) needs the unsorted and the sorted copy at once, and
pyarrow's ``take`` on a chunked column first concatenates every chunk into a third copy: on a
5M-event trace that alone is 1.4 GB of peak memory. ``DeferredTrace`` keeps such columns in
their input order with the permutation that sorts them, and:

- ``write`` gathers them one row group at a time (the Parquet writer never holds more than one
  row group of them in event order);
- ``events`` (anything that reads the table) gathers them in full once, then behaves as a
  plain ``Trace``.

Rows are gathered from a chunked column chunk by chunk, never concatenating the input.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from neuron_explorer.collectors.build._conversion import conversion_settings, release_freed_memory
from neuron_explorer.trace.arrow import from_numpy
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import EVENTS_SCHEMA

#: Rows gathered per step: each step's temporaries are ~3x this many rows of one column.
GATHER_ROWS = 1 << 17


class _Pieces:
    """A column in input order as a list of its chunks, which can be released one by one."""

    def __init__(self, values: pa.Array | pa.ChunkedArray) -> None:
        chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
        self.chunks = [c for c in chunks if len(c)]
        self.starts = np.zeros(len(self.chunks) + 1, np.int64)
        np.cumsum([len(c) for c in self.chunks], out=self.starts[1:])

    def gather(self, rows: np.ndarray, typ: pa.DataType) -> pa.ChunkedArray:
        """Rows ``rows`` (input row numbers) cast to ``typ``, in steps of ``GATHER_ROWS``.

        Each step takes the rows of each chunk from that chunk alone, then puts them back in
        the requested order: pyarrow's ``take`` on a ``ChunkedArray`` would concatenate every
        chunk first (a copy of the whole column, per call).
        """
        chunks, starts = self.chunks, self.starts
        pieces = []
        for lo in range(0, len(rows), GATHER_ROWS):
            step = rows[lo : lo + GATHER_ROWS]
            if len(chunks) == 1:
                part = chunks[0].take(from_numpy(step, pa.int64()))
            else:
                chunk_of = np.searchsorted(starts, step, side="right") - 1
                by_chunk = np.argsort(chunk_of, kind="stable")
                bounds = np.flatnonzero(np.diff(chunk_of[by_chunk])) + 1
                parts = []
                for seg in np.split(by_chunk, bounds):
                    c = int(chunk_of[seg[0]])
                    local = from_numpy(step[seg] - starts[c], pa.int64())
                    parts.append(_as(chunks[c].take(local), typ))
                grouped = pa.concat_arrays(parts)
                del parts
                back = np.empty(len(by_chunk), np.int64)
                back[by_chunk] = np.arange(len(by_chunk))
                part = grouped.take(from_numpy(back, pa.int64()))
            pieces.append(_as(part, typ))
        return pa.chunked_array(pieces, typ)


def _as(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    return arr if arr.type == typ else arr.cast(typ)


class DeferredTrace(Trace):
    """A trace whose ``deferred`` columns (name -> input-order column) are still to be put in
    the order ``order`` (``order[i]``: the input row of event i); ``table`` holds every other
    ``EVENTS_SCHEMA`` column, in event order."""

    def __init__(
        self,
        table: pa.Table,
        deferred: dict[str, pa.Array | pa.ChunkedArray],
        order: np.ndarray,
        metadata: dict[str, Any],
        path: str | Path | None = None,
    ) -> None:
        super().__init__(table, metadata, path)
        self._deferred = {name: _Pieces(v) for name, v in deferred.items()}
        self._order = order

    @property
    def events(self) -> pa.Table:
        if self._deferred:
            table = self._table
            for name, values in self._take_deferred(self._order).items():
                table = _insert(table, name, values.combine_chunks())
            self._table = table
            self._deferred = {}
        return self._table

    @events.setter
    def events(self, table: pa.Table) -> None:
        self._table = table
        self._deferred = {}

    @property
    def num_events(self) -> int:
        return self._table.num_rows

    def _take_deferred(self, rows: np.ndarray) -> dict[str, pa.ChunkedArray]:
        return {name: v.gather(rows, EVENTS_SCHEMA.field(name).type) for name, v in self._deferred.items()}

    def _row_group_tables(self, rows: int) -> Iterator[pa.Table]:
        """One row group at a time: the deferred columns exist in event order for one row
        group only (the trace stays usable after ``write``: its inputs are kept)."""
        if not self._deferred:
            yield from super()._row_group_tables(rows)
            return
        n = self._table.num_rows
        with conversion_settings():
            for lo in range(0, max(n, 1), rows):
                part = self._table.slice(lo, rows)
                for name, values in self._take_deferred(self._order[lo : lo + rows]).items():
                    part = _insert(part, name, values)
                yield part
                del part
                release_freed_memory()  # this row group's gathered columns


def _insert(table: pa.Table, name: str, column: pa.Array | pa.ChunkedArray) -> pa.Table:
    """``table`` with ``column`` at its ``EVENTS_SCHEMA`` position (the other columns are in
    schema order already)."""
    index = EVENTS_SCHEMA.get_field_index(name)
    position = sum(EVENTS_SCHEMA.get_field_index(c) < index for c in table.column_names)
    return table.add_column(position, EVENTS_SCHEMA.field(name), column)
