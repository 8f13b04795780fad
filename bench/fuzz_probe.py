"""A second opinion on the input boundaries: mutators written apart from the fuzz suite's
(tests/_fuzz.py), as an outside checker would write them, judged by the same oracles.

    .venv/bin/python bench/fuzz_probe.py kineto 500 --seed 1
    .venv/bin/python bench/fuzz_probe.py neuron 500 --seed 1
    .venv/bin/python bench/fuzz_probe.py parquet

Kineto: a byte-order mark, UTF-16, the array format, duplicate keys, NaN/Infinity literals,
number spellings (1e3, -0, 23 digits), odd traceEvents values, unpaired phases, a 1 MB name,
CRLF pretty-printing, trailing bytes, two traceEvents keys, deviceProperties and
distributedInfo fields of other types, odd ProfilerStep names, multi-member gzip, empty
files, a deep top-level list, odd ids, pid/tid labels, Unicode. Legacy Neuron JSON: a table
as one record, timestamp spellings, NaN, unknown keys, metadata and summary forms, 100x the
records, duplicate keys, BOM, UTF-16, queue info, active-time fields, instruction text fields,
source locations, DMA numbers and flags, gzip, empty tables, the absolute clock. Parquet
(fixed cases): a column twice, unknown and retyped columns, schema versions, metadata that is
not JSON or nests 5,000 deep, row groups of 3, zero rows, null kind/name, metadata values out
of range. Prints the outcome classes and every input that is not ``correct`` or ``rejected``;
tracebacks and wrong results are saved under bench/results/fuzz_probe/.
"""

import argparse
import collections
import copy
import gzip
import io
import json
import random
import sys
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests import _fuzz, _fuzz_parquet  # noqa: E402

SAVE = HERE / "results" / "fuzz_probe"
rng = random.Random(1)


