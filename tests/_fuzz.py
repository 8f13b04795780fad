"""Fuzzing the input boundaries: mutators, a reference for the Kineto rules, and the oracle.

Shared by the bounded fuzz tests (tests/unit/test_fuzz_*.py) and the long run (bench/fuzz.py).
Every input goes through the real CLI entry (``neuron_explorer.cli.main``); its outcome is one
of these classes:

- ``rejected``: exit 3, one line ``neuron-explorer: error: <file>: ...`` and no output file;
- ``correct``: exit 0 and the written trace agrees with the reference (``check_kineto``) or
  meets the trace invariants (``check_trace``);
- ``traceback``: an exception escaped ``main`` (or a warning that is not one line);
- ``wrong``: exit 0 with a trace that breaks the reference or an invariant, or an exit code,
  message or output file that breaks the promise above.

The reference implements the rules of docs/schema.md ("Validation") on Python's own JSON parse,
independently of the importer's columnar code.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import sys
import threading
import warnings
import zlib
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

MAX_TIME_NS = 4 * 10**18
INT32_MAX = 2**31 - 1
ROOT = Path(__file__).resolve().parent.parent
SEEDS = (
    ROOT / "tests/data/kineto/hta/backward_thread.json",
    ROOT / "tests/data/kineto/hta/triton_example.json.gz",
    ROOT / "tests/data/kineto/hta/event_sync_multi_stream.json.gz",
    ROOT / "tests/data/kineto/hta/cpu_only_rank34.json.gz",
    # NCCL collectives with record_param_comms metadata (process group, message sizes, dtype)
    ROOT / "tests/data/kineto/hta/nccl_data.json.gz",
)
FUZZ_DATA = ROOT / "tests/data/fuzz"


def load_seed(path: Path, max_events: int = 80) -> dict[str, Any]:
    """The first ``max_events`` events of a seed trace, or for a trace with collectives the
    events around its first collective kernel (with its launch and record_param_comms op)."""
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"]
    coll = [e.get("ts", 0) for e in events if isinstance(e.get("args"), dict) and "Collective name" in e["args"]]
    if coll:  # the events nearest in time to the first collective, in file order
        t = min(coll)
        near = sorted(range(len(events)), key=lambda i: abs(float(events[i].get("ts", t)) - t))[:max_events]
        doc["traceEvents"] = [events[i] for i in sorted(near)]
    else:
        doc["traceEvents"] = events[:max_events]
    return doc


# ------------------------------------------------------------------------------ mutators
_ODD_VALUES: list[Any] = [
    "12",
    "abc",
    "",
    "\x00",
    True,
    False,
    None,
    [],
    [1, 2],
    {},
    {"a": 1},
    -1,
    -(10**6),
    0,
    2**31,
    2**31 - 1,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    10**19,
    1e19,
    -1e19,
    1e300,
    1.5,
    -0.5,
    0.0001,
    123456789.123456789,
]
_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "bp", "s")
_ARG_KEYS = ("External id", "correlation", "device", "stream", "grid", "block", "registers per thread", "Bytes")
_TOP_KEYS = ("baseTimeNanoseconds", "deviceProperties", "distributedInfo", "schemaVersion")


def _deep(depth: int) -> str:
    return '{"x": ' * depth + "1" + "}" * depth


def mutate_doc(doc: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """A structural mutation of a parsed trace (in place) and its name."""
    events = doc["traceEvents"]
    choice = rng.randrange(15)
    if not events:
        choice = 12
    e = events[rng.randrange(len(events))] if events else {}
    if choice == 0:
        key = rng.choice(_FIELDS)
        e.pop(key, None)
        return doc, f"delete {key}"
    if choice == 1:
        key = rng.choice(_FIELDS)
        e[key] = rng.choice(_ODD_VALUES)
        return doc, f"retype {key}"
    if choice == 2:
        events.insert(rng.randrange(len(events) + 1), json.loads(json.dumps(e)))
        return doc, "duplicate event"
    if choice == 3:
        args = e.setdefault("args", {}) if isinstance(e.get("args"), dict) else {}
        args[rng.choice(_ARG_KEYS)] = rng.choice([*_ODD_VALUES, [2**40, 1, 1], [1.5, 2], ["a"]])
        e["args"] = args
        return doc, "retype arg"
    if choice == 4:
        e["name"] = rng.choice(["ProfilerStep#3000000000", "ProfilerStep#" + "9" * 30, "ProfilerStep#-1"])
        e["cat"] = "user_annotation"
        return doc, "huge step"
    if choice == 5:
        flow = {"ph": rng.choice("stf"), "cat": "ac2g", "name": "flow", "id": rng.randrange(10**6)}
        flow.update(pid=e.get("pid", 0), tid=e.get("tid", 0), ts=rng.choice([e.get("ts", 0), 10**12, -5]))
        events.append(flow)
        return doc, "flow to nowhere"
    if choice == 6:
        key = rng.choice(_TOP_KEYS)
        doc[key] = rng.choice([*_ODD_VALUES, [1, "x"], {"rank": 2**40}, {"rank": "3"}, {"world_size": -1}])
        return doc, f"retype {key}"
    if choice == 7:
        e[rng.choice(("ts", "dur"))] = rng.choice([2**62, 2**63 - 1, 9.3e15, -(2**62), 10**16, 4 * 10**15])
        return doc, "huge time"
    if choice == 8:
        e["dur"] = rng.choice([-1, -0.001, -(10**9)])
        return doc, "negative dur"
    if choice == 9:
        e["ts"] = rng.choice(["100", True, None, "\x00", [1], {"t": 1}])
        return doc, "ts not a number"
    if choice == 10:
        e["name"] = rng.choice([["a", "b"], {"n": 1}, 5, 1.5, True])
        e["cat"] = rng.choice([{"c": 1}, ["x"], 3, "kernel"])
        return doc, "name/cat of another type"
    if choice == 11:
        e["args"] = {"deep": "__DEEP__"}
        return doc, "deep args"
    if choice == 12:
        doc["baseTimeNanoseconds"] = rng.choice([2**63 - 1, 4 * 10**18, -1, "1", 1.5, 10**30])
        return doc, "odd base time"
    if choice == 14:
        # one event at the clock's origin among epoch times (a runtime call at ts 0 made the
        # critical-path walk loop forever: issue 43)
        runtime = [x for x in events if x.get("cat") in ("cuda_runtime", "cuda_driver")] or events
        rng.choice(runtime)["ts"] = 0
        return doc, "event at ts 0"
    events.append({"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1})
    events[-1][rng.choice(("pid", "tid", "id"))] = rng.choice(_ODD_VALUES)
    return doc, "odd id"


def encode_doc(doc: dict[str, Any], rng: random.Random) -> bytes:
    text = json.dumps(doc)
    if "__DEEP__" in text:
        text = text.replace('"__DEEP__"', _deep(rng.choice([300, 1500, 20000])), 1)
    return text.encode()


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A byte-level mutation: truncate, flip, delete, duplicate, insert."""
    if not data:
        return data, "empty"
    choice = rng.randrange(5)
    i = rng.randrange(len(data))
    if choice == 0:
        return data[:i], "truncate"
    if choice == 1:
        b = bytearray(data)
        b[i] ^= 1 << rng.randrange(8)
        return bytes(b), "flip bit"
    if choice == 2:
        return data[:i] + data[i + rng.randrange(1, 64) :], "delete bytes"
    if choice == 3:
        j = min(len(data), i + rng.randrange(1, 200))
        return data[:j] + data[i:j] + data[j:], "duplicate bytes"
    junk = rng.choice([b"\x00", b"NaN", b"-", b'"', b"]", b"}", b"{", b"1e999", b"\xff\xfe", b",,"])
    return data[:i] + junk + data[i:], "insert bytes"


