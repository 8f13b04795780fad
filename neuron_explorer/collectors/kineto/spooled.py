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
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neuron_explorer import __version__
from neuron_explorer.collectors.build import graph_replay
from neuron_explorer.collectors.build._conversion import conversion_settings, release_freed_memory
from neuron_explorer.collectors.build.nesting import enclosing_spans
from neuron_explorer.collectors.build.normalize import (
    _C10_DEVICE,
    _GRAPH_FAMILY_OF,
    _HOST_CHILD_CODES,
    _HOST_LINKED_CODES,
    _HOST_SPAN_CODES,
    _ON_DEVICE_CODES,
    KINDS,
    K,
    RawEvents,
    StepTimes,
    _classify,
    _coerce,
    _int_column,
    _narrow_int32,
    _nullable,
    _step_number,
    _Words,
    accelerator_type,
    is_ac2g_category,
    is_autograd_wrapper,
    is_fwdbwd_category,
    nearest_marked_ancestor,
    schema_table,
    trailing_step,
    typed_columns,
)
from neuron_explorer.collectors.build.source_attribution import (
    _FORWARD,
    _FUNCTION,
    _GENERATED,
    _GRAPH_CAPTURE,
    _LAUNCH,
    _PRECISIONS,
)
from neuron_explorer.collectors.build.source_map import UserCode, module_name, parse_python_frame
from neuron_explorer.collectors.build.step_tail import STEP_MARKER
from neuron_explorer.trace.arrow import (
    bool_array,
    dict_parts,
    dictionary_from_codes,
    from_numpy,
    string_array,
    to_numpy,
)
from neuron_explorer.trace.atomic import forget_temporary, process_alive, register_temporary
from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.repairs import Repairs
from neuron_explorer.trace.schema import EVENTS_SCHEMA, SCHEMA_VERSION, Kind

#: Traces with more events than this are built out of core (``NEURON_EXPLORER_SPOOL_EVENTS``
#: overrides; 0 spools every streamed file).
SPOOL_EVENTS = 1 << 20
#: Events per spooled batch and per walked batch of the call tree.
BATCH_EVENTS = 1 << 18
#: Events per row group of a spooled trace's Parquet file (the in-memory build writes 1M).
WRITE_ROWS = 1 << 17
#: DuckDB's memory limit: past it, sorts and joins spill to the temporary directory.
DUCKDB_MEMORY = "384MB"
#: ... while chunks are spooled (the decoded chunks and a batch in flight share the process).
SPOOL_DUCKDB_MEMORY = "160MB"
#: ... while the trace is written (two tables scanned in order).
ASSEMBLY_DUCKDB_MEMORY = "128MB"


def spool_events() -> int:
    """Event count above which the JSON importer builds out of core."""
    from neuron_explorer import environment

    value = environment.spool_events()
    return SPOOL_EVENTS if value is None else value


#: Spool directories are named ``SPOOL_PREFIX...`` and hold the owning process's id in ``OWNER_FILE``.
SPOOL_PREFIX = "neuron-explorer-spool-"
OWNER_FILE = "owner.pid"


