"""Export a trace as Chrome trace JSON (opens in Perfetto and chrome://tracing).

Export is exact: every event is written back with its original phase, category, ids, raw
``args`` text and extra fields, timestamps as exact decimal microseconds relative to
``baseTimeNanoseconds``, and the original top-level metadata; the columns with no Chrome field
travel in ``args`` (``trace.carry``): the source columns always (Perfetto shows them), any other
column where importing the file would not give it back (found by importing the first write and
comparing; then the file is written again carrying those cells). Importing the export gives the
same events table, for a single-rank trace.
"""

from __future__ import annotations

import gzip
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from neuron_explorer.collectors.kineto import json_depth
from neuron_explorer.trace import carry
from neuron_explorer.trace.atomic import atomic_path
from neuron_explorer.trace.errors import TraceFormatError
from neuron_explorer.trace.model import Trace

_COLUMNS = ["ph", "category", "name", "pid", "tid", "start_ns", "dur_ns", "flow_id", "args", "extra"]
_BATCH = 200_000


def _us(ns: np.ndarray) -> list[str]:
    """Integer nanoseconds as exact decimal microseconds (``1234.567``)."""
    q, r = np.divmod(ns, 1000)
    return [f"{a}.{b:03d}" for a, b in zip(q.tolist(), r.tolist())]


def iter_chrome_json(trace: Trace, extra_carry: dict[str, np.ndarray] | None = None) -> Iterator[bytes]:
    """The Chrome JSON document, in pieces (memory stays bounded by the batch size).

    ``extra_carry``: column -> row mask of the cells to carry besides the source columns."""
    extra_carry = extra_carry or {}
    carried = [c for c in carry.ALWAYS if c in trace.events.column_names] + list(extra_carry)
    enc = msgspec.json.encode
    meta = dict(trace.metadata.get("trace_metadata") or {})
    base = trace.metadata.get("base_time_ns")
    base = int(base) if isinstance(base, int) else 0
    if multi := len(trace.rank_metadata) > 1:
        meta.setdefault("neuron_explorer_note", "multi-rank run exported as one file; pid is prefixed by rank")
    yield b"{\n"
    for key, value in meta.items():
        if key == "traceEvents":
            continue
        yield enc(key) + b": " + enc(value) + b",\n"
    yield b'"traceEvents": ['
    table = trace.events.select(_COLUMNS + (["rank"] if multi else []) + [c for c in carried if c not in _COLUMNS])
    first = True
    offset = 0
    for batch in table.to_batches(max_chunksize=_BATCH):
        cols = {name: batch.column(name) for name in batch.schema.names}
        n = batch.num_rows
        ph = _py(cols["ph"])
        cat = _encoded_strings(cols["category"])
        name = _encoded_strings(cols["name"])
        pid_l = _ints(cols["pid"])
        if multi:
            ranks = _ints(cols["rank"])
            pid_l = [None if p is None or r is None else r * 10_000_000 + p for p, r in zip(pid_l, ranks)]
        tid_l = _ints(cols["tid"])
        ts = _us(cols["start_ns"].to_numpy(zero_copy_only=False) - base)
        dur = _us(cols["dur_ns"].to_numpy(zero_copy_only=False))
        ids = cols["flow_id"].to_pylist()
        args = cols["args"].to_pylist()
        extra = cols["extra"].to_pylist()
        _check_json(args, "args", offset, trace)
        _check_json(extra, "extra", offset, trace)
        carry_rows = _carry_rows(cols, carried, extra_carry, offset, n)
        row0, offset = offset, offset + n
        parts: list[str] = []
        for i in range(n):
            x: Any = msgspec.json.decode(extra[i]) if extra[i] else {}
            if not isinstance(x, dict):
                raise TraceFormatError(f"event {row0 + i}: extra is not a JSON object (damaged trace)", trace.path)
            p = ph[i] or ""
            fields = [f'"ph": {enc(p).decode()}']
            if cat[i] is not None:
                fields.append(f'"cat": {cat[i]}')
            fields.append(f'"name": {name[i] or "null"}')  # (null only in a repaired trace)
            fields.append(f'"pid": {enc(x.pop("pid") if "pid" in x else pid_l[i]).decode()}')
            fields.append(f'"tid": {enc(x.pop("tid") if "tid" in x else tid_l[i]).decode()}')
            fields.append(f'"ts": {ts[i]}')
            if p == "X" or dur[i] != "0.000":  # (an instant with a duration keeps it)
                fields.append(f'"dur": {dur[i]}')
            if "id" in x:
                fields.append(f'"id": {enc(x.pop("id")).decode()}')
            elif ids[i] is not None:
                fields.append(f'"id": {ids[i]}')
            for k, v in x.items():
                fields.append(f"{enc(k).decode()}: {enc(v).decode()}")
            a = args[i] if not carry_rows[i] else carry.join(carry_rows[i], args[i])
            if a is not None:
                fields.append(f'"args": {a}')
            parts.append("{" + ", ".join(fields) + "}")
        text = ",\n".join(parts)
        if text:
            yield (b"\n" if first else b",\n") + text.encode()
            first = False
    yield b"\n]}\n"


