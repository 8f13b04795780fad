"""Fuzzing the Parquet trace reader (and the legacy Neuron JSON importer) through the CLI.

A mutation that makes the trace lossy by construction (a dropped or retyped column, a negative
duration, a link outside the file, a metadata value of the wrong type) must end in a rejection
or in a trace whose metadata lists a repair; any accepted trace must keep the invariants of
``tests._fuzz.check_trace``. See tests/_fuzz.py for the outcome classes.
"""

from __future__ import annotations

import gzip
import io
import json
import random
import tempfile
import zlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tests import _fuzz

METADATA_KEY = b"neuron_explorer"
_TYPES = [
    pa.int8(),
    pa.int32(),
    pa.bool_(),
    pa.string(),
    pa.float64(),
    pa.int64(),
    pa.dictionary(pa.int8(), pa.string()),
]
_META_VALUES: list[Any] = ["x", 5, -1, 2**40, True, None, [], {}, [1, "a"], "3", 1.5]


def parquet_seeds() -> list[tuple[pa.Table, dict[str, Any]]]:
    """Small real traces as (table, metadata), made with the Kineto importer."""
    from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json

    seeds = []
    with tempfile.TemporaryDirectory() as tmp:
        for p in _fuzz.SEEDS[:3]:
            src = Path(tmp) / "seed.json"
            src.write_text(json.dumps(_fuzz.load_seed(p, 120)))
            out = Path(tmp) / "seed.parquet"
            import_kineto_json(src).write(out)
            t = pq.read_table(out)
            seeds.append((t.replace_schema_metadata(None), json.loads(t.schema.metadata[METADATA_KEY])))
    return seeds


def _retype(col: pa.ChunkedArray, typ: pa.DataType, rng: random.Random) -> pa.Array:
    try:
        return col.cast(typ, safe=False).combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        n = len(col)
        if pa.types.is_boolean(typ):
            return pa.array([rng.random() < 0.5 for _ in range(n)])
        if pa.types.is_string(typ) or pa.types.is_dictionary(typ):
            return pa.array([rng.choice(["a", "", "kernel"]) for _ in range(n)]).cast(typ)
        return pa.array([rng.randrange(-100, 100) for _ in range(n)]).cast(typ)


def _set_values(table: pa.Table, name: str, values: np.ndarray) -> pa.Table:
    return table.set_column(table.column_names.index(name), name, pa.array(values, table[name].type))


def mutate_parquet(
    table: pa.Table, meta: dict[str, Any], rng: random.Random, original: pa.Schema | None = None
) -> tuple[pa.Table, Any, str, bool]:
    """One mutation: (table, metadata, name, lossy). ``original``: the schema the trace was
    written with; a retyped column is lossy when its values do not convert back to that type
    (values an earlier mutation replaced are the file's values: no reader can know them)."""
    n = table.num_rows
    names = table.column_names
    choice = rng.randrange(9)
    if n == 0:
        choice = rng.choice([0, 1, 2, 8])
    if not isinstance(meta, dict) and choice == 2:
        choice = 8
    if choice == 0:
        name = rng.choice(names)
        return table.drop_columns([name]), meta, f"drop {name}", n > 0
    if choice == 1:
        name = rng.choice(names)
        typ = rng.choice(_TYPES)
        col = _retype(table[name], typ, rng)
        want = original.field(name).type if original is not None and name in original.names else table[name].type
        lossy = not _lossless(want, col)
        return table.set_column(names.index(name), name, col), meta, f"retype {name} as {typ}", lossy
    if choice == 2:
        meta = dict(meta)
        key = rng.choice(
            [
                "device_properties",
                "rank",
                "schema_version",
                "trace_metadata",
                "distributed_info",
                "base_time_ns",
                "world_size",
                "device_types",
            ]
        )
        meta[key] = value = rng.choice(_META_VALUES)
        return table, meta, f"metadata {key}", not _metadata_ok(key, value)
    if choice == 3:
        col = rng.choice(["start_ns", "dur_ns"])
        values = table[col].to_numpy().copy()
        values[rng.randrange(n)] = rng.choice([2**63 - 1, -(2**63), 5 * 10**18])
        return _set_values(table, col, values), meta, f"extreme {col}", True
    if choice == 4:
        values = table["dur_ns"].to_numpy().copy()
        low = -np.iinfo(values.dtype).min if values.dtype.kind == "i" else 10**9  # (dur_ns retyped before)
        values[rng.randrange(n)] = -rng.randrange(1, min(10**9, low))
        return _set_values(table, "dur_ns", values), meta, "negative dur_ns", True
    if choice == 5:
        return table.slice(0, 0), meta, "empty table", True
    if choice == 6:
        name = rng.choice(["parent_id", "launch_id", "op_id", "fwd_id"])
        values = np.array(table[name].to_pylist(), dtype=object)
        values[rng.randrange(n)] = rng.choice([n, n + 5, -7, 2**40])
        return (
            table.set_column(names.index(name), name, pa.array(list(values), pa.int64())),
            meta,
            f"{name} outside",
            True,
        )
    if choice == 7:
        values = table["event_id"].to_numpy().copy()
        rng.shuffle(values)
        lossy = not np.array_equal(values, np.arange(n))
        return _set_values(table, "event_id", values), meta, "event_id shuffled", lossy
    return table, rng.choice(["[]", "{", 5, {"schema_version": 1}]), "metadata not an object", True


