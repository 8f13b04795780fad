"""Every class of bad input in issue 19 gets a one-line error (exit 3, no output file) or a
trace with the repair said out loud (metadata ``repairs``, a warning line), never a traceback
or a silently wrong trace. The inputs are the small files under tests/data/fuzz/."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow.compute as pc
import pytest

import neuron_explorer as ne
from neuron_explorer.trace import EVENTS_SCHEMA, Trace
from tests._fuzz import FUZZ_DATA, ROOT, run_cli
from tests._fuzz_parquet import packet_group_transfers

KINETO = FUZZ_DATA / "kineto"
PARQUET = FUZZ_DATA / "parquet"
CLEAN_EVENTS = 8  # events in kineto/clean.json

# file -> (events kept, the repair's text, its count); None: rejected with this text instead
KINETO_CASES: dict[str, tuple[int, str, int] | str] = {
    "args_nested_20000_deep.json.gz": (8, "args nested deeper than 200 levels", 1),
    "ids_beyond_int64.json": (8, "", 0),
    "rank_beyond_int32.json": (8, "distributedInfo.rank not an int32", 1),
    "profiler_step_3000000000.json": (8, "step number beyond int32", 7),
    "grid_and_device_beyond_int32.json": (8, "grid not a list of int32", 1),
    "ts_dur_beyond_int64_ns.json": (6, "beyond the int64 ns range", 2),
    "base_time_beyond_range.json": (8, "baseTimeNanoseconds not an integer", 1),
    "ts_plus_base_beyond_range.json": (7, "ts beyond the int64 ns range", 1),
    "name_list_cat_object.json": (6, "name is not a string", 1),
    "device_properties_number.json": (8, "deviceProperties not a list", 1),
    "device_properties_string.json": (8, "deviceProperties not a list", 1),
    "negative_dur.json": (6, "negative dur", 2),
    "ts_string_bool_nul.json": (5, "ts is not a number", 3),
    "dur_string_bool.json": (6, "dur is not a number", 2),
    "flows_to_nowhere.json": (10, "", 0),
    "instant_with_duration_ph_quote.json": (8, "", 0),
    "args_invalid_utf8.json": (8, "args not valid UTF-8", 1),
    "bad_deflate_block.json.gz": "cannot decompress",
    "fuzzer_invalid_json_inside_deep_args.json.gz": "invalid JSON in a value nested deeper than 200 levels",
    "fuzzer_analyze_deep_probe_a244.json.gz": "events have no 'ph'",
    "fuzzer_analyze_deep_probe_d190.json.gz": "traceEvents list never closes",
    "every_event_invalid.json": "no valid event",
    "fuzzer_bytes_int64_max_beside_float.json": (8, "", 0),  # Bytes 2**63-1 in one category, -1e19 in another
    "device_properties_fields.json": (8, "deviceProperties.", 2),  # name a list, totalGlobalMem -1
    "fuzzer_ts_exponent_decimal_overflow.json": (78, "ts beyond the int64 ns range", 1),  # (and a ts [1])
    "collective_args_bad.json": (9, "negative In msg nelems", 1),  # (and a group name 7, nelems "12")
    "fuzzer_span_5e18_union_recursion.json": (80, "ts is not a number", 1),  # analyze recursed
    # the out-of-core build missed the runtime side of ac2g flows (tests/integration/test_spooled_build.py)
    "spooled_ac2g_runtime_without_correlation.json": (39, "negative dur", 1),
    "spooled_batch_ends_outside_every_span.json": (30, "ts is not a number", 1),  # (its walk's empty open stack)
    # issue 26: "traceEvents" as a string value and nested keys before the list (a streamed file
    # took the first text match); traceEvents twice (the last wins at every size, said out loud);
    # a field no Chrome reader knows on every event (kept in `extra`, not dropped)
    "traceevents_in_values_and_nested_keys.json": (8, "", 0),
    "traceevents_twice.json": (8, "duplicate top-level traceEvents (the last one is used)", 1),
    "nonstandard_event_field.json": (8, "", 0),
}

PARQUET_CASES: dict[str, tuple[str, str] | str] = {
    "missing_src_file.parquet": ("set to null", "column src_file missing"),
    "missing_rank.parquet": ("set to null", "column rank missing"),
    "category_bool.parquet": ("set to null", "column category of type bool"),
    "src_func_int8.parquet": ("set to null", "column src_func of type int8"),
    "meta_device_properties_string.parquet": ("ignored", "metadata device_properties of type str"),
    "meta_device_properties_number.parquet": ("ignored", "metadata device_properties of type int"),
    "meta_rank_string.parquet": ("ignored", "metadata rank '3'"),
    "negative_dur_ns.parquet": ("clamped", "dur_ns null or negative"),
    "op_id_outside.parquet": ("set to null", "op_id outside the trace"),
    "name_null.parquet": ("filled", "name null (read as the empty string)"),
    "meta_base_time_beyond_range.parquet": ("ignored", "metadata base_time_ns 1180591620717411303424 (out of range)"),
    "duplicate_column.parquet": "column(s) name appear more than once",
    "kind_int8.parquet": "column kind of type int8",
    "event_id_bool.parquet": "column event_id of type bool",
    "start_ns_int64_max.parquet": "start_ns beyond",
    "dur_ns_int64_max.parquet": "dur_ns beyond",
    "empty_table.parquet": "the trace holds no events",
    "fuzzer_flipped_footer_int128.parquet": "not a readable Parquet file",
    "fuzzer_column_name_not_utf8_407e.parquet": "not a readable Parquet file",
    "fuzzer_column_name_not_utf8_7783.parquet": "not a readable Parquet file",
    "fuzzer_pid_bool_export.parquet": ("set to null", "op_id outside the trace"),
    "fuzzer_flipped_bit_invalid_utf8.parquet": "column name holds text that is not UTF-8",
}


def _repairs(trace: Trace) -> dict[str, int]:
    return {r["what"]: r["count"] for r in trace.metadata.get("repairs") or []}


@pytest.mark.parametrize("name", sorted(KINETO_CASES))
def test_each_bad_kineto_input_is_rejected_in_one_line_or_repaired_out_loud(name: str, tmp_path: Path) -> None:
    src = tmp_path / name
    shutil.copy(KINETO / name, src)
    out = tmp_path / "out.parquet"
    code, stderr, exc = run_cli(["convert", str(src), "-o", str(out), "-q"])
    assert exc is None, exc
    expected = KINETO_CASES[name]
    if isinstance(expected, str):
        assert code == 3
        assert stderr.count("\n") == 1 and stderr.startswith(f"neuron-explorer: error: {src}: ")
        assert expected in stderr
        assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [name]
        return
    kept, what, count = expected
    assert code == 0, stderr
    trace = Trace.read(out)
    assert trace.num_events == kept
    repairs = _repairs(trace)
    if what:
        found = {w: c for w, c in repairs.items() if what in w}
        assert sum(found.values()) == count, repairs
        assert f"{src}: repaired the input:" in stderr and what in stderr  # the warning line
        assert stderr.count("\n") == 1
    else:
        assert repairs == {} and stderr == ""
    # dropped events are counted: kept + dropped = the events of the file
    dropped = trace.metadata.get("dropped_events", 0)
    assert kept + dropped == _events_in(src)
    assert pc.min(trace.events["dur_ns"]).as_py() >= 0


def _events_in(path: Path) -> int:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if b'{"x": {"x": ' in raw:  # (too deep for json.loads: count the events by their phase)
        return raw.count(b'"ph": ')
    return len(json.loads(raw.decode("utf-8", "replace"))["traceEvents"])


def test_deep_args_are_kept_byte_for_byte_and_streamed_decoding_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_explorer.collectors.kineto.kineto_json as kineto_json

    path = KINETO / "args_nested_20000_deep.json.gz"
    raw = gzip.decompress(path.read_bytes())
    deep = raw[raw.index(b'{"External id": 1, "Sequence number": 3, "deep"') :]
    deep = deep[: deep.index(b"}" * 20001) + 20001]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = ne.load(path)
        monkeypatch.setattr(kineto_json, "STREAM_THRESHOLD", 200)
        monkeypatch.setattr(kineto_json, "CHUNK_BYTES", 300)
        streamed = ne.load(path)
    args = whole.events["args"].to_pylist()
    assert deep.decode() in args
    assert streamed.events.equals(whole.events)
    # the typed fields of the deep event are not read; the others' are
    mm = whole.events.filter(pc.equal(whole.events["name"].cast("string"), "aten::mm"))
    assert mm["sequence_nr"].to_pylist() == [None]
    assert whole.events["correlation_id"].drop_null().to_pylist() == [7, 7]


def test_ids_beyond_int64_are_labels_kept_verbatim_for_export(tmp_path: Path) -> None:
    from neuron_explorer.reports.chrome_trace import write_chrome_trace

    trace = ne.load(KINETO / "ids_beyond_int64.json")
    extras = [json.loads(x) for x in trace.events["extra"].to_pylist() if x]
    assert {"pid": 2**64} in extras and {"tid": -(2**63) - 1} in extras
    out = write_chrome_trace(trace, tmp_path / "again.json")
    doc = json.loads(out.read_text())
    assert 2**64 in [e.get("pid") for e in doc["traceEvents"]]
    assert ne.load(out).events.equals(trace.events)


@pytest.mark.parametrize("name", sorted(PARQUET_CASES))
@pytest.mark.parametrize("command", ["info", "analyze", "report"])
def test_each_damaged_parquet_trace_is_rejected_in_one_line_or_repaired_out_loud(
    name: str, command: str, tmp_path: Path
) -> None:
    src = tmp_path / name
    shutil.copy(PARQUET / name, src)
    out = tmp_path / "report.html"
    argv = [command, str(src)] + (["-o", str(out)] if command == "report" else [])
    code, stderr, exc = run_cli(argv)
    assert exc is None, exc
    expected = PARQUET_CASES[name]
    if isinstance(expected, str):
        assert code == 3, stderr
        assert stderr.count("\n") == 1 and stderr.startswith(f"neuron-explorer: error: {src}: ")
        assert expected in stderr
        assert not out.exists()
        return
    action, what = expected
    assert code == 0, stderr
    line = next(ln for ln in stderr.splitlines() if f"{src}: repaired the input: " in ln)
    assert f"{action} (" in line and what in line
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = Trace.read(src)
    assert any(what in w for w in _repairs(trace))
    assert trace.events.schema.remove_metadata() == EVENTS_SCHEMA


def test_info_lists_the_repairs_of_a_trace(tmp_path: Path) -> None:
    src = tmp_path / "negative_dur.json"
    shutil.copy(KINETO / "negative_dur.json", src)
    out = tmp_path / "t.parquet"
    assert run_cli(["convert", str(src), "-o", str(out)])[0] == 0
    proc = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "info", str(out), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    info = json.loads(proc.stdout)
    assert info["dropped_events"] == 2
    assert info["repairs"] == [{"what": "negative dur", "action": "dropped", "count": 2}]
    text = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "info", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert "dropped: negative dur (2)" in text.stdout


@pytest.mark.parametrize("name", ["bad_deflate_block.json.gz", "ts_string_bool_nul.json"])
def test_the_real_command_line_gives_one_line_and_exit_3_or_a_warning(name: str, tmp_path: Path) -> None:
    src = tmp_path / name
    shutil.copy(KINETO / name, src)
    out = tmp_path / "out.parquet"
    proc = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "convert", str(src), "-o", str(out), "-q"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    if name.endswith(".gz"):
        assert proc.returncode == 3 and not out.exists()
    else:
        assert proc.returncode == 0 and "neuron-explorer: warning:" in proc.stderr


@pytest.mark.parametrize("name", sorted(n for n, e in KINETO_CASES.items() if not isinstance(e, str)))
def test_streamed_decoding_makes_the_same_repairs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_explorer.collectors.kineto.kineto_json as kineto_json

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = ne.load(KINETO / name)
        monkeypatch.setattr(kineto_json, "STREAM_THRESHOLD", 200)
        monkeypatch.setattr(kineto_json, "CHUNK_BYTES", 300)
        streamed = ne.load(KINETO / name)
    assert streamed.events.equals(whole.events)
    assert streamed.metadata.get("repairs") == whole.metadata.get("repairs")


# ------------------------------------------------------------------------------ legacy Neuron JSON
NEURON = FUZZ_DATA / "neuron"
#: file -> {(table, what was done to it by hand): records of that table the trace must lack}, and
#: the repair texts. Each file is neuron/clean.json with the named records changed
#: (instruction i / dma i: the record at that index).
NEURON_CASES: dict[str, tuple[dict[str, list[int]], list[str]]] = {
    # instruction 0 timestamp "12", instruction 1 timestamp true, dma 0 timestamp null
    "timestamp_string_bool_null.json": (
        {"instruction": [0, 1], "dma": [0]},
        ["instruction records with a missing, non-numeric or out-of-range time", "dma records with a missing"],
    ),
    # instruction 2 duration -5, dma 26 duration -0.5 (negative before any rounding)
    "duration_negative_and_minus_half.json": (
        {"instruction": [2], "dma": [26]},
        ["instruction records with a negative duration", "dma records with a negative duration"],
    ),
    # instruction 3 timestamp 2**70, dma 1 duration 1e19 ns
    "times_beyond_range.json": ({"instruction": [3], "dma": [1]}, ["out-of-range time"]),
    # instruction 4 without its duration
    "duration_missing.json": ({"instruction": [4]}, ["instruction records with a missing"]),
    # metadata.first_hw_timestamp "12" (a string: not a clock origin) and instruction 10 label null:
    # nothing dropped, nothing shifted
    "first_hw_timestamp_string.json": ({}, []),
    "label_null.json": ({}, []),
    # instruction 6 timestamp 4e18 + 1 (past the range by one: float64 reads it as 4e18)
    "timestamp_4e18_plus_1.json": ({"instruction": [6]}, ["instruction records with a missing"]),
    # summary.total_time 1e300 s (left out of the metrics, with a warning), instruction 5 at
    # line 99999999999999999999 (not a line: no source line), active_time 0 start "soon" (the
    # interval ignored, not an event): no record dropped
    "summary_time_1e300.json": ({}, []),
    "source_location_huge_line.json": ({}, []),
    "active_time_string.json": ({}, ["active_time records with a missing"]),
}


def _neuron_times(trace: Trace, category: str) -> list[tuple[int, int]]:
    t = trace.events
    keep = pc.equal(t["category"], category)
    return sorted(zip(t.filter(keep)["start_ns"].to_pylist(), t.filter(keep)["dur_ns"].to_pylist()))


@pytest.mark.parametrize("name", sorted(NEURON_CASES))
def test_each_bad_neuron_record_is_dropped_and_counted_never_clamped(name: str, tmp_path: Path) -> None:
    clean = json.loads((NEURON / "clean.json").read_text())
    src, out = tmp_path / name, tmp_path / "out.parquet"
    shutil.copy(NEURON / name, src)
    code, stderr, exc = run_cli(["convert", str(src), "-o", str(out)])
    assert exc is None and code == 0, stderr
    dropped, texts = NEURON_CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = Trace.read(out)
    # Expected: the clean file's records (times straight from its JSON: none of its tables is on
    # the absolute clock) less the dropped ones.
    for table, category in (("instruction", "neuron_kernel"), ("dma", "neuron_dma_memcpy")):
        kept = [r for i, r in enumerate(clean[table]) if i not in dropped.get(table, [])]
        want = [(r["timestamp"], r["duration"]) for r in kept]
        if table == "dma":  # a packet group without an aggregated row is a transfer of its own
            want += packet_group_transfers(kept)
        want = sorted(want)
        assert _neuron_times(trace, category) == want, table
    assert trace.metadata.get("dropped_events", 0) == sum(len(v) for v in dropped.values())
    repairs = _repairs(trace)
    for text in texts:
        assert any(text in what for what in repairs), (text, repairs)
    if texts:
        warned = [ln for ln in stderr.splitlines() if "repaired the input" in ln]
        assert len(warned) == 1 and warned[0].startswith(f"neuron-explorer: warning: {src}: repaired the input: ")
    else:
        assert "repaired" not in stderr