def bad_gzip(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Gzip the input and damage a byte inside the deflate stream (or its trailer)."""
    gz = bytearray(gzip.compress(data, compresslevel=rng.choice([1, 6, 9])))
    i = rng.randrange(10, len(gz))
    gz[i] ^= 0xFF
    return bytes(gz), "bad gzip"


def kineto_input(rng: random.Random, seeds: list[dict[str, Any]]) -> tuple[bytes, str, bool]:
    """One fuzzed Kineto input: (bytes, mutation, gzipped)."""
    doc = json.loads(json.dumps(rng.choice(seeds)))
    names = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        doc, name = mutate_doc(doc, rng)
        names.append(name)
    data = encode_doc(doc, rng)
    r = rng.random()
    if r < 0.25:
        data, name = mutate_bytes(data, rng)
        names.append(name)
    if r > 0.9:
        data, name = bad_gzip(data, rng)
        return data, "+".join([*names, name]), True
    gz = r > 0.75
    return (gzip.compress(data, 1) if gz else data), "+".join(names), gz


# ------------------------------------------------------------------------------ reference
class _Reject(Exception):
    """The reference expects the file to be rejected."""


def _parse_json(data: bytes) -> Any:
    def no_constants(name: str) -> Any:
        raise _Reject(f"JSON constant {name}")

    result: list[Any] = []

    def run() -> None:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(100_000)
        try:
            result.append(json.loads(data, parse_float=Decimal, parse_constant=no_constants))
        except BaseException as exc:  # (handed to the caller)
            result.append(exc)
        finally:
            sys.setrecursionlimit(old)

    threading.stack_size(512 << 20)
    t = threading.Thread(target=run)
    t.start()
    t.join()
    threading.stack_size(0)
    if isinstance(result[0], BaseException):
        raise _Reject(str(result[0])[:80])
    return result[0]


def _depth(value: Any) -> int:
    depth = 0
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            depth = max(depth, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return depth


def _is_num(v: Any) -> bool:
    return type(v) in (int, Decimal)


def _ns(us: int | Decimal) -> int:
    try:
        return int((Decimal(us) * 1000).to_integral_value())
    except ArithmeticError:  # (17121e999867402349098: past any time; decimal.Overflow)
        return 2 * MAX_TIME_NS


def reference_kineto(data: bytes) -> dict[str, Any]:
    """What a correct import of ``data`` holds: the sorted start and duration of every valid
    event and the number dropped. Raises ``_Reject`` where the file must be rejected."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise _Reject("gzip") from exc
    try:
        data.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:  # (inside args: kept with the bad bytes replaced, a repair; in an
        # unknown key: ignored with the key; tests/unit/test_input_validation.py checks the repair)
        data, utf8 = data.decode("utf-8", "replace").encode(), False
    doc = _parse_json(data)
    events = doc if isinstance(doc, list) else (doc.get("traceEvents") if isinstance(doc, dict) else None)
    top = doc if isinstance(doc, dict) else {}
    if not isinstance(events, list) or not events:
        raise _Reject("no events")
    base = top.get("baseTimeNanoseconds")
    if not (type(base) is int and 0 <= base <= MAX_TIME_NS):
        base = 0
    starts, durs, dropped = [], [], 0
    for e in events:
        if not isinstance(e, dict) or not isinstance(e.get("ph", ""), str) or not e.get("ph"):
            raise _Reject("event shape")
        if "ts" not in e and e["ph"] != "M":
            raise _Reject("no ts")
        deep_other = any(_depth(v) > 200 for k, v in e.items() if k != "args" and k in (*_FIELDS, "cname", "tts"))
        ts, dur = e.get("ts"), e.get("dur")
        ok = not deep_other
        ok &= "ts" not in e or (_is_num(ts) and abs(_ns(ts)) <= MAX_TIME_NS)
        ok &= type(e.get("name")) in (str, type(None)) and type(e.get("cat")) in (str, type(None))
        if dur is not None:
            if not _is_num(dur):
                ok = False
            else:
                f = float(dur) * 1000.0
                ok &= 0 <= f <= MAX_TIME_NS
        if not ok:
            dropped += 1
            continue
        start = _ns(ts) if "ts" in e else 0
        if base and abs(start + base) > MAX_TIME_NS:
            dropped += 1
            continue
        starts.append(start + base)
        durs.append(0 if dur is None else round(float(dur) * 1000.0))
    if not starts:
        raise _Reject("no valid event")
    return {"starts": sorted(starts), "durs": sorted(durs), "dropped": dropped, "utf8": utf8}


# ------------------------------------------------------------------------------ running
def run_cli(argv: list[str]) -> tuple[int | None, str, BaseException | None]:
    """``main(argv)`` in process: (exit code, stderr, exception that escaped)."""
    from neuron_explorer.cli import main

    err = io.StringIO()
    out = io.StringIO()

    def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, "", 0))

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show  # (not pytest's recorder: the user's stderr is under test)
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                code = main(argv)
        except SystemExit as exc:
            return int(exc.code or 0), err.getvalue(), None
        except BaseException as exc:  # the outcome under test
            return None, err.getvalue(), exc
    return code, err.getvalue(), None