_META_OK: dict[str, Any] = {
    "device_properties": lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
    "rank": lambda v: type(v) is int and 0 <= v < 2**31,
    "schema_version": lambda v: True,  # (a bad one is rejected, checked as such)
    "trace_metadata": lambda v: isinstance(v, dict),
    "distributed_info": lambda v: v is None or isinstance(v, dict),
    "base_time_ns": lambda v: v is None or type(v) is int,
    "world_size": lambda v: v is None or type(v) is int,
    "device_types": lambda v: isinstance(v, list),
}


def _metadata_ok(key: str, value: Any) -> bool:
    return bool(_META_OK[key](value))


def _lossless(want: pa.DataType, after: pa.Array) -> bool:
    """Whether the file's new values convert to the column's type without loss (what a reader
    can know: a value already truncated by the mutation is the file's value)."""
    try:
        after.cast(want)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    return True


def encode_parquet(table: pa.Table, meta: Any) -> bytes:
    raw = meta if isinstance(meta, str) else json.dumps(meta)
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: raw.encode()}), buf)
    return buf.getvalue()


def parquet_input(rng: random.Random, seeds: list[tuple[pa.Table, dict[str, Any]]]) -> tuple[bytes, str]:
    table, meta = rng.choice(seeds)
    original = table.schema
    names: list[str] = []
    lossy_of: dict[str, bool] = {}  # per column or metadata key: the last mutation of it decides
    for _ in range(rng.choice([1, 1, 2])):
        try:
            table, meta, name, loss = mutate_parquet(table, meta, rng, original)
        except (KeyError, TypeError, ValueError, OverflowError, pa.ArrowException):  # (an earlier step changed it)
            continue
        names.append(name)
        lossy_of[_target(name)] = loss
    lossy = any(lossy_of.values())
    data = encode_parquet(table, meta)
    if rng.random() < 0.15:
        data, name = _fuzz.mutate_bytes(data, rng)
        names.append(name)
        lossy = False  # (a flipped byte may land where nothing is read)
    return data, "+".join(names) + ("!" if lossy else "")


def _target(mutation: str) -> str:
    """What a mutation changed: a column, ``meta:KEY``, ``meta`` or ``table``."""
    words = mutation.split()
    if words[0] in ("drop", "retype", "extreme"):
        return words[1]
    if mutation.startswith("metadata not"):
        return "meta"
    if words[0] == "metadata":
        return "meta:" + words[1]
    if words[0] == "negative":
        return "dur_ns"
    return "table" if words[0] == "empty" else words[0]


def parquet_case(data: bytes, workdir: Path, command: str = "info", mutation: str = "") -> tuple[str, str]:
    """Run one Parquet input through the CLI: (outcome class, detail)."""
    for old in workdir.iterdir():
        old.unlink()
    src = workdir / "in.parquet"
    out = workdir / ("out.json" if command == "export" else "out.html")
    src.write_bytes(data)
    argv = {
        "info": ["info", str(src)],
        "analyze": ["analyze", str(src)],
        "report": ["report", str(src), "-o", str(out)],
        "export": ["export", str(src), "--format", "chrome", "-o", str(out)],
    }[command]
    code, stderr, exc = _fuzz.run_cli(argv)
    if exc is not None:
        return "traceback", f"{command}: {type(exc).__name__}: {str(exc)[:120]}"
    if code in (0, 1):  # (analyze exits 1 only with --fail-on)
        outcome = _accepted(src)
        if outcome[0] == "correct" and accepted_lossy_without_repair(data, mutation, workdir):
            return "wrong", "a lossy change opened without a repair"
        return outcome
    why = _fuzz.clean_error(code, stderr, src)
    if why:
        return "wrong", f"{command}: {why}"
    if out.exists():
        return "wrong", "output file left after an error"
    return "rejected", stderr.strip()[-120:]