def k_mut(doc):
    ev = doc["traceEvents"]
    e = rng.choice(ev)
    c = rng.randrange(26)
    name = f"k{c}"
    if c == 0:
        return json.dumps(doc).encode(), name + " bom", b"\xef\xbb\xbf"
    if c == 1:
        return json.dumps(doc).encode("utf-16"), name + " utf16", None
    if c == 2:
        return json.dumps(ev).encode(), name + " array top", None
    if c == 3:
        t = json.dumps(doc)
        s = json.dumps(e)
        d = s[:-1] + ', "ts": "dup"}' if rng.random() < 0.5 else s[:-1] + ', "dur": -7}'
        return t.replace(s, d, 1).encode(), name + " dup key", None
    if c == 4:
        e[rng.choice(["ts", "dur"])] = "__NAN__"
        t = json.dumps(doc).replace('"__NAN__"', rng.choice(["NaN", "Infinity", "-Infinity"]))
        return t.encode(), name + " nan literal", None
    if c == 5:
        t = json.dumps(doc)
        s = json.dumps(e)
        k = rng.choice(["ts", "dur"])
        if k in e:
            d = s.replace(
                f'"{k}": {json.dumps(e[k])}',
                f'"{k}": {rng.choice(["1e3", "1E-3", "-0", "0.0", "1.0000000000000000001", "12345678901234567890123"])}',
            )
            return t.replace(s, d, 1).encode(), name + " number form", None
        return t.encode(), name, None
    if c == 6:
        doc["traceEvents"] = rng.choice([None, {}, "x", 5, [[]], [5], [None]])
        return json.dumps(doc).encode(), name + " traceEvents odd", None
    if c == 7:
        ev.append(
            {
                "ph": rng.choice("BEiICbenMP"),
                "name": "z",
                "pid": 1,
                "tid": 1,
                "ts": e.get("ts", 0),
                "dur": 5,
                "args": rng.choice([{}, [], 3, None, "s"]),
            }
        )
        return json.dumps(doc).encode(), name + " odd ph", None
    if c == 8:
        e["name"] = "x" * rng.choice([10**5, 10**6])
        return json.dumps(doc).encode(), name + " huge name", None
    if c == 9:
        return json.dumps(doc, indent=2).replace("\n", "\r\n").encode(), name + " crlf pretty", None
    if c == 10:
        return json.dumps(doc).encode() + rng.choice([b" x", b"{}", b"]", b"\x00", b"\n\n"]), name + " trailing", None
    if c == 11:
        t = json.dumps(doc)
        return (t[:-1] + ', "traceEvents": []}').encode(), name + " two traceEvents", None
    if c == 12:
        doc["deviceProperties"] = [
            {
                "id": rng.choice([0, "0", None, -1, 2**40]),
                "name": rng.choice([["a"], 5, None, "H100"]),
                "totalGlobalMem": rng.choice(["80GB", -1, 1e300]),
            }
        ]
        return json.dumps(doc).encode(), name + " deviceProperties fields", None
    if c == 13:
        doc["distributedInfo"] = {
            "rank": rng.choice([True, 1.0, "0", -0.0, 1.5]),
            "world_size": rng.choice([2, 2.0, "2", True]),
        }
        return json.dumps(doc).encode(), name + " rank forms", None
    if c == 14:
        e["name"] = rng.choice(
            [
                "ProfilerStep#1a",
                "ProfilerStep#",
                "ProfilerStep#01",
                "ProfilerStep# 3",
                "ProfilerStep#٣",
                "ProfilerStep#1e3",
            ]
        )
        e["cat"] = "user_annotation"
        e["ph"] = "X"
        e.setdefault("dur", 10)
        e.setdefault("ts", 1)
        return json.dumps(doc).encode(), name + " step names", None
    if c == 15:
        b = json.dumps(doc).encode()
        i = len(b) // 2
        return gzip.compress(b[:i]) + gzip.compress(b[i:]), name + " multi-member gzip", "gz"
    if c == 16:
        return (
            rng.choice([b"", b"   ", b"{}", b"[]", b"null", b"1", b'""', b"\xef\xbb\xbf"]),
            name + " empty forms",
            None,
        )
    if c == 17:
        doc["distributedInfo"] = json.loads("[" * 300 + "]" * 300)
        return json.dumps(doc).encode(), name + " deep top list", None
    if c == 18:
        e.setdefault("args", {})["External id"] = rng.choice([-5, 2**63, "7", 1.5])
        e["args"]["correlation"] = rng.choice([-1, 2**64, "x"])
        return json.dumps(doc).encode(), name + " ids odd", None
    if c == 19:
        e["cat"] = "kernel"
        e["ph"] = "X"
        e.setdefault("args", {})
        e["args"] = {
            "device": rng.choice([-1, 2**40, "0"]),
            "stream": rng.choice([2**40, -3, "7"]),
            "grid": rng.choice([[1, 1], [2**31, 1, 1], "x", [1, 1, 1, 1]]),
            "correlation": 1,
        }
        return json.dumps(doc).encode(), name + " kernel args odd", None
    if c == 20:
        d2 = copy.deepcopy(doc)
        d2["traceEvents"] = ev * rng.choice([3, 20])
        return json.dumps(d2).encode(), name + " repeated events", None
    if c == 21:
        e["ts"] = rng.choice([0, -1, 1e-9, 4e15, -4e15])
        e["dur"] = rng.choice([0, 1e-9, 4e12])
        return json.dumps(doc).encode(), name + " tiny/large times", None
    if c == 22:
        e["pid"] = rng.choice(["Spans", "", "GPU 0", -1, 0.5, [1]])
        e["tid"] = rng.choice(["stream 7", "", None, 2**70])
        return json.dumps(doc).encode(), name + " pid/tid labels", None
    if c == 23:
        e["ph"] = rng.choice(["", "XX", "x", "\u00e9", None, 1])
        return json.dumps(doc).encode(), name + " ph odd", None
    if c == 24:
        doc["schemaVersion"] = rng.choice([None, "1", 99, [1]])
        doc["displayTimeUnit"] = rng.choice(["ns", "ms", 5])
        return json.dumps(doc).encode(), name + " top odd", None
    b = json.dumps(doc, ensure_ascii=False).encode()
    return b.replace(b'"name": "', '"name": "\u2603\ud7ff'.encode(), 3), name + " unicode", None