def remove_stale_spools(parent: Path) -> list[Path]:
    """Remove the spool directories in ``parent`` whose process is gone: one killed by a signal
    (SIGTERM, SIGHUP when its terminal closed, the OOM killer) could not remove its own, which
    can hold gigabytes. A directory without an owner file, or whose owner runs, is kept."""
    removed = []
    for d in parent.glob(SPOOL_PREFIX + "*"):
        try:
            pid = int((d / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if process_alive(pid):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def _remove_spool(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    forget_temporary(directory)


class NotSpoolable(Exception):
    """A chunk holds what only the in-memory build handles (carried export columns)."""


class SpoolError(NeuronExplorerError):
    """The out-of-core build could not use its temporary directory (full disk, no access)."""


@contextlib.contextmanager
def _spool_errors(directory: Path | str | None) -> Iterator[None]:
    """DuckDB's and the file system's errors as one line naming the spool directory."""
    import duckdb

    try:
        yield
    except (duckdb.Error, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        where = directory or tempfile.gettempdir()
        raise SpoolError(
            f"the out-of-core build of a large trace failed in its temporary directory ({first}); "
            "point NEURON_EXPLORER_SPOOL_DIR at a writable directory with free space",
            where,
        ) from None


class _Vocab:
    """Distinct strings of one column across all batches, and each one's code."""

    def __init__(self) -> None:
        self.words: list[Any] = []
        self._code: dict[Any, int] = {}

    def code(self, word: Any) -> int:
        c = self._code.get(word)
        if c is None:
            c = self._code[word] = len(self.words)
            self.words.append(word)
        return c

    def codes(self, arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
        words, codes = dict_parts(arr)
        table = np.empty(len(words) + 1, np.int32)
        for i, w in enumerate(words):
            table[i] = self.code(w)
        table[-1] = -1
        return table[codes] if len(codes) else np.zeros(0, np.int32)


#: Device types of events, spooled as tokens into ``_DTYPE_WORDS``-like vocabularies: the
#: accelerator is only known once every category and runtime name has been seen.
_ACCEL = "\x00accel"
#: Memory events on these c10 device types take the accelerator's name (see ``_classify``).
_RENAMED = "\x00renamed:"

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


class Spool:
    """Decoded chunks on their way to an out-of-core build (see the module docstring)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        import duckdb  # (a declared dependency; only large imports pay for importing it)

        from neuron_explorer import environment

        parent = directory or environment.spool_dir()
        with _spool_errors(parent):
            remove_stale_spools(Path(parent or tempfile.gettempdir()))
            self.dir = Path(tempfile.mkdtemp(prefix=SPOOL_PREFIX, dir=parent))
            (self.dir / OWNER_FILE).write_text(str(os.getpid()))
        register_temporary(self.dir)  # (removed if a signal ends the process: cli.signals)
        self._finalizer = weakref.finalize(self, _remove_spool, str(self.dir))
        with _spool_errors(self.dir):
            self.con = self._connect(duckdb, self.dir)
        self.ph, self.cat, self.name, self.dtype = _Vocab(), _Vocab(), _Vocab(), _Vocab()
        self.runtime_names: set[int] = set()
        self.n = 0
        self.issues: dict[tuple[str, str], int] = {}
        self._pending: list[RawEvents] = []
        self._pending_n = 0
        self._table_made = False
        self._inserter: ThreadPoolExecutor | None = None
        self._inserting: Future[None] | None = None

    @staticmethod
    def _connect(duckdb: Any, directory: Path) -> Any:
        return duckdb.connect(
            str(directory / "spool.duckdb"),
            config={
                "memory_limit": SPOOL_DUCKDB_MEMORY,
                "threads": max(1, min(os.cpu_count() or 1, 4)),
                "temp_directory": str(directory / "tmp"),
                # (only the two tables kept in event order need it: ``_Builder.sql(ordered=True)``)
                "preserve_insertion_order": False,
            },
        )

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
            return _Builder(self, metadata, user_code or UserCode.default(), phase).build()

    def close(self) -> None:
        if self._inserter is not None:
            with contextlib.suppress(Exception):
                self._wait()
            self._inserter.shutdown(wait=True)
            self._inserter = None
        with contextlib.suppress(Exception):
            self.con.close()
        self._finalizer()


def _as_int64(arr: Any) -> Any:
    """A pid/tid/flow-id column as int64, as ``RawEvents.concat`` makes it."""
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([_coerce(c, pa.int64()) for c in arr.chunks], pa.int64())
    return _coerce(arr, pa.int64())


def _reader(con: Any, query: str, rows: int) -> pa.RecordBatchReader:
    """A query's result streamed as Arrow batches of ``rows`` rows (DuckDB 1.x and 2.x)."""
    rel = con.sql(query)
    if hasattr(rel, "to_arrow_reader"):
        return rel.to_arrow_reader(rows)
    return rel.fetch_record_batch(rows)  # pragma: no cover - DuckDB < 1.4


def _fetch(con: Any, query: str) -> pa.Table:
    """A (small) query's whole result as one Arrow table."""
    return _reader(con, query, BATCH_EVENTS).read_all()


# ----------------------------------------------------------------------------- the tree walk
class _TreeWalk:
    """The call tree of host events streamed in thread order (pid, tid, event_id), batch by
    batch, carrying the open stack of the current thread between batches.

    ``marks``: per batch, arrays of values >= 0 where a row is marked; ``step`` resolves, per
    mark, the value of the nearest marked row among each row and its ancestors (-1: none).
    The context in front of a batch is the previous batch's open stack with its resolved
    marks (``ctx``); a caller can keep more per-row values there (``ctx[key]``, set after
    ``step`` for the positions ``chain``).
    """

    def __init__(self) -> None:
        self.ctx: dict[str, np.ndarray] | None = None

    def step(
        self,
        pid: np.ndarray,
        tid: np.ndarray,
        eid: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        span: np.ndarray,
        marks: list[np.ndarray],
    ) -> tuple[int, dict[str, np.ndarray] | None, np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
        """(m, the context used, local parent positions, parent event ids, resolved marks,
        the positions of the next context); the arrays cover context + batch, the ``m``
        context rows first."""
        ctx = self.ctx
        if ctx is not None and (
            len(pid) == 0 or len(ctx["eid"]) == 0 or ctx["pid"][0] != pid[0] or ctx["tid"][0] != tid[0]
        ):
            ctx = None
        m = 0 if ctx is None else len(ctx["eid"])
        if m:
            assert ctx is not None
            pid, tid, eid = (np.concatenate([ctx[k], v]) for k, v in (("pid", pid), ("tid", tid), ("eid", eid)))
            start, end = np.concatenate([ctx["start"], start]), np.concatenate([ctx["end"], end])
            span = np.concatenate([ctx["span"], span])
            marks = [np.concatenate([ctx[f"mark{i}"], mk]) for i, mk in enumerate(marks)]
        new_group = np.ones(len(pid), bool)
        new_group[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
        local = enclosing_spans(start, end, span, new_group)
        resolved = [nearest_marked_ancestor(local, mk) for mk in marks]
        parent = np.where(local >= 0, eid[np.maximum(local, 0)], -1)
        # The open stack after the last row: the chain of its parents (itself first when a
        # span). Every other row before it ended at or before a later start, so it can
        # enclose nothing that follows (see ``nesting``).
        chain: list[int] = []
        if len(pid):
            r = len(pid) - 1 if span[-1] else int(local[-1])
            while r >= 0:
                chain.append(r)
                r = int(local[r])
        rows = np.array(chain[::-1], np.int64)
        self.ctx = {
            "pid": pid[rows],
            "tid": tid[rows],
            "eid": eid[rows],
            "start": start[rows],
            "end": end[rows],
            "span": span[rows],
            **{f"mark{i}": res[rows] for i, res in enumerate(resolved)},
        }
        return m, ctx, local, parent, resolved, rows


# ----------------------------------------------------------------------------- the build
def _sql_list(codes: Any) -> str:
    """Kind codes as a SQL ``IN`` list."""
    return ", ".join(str(int(c)) for c in codes)


_HOST_CHILD = _sql_list(_HOST_CHILD_CODES)
_ON_DEVICE = _sql_list(_ON_DEVICE_CODES)
_CPU_OP, _RUNTIME, _MEMORY = int(K[Kind.CPU_OP]), int(K[Kind.RUNTIME]), int(K[Kind.MEMORY])
_PYTHON, _STEP = int(K[Kind.PYTHON]), int(K[Kind.STEP])
_HOST_LINKED = _sql_list(_HOST_LINKED_CODES)
_DEVICE_WORK = _sql_list(np.array([K[k] for k in _GRAPH_FAMILY_OF]))
#: kind code -> the work family graph_replay compares (-1: not device work)
_GRAPH_FAMILY = np.full(len(KINDS), -1, np.int8)
for _k, _fam in _GRAPH_FAMILY_OF.items():
    _GRAPH_FAMILY[K[_k]] = _fam


class _Builder:
    def __init__(
        self, spool: Spool, metadata: dict[str, Any], user_code: UserCode, phase: Callable[[str], None] | None
    ) -> None:
        self.phase = phase or (lambda text: None)
        self.spool = spool
        self.con = spool.con
        self.metadata = metadata
        self.user_code = user_code
        self.issues = dict(spool.issues)

    def sql(self, query: str, ordered: bool = False) -> None:
        """Run a statement; ``ordered``: the table it makes keeps the order of its ORDER BY
        (DuckDB's insertion order, otherwise off: joins and sorts spill more freely)."""
        if ordered:
            self.con.execute("SET preserve_insertion_order = true").fetchall()
        try:
            self.con.execute(query).fetchall()  # (DuckDB wants every result finished)
        finally:
            if ordered:
                self.con.execute("SET preserve_insertion_order = false").fetchall()

    def build(self) -> SpooledTrace:
        from neuron_explorer.collectors.kineto import kineto_checks as checks

        self.sql(f"SET memory_limit = '{DUCKDB_MEMORY}'")
        base = self.metadata.get("base_time_ns")
        base = int(base) if isinstance(base, int) else 0
        keep = f"WHERE abs(start_rel + {base}) <= {checks.MAX_TIME_NS}" if base else ""
        self.phase(f"sorting {self.spool.n:,} events on disk")
        # event order: start, the longer (enclosing) event first, then input order
        # (one sort of the whole rows; with insertion order preserved the table keeps it, and
        # a row's position is its event id: ``eid`` is DuckDB's rowid. The assembly checks
        # that the rows it writes come in this order.)
        self.sql(
            f"CREATE TABLE evt AS SELECT start_rel + {base} AS start, * EXCLUDE (start_rel) FROM raw {keep} "
            f"ORDER BY start, dur DESC, row",
            ordered=True,
        )
        self.sql("DROP TABLE raw")
        self.sql("CREATE VIEW ev AS SELECT rowid AS eid, * FROM evt")
        self.sql("CHECKPOINT")
        n = self.scalar("SELECT count(*) FROM ev")
        self.n = n
        self._frames()
        self.phase("call tree")
        self._tree()
        self.phase("links and source lines")
        self._links()
        return self._trace()

    def scalar(self, query: str) -> Any:
        rows = self.con.execute(query).fetchall()
        return rows[0][0] if rows else None

    def _frames(self) -> None:
        """Per distinct name: the python frame it names (file, line, function), its origin and
        nn.Module (``source_attribution``'s per-name tables)."""
        names = [w if w is not None else "" for w in self.spool.name.words]
        frames = [parse_python_frame(nm) for nm in names]
        origin = [self.user_code.origin(f[0]) if f is not None else "library" for f in frames]
        self.frames = frames
        self.user_name = np.array([o == "user" for o in origin] + [False])
        self.gen_name = np.array([o == "generated" for o in origin] + [False])
        self.mod_names = [module_name(nm) for nm in names]
        self.is_mod_name = np.array([m is not None for m in self.mod_names] + [False])
        self.line_by_name = np.array([f[1] if f else -1 for f in frames] + [-1], np.int64)
        self.module_words: list[str] = []

    # --------------------------------------------------------------------- call tree
    def _thread_rows(self, extra: str = "", join: str = "") -> Iterator[pa.RecordBatch]:
        query = (
            f"SELECT ev.eid, ev.pid, ev.tid, ev.start, ev.dur, ev.kind, ev.name{extra} FROM ev {join} "
            f"WHERE ev.kind IN ({_HOST_CHILD}) ORDER BY ev.pid, ev.tid, ev.eid"
        )
        yield from _reader(self.con, query, BATCH_EVENTS)

    def _tree(self) -> None:
        """parent_id, the enclosing op (exclusive), the frame attribution and module path of
        every host event, into table ``tree``."""
        walk = _TreeWalk()
        code_of_path: dict[str, int] = {}
        out_path = self.spool.dir / "tree.parquet"
        schema = pa.schema(
            [(c, pa.int64()) for c in ("eid", "parent", "op_excl", "sname", "sline", "smod")] + [("sprec", pa.int8())]
        )
        nm = len(self.spool.name.words)
        with pq.ParquetWriter(out_path, schema, compression="lz4") as writer:
            for batch in self._thread_rows():
                c = {k: to_numpy(batch.column(k)) for k in batch.schema.names}
                kind, name = c["kind"], np.where(c["name"] < 0, nm, c["name"]).astype(np.int64)
                is_py = kind == _PYTHON
                span = np.isin(kind, _HOST_SPAN_CODES) & (c["dur"] > 0)
                marks = [
                    np.where(kind == _CPU_OP, c["eid"], -1),
                    np.where(is_py & self.user_name[name], name, -1),
                    np.where(is_py & self.gen_name[name], name, -1),
                ]
                m, ctx, local, parent, (op_incl, frame, gen), chain = walk.step(
                    c["pid"], c["tid"], c["eid"], c["start"], c["start"] + c["dur"], span, marks
                )
                is_mod = is_py & self.is_mod_name[name]
                prev_mod = ctx["mod"] if ctx is not None else np.zeros(0, np.int64)
                module = self._modules(local, m, prev_mod, is_mod, name, code_of_path)
                assert walk.ctx is not None
                walk.ctx["mod"] = module[chain]
                # the enclosing op, exclusive: the parent's inclusive one
                op_excl = np.where(local >= 0, op_incl[np.maximum(local, 0)], -1)[m:]
                frame, gen = frame[m:], gen[m:]
                generated = (frame < 0) & (gen >= 0)
                sname = np.where(generated, gen, frame)
                sprec = np.where(generated, _GENERATED, np.where(frame >= 0, _FUNCTION, -1))
                sline = self.line_by_name[np.where(sname >= 0, sname, nm)]
                columns = [c["eid"], parent[m:], op_excl, sname, sline, module[m:], sprec.astype(np.int8)]
                writer.write_table(pa.table(columns, schema=schema))
        self.sql(f"CREATE TABLE tree AS SELECT * FROM read_parquet('{out_path}')")
        out_path.unlink()

    def _modules(
        self,
        local: np.ndarray,
        m: int,
        prev_mod: np.ndarray,
        is_mod: np.ndarray,
        name: np.ndarray,
        code_of_path: dict[str, int],
    ) -> np.ndarray:
        """The nn.Module path code of each row, context rows first: the path of the nearest
        module frame at or above it, built as ``source_attribution`` builds it (the outer
        module's path, a dot, the frame's own name). A context row stands for the module it
        resolved to."""
        total = m + len(is_mod)
        marked = np.concatenate([np.where(prev_mod >= 0, np.arange(m), -1), np.where(is_mod, np.arange(m, total), -1)])
        module_of = nearest_marked_ancestor(local, marked)
        code = np.full(total, -1, np.int64)
        code[:m] = prev_mod
        words = self.module_words
        for r in (np.nonzero(is_mod)[0] + m).tolist():  # parents come first
            p = int(local[r])
            o = int(module_of[p]) if p >= 0 else -1
            own = self.mod_names[int(name[r - m])] or ""
            path = f"{words[code[o]]}.{own}" if o >= 0 and code[o] >= 0 else own
            k = code_of_path.get(path)
            if k is None:
                k = code_of_path[path] = len(words)
                words.append(path)
            code[r] = k
        return np.where(module_of >= 0, code[np.maximum(module_of, 0)], -1)

    # --------------------------------------------------------------------- links
    def _links(self) -> None:
        sql = self.sql
        # Device work without a correlation arg takes it from its ac2g flow's 'f' end, the
        # runtime call from its 's' end (old traces; as ``build_trace``).
        fix = self.scalar(
            f"SELECT (SELECT count(*) FROM ev WHERE ac2g) > 0 AND "
            f"(SELECT count(*) FROM ev WHERE kind IN ({_ON_DEVICE}) AND corr < 0) > 0"
        )
        if fix:
            sql(
                f"""CREATE TABLE corr_fix AS
                WITH dev AS (SELECT pid, tid, start, min(eid) AS target FROM ev WHERE kind IN ({_ON_DEVICE})
                             GROUP BY pid, tid, start),
                run AS (SELECT pid, tid, start, min(eid) AS target FROM ev WHERE kind = {_RUNTIME}
                        GROUP BY pid, tid, start)
                SELECT c.target AS eid, arg_max(f.flow, f.eid) AS corr
                FROM ev f JOIN dev c ON f.pid = c.pid AND f.tid = c.tid AND f.start = c.start
                WHERE f.ac2g AND NOT f.is_s GROUP BY c.target
                UNION ALL
                SELECT c.target AS eid, arg_max(f.flow, f.eid) AS corr
                FROM ev f JOIN run c ON f.pid = c.pid AND f.tid = c.tid AND f.start = c.start
                WHERE f.ac2g AND f.is_s GROUP BY c.target"""
            )
            corr = "CASE WHEN ev.corr < 0 AND cf.eid IS NOT NULL THEN cf.corr ELSE ev.corr END"
            corr_join = "LEFT JOIN corr_fix cf ON cf.eid = ev.eid"
        else:
            corr, corr_join = "ev.corr", ""
        sql(f"CREATE TABLE ox AS SELECT ext, max(eid) AS op FROM ev WHERE kind = {_CPU_OP} AND ext >= 0 GROUP BY ext")
        sql(
            f"""CREATE TABLE l1 AS
            SELECT ev.eid, ev.kind, ev.start, {corr} AS corr, ev.kind IN ({_ON_DEVICE}) AS on_device,
                   coalesce(t.parent, -1) AS parent,
                   CASE WHEN ev.kind IN ({_HOST_LINKED}) THEN coalesce(ox.op, t.op_excl, -1) ELSE -1 END AS op_h,
                   coalesce(ox.op, -1) AS op_ext,
                   coalesce(t.sname, -1) AS sname, coalesce(t.sline, -1) AS sline,
                   coalesce(t.smod, -1) AS smod, coalesce(t.sprec, -1) AS sprec
            FROM ev {corr_join}
            LEFT JOIN tree t ON t.eid = ev.eid
            LEFT JOIN ox ON ox.ext = ev.ext"""
        )
        sql(
            f"CREATE TABLE rt AS SELECT corr, max(eid) AS launch FROM l1 WHERE kind = {_RUNTIME} AND corr >= 0 GROUP BY corr"
        )
        sql(
            """CREATE TABLE l2 AS
            SELECT l1.*, CASE WHEN l1.on_device AND l1.corr >= 0 THEN coalesce(rt.launch, -1) ELSE -1 END AS launch
            FROM l1 LEFT JOIN rt ON rt.corr = l1.corr"""
        )
        sql("DROP TABLE l1")
        sql(
            f"""CREATE TABLE l3 AS
            SELECT l2.* EXCLUDE (op_h, op_ext),
                   CASE WHEN NOT l2.on_device THEN l2.op_h
                        WHEN l2.launch >= 0 AND lr.op_h >= 0 THEN lr.op_h
                        ELSE l2.op_ext END AS op,
                   coalesce(lr.start, 0) AS launch_start
            FROM l2 LEFT JOIN (SELECT eid, op_h, start FROM l2 WHERE kind = {_RUNTIME}) lr ON lr.eid = l2.launch"""
        )
        sql("DROP TABLE l2")
        self._forward()
        sql(
            f"""CREATE TABLE l4 AS
            SELECT l3.*, coalesce(fw.fwd, -1) AS fwd, coalesce(o.start, 0) AS op_start
            FROM l3 LEFT JOIN fw ON fw.eid = l3.eid
            LEFT JOIN (SELECT eid, start FROM l3 WHERE kind = {_CPU_OP}) o ON o.eid = l3.op"""
        )
        sql("DROP TABLE l3")
        self._sources()

    def _forward(self) -> None:
        """``fwd``: the forward op of each backward op (fwdbwd flows, through the autograd
        wrapper, down to the ops nested in a backward node), into table ``fw``."""
        sql = self.sql
        if not self.scalar("SELECT count(*) FROM ev WHERE fb"):
            sql("CREATE TABLE fw (eid BIGINT, fwd BIGINT)")
            return
        sql(
            f"""CREATE TABLE fm AS
            WITH cand AS (SELECT pid, tid, start, min(eid) AS target FROM ev WHERE kind = {_CPU_OP} GROUP BY pid, tid, start),
            s AS (SELECT e.eid, e.flow, c.target AS s_op FROM ev e
                  JOIN cand c ON e.pid = c.pid AND e.tid = c.tid AND e.start = c.start WHERE e.fb AND e.is_s),
            f AS (SELECT e.eid, e.flow, c.target AS f_op FROM ev e
                  JOIN cand c ON e.pid = c.pid AND e.tid = c.tid AND e.start = c.start WHERE e.fb AND e.is_f),
            of AS (SELECT flow, arg_max(s_op, eid) AS fwd FROM s WHERE flow >= 0 GROUP BY flow)
            SELECT f.eid AS feid, f.f_op, of.fwd FROM f JOIN of ON of.flow = f.flow"""
        )
        sql(
            """CREATE TABLE marks AS
            WITH direct AS (SELECT f_op AS eid, arg_max(fwd, feid) AS mark FROM fm GROUP BY f_op),
            wrap AS (SELECT t.parent AS eid, arg_max(fm.fwd, fm.feid) AS mark FROM fm
                     JOIN tree t ON t.eid = fm.f_op JOIN ev w ON w.eid = t.parent
                     WHERE t.parent >= 0 AND w.evaluate GROUP BY t.parent)
            SELECT coalesce(w.eid, d.eid) AS eid, coalesce(w.mark, d.mark) AS mark
            FROM direct d FULL OUTER JOIN wrap w ON w.eid = d.eid"""
        )
        walk = _TreeWalk()
        out_path = self.spool.dir / "fwd.parquet"
        schema = pa.schema([("eid", pa.int64()), ("fwd", pa.int64())])
        with pq.ParquetWriter(out_path, schema, compression="lz4") as writer:
            for batch in self._thread_rows(", coalesce(mk.mark, -1) AS mark", "LEFT JOIN marks mk ON mk.eid = ev.eid"):
                c = {k: to_numpy(batch.column(k)) for k in batch.schema.names}
                span = np.isin(c["kind"], _HOST_SPAN_CODES) & (c["dur"] > 0)
                m, _, _, _, (fwd,), _ = walk.step(
                    c["pid"], c["tid"], c["eid"], c["start"], c["start"] + c["dur"], span, [c["mark"]]
                )
                fwd = fwd[m:]
                keep = (c["kind"] == _CPU_OP) & (fwd >= 0)
                writer.write_table(pa.table([c["eid"][keep], fwd[keep]], schema=schema))
        self.sql(f"CREATE TABLE fw AS SELECT * FROM read_parquet('{out_path}')")
        out_path.unlink()

    def _sources(self) -> None:
        """The inherited source lines (``source_attribution``): backward ops take their
        forward op's, device work, runtime calls and memory events their op's, device work
        without one its launch's; into table ``lk``, in event order."""
        sql = self.sql
        sql(
            f"""CREATE TABLE s1 AS
            SELECT l4.* EXCLUDE (sname, sline, smod, sprec),
              CASE WHEN f.sline >= 0 THEN f.sname ELSE l4.sname END AS sname,
              CASE WHEN f.sline >= 0 THEN f.sline ELSE l4.sline END AS sline,
              CASE WHEN f.sline >= 0 AND f.smod >= 0 THEN f.smod ELSE l4.smod END AS smod,
              CASE WHEN f.sline >= 0 THEN {_FORWARD} ELSE l4.sprec END AS sprec
            FROM l4 LEFT JOIN (SELECT eid, sname, sline, smod FROM l4 WHERE kind = {_CPU_OP} AND sline >= 0) f
              ON f.eid = l4.fwd"""
        )
        sql("DROP TABLE l4")
        inherits = f"(s.on_device OR s.kind = {_RUNTIME} OR s.kind = {_MEMORY})"
        take_op = (
            f"({inherits} AND s.op >= 0 AND ((s.kind <> {_RUNTIME} AND s.kind <> {_MEMORY}) OR s.sline < 0) "
            f"AND o.sline >= 0)"
        )
        sql(
            f"""CREATE TABLE s2 AS
            SELECT s.* EXCLUDE (sname, sline, smod, sprec),
              CASE WHEN {take_op} THEN o.sname ELSE s.sname END AS sname,
              CASE WHEN {take_op} THEN o.sline ELSE s.sline END AS sline,
              CASE WHEN {take_op} THEN o.smod ELSE s.smod END AS smod,
              CASE WHEN {take_op} THEN {_LAUNCH} ELSE s.sprec END AS sprec
            FROM s1 s LEFT JOIN (SELECT eid, sname, sline, smod FROM s1 WHERE kind = {_CPU_OP} AND sline >= 0) o
              ON o.eid = s.op"""
        )
        sql("DROP TABLE s1")
        self._graph_capture()
        take_launch = f"({inherits} AND s.sline < 0 AND s.launch >= 0 AND s.kind <> {_RUNTIME} AND o.sline >= 0)"
        graph = "g.src"
        sql(
            f"""CREATE TABLE lk AS
            SELECT s.eid AS lk_eid, s.corr AS lk_corr, s.parent, s.launch, s.op, s.fwd, s.launch_start, s.op_start,
              CASE WHEN {graph} THEN g.sname WHEN {take_launch} THEN o.sname ELSE s.sname END AS sname,
              CASE WHEN {graph} THEN g.sline WHEN {take_launch} THEN o.sline ELSE s.sline END AS sline,
              CASE WHEN {graph} THEN g.smod WHEN {take_launch} THEN o.smod ELSE s.smod END AS smod,
              CASE WHEN {graph} THEN {_GRAPH_CAPTURE} WHEN {take_launch} THEN {_LAUNCH} ELSE s.sprec END AS sprec,
              coalesce(g.cop, -1) AS capture_op
            FROM s2 s LEFT JOIN (SELECT eid, sname, sline, smod FROM s2 WHERE kind = {_RUNTIME} AND sline >= 0) o
              ON o.eid = s.launch
            LEFT JOIN gr g ON g.eid = s.eid ORDER BY s.eid""",
            ordered=True,
        )
        sql("DROP TABLE s2")
        for table in ("tree", "rt", "ox", "fw", "fm", "marks", "corr_fix", "gr"):
            sql(f"DROP TABLE IF EXISTS {table}")
        sql("CHECKPOINT")
        # the assembly reads both tables in their stored (event) order, streaming: it needs
        # little of DuckDB's memory, which goes to the rows being assembled instead
        sql("SET preserve_insertion_order = true")
        sql(f"SET memory_limit = '{ASSEMBLY_DUCKDB_MEMORY}'")

    def _graph_capture(self) -> None:
        """Work replayed from a CUDA/HIP graph and the source of its capture-time call
        (``collectors.build.graph_replay``, as ``build_trace`` resolves it), into table ``gr``. Only
        the graph-related runtime calls and the work of graph launches are read out of DuckDB."""
        self.graph_meta: dict[str, Any] | None = None
        empty = pa.table(
            {c: pa.array([], pa.int64()) for c in ("eid", "cop", "sname", "sline", "smod")}
            | {"src": pa.array([], pa.bool_())}
        )
        runtime = np.array(sorted(self.spool.runtime_names), np.int64)
        role_w, family_w = graph_replay.runtime_roles(self.spool.name.words, runtime)
        codes = np.nonzero(role_w[:-1] != graph_replay.NONE)[0].tolist()
        plan = None
        if codes:
            calls = _fetch(
                self.con,
                f"""SELECT s.eid, ev.name, ev.pid, ev.tid, s.start, CAST(r.launch IS NOT NULL AS INTEGER) AS ran, s.op
                FROM s2 s JOIN ev ON ev.eid = s.eid
                LEFT JOIN (SELECT DISTINCT launch FROM s2 WHERE launch >= 0) r ON r.launch = s.eid
                WHERE s.kind = {_RUNTIME} AND ev.name IN ({", ".join(map(str, codes))}) ORDER BY s.eid""",
            )
            c = {k: to_numpy(calls.column(k)) for k in calls.column_names}
            name = c["name"].astype(np.int64)
            role = role_w[name]
            launches = c["eid"][role == graph_replay.GRAPH_LAUNCH]
            self.con.register("graph_launch_rows", pa.table({"eid": pa.array(launches, pa.int64())}))
            dev = _fetch(
                self.con,
                f"""SELECT s.eid, s.launch, s.kind, s.start, coalesce(ev.graph_id, -1) AS graph_id
                FROM s2 s JOIN ev ON ev.eid = s.eid
                WHERE s.kind IN ({_DEVICE_WORK}) AND s.launch IN (SELECT eid FROM graph_launch_rows) ORDER BY s.eid""",
            )
            self.con.unregister("graph_launch_rows")
            d = {k: to_numpy(dev.column(k)) for k in dev.column_names}
            plan = graph_replay.plan_replays(
                c["eid"],
                role,
                family_w[name],
                c["pid"],
                c["tid"],
                c["start"],
                c["ran"].astype(bool),
                d["eid"],
                d["launch"],
                _GRAPH_FAMILY[d["kind"].astype(np.int64)],
                d["start"],
                d["graph_id"],
            )
        if plan is None:
            self.con.register("gr_rows", empty)
        else:
            self.con.register("gr_rows", self._graph_sources(plan, c["eid"], c["op"]))
            self.graph_meta = plan.metadata
        self.sql("CREATE TABLE gr AS SELECT * FROM gr_rows")
        self.con.unregister("gr_rows")

    def _graph_sources(self, plan: graph_replay.GraphReplays, call_eid: np.ndarray, call_op: np.ndarray) -> pa.Table:
        """Resolve ``plan`` with the capture calls' sources; the ``gr`` rows."""
        wanted = np.unique(np.concatenate([np.zeros(0, np.int64), *plan.captures]))
        op = call_op[np.searchsorted(call_eid, wanted)] if wanted.size else np.zeros(0, np.int64)
        rows = np.unique(np.concatenate([wanted, op[op >= 0]]))
        self.con.register("graph_src_rows", pa.table({"eid": pa.array(rows, pa.int64())}))
        got = _fetch(
            self.con,
            "SELECT eid, sname, sline, smod FROM s2 WHERE eid IN (SELECT eid FROM graph_src_rows) ORDER BY eid",
        )
        self.con.unregister("graph_src_rows")
        src = {k: to_numpy(got.column(k)) for k in got.column_names}
        files, funcs = ({}, {})  # names whose frames share a file (function) compare equal
        nm = len(self.frames)
        file_of = np.array([files.setdefault(f[0] if f else None, len(files)) for f in self.frames] + [-1], np.int64)
        func_of = np.array([funcs.setdefault(f[2] if f else None, len(funcs)) for f in self.frames] + [-1], np.int64)

        def at(eids: np.ndarray) -> np.ndarray:
            return np.searchsorted(src["eid"], eids)

        def donor(calls: np.ndarray) -> np.ndarray:
            o = call_op[np.searchsorted(call_eid, calls)]
            has = (o >= 0) & (src["sline"][at(np.maximum(o, 0))] >= 0) if src["eid"].size else o < -1
            return at(np.where(has, o, calls))

        def key(calls: np.ndarray) -> np.ndarray:
            d = donor(calls)
            sname = np.where(src["sname"][d] >= 0, src["sname"][d], nm)
            return np.stack([file_of[sname], src["sline"][d], func_of[sname], src["smod"][d]], axis=1)

        plan.resolve(key)
        d = donor(plan.calls)
        cop = call_op[np.searchsorted(call_eid, plan.calls)]
        return pa.table(
            {
                "eid": pa.array(plan.rows, pa.int64()),
                "cop": pa.array(cop, pa.int64()),
                "sname": pa.array(src["sname"][d], pa.int64()),
                "sline": pa.array(src["sline"][d], pa.int64()),
                "smod": pa.array(src["smod"][d], pa.int64()),
                "src": pa.array(src["sline"][d] >= 0, pa.bool_()),
            }
        )

    # --------------------------------------------------------------------- assembly
    def _trace(self) -> SpooledTrace:
        spool = self.spool
        metadata = self.metadata
        cats = [c if c is not None else "" for c in spool.cat.words]
        runtime = {spool.name.words[i] or "" for i in spool.runtime_names if i >= 0}
        accel = accelerator_type(cats, metadata, runtime)
        dtypes = []
        for token in spool.dtype.words:
            if token == _ACCEL:
                dtypes.append(accel)
            elif token.startswith(_RENAMED):
                dev_name = token[len(_RENAMED) :]
                dtypes.append(accel if accel not in ("cpu",) else dev_name)
            else:
                dtypes.append(token)
        used = [int(c) for (c,) in self.con.execute("SELECT DISTINCT dtype FROM ev").fetchall()]
        # steps: the few ProfilerStep spans, in event order (the trailing partial one demoted)
        rows = self.con.execute(f"SELECT eid, name, start, dur FROM ev WHERE kind = {_STEP} ORDER BY eid").fetchall()
        step_eid = np.array([r[0] for r in rows], np.int64)
        step_names = [spool.name.words[r[1]] for r in rows]
        step_start = np.array([r[2] for r in rows], np.int64)
        step_dur = np.array([r[3] for r in rows], np.int64)
        markers = np.zeros(0, np.int64)
        marker_codes = [i for i, w in enumerate(spool.name.words) if w is not None and STEP_MARKER.match(w)]
        if step_eid.size >= 2 and marker_codes:
            found = self.con.execute(
                f"SELECT start FROM ev WHERE name IN ({', '.join(map(str, marker_codes))}) ORDER BY eid"
            ).fetchall()
            markers = np.array([r[0] for r in found], np.int64)
        tail, dropped_steps = trailing_step(step_names, step_start, step_dur, markers)
        demoted = step_eid[tail]
        kept = ~tail
        steps = _Steps(
            step_eid[kept],
            step_start[kept],
            step_dur[kept],
            np.array([_step_number(nm) for nm, k in zip(step_names, kept) if k], np.int64),
        )
        rank = int(metadata.get("rank", 0) or 0)
        meta = dict(metadata)
        meta.setdefault("collector_version", __version__)
        meta["schema_version"] = SCHEMA_VERSION
        meta["device_types"] = sorted({dtypes[c] for c in used}) if self.n else []
        if dropped_steps:
            meta["dropped_steps"] = [{"rank": rank, **d} for d in dropped_steps]
        if self.graph_meta is not None:
            meta["graph_replay"] = self.graph_meta
        assembly = _Assembly(spool, dtypes, steps, demoted, rank, list(self.module_words), self.frames)
        issues = dict(self.issues)
        if (steps.numbers > 2**31 - 1).any():  # nulled and counted, as the in-memory build does
            for _ in assembly.tables(self.con, steps_only=True):
                pass
            for key, count in assembly.issues.items():
                issues[key] = issues.get(key, 0) + count
            assembly.issues.clear()
        repairs = Repairs()
        repairs.merge(issues)
        repairs.record(meta)
        return SpooledTrace(spool, assembly, self.n, meta)


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
        spool: Spool,
        dtypes: list[str],
        steps: _Steps,
        demoted: np.ndarray,
        rank: int,
        module_words: list[str],
        frames: list[Any],
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

    def tables(self, con: Any, rows: int = WRITE_ROWS, steps_only: bool = False) -> Iterator[pa.Table]:
        """The trace's rows as ``EVENTS_SCHEMA`` tables of ``rows`` rows, in event order."""
        reader = _reader(con, "SELECT * FROM ev POSITIONAL JOIN lk", min(rows, BATCH_EVENTS))
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

    def __init__(self, spool: Spool, assembly: _Assembly, n: int, metadata: dict[str, Any]) -> None:
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