def _accepted(src: Path) -> tuple[str, str]:
    import warnings

    from neuron_explorer.trace import Trace
    from neuron_explorer.trace.errors import TraceFormatError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            trace = Trace.read(src)
        except TraceFormatError:  # the command read only columns that were intact
            return "accepted (full read rejects)", ""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "again.parquet"
        trace.write(out)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bad = _fuzz.check_trace(out)
    return ("wrong", bad) if bad else ("correct", "")


def accepted_lossy_without_repair(data: bytes, mutation: str, workdir: Path) -> bool:
    """For a lossy mutation that opened: True when no repair says so (silently wrong)."""
    import warnings

    from neuron_explorer.trace import Trace

    if not mutation.endswith("!"):
        return False
    src = workdir / "lossy.parquet"
    src.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            trace = Trace.read(src)
        except Exception:  # (rejected: not silent)
            return False
    return not trace.metadata.get("repairs")


# ------------------------------------------------------------------------------ legacy Neuron JSON
def neuron_seeds() -> list[dict[str, Any]]:
    from neuron_explorer.collectors.neuron.synth import SynthSpec, write_legacy_json

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "n.json"
        write_legacy_json(p, SynthSpec(executions=1, instructions_per_engine=5, transfers_per_queue=4))
        return [json.loads(p.read_text())]


def _walk_containers(obj: Any) -> list[Any]:
    found, stack = [], [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            found.append(v)
            stack.extend(v.values())
        elif isinstance(v, list):
            found.append(v)
            stack.extend(v)
    return found


def neuron_input(rng: random.Random, seeds: list[dict[str, Any]]) -> tuple[bytes, str]:
    doc = json.loads(json.dumps(rng.choice(seeds)))
    names = []
    for _ in range(rng.choice([1, 2, 3])):
        dicts = [c for c in _walk_containers(doc) if isinstance(c, dict) and c]
        d = rng.choice(dicts)
        key = rng.choice(list(d))
        if rng.random() < 0.3:
            del d[key]
            names.append("delete key")
        else:
            d[key] = rng.choice(_fuzz._ODD_VALUES)
            names.append("retype value")
    data = json.dumps(doc).encode()
    if rng.random() < 0.25:
        data, name = _fuzz.mutate_bytes(data, rng)
        names.append(name)
    return data, "+".join(names)


def _within(v: int | Decimal, low: int) -> bool:
    try:
        return low <= v <= _fuzz.MAX_TIME_NS
    except ArithmeticError:  # (1e999999999: beyond any time)
        return False


#: How the exports write a true flag (``"yes"``; docs/neuron.md), compared as lower-case text.
_TRUE_FLAGS = {"yes", "y", "true", "t", "1", "1.0"}


def _valid_record(r: dict[str, Any]) -> bool:
    ts, dur = r.get("timestamp"), r.get("duration")
    return _fuzz._is_num(ts) and _fuzz._is_num(dur) and _within(ts, -_fuzz.MAX_TIME_NS) and _within(dur, 0)


def _flag(v: Any) -> bool:
    return v is not None and str(v).strip().lower() in _TRUE_FLAGS


def _group_key(v: Any) -> float | None:
    """``packet_aggregation_id`` as a number (a numeric string too), or None."""
    if isinstance(v, bool) or v is None:
        return float(v) if isinstance(v, bool) else None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return None if f != f else f


def packet_group_transfers(records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """docs/schema.md: DMA transfers are one per packet group. Where a profile has aggregated
    rows, a group of packets without one (not duplicates) is a transfer of its own, from its
    first packet's start to its last packet's end: (start, duration) of each such transfer."""
    if not any(_flag(r.get("aggregated")) for r in records):
        return []
    covered = {
        _group_key(r.get("packet_aggregation_id"))
        for r in records
        if _flag(r.get("aggregated")) and not _flag(r.get("duplicate"))
    }
    spans: dict[float, list[int]] = {}
    for r in records:
        g = _group_key(r.get("packet_aggregation_id"))
        if g is None or g in covered or _flag(r.get("aggregated")) or _flag(r.get("duplicate")):
            continue
        t = int(Decimal(r["timestamp"]).to_integral_value())
        e = t + int(Decimal(r["duration"]).to_integral_value())
        lo_hi = spans.setdefault(g, [t, e])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], t), max(lo_hi[1], e)
    return [(lo, hi - lo) for lo, hi in spans.values()]


