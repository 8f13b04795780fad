"""The importer's fast paths give exactly what the plain pyarrow calls would: Arrow arrays built
from buffers, dictionary columns built from codes, timestamps parsed by the float/int/decimal
routes, args text kept byte for byte, and chunked decoding equal to decoding the whole file."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import neuron_explorer.collectors.kineto.kineto_json as kineto_json
from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json
from neuron_explorer.trace.arrow import (
    dict_parts,
    dictionary_array,
    dictionary_from_codes,
    from_numpy,
    loose_array,
    to_numpy,
)
from tests.conftest import shared_fixture


# ------------------------------------------------------------------------------- arrays
def test_numpy_round_trip_keeps_values_nulls_and_slices() -> None:
    values = np.array([5, -1, 7, 9], np.int64)
    arr = from_numpy(values, pa.int64(), values < 0)
    assert arr.equals(pa.array([5, None, 7, 9], pa.int64()))
    assert to_numpy(arr.slice(1), fill=0).tolist() == [0, 7, 9]
    chunked = pa.chunked_array([arr, arr.slice(2)])
    assert to_numpy(chunked, fill=-2).tolist() == [5, -2, 7, 9, 7, 9]


@pytest.mark.parametrize(
    "values",
    [
        [1, None, 3],
        [1.5, None, 2.0],
        [1, 2.5, None],
        [None, None],
        ["a", None, "b", "a"],
        [[1, 2, 3], None, [4]],
        [2**64, None],
        [True, None, False],
        [1, "x", None],
        [{"k": 1}, None],
    ],
)
def test_loose_array_infers_what_pa_array_infers(values: list) -> None:
    expected = _pa_array_or_text(values)
    got = loose_array(values)
    assert got.to_pylist() == expected.to_pylist()
    assert got.type == expected.type or pa.types.is_null(expected.type)


def _pa_array_or_text(values: list) -> pa.Array:
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([None if v is None else str(v) for v in values], pa.string())


def test_dictionary_array_maps_none_to_null_and_other_values_to_their_text() -> None:
    arr = dictionary_array(["x", None, 1, "1", "x"])
    assert arr.to_pylist() == ["x", None, "1", "1", "x"]
    assert dictionary_array(["x", None], none_as="").to_pylist() == ["x", ""]
    # chunks with different dictionaries combine into one dictionary
    both = pa.chunked_array([dictionary_array(["a", None]), dictionary_array(["b", "a"])])
    words, codes = dict_parts(both)
    assert [None if c < 0 else words[c] for c in codes] == ["a", None, "b", "a"]


def test_dictionary_from_codes_equals_dictionary_encode_of_the_values() -> None:
    words = ["b", "a", None, "b", "c"]  # a None word and a duplicate word
    codes = np.array([4, 0, -1, 2, 3, 1, 0], np.int32)
    values = [None if c < 0 else words[c] for c in codes]
    assert dictionary_from_codes(codes, words).equals(pa.array(values, pa.string()).dictionary_encode())


# ------------------------------------------------------------------------------- timestamps
@pytest.mark.parametrize(
    "texts",
    [
        ["1669783687464181", "1669783687464194", "-5"],  # integer microseconds
        ["12.5", "1000000.125", "0.001"],  # relative, <= 3 decimals: the float route
        ["1712195495519689.047", "1712195495519690.5"],  # absolute with fractions: decimals
        ["1.0005", "2.0015"],  # more than three decimals
        ["1e3", "2.5E1"],  # exponents
    ],
)
def test_timestamps_parse_to_the_exact_nanosecond(texts: list[str]) -> None:
    import msgspec

    raws = [msgspec.Raw(t.encode()) for t in texts]
    got = kineto_json._parse_ts(raws).tolist()
    assert got == [int((Decimal(t) * 1000).to_integral_value()) for t in texts]


# ------------------------------------------------------------------------------- args
def test_args_are_byte_exact_and_missing_args_are_null(tmp_path: Path) -> None:
    events = [
        '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 5,\n'
        '  "args": {\n    "External id": 7,"x":  [1, 2.50]\n  }}',
        '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 2, "dur": 1}',
        '{"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 3, "dur": 1, "args": {}}',
        '{"ph": "i", "cat": "x", "name": "d", "pid": 1, "tid": 1, "ts": 4, "s": "t", "args": 5}',
    ]
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + ",".join(events) + "]}")
    trace = import_kineto_json(path)
    by_name = dict(zip(trace.events["name"].to_pylist(), trace.events["args"].to_pylist()))
    assert by_name == {"a": '{\n    "External id": 7,"x":  [1, 2.50]\n  }', "b": None, "c": "{}", "d": "5"}
    ext = dict(zip(trace.events["name"].to_pylist(), trace.events["external_id"].to_pylist()))
    assert ext["a"] == 7 and ext["b"] is None


def test_import_leaves_the_garbage_collector_as_it_found_it() -> None:
    # The import pauses the cyclic collector (its objects hold no cycles) and must resume it.
    path = shared_fixture("kineto/local/example_cpu_small.json")
    was = gc.isenabled()
    try:
        gc.enable()
        import_kineto_json(path)
        assert gc.isenabled()
        gc.disable()
        import_kineto_json(path)
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


# ------------------------------------------------------------------------------- chunks
@pytest.mark.slow
def test_a_large_trace_decoded_in_small_chunks_equals_one_decoded_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    path = shared_fixture("kineto/hta/df_index_resolver/df_index_resolver.json.gz")
    monkeypatch.setattr(kineto_json, "STREAM_THRESHOLD", 1 << 30)
    whole = import_kineto_json(path)
    monkeypatch.setattr(kineto_json, "STREAM_THRESHOLD", 1 << 20)
    monkeypatch.setattr(kineto_json, "CHUNK_BYTES", 1 << 20)  # ~50 chunks
    chunked = import_kineto_json(path)
    assert chunked.events.equals(whole.events)


def test_events_split_across_chunk_boundaries_inside_nested_arrays(tmp_path: Path, monkeypatch) -> None:
    # args holding arrays of objects ("},{" inside an event) must not be cut there.
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1,
         "args": {"l": [{"a": i}, {"b": [1, {"c": 2}]}]}}
        for i in range(400)
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"meta": 1, "traceEvents": events, "after": {"x": [1]}}, indent=1))
    whole = import_kineto_json(path)
    monkeypatch.setattr(kineto_json, "STREAM_THRESHOLD", 500)
    monkeypatch.setattr(kineto_json, "CHUNK_BYTES", 333)
    streamed = import_kineto_json(path)
    assert streamed.events.equals(whole.events)
    assert streamed.metadata["trace_metadata"] == {"meta": 1, "after": {"x": [1]}}
    assert len(streamed.events) == 400


def test_convert_does_not_import_pandas(tmp_path: Path) -> None:
    # pandas costs a convert ~40 MB of RSS and 0.15-0.5 s; nothing on the path needs it.
    src = shared_fixture("kineto/local/example_cpu_small.json")
    code = (
        "import sys\n"
        "from neuron_explorer.cli import main\n"
        f"rc = main(['convert', {str(src)!r}, '-o', {str(tmp_path / 'o.parquet')!r}, '-q'])\n"
        "from neuron_explorer.trace import Trace\n"
        f"Trace.read({str(tmp_path / 'o.parquet')!r}, columns=['kind'])\n"
        "print(rc, 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "False"]


def test_import_restores_the_default_arrow_memory_pool() -> None:
    before = pa.default_memory_pool().backend_name
    import_kineto_json(shared_fixture("kineto/local/example_cpu_small.json"))
    assert pa.default_memory_pool().backend_name == before
