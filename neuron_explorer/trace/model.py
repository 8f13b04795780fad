"""The ``Trace``: one events table (Arrow) plus its metadata, read from and written to Parquet.

A trace is one Parquet file per rank. A directory of such files (``run/rank=N/*.parquet``) is a
multi-rank run; ``Trace.read`` on a directory concatenates the ranks into one table whose
``rank`` column tells them apart (``event_id`` and every link column are unique within a rank).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neuron_explorer.trace import validate
from neuron_explorer.trace.arrow import string_array
from neuron_explorer.trace.atomic import atomic_path
from neuron_explorer.trace.errors import SchemaVersionError, TraceFormatError
from neuron_explorer.trace.paths import require_input
from neuron_explorer.trace.repairs import Repairs
from neuron_explorer.trace.schema import (
    COLUMN_NAMES,
    DEVICE_KINDS,
    EVENTS_SCHEMA,
    METADATA_KEY,
    SCHEMA_MAJOR,
    SCHEMA_VERSION,
    Kind,
    parse_version,
)

if TYPE_CHECKING:
    import pandas as pd

PARQUET_SUFFIXES = (".parquet", ".pq")
#: Sorted or slowly varying id/time columns: delta encoding stores them in a few bits each
#: (event_id is 0..n-1, start_ns ascends), where dictionaries would not help.
DELTA_COLUMNS = (
    "event_id",
    "start_ns",
    "external_id",
    "flow_id",
    "correlation_id",
    "parent_id",
    "op_id",
    "launch_id",
    "fwd_id",
    "capture_op_id",
    "sequence_nr",
)
#: The raw args text is most of a file; a higher zstd level keeps the Parquet trace smaller
#: than the gzipped JSON it came from.
ARGS_ZSTD_LEVEL = 7
#: Rows per Parquet row group.
ROW_GROUP_ROWS = 1 << 20


class Trace:
    """An events table conforming to ``EVENTS_SCHEMA`` and the trace's metadata.

    ``metadata`` is a JSON-able dict (see docs/schema.md, "Metadata"); for a multi-rank run it
    is rank 0's (the lowest rank's) and ``rank_metadata`` maps every rank to its own.
    """

    def __init__(
        self,
        events: pa.Table,
        metadata: dict[str, Any] | None = None,
        path: str | Path | None = None,
        rank_metadata: dict[int, dict[str, Any]] | None = None,
    ) -> None:
        self.events = events
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.metadata.setdefault("schema_version", SCHEMA_VERSION)
        self.path = Path(path) if path is not None else None
        rank = int(self.metadata.get("rank", 0) or 0)
        self.rank_metadata: dict[int, dict[str, Any]] = rank_metadata or {rank: self.metadata}

    # ----------------------------------------------------------------------------- reading
    @classmethod
    def read(cls, path: str | Path, columns: Sequence[str] | None = None) -> Trace:
        """Read a Parquet trace file or a run directory of per-rank files."""
        path = Path(path)
        require_input(path)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix in PARQUET_SUFFIXES and p.is_file())
            if not files:
                raise TraceFormatError("directory holds no .parquet trace files", path)
            parts = [_read_file(f, columns) for f in files]
            parts.sort(key=lambda tm: int(tm[1].get("rank", 0) or 0))
            rank_metadata = {int(m.get("rank", 0) or 0): m for _, m in parts}
            if len(rank_metadata) != len(parts):
                raise TraceFormatError("two trace files in the directory claim the same rank", path)
            table = pa.concat_tables([t for t, _ in parts], promote_options="permissive")
            from neuron_explorer.trace.run_check import check_one_job

            check_one_job(table, rank_metadata, path)
            return cls(table, parts[0][1], path, rank_metadata)
        table, metadata = _read_file(path, columns)
        return cls(table, metadata, path)

    # ----------------------------------------------------------------------------- writing
    def write(self, path: str | Path, *, args_zstd_level: int = ARGS_ZSTD_LEVEL) -> Path:
        """Write the trace as one zstd Parquet file, atomically (temporary name, then rename).

        ``args_zstd_level``: the zstd level of the raw args text (the other columns use 3).
        """
        path = Path(path)
        meta = dict(self.metadata)
        meta["schema_version"] = SCHEMA_VERSION
        schema = EVENTS_SCHEMA.with_metadata({METADATA_KEY: json.dumps(meta, default=str).encode()})
        names = schema.names
        with (
            atomic_path(path) as tmp,
            pq.ParquetWriter(
                tmp,
                schema,
                compression="zstd",
                compression_level={c: (args_zstd_level if c == "args" else 3) for c in names},
                use_dictionary=[c for c in names if c not in DELTA_COLUMNS],
                column_encoding=dict.fromkeys(DELTA_COLUMNS, "DELTA_BINARY_PACKED"),
                write_statistics=["start_ns", "kind", "rank", "step", "event_id"],
            ) as writer,
        ):
            for part in self._row_group_tables(ROW_GROUP_ROWS):
                writer.write_table(part, row_group_size=ROW_GROUP_ROWS)
        self.path = path
        return path

    def _row_group_tables(self, rows: int) -> Iterator[pa.Table]:
        """The events as ``EVENTS_SCHEMA`` tables that the writer cuts into row groups of
        ``rows`` rows; a trace that assembles its table lazily yields one row group at a time,
        so the writer never needs the whole table."""
        yield conform(self.events)

    # ----------------------------------------------------------------------------- views
    @property
    def num_events(self) -> int:
        return self.events.num_rows

    @property
    def ranks(self) -> list[int]:
        return sorted(int(r) for r in pc.unique(self.events["rank"]).to_pylist() if r is not None)

    def select(self, kinds: Iterable[str] | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """The events of the given kinds (all when None), with only the given columns."""
        table = self.events
        if kinds is not None:
            kind_values = string_array(list(kinds))  # not pa.array: it imports pandas
            mask = pc.is_in(pc.cast(table["kind"], pa.string()), value_set=kind_values)
            table = table.filter(mask)
        if columns is not None:
            table = table.select(list(columns))
        return table

    def to_pandas(self, kinds: Iterable[str] | None = None, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """A pandas view; dictionary columns become categoricals, nullable ints stay nullable."""
        table = self.select(kinds, columns)
        return table.to_pandas(types_mapper=_pandas_types, split_blocks=True, self_destruct=False)

    def ops(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        return self.to_pandas([Kind.CPU_OP], columns)

    def kernels(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Device work: kernels, collectives, memcpys and memsets."""
        return self.to_pandas(DEVICE_KINDS, columns)

    def steps(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        return self.to_pandas([Kind.STEP], columns)

    def __repr__(self) -> str:
        source = self.metadata.get("source_file") or self.path
        return f"<Trace {self.num_events} events ranks={self.ranks} from {source}>"


def _pandas_types(t: pa.DataType) -> Any:
    import pandas as pd

    if pa.types.is_integer(t):
        return {8: pd.Int8Dtype(), 16: pd.Int16Dtype(), 32: pd.Int32Dtype(), 64: pd.Int64Dtype()}[t.bit_width]
    return None


def conform(table: pa.Table) -> pa.Table:
    """Order, add (as nulls) and cast columns so the table has exactly ``EVENTS_SCHEMA``."""
    arrays = []
    n = table.num_rows
    for field in EVENTS_SCHEMA:
        if field.name in table.column_names:
            col = table[field.name]
            if col.type != field.type:
                col = col.cast(field.type)
            arrays.append(col)
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=EVENTS_SCHEMA)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The trace metadata of one Parquet trace file, checked for a compatible schema version."""
    path = Path(path)
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise TraceFormatError(f"not a readable Parquet file ({_short(exc)})", path) from None
    return _check_metadata(schema, path)


def _check_metadata(schema: pa.Schema, path: Path) -> dict[str, Any]:
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise TraceFormatError("a Parquet file, but not a Neuron Explorer trace (no trace metadata)", path)
    try:
        metadata = json.loads(raw)
        if not isinstance(metadata, dict):
            raise TypeError("metadata is not a JSON object")
        major, _, _ = parse_version(metadata["schema_version"])
    except (ValueError, KeyError, TypeError, RecursionError):
        raise TraceFormatError("trace metadata is corrupt (no valid schema_version)", path) from None
    if major > SCHEMA_MAJOR:
        raise SchemaVersionError(
            f"written with trace schema {metadata['schema_version']}, newer than this tool reads "
            f"({SCHEMA_VERSION}); upgrade neuron-explorer",
            path,
        )
    missing = [c for c in ("event_id", "kind", "name", "start_ns", "dur_ns") if c not in schema.names]
    if missing:
        raise TraceFormatError(f"trace is missing required columns: {', '.join(missing)}", path)
    return metadata


def _read_file(path: Path, columns: Sequence[str] | None) -> tuple[pa.Table, dict[str, Any]]:
    """One file's table (validated against the schema: ``trace.validate``) and metadata."""
    # One open of the file for footer and data, through ParquetFile: pq.read_table goes
    # through pyarrow.dataset, whose import pulls in pandas (~0.3 s of CPU, 40 MB) for nothing.
    try:
        pf = pq.ParquetFile(path)
        schema = pf.schema_arrow
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # (a column name not UTF-8)
        raise TraceFormatError(f"not a readable Parquet file ({_short(exc)})", path) from None
    wanted = list(COLUMN_NAMES) if columns is None else [c for c in dict.fromkeys(columns) if c in COLUMN_NAMES]
    with pf:
        metadata = _check_metadata(schema, path)
        twice = sorted({c for c in schema.names if schema.names.count(c) > 1})
        if twice:
            raise TraceFormatError(f"damaged trace: column(s) {', '.join(twice)} appear more than once", path)
        present = set(schema.names)
        try:
            table = pf.read(columns=[c for c in wanted if c in present])
        except (pa.ArrowException, OSError) as exc:
            raise TraceFormatError(f"Parquet data is corrupt or truncated ({_short(exc)})", path) from None
    neuron = metadata.get("neuron")
    if table.num_rows == 0 and not (isinstance(neuron, dict) and neuron.get("metrics_only") is True):
        # (a Neuron summary-json export is metrics only: no events, by design)
        raise TraceFormatError("the trace holds no events", path)
    repairs = Repairs()
    metadata = validate.check_metadata(metadata, path, repairs)
    written_by = tuple(parse_version(str(metadata.get("schema_version", "1.0.0")))[:2])
    table = validate.check_columns(table, wanted, metadata["rank"], path, repairs, written_by)
    table = validate.check_values(table, path, repairs)
    repairs.record(metadata)
    repairs.warn(path, stacklevel=4)
    return table, metadata


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]
