"""The out-of-core build of a large trace: the same ``Trace`` as ``normalize.build_trace``, in
bounded memory.

``build_trace`` holds every column of the trace at once (~600 bytes per event on a 5M-event
Kineto file). Past ``spool_events()`` events the JSON importer hands its decoded chunks to a
``Spool`` instead, which keeps nothing per event in Python memory:

1. **Spool.** Chunks are gathered into batches of ``BATCH_EVENTS``; everything that is a
   function of one event alone is computed batch by batch with the functions ``build_trace``
   uses (kinds by ``_classify``, the typed argument columns by ``typed_columns``, device and
   stream), and the batch is appended to a DuckDB table in a temporary directory, with its
   strings as codes into vocabularies of distinct values (``_Vocab``).
2. **Sort.** DuckDB sorts the table into event order (start, longer first, input order) out of
   core; ``event_id`` is the position.
3. **Call tree.** The host events in thread order stream through ``_TreeWalk`` one batch at a
   time: the parent of each event (``nesting.enclosing_spans``) and the nearest marked ancestor
   (enclosing op, user frame, generated frame, nn.Module path, forward op). Between batches only
   the open stack of the thread is carried: it is exactly the chain of parents of the last
   event, so a batch with that chain in front gets the answers the whole thread would.
4. **Links.** Correlation, External id and flow joins, the forward-op marks, the source lines
   inherited through forward op, op and launch, as SQL joins (DuckDB spills past its memory
   limit), into one link table in event order.
5. **Write.** The trace is written row group by row group from the two tables zipped by
   position (``POSITIONAL JOIN``): the columns are assembled per row group (steps, device
   types, dictionaries), never for the whole trace.

The result equals ``build_trace``'s (tests/integration/test_spooled_build.py compares them on
every bundled Kineto trace and every kept fuzz input; bench/fuzz_spooled.py on mutated ones).
Differences by design: dictionaries list their words in another order, row groups hold
``WRITE_ROWS`` events, and a typed argument that is a number in one batch and a string in
another is read batch by batch (the in-memory build reads such a column as text, through
float64). Files that carry our own export's columns (``collectors.kineto.kineto_carry``) are built in
memory.

Modules: ``spooled`` (this one: the threshold, the ``Spool`` the importer fills batch by batch,
the entry points), ``spool_store`` (the directory, the database, the vocabularies),
``spool_tree`` (the call-tree walk), ``spool_links`` (sort, links, sources, metadata),
``spool_assembly`` (the row groups, ``SpooledTrace``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from neuron_explorer.collectors.build._conversion import release_freed_memory
from neuron_explorer.collectors.build.event_columns import _narrow_int32, typed_columns
from neuron_explorer.collectors.build.event_kinds import _C10_DEVICE, _ON_DEVICE_CODES, _classify, _Words
from neuron_explorer.collectors.build.event_links import is_ac2g_category, is_autograd_wrapper, is_fwdbwd_category
from neuron_explorer.collectors.build.raw_events import K, RawEvents, _coerce, _int_column
from neuron_explorer.collectors.build.source_map import UserCode
from neuron_explorer.collectors.kineto.spool_assembly import SpooledTrace
from neuron_explorer.collectors.kineto.spool_links import _Builder
from neuron_explorer.collectors.kineto.spool_store import _ACCEL, _RENAMED, SpoolStore, _spool_errors
from neuron_explorer.trace.arrow import bool_array, from_numpy
from neuron_explorer.trace.schema import EVENTS_SCHEMA, Kind

#: Traces with more events than this are built out of core (``NEURON_EXPLORER_SPOOL_EVENTS``
#: overrides; 0 spools every streamed file).
SPOOL_EVENTS = 1 << 20
#: Events per spooled batch and per walked batch of the call tree (read when a batch fills and
#: when ``Spool.build`` starts the build, which hands it on).
BATCH_EVENTS = 1 << 18


def spool_events() -> int:
    """Event count above which the JSON importer builds out of core."""
    from neuron_explorer import environment

    value = environment.spool_events()
    return SPOOL_EVENTS if value is None else value


class NotSpoolable(Exception):
    """A chunk holds what only the in-memory build handles (carried export columns)."""


_SPOOL_SCHEMA = pa.schema(
    [
        ("row", pa.int64()),
        ("start_rel", pa.int64()),
        ("dur", pa.int64()),
        ("pid", pa.int64()),
        ("tid", pa.int64()),
        ("kind", pa.int8()),
        ("ph", pa.int32()),
        ("cat", pa.int32()),
        ("name", pa.int32()),
        ("dtype", pa.int16()),
        ("is_s", pa.bool_()),
        ("is_f", pa.bool_()),
        ("ac2g", pa.bool_()),
        ("fb", pa.bool_()),
        ("evaluate", pa.bool_()),
        ("corr", pa.int64()),
        ("ext", pa.int64()),
        ("flow", pa.int64()),
        ("device", pa.int32()),
        ("stream", pa.int64()),
    ]
)


class Spool(SpoolStore):
    """Decoded chunks on their way to an out-of-core build (see the module docstring)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        super().__init__(directory)
        self._pending: list[RawEvents] = []
        self._pending_n = 0
        self._table_made = False
        self._inserter: ThreadPoolExecutor | None = None
        self._inserting: Future[None] | None = None

    # ------------------------------------------------------------------------- spooling
    def add(self, raw: RawEvents) -> None:
        with _spool_errors(self.dir):
            self._add(raw)

    def _add(self, raw: RawEvents) -> None:
        if raw.src or raw.columns:
            raise NotSpoolable("a chunk carries columns only the in-memory build restores")
        for key, count in raw.issues.items():
            self.issues[key] = self.issues.get(key, 0) + count
        if raw.n == 0:
            return
        raw.issues = {}
        self._pending.append(raw)
        self._pending_n += raw.n
        if self._pending_n >= BATCH_EVENTS:
            self._flush()

    def _flush(self) -> None:
        """Spool the pending chunks as one batch. The insert runs in a thread (DuckDB releases
        the GIL) while the next chunks are decoded; at most one batch waits for it."""
        if not self._pending:
            return
        batch = RawEvents.concat(self._pending)
        self._pending, self._pending_n = [], 0
        table = self._batch_table(batch)
        del batch
        self._wait()
        if self._inserter is None:
            self._inserter = ThreadPoolExecutor(1, thread_name_prefix="neuron-explorer-spool")
        self._inserting = self._inserter.submit(self._insert, table)

    def _insert(self, table: pa.Table) -> None:
        self.con.register("batch_table", table)
        if not self._table_made:
            self.con.execute("CREATE TABLE raw AS SELECT * FROM batch_table").fetchall()
            self._table_made = True
        else:
            self.con.execute("INSERT INTO raw SELECT * FROM batch_table").fetchall()
        self.con.unregister("batch_table")
        del table
        release_freed_memory()

    def _wait(self) -> None:
        """Wait for the batch being inserted (its error, if any, is raised here)."""
        if self._inserting is not None:
            future, self._inserting = self._inserting, None
            future.result()

    def _finish(self) -> None:
        """Spool what is pending and wait for it: the table is complete."""
        self._flush()
        self._wait()
        if self._inserter is not None:
            self._inserter.shutdown(wait=True)
            self._inserter = None

    def _batch_table(self, raw: RawEvents) -> pa.Table:
        """One batch's spooled columns: what ``build_trace`` derives from each event alone."""
        n = raw.n
        issues = self.issues
        ph, cat, name = _Words.of(raw.ph), _Words.of(raw.cat), _Words.of(raw.name)
        typed = dict(raw.typed)
        kind, _, _ = _classify(ph, cat, name, typed, {})
        on_device = np.isin(kind, _ON_DEVICE_CODES)
        is_mem = kind == K[Kind.MEMORY]
        pid = _int_column(_as_int64(raw.pid), n)
        tid = _int_column(_as_int64(raw.tid), n)
        name_codes = self.name.codes(raw.name)
        self.runtime_names.update(np.unique(name_codes[kind == K[Kind.RUNTIME]]).tolist())

        # device types as token codes (the accelerator's name is decided at build time)
        cat_token = np.empty(len(cat.words) + 1, np.int16)
        for i, c in enumerate([*cat.words, ""]):
            c = c if c is not None else ""
            prefix = c.split("_", 1)[0].lower()
            cat_token[i] = self.dtype.code(prefix if prefix in ("hip", "mtia", "xpu", "hpu") and "_" in c else _ACCEL)
        dtype = np.where(on_device, cat_token[cat.codes], self.dtype.code("cpu")).astype(np.int16)
        mem_type = _int_column(typed.pop("mem_device_type", None), n)
        not_cpu = np.zeros(n, bool)
        if is_mem.any():
            for code in np.unique(mem_type[is_mem]).tolist():
                dev_name = _C10_DEVICE.get(int(code), "cpu" if code < 0 else f"device{int(code)}")
                rows = is_mem & (mem_type == code)
                dtype[rows] = self.dtype.code(
                    _RENAMED + dev_name if dev_name in ("cuda", "privateuseone") else dev_name
                )
                not_cpu |= rows & (dev_name != "cpu")

        dev_arg = _int_column(typed.pop("device", None), n)
        device = np.where(on_device, np.where(dev_arg >= 0, dev_arg, pid), -1)
        mem_dev = _int_column(typed.pop("mem_device_id", None), n)
        device = _narrow_int32(np.where(is_mem & not_cpu, mem_dev, device), "device", issues)
        stream_arg = _int_column(typed.pop("stream", None), n)
        stream = np.where(on_device, np.where(stream_arg >= 0, stream_arg, tid), -1)
        del dev_arg, mem_dev, stream_arg

        is_flow = kind == K[Kind.FLOW]
        text = {"args": raw.args, "extra": raw.extra}
        for out_name, key in (("input_shapes", "input_dims"), ("input_types", "input_type")):
            text[out_name] = typed.pop(key, None)
        cols: dict[str, Any] = {
            "row": np.arange(self.n, self.n + n, dtype=np.int64),
            "start_rel": np.asarray(raw.start_ns, np.int64),
            "dur": np.maximum(np.asarray(raw.dur_ns, np.int64), 0),
            "pid": pid,
            "tid": tid,
            "kind": kind.astype(np.int8),
            "ph": self.ph.codes(raw.ph),
            "cat": self.cat.codes(raw.cat),
            "name": name_codes,
            "dtype": dtype,
            "is_s": ph.isin(("s",)),
            "is_f": ph.isin(("f",)),
            "ac2g": is_flow & cat.test(is_ac2g_category),
            "fb": is_flow & cat.test(is_fwdbwd_category),
            "evaluate": name.test(is_autograd_wrapper),
            "corr": _int_column(typed.pop("correlation", None), n),
            "ext": _int_column(typed.pop("external_id", None), n),
            "flow": _int_column(_as_int64(raw.flow_id), n),
            "device": device.astype(np.int32),
            "stream": stream,
        }
        arrays = [
            bool_array(cols[f.name]) if f.type == pa.bool_() else from_numpy(cols[f.name], f.type)
            for f in _SPOOL_SCHEMA
        ]
        fields = list(_SPOOL_SCHEMA)
        out = typed_columns(typed, kind, name, n, issues)
        out["flow_id"] = _as_int64(raw.flow_id)
        out["memcpy_kind"] = out["memcpy_kind"].cast(pa.string())
        for key, values in out.items():
            values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
            typ = EVENTS_SCHEMA.field(key).type
            typ = typ.value_type if pa.types.is_dictionary(typ) else typ
            arrays.append(values if values.type == typ else values.cast(typ))
            fields.append(pa.field(key, typ))
        for key, values in text.items():
            if values is None:
                values = pa.nulls(n, pa.string())
            values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
            arrays.append(values if values.type == pa.string() else values.cast(pa.string()))
            fields.append(pa.field(key, pa.string()))
        self.n += n
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))

    # ------------------------------------------------------------------------- building
    def out_of_range(self, base: Any) -> int:
        """Events whose absolute start (start + ``base``) passes ``MAX_TIME_NS``: the build
        drops them (``kineto_json._within_time_range``)."""
        from neuron_explorer.collectors.kineto.kineto_checks import MAX_TIME_NS

        with _spool_errors(self.dir):
            self._finish()
            if not isinstance(base, int) or not base or not self._table_made:
                return 0
            query = f"SELECT count(*) FROM raw WHERE abs(start_rel + {base}) > {MAX_TIME_NS}"
            return int(self.con.execute(query).fetchall()[0][0])

    def build(
        self, metadata: dict[str, Any], user_code: UserCode | None = None, phase: Callable[[str], None] | None = None
    ) -> SpooledTrace:
        """The trace (its events stay in the spool until written); ``phase(text)`` is told
        each step as it starts (a progress bar's description)."""
        with _spool_errors(self.dir):
            self._finish()
            return _Builder(self, metadata, user_code or UserCode.default(), phase, BATCH_EVENTS).build()

    def close(self) -> None:
        if self._inserter is not None:
            with contextlib.suppress(Exception):
                self._wait()
            self._inserter.shutdown(wait=True)
            self._inserter = None
        super().close()


def _as_int64(arr: Any) -> Any:
    """A pid/tid/flow-id column as int64, as ``RawEvents.concat`` makes it."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([_coerce(c, pa.int64()) for c in arr.chunks], pa.int64())
    return _coerce(arr, pa.int64())