def clean_error(code: int | None, stderr: str, path: Path) -> str | None:
    """None when (code, stderr) is the promised one-line error naming ``path``, else why not."""
    if code != 3:
        return f"exit {code}"
    errors = [ln for ln in stderr.splitlines() if ln.startswith("neuron-explorer: error:")]
    if len(errors) != 1 or str(path) not in errors[0]:
        return f"error line: {stderr.strip()[-200:]!r}"
    if "Traceback" in stderr:
        return "traceback text on stderr"
    return None


def check_trace(path: Path) -> str | None:
    """The invariants every written trace keeps (None when it does)."""
    from neuron_explorer.trace import EVENTS_SCHEMA, Trace

    trace = Trace.read(path)
    t = trace.events
    n = t.num_rows
    if t.schema.remove_metadata() != EVENTS_SCHEMA:
        return "schema differs"
    if n == 0:
        return "empty trace written"
    if t["event_id"].to_pylist() != list(range(n)):
        return "event_id is not 0..n-1"
    start, dur = t["start_ns"], t["dur_ns"]
    if start.null_count or dur.null_count:
        return "null start or duration"
    if pc.min(dur).as_py() < 0:
        return "negative dur_ns"
    if max(abs(pc.min(start).as_py()), abs(pc.max(start).as_py())) > MAX_TIME_NS or pc.max(dur).as_py() > MAX_TIME_NS:
        return "time beyond the range"
    for col in ("parent_id", "launch_id", "op_id", "fwd_id"):
        c = t[col]
        if c.null_count < n and (pc.min(c).as_py() < 0 or pc.max(c).as_py() >= n):
            return f"{col} points outside the trace"
    return None


