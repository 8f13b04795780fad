"""Export a trace as Chrome trace JSON (opens in Perfetto and chrome://tracing).

Export is exact: every event is written back with its original phase, category, ids, raw
``args`` text and extra fields, timestamps as exact decimal microseconds relative to
``baseTimeNanoseconds``, and the original top-level metadata, so importing the export gives
the same events table.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from neuron_explorer.trace.atomic import atomic_path
from neuron_explorer.trace.model import Trace

_COLUMNS = ["ph", "category", "name", "pid", "tid", "start_ns", "dur_ns", "flow_id", "args", "extra"]
_BATCH = 200_000


def _us(ns: np.ndarray) -> list[str]:
    """Integer nanoseconds as exact decimal microseconds (``1234.567``)."""
    q, r = np.divmod(ns, 1000)
    return [f"{a}.{b:03d}" for a, b in zip(q.tolist(), r.tolist())]


def iter_chrome_json(trace: Trace) -> Iterator[bytes]:
    """The Chrome JSON document, in pieces (memory stays bounded by the batch size)."""
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
    table = trace.events.select(_COLUMNS + (["rank"] if multi else []))
    first = True
    for batch in table.to_batches(max_chunksize=_BATCH):
        cols = {name: batch.column(name) for name in batch.schema.names}
        n = batch.num_rows
        ph = _py(cols["ph"])
        cat = _encoded_strings(cols["category"])
        name = _encoded_strings(cols["name"])
        pid = cols["pid"].to_numpy(zero_copy_only=False)
        if multi:
            pid = cols["rank"].to_numpy(zero_copy_only=False).astype(np.int64) * 10_000_000 + pid
        pid_l = pid.tolist()
        tid_l = cols["tid"].to_numpy(zero_copy_only=False).tolist()
        ts = _us(cols["start_ns"].to_numpy(zero_copy_only=False) - base)
        dur = _us(cols["dur_ns"].to_numpy(zero_copy_only=False))
        ids = cols["flow_id"].to_pylist()
        args = cols["args"].to_pylist()
        extra = cols["extra"].to_pylist()
        parts: list[str] = []
        for i in range(n):
            x: dict[str, Any] = msgspec.json.decode(extra[i]) if extra[i] else {}
            p = ph[i] or ""
            fields = [f'"ph": "{p}"']
            if cat[i] is not None:
                fields.append(f'"cat": {cat[i]}')
            fields.append(f'"name": {name[i]}')
            fields.append(f'"pid": {enc(x.pop("pid")).decode() if "pid" in x else pid_l[i]}')
            fields.append(f'"tid": {enc(x.pop("tid")).decode() if "tid" in x else tid_l[i]}')
            fields.append(f'"ts": {ts[i]}')
            if p == "X":
                fields.append(f'"dur": {dur[i]}')
            if "id" in x:
                fields.append(f'"id": {enc(x.pop("id")).decode()}')
            elif ids[i] is not None:
                fields.append(f'"id": {ids[i]}')
            for k, v in x.items():
                fields.append(f'"{k}": {enc(v).decode()}')
            if args[i] is not None:
                fields.append(f'"args": {args[i]}')
            parts.append("{" + ", ".join(fields) + "}")
        text = ",\n".join(parts)
        if text:
            yield (b"\n" if first else b",\n") + text.encode()
            first = False
    yield b"\n]}\n"


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
    """Write the Chrome JSON (gzip when the name ends in .gz), atomically."""
    path = Path(path)
    with atomic_path(path) as tmp, _open_output(tmp, gz=path.name.endswith(".gz")) as fh:
        for piece in iter_chrome_json(trace):
            fh.write(piece)
    return path


def _open_output(path: Path, gz: bool) -> Any:
    return gzip.open(path, "wb", compresslevel=6) if gz else open(path, "wb")