def reference_neuron(data: bytes) -> dict[str, Any] | None:
    """What a correct import of a legacy Neuron JSON export holds (docs/schema.md, "Validation",
    Neuron), from Python's own parse: for ``instruction`` (kernel events) and ``dma`` (memcpy
    and packet events), the sorted start and duration of every valid record and the number
    dropped; None when the file has no event tables (a summary-json export). Raises
    ``_fuzz._Reject`` where the file must be rejected."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise _fuzz._Reject("gzip") from exc
    doc = _fuzz._parse_json(data)
    if not isinstance(doc, dict):
        raise _fuzz._Reject("not an object")
    meta = doc.get("metadata")
    meta = meta[0] if isinstance(meta, list) and meta else meta
    first = meta.get("first_hw_timestamp") if isinstance(meta, dict) else None
    first = first if _fuzz._is_num(first) and first > 0 else None
    out: dict[str, Any] = {"dropped": 0}
    for key in ("instruction", "dma"):
        records = doc.get(key)
        if records is None:
            out[key] = None
            continue
        records = [records] if isinstance(records, dict) else records
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise _fuzz._Reject(f"{key} not a list of records")
        if records and not any("timestamp" in r for r in records):
            raise _fuzz._Reject(f"{key} without timestamps")
        kept = []
        for r in records:
            ts, dur = r.get("timestamp"), r.get("duration")
            if _valid_record(r):
                kept.append((int(Decimal(ts).to_integral_value()), int(Decimal(dur).to_integral_value())))
            else:
                out["dropped"] += 1
        if key == "dma":
            kept += packet_group_transfers([r for r in records if _valid_record(r)])
        origin = int(first) if first is not None and kept and min(t for t, _ in kept) >= first else 0
        out[key] = {"starts": sorted(t - origin for t, _ in kept), "durs": sorted(d for _, d in kept)}
    if out["instruction"] is None and out["dma"] is None:
        return None
    return out


def check_neuron(path: Path, expected: dict[str, Any]) -> str | None:
    from neuron_explorer.trace import Trace

    bad = _fuzz.check_trace(path)
    if bad:
        return bad
    trace = Trace.read(path)
    t = trace.events
    cat = t["category"].to_pylist()
    start, dur = t["start_ns"].to_pylist(), t["dur_ns"].to_pylist()
    # (every instruction is a ``neuron_kernel`` row: a kernel, or an annotation for a semaphore
    # wait; every DMA record a ``neuron_dma_memcpy`` row: a copy, or an annotation for a packet)
    got = {
        "instruction": [i for i, c in enumerate(cat) if c == "neuron_kernel"],
        "dma": [i for i, c in enumerate(cat) if c == "neuron_dma_memcpy"],
    }
    dropped = int(trace.metadata.get("dropped_events") or 0)
    if dropped != expected["dropped"]:
        return f"{dropped} records dropped, reference {expected['dropped']}"
    for key, rows in got.items():
        want = expected[key] or {"starts": [], "durs": []}
        if len(rows) != len(want["starts"]):
            return f"{len(rows)} {key} events, reference {len(want['starts'])}"
        if sorted(start[i] for i in rows) != want["starts"]:
            return f"{key} start times differ from the reference"
        if sorted(dur[i] for i in rows) != want["durs"]:
            return f"{key} durations differ from the reference"
    return None


def neuron_case(data: bytes, workdir: Path, command: str = "convert") -> tuple[str, str]:
    """Run one legacy Neuron JSON input through the CLI (``convert``, then the written trace is
    checked against ``reference_neuron``; or ``info``): (outcome class, detail)."""
    for old in workdir.iterdir():
        old.unlink()
    src = workdir / "device.json"
    out = workdir / "out.parquet"
    src.write_bytes(data)
    argv = ["convert", str(src), "-o", str(out)] if command == "convert" else ["info", str(src)]
    code, stderr, exc = _fuzz.run_cli(argv)
    if exc is not None:
        return "traceback", f"{command}: {type(exc).__name__}: {str(exc)[:120]}"
    try:
        expected = reference_neuron(data)
        reject = False
    except _fuzz._Reject:
        expected, reject = None, True
    if code == 0:
        if command != "convert":
            return "correct", ""
        if reject or expected is None:
            bad = _fuzz.check_trace(out)
            if bad:
                return "wrong", f"accepted; {bad}"
            return ("accepted (reference rejects)" if reject else "correct"), ""
        bad = check_neuron(out, expected)
        return ("wrong", bad) if bad else ("correct", "")
    why = _fuzz.clean_error(code, stderr, src)
    if why:
        return "wrong", f"{command}: {why}"
    if out.exists():
        return "wrong", "output file left after an error"
    return ("rejected" if reject else "rejected (reference accepts)"), stderr.strip()[-120:]