def _check_json(texts: list[str | None], column: str, offset: int, trace: Trace) -> None:
    """Every text of a batch is one JSON value (else the trace is damaged: a clean error, not an
    invalid export). One C-level parse per batch; value by value only to name a bad one."""
    present = [t for t in texts if t is not None]
    try:
        _raw_list.decode(("[" + ",".join(present) + "]").encode())
        return
    except (msgspec.DecodeError, RecursionError):
        pass
    for i, t in enumerate(texts):
        if t is not None and not json_depth.valid_json(t.encode()):
            raise TraceFormatError(f"event {offset + i}: {column} is not valid JSON text (damaged trace)", trace.path)


_raw_list = msgspec.json.Decoder(list[msgspec.Raw])


def _carry_rows(
    cols: dict[str, pa.Array], carried: list[str], extra_carry: dict[str, np.ndarray], offset: int, n: int
) -> list[dict[str, Any]]:
    """Per row of a batch, the carried columns' values (non-null source values, and the cells
    ``extra_carry`` names)."""
    rows: list[dict[str, Any]] = [{} for _ in range(n)]
    for name in carried:
        values = _py(cols[name])
        wanted = extra_carry.get(name)
        for i, v in enumerate(values):
            if wanted is not None:
                if wanted[offset + i]:
                    rows[i][name] = v
            elif v is not None:
                rows[i][name] = v
    return rows


def _ints(arr: pa.Array) -> list[int | None]:
    """An integer column as Python ints, None where null (a repaired trace may hold nulls)."""
    return arr.to_numpy(zero_copy_only=False).tolist() if arr.null_count == 0 else arr.to_pylist()


def _py(arr: pa.Array) -> list[Any]:
    return arr.cast(pa.string()).to_pylist() if pa.types.is_dictionary(arr.type) else arr.to_pylist()


def _encoded_strings(arr: pa.Array) -> list[str | None]:
    """JSON-encoded strings, each distinct value encoded once (the column is dictionary encoded)."""
    if pa.types.is_dictionary(arr.type):
        dictionary = arr.dictionary.to_pylist()
        encoded = [msgspec.json.encode(v).decode() for v in dictionary] + [None]
        idx = arr.indices.fill_null(len(dictionary)).to_numpy(zero_copy_only=False)
        return [encoded[i] for i in idx.tolist()]
    return [None if v is None else msgspec.json.encode(v).decode() for v in arr.to_pylist()]


def write_chrome_trace(trace: Trace, path: str | Path) -> Path:
    """Write the Chrome JSON (gzip when the name ends in .gz), atomically; a single-rank trace
    is checked by importing it, and written again carrying whatever did not come back."""
    path = Path(path)
    gz = path.name.endswith(".gz")
    with atomic_path(path) as tmp:
        _write(trace, tmp, gz)
        if len(trace.rank_metadata) == 1:
            missing = _not_reproduced(trace, tmp)
            if missing:
                _write(trace, tmp, gz, missing)
    return path


def _write(trace: Trace, path: Path, gz: bool, extra_carry: dict[str, np.ndarray] | None = None) -> None:
    with _open_output(path, gz) as fh:
        for piece in iter_chrome_json(trace, extra_carry):
            fh.write(piece)


def _not_reproduced(trace: Trace, written: Path) -> dict[str, np.ndarray]:
    """Column -> rows where importing ``written`` does not give ``trace``'s value back."""
    from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            again = import_kineto_json(written).events
        except TraceFormatError as exc:  # (an export bug: say so about the trace, not the temp file)
            raise TraceFormatError(f"the Chrome export does not import back ({exc.message})", trace.path) from None
    table = trace.events
    if again.num_rows != table.num_rows:
        return {}
    out: dict[str, np.ndarray] = {}
    for name in table.column_names:
        if name in carry.NATIVE or name in carry.ALWAYS or name not in again.column_names:
            continue
        a, b = table[name], again[name]
        if a.equals(b) or a.cast(_plain(a.type)).equals(b.cast(_plain(b.type))):
            continue
        same = np.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist())], bool)
        if not same.all():
            out[name] = ~same
    return out


def _plain(typ: pa.DataType) -> pa.DataType:
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def _open_output(path: Path, gz: bool) -> Any:
    return gzip.open(path, "wb", compresslevel=6) if gz else open(path, "wb")