def n_mut(doc):
    c = rng.randrange(20)
    name = f"n{c}"
    ins, dma = doc["instruction"], doc["dma"]
    r = rng.choice(ins + dma)
    if c == 0:
        doc["instruction"] = ins[0]
        return json.dumps(doc).encode(), name + " table as dict"
    if c == 1:
        r["timestamp"] = rng.choice([1.5, 0.4999, 1e3, -0.0, 2**53 + 1, 4e18, -4e18, 4000000000000000001])
        return json.dumps(doc).encode(), name + " ts forms"
    if c == 2:
        r["timestamp"] = "__N__"
        return json.dumps(doc).replace('"__N__"', rng.choice(["NaN", "Infinity"])).encode(), name + " nan literal"
    if c == 3:
        r["\u00fcnknown"] = {"a": [1, 2]}
        r["x" * 50] = None
        return json.dumps(doc).encode(), name + " extra keys"
    if c == 4:
        doc["metadata"] = rng.choice([doc["metadata"][0], [], {}, [{}], [None], "m"])
        return json.dumps(doc).encode(), name + " metadata forms"
    if c == 5:
        s = doc["summary"][0]
        k = rng.choice(list(s))
        s[k] = rng.choice(["abc", [1], {"a": 1}, None, -1, 1e300, True])
        return json.dumps(doc).encode(), name + " summary field"
    if c == 6:
        doc["instruction"] = ins * rng.choice([10, 100])
        return json.dumps(doc).encode(), name + " many records"
    if c == 7:
        t = json.dumps(doc)
        s = json.dumps(r)
        return t.replace(s, s[:-1] + ', "timestamp": "dup"}', 1).encode(), name + " dup key"
    if c == 8:
        return b"\xef\xbb\xbf" + json.dumps(doc).encode(), name + " bom"
    if c == 9:
        return json.dumps(doc).encode("utf-16"), name + " utf16"
    if c == 10:
        q = rng.choice(doc["dma_queues_info"])
        q["q_idx"] = rng.choice(["1", -1, 2**40, 1.5, None, [0]])
        q["q_name"] = rng.choice([5, None, "", ["q"]])
        return json.dumps(doc).encode(), name + " queue info"
    if c == 11:
        a = rng.choice(doc["active_time"])
        k = rng.choice(list(a))
        a[k] = rng.choice(["s", -5, None, 2**70, 1.5, [1]])
        return json.dumps(doc).encode(), name + " active_time field"
    if c == 12:
        i = rng.choice(ins)
        i[rng.choice(["label", "opcode", "hlo_name", "layer", "subgroup"])] = rng.choice(
            [5, ["a"], {"b": 1}, None, "", "x" * 10000]
        )
        return json.dumps(doc).encode(), name + " instruction text fields"
    if c == 13:
        i = rng.choice(ins)
        i["nki_source_location"] = rng.choice(
            ["f.py:99999999999999999999", "f.py:-3", ":12", "f.py:", "[f.py:3]", 5, None]
        )
        return json.dumps(doc).encode(), name + " source location"
    if c == 14:
        d = rng.choice(dma)
        d[
            rng.choice(["transfer_size", "read_size", "write_size", "dma_engine", "dma_queue", "packet_aggregation_id"])
        ] = rng.choice(["12", -1, 2**70, 1e300, None, [1], True])
        return json.dumps(doc).encode(), name + " dma numbers"
    if c == 15:
        d = rng.choice(dma)
        d[rng.choice(["aggregated", "duplicate", "is_cc_dma"])] = rng.choice(
            ["YES", "No", 1, 0, True, None, "maybe", [1]]
        )
        return json.dumps(doc).encode(), name + " dma flags"
    if c == 16:
        b = json.dumps(doc).encode()
        return gzip.compress(b)[: rng.choice([len(b) // 4, 30])] if rng.random() < 0.5 else gzip.compress(
            b
        ), name + " gzip"
    if c == 17:
        doc["instruction"] = []
        doc["dma"] = []
        return json.dumps(doc).encode(), name + " empty tables"
    if c == 18:
        r["duration"] = rng.choice([0, 1e-9, 4e18, 4e18 + 1e3, 0.5, 1.5])
        return json.dumps(doc).encode(), name + " duration forms"
    for x in ins:
        x["timestamp"] += 9000000000
    return json.dumps(doc).encode(), name + " absolute clock"


def _parquet_cases() -> collections.Counter:
    """Fixed damaged Parquet traces, each through info, analyze, report and export."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    counts: collections.Counter[str] = collections.Counter()
    table, meta = _fuzz_parquet.parquet_seeds()[0]
    KEY = b"neuron_explorer"

    def enc(t, m, **kw):
        t = t.replace_schema_metadata({KEY: json.dumps(m).encode()} if not isinstance(m, bytes) else {KEY: m})
        b = io.BytesIO()
        pq.write_table(t, b, **kw)
        return b.getvalue()

    cases = {}
    cases["dup column"] = enc(
        pa.Table.from_arrays([*list(table.columns), table["name"]], names=[*table.column_names, "name"]), meta
    )
    cases["extra unknown col"] = enc(table.append_column("zzz", pa.array([1] * table.num_rows)), meta)
    cases["large_string name"] = enc(
        table.set_column(table.column_names.index("name"), "name", table["name"].cast(pa.large_string())), meta
    )
    cases["timestamp start"] = enc(
        table.set_column(table.column_names.index("start_ns"), "start_ns", table["start_ns"].cast(pa.timestamp("ns"))),
        meta,
    )
    cases["struct args"] = enc(
        table.set_column(table.column_names.index("args"), "args", pa.array([{"a": 1}] * table.num_rows)), meta
    )
    for v in ["2.0", "1.99", "abc", 2, None, "99.0.0", "0.1"]:
        m = dict(meta)
        m["schema_version"] = v
        cases[f"schema_version {v!r}"] = enc(table, m)
    cases["meta list"] = enc(table, b"[1,2]")
    cases["meta not json"] = enc(table, b"{not json")
    cases["meta deep"] = enc(table, (b'{"x":' * 5000) + b"1" + b"}" * 5000)
    m = dict(meta)
    m.pop("schema_version", None)
    cases["no schema_version"] = enc(table, m)
    cases["no metadata"] = (lambda: __import__("io").BytesIO())()
    b = __import__("io").BytesIO()
    pq.write_table(table.replace_schema_metadata(None), b)
    cases["no metadata"] = b.getvalue()
    cases["many row groups"] = enc(table, meta, row_group_size=3)
    cases["zero rows"] = enc(table.slice(0, 0), meta)
    cases["null kind"] = enc(
        table.set_column(table.column_names.index("kind"), "kind", pa.nulls(table.num_rows, table["kind"].type)), meta
    )
    cases["null name"] = enc(
        table.set_column(table.column_names.index("name"), "name", pa.nulls(table.num_rows, table["name"].type)), meta
    )
    cases["kind unknown values"] = enc(
        table.set_column(
            table.column_names.index("kind"),
            "kind",
            pa.array(["weird"] * table.num_rows).dictionary_encode()
            if pa.types.is_dictionary(table["kind"].type)
            else pa.array(["weird"] * table.num_rows),
        ),
        meta,
    )
    for k, v in [
        ("rank", 2**40),
        ("world_size", -3),
        ("base_time_ns", 2**70),
        ("device_type", 5),
        ("repairs", [1, "x"]),
        ("steps", "x"),
        ("device_properties", [{"id": "0", "name": 3}]),
    ]:
        m = dict(meta)
        m[k] = v
        cases[f"meta {k}={v!r}"] = enc(table, m)
    with tempfile.TemporaryDirectory() as d:
        for name, data in cases.items():
            for cmd in ("info", "analyze", "report", "export"):
                out = _fuzz_parquet.parquet_case(data, Path(d), cmd, name)
                counts[out[0]] += 1
                if out[0] not in ("correct", "rejected"):
                    print(f"  {name} {cmd}: {out}")

    print(f"parquet: {len(cases)} cases x 4 commands: {dict(counts)}")
    return counts


def _run(which: str, n: int) -> collections.Counter:
    counts: collections.Counter[str] = collections.Counter()
    bad: collections.Counter[str] = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        seeds = [_fuzz.load_seed(p, 60) for p in _fuzz.SEEDS] if which == "kineto" else _fuzz_parquet.neuron_seeds()
        for i in range(n):
            doc = copy.deepcopy(rng.choice(seeds))
            command = "analyze" if which == "kineto" and i % 10 == 0 else ("info" if i % 10 == 0 else "convert")
            if which == "kineto":
                data, mut, pre = k_mut(doc)
                if pre == b"\xef\xbb\xbf":
                    data = pre + data
                outcome, detail = _fuzz.kineto_case(data, pre == "gz", work, command)
            else:
                data, mut = n_mut(doc)
                outcome, detail = _fuzz_parquet.neuron_case(data, work, command)
            counts[outcome] += 1
            if outcome not in ("correct", "rejected"):
                bad[f"{outcome}: {mut}: {detail[:140]}"] += 1
            if outcome in ("traceback", "wrong"):
                SAVE.mkdir(parents=True, exist_ok=True)
                (SAVE / f"{which}-{outcome}-{i}.bin").write_bytes(data)
    print(f"{which}: {n} inputs: {dict(counts)}")
    for k, v in bad.most_common(40):
        print(f"  {v:4d} x {k}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("importer", choices=["kineto", "neuron", "parquet"])
    parser.add_argument("inputs", type=int, nargs="?", default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    rng.seed(args.seed)
    counts = _parquet_cases() if args.importer == "parquet" else _run(args.importer, args.inputs)
    return 1 if counts["traceback"] or counts["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