def check_kineto(out: Path, expected: dict[str, Any]) -> str | None:
    from neuron_explorer.trace import Trace

    bad = check_trace(out)
    if bad:
        return bad
    trace = Trace.read(out)
    starts = sorted(trace.events["start_ns"].to_pylist())
    durs = sorted(trace.events["dur_ns"].to_pylist())
    dropped = int(trace.metadata.get("dropped_events") or 0)
    if len(starts) != len(expected["starts"]) or dropped != expected["dropped"]:
        return f"{len(starts)} events + {dropped} dropped, reference {len(expected['starts'])} + {expected['dropped']}"
    if starts != expected["starts"]:
        return "start times differ from the reference"
    if durs != expected["durs"]:
        return "durations differ from the reference"
    return None


def kineto_case(data: bytes, gz: bool, workdir: Path, command: str = "convert") -> tuple[str, str]:
    """Run one Kineto input through the CLI: (outcome class, detail)."""
    for old in workdir.iterdir():
        old.unlink()
    src = workdir / ("in.json.gz" if gz else "in.json")
    out = workdir / "out.parquet"
    src.write_bytes(data)
    argv = ["convert", str(src), "-o", str(out)] if command == "convert" else ["analyze", str(src), "--format", "json"]
    code, stderr, exc = run_cli(argv)
    if exc is not None:
        return "traceback", f"{type(exc).__name__}: {str(exc)[:120]}"
    try:
        expected: dict[str, Any] | None = reference_kineto(data)
    except _Reject:
        expected = None
    leftovers = [p.name for p in workdir.iterdir() if p.name not in (src.name, out.name)]
    if leftovers:
        return "wrong", f"stray files {leftovers}"
    if code == 0:
        if command != "convert":
            return "correct", ""
        if expected is None:
            bad = check_trace(out)
            return ("wrong", f"accepted, reference rejects; {bad}") if bad else ("accepted (reference rejects)", "")
        bad = check_kineto(out, expected)
        return ("wrong", bad) if bad else ("correct", "")
    why = clean_error(code, stderr, src)
    if why:
        return "wrong", why
    if out.exists():
        return "wrong", "output file left after an error"
    return ("rejected" if expected is None else "rejected (reference accepts)"), stderr.strip()[-120:]


Mutator = Callable[[random.Random], tuple[bytes, str]]
