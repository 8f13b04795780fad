"""The same document imports the same way at any size (issue 26), through the real CLI.

Below ``kineto_json.STREAM_THRESHOLD`` a Kineto file is decoded whole; above it, streamed. Each
document of ``tests/size_documents.py`` (``"traceEvents"`` as a string value and as nested keys
before the real list; ``traceEvents`` twice, the decoy first or a short one before padding;
fields no Chrome reader knows) is padded to 1 MB and to just past the threshold, and must give
the same events, with the same repairs announced, both ways, and out of core too. (A 100 MB
copy of each was checked by hand: ``python -m tests.size_documents SHAPE 1e8 OUT``.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from neuron_explorer.collectors.kineto.kineto_json import DUPLICATE_EVENTS, STREAM_THRESHOLD
from tests.integration.faults import cli, one_error_line
from tests.size_documents import CLEAN, SHAPES, document

SIZES = {"1MB": 1 << 20, "past-threshold": STREAM_THRESHOLD + (1 << 20)}


def _events(path: Path) -> object:
    return pq.read_table(path).replace_schema_metadata(None)


def _repairs(path: Path) -> list:
    return json.loads(pq.read_schema(path).metadata[b"neuron_explorer"]).get("repairs") or []


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each shape's events as the unpadded document gives them (clean.json's, but for the
    non-standard fields, which ``extra`` keeps)."""
    d = tmp_path_factory.mktemp("reference")
    out = {}
    for shape in ("clean", "nonstandard_fields"):
        src = d / f"{shape}.json"
        src.write_bytes(document(shape, 0))
        r = cli("convert", str(src), "-o", str(d / f"{shape}.parquet"), "-q")
        assert r.returncode == 0, r.stderr
        out[shape] = d / f"{shape}.parquet"
    return out


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("shape", SHAPES)
def test_the_document_imports_the_same_way_on_both_sides_of_the_stream_threshold(
    shape: str, size: str, reference: dict[str, Path], tmp_path: Path
) -> None:
    src, out = tmp_path / "doc.json", tmp_path / "doc.parquet"
    src.write_bytes(document(shape, SIZES[size]))
    assert (src.stat().st_size > STREAM_THRESHOLD) == (size == "past-threshold")
    r = cli("convert", str(src), "-o", str(out))
    assert r.returncode == 0, r.stderr
    want = reference["nonstandard_fields" if shape == "nonstandard_fields" else "clean"]
    assert _events(out).equals(_events(want))
    repairs = [e["what"] for e in _repairs(out)]
    if shape.startswith("duplicate"):
        assert repairs == [DUPLICATE_EVENTS]
        assert f"repaired the input: ignored ({DUPLICATE_EVENTS}: 1)" in r.stderr
    else:
        assert repairs == []


@pytest.mark.parametrize("shape", ["duplicate_padded_first", "nonstandard_fields"])
def test_out_of_core_the_document_imports_the_same_way(shape: str, reference: dict[str, Path], tmp_path: Path) -> None:
    src, out = tmp_path / "doc.json", tmp_path / "doc.parquet"
    src.write_bytes(document(shape, STREAM_THRESHOLD + (1 << 20)))
    r = cli("convert", str(src), "-o", str(out), "-q", env={"NEURON_EXPLORER_SPOOL_EVENTS": "0"})
    assert r.returncode == 0, r.stderr
    want = reference["nonstandard_fields" if shape == "nonstandard_fields" else "clean"]
    a, b = _events(out), _events(want)
    assert a.num_rows == b.num_rows
    for name in ("name", "start_ns", "dur_ns", "extra", "args"):  # (dictionaries may list words in another order)
        assert a[name].to_pylist() == b[name].to_pylist(), name


def test_a_nonstandard_field_is_kept_in_extra_and_exported_back(reference: dict[str, Path], tmp_path: Path) -> None:
    extra = pq.read_table(reference["nonstandard_fields"])["extra"].to_pylist()
    assert all(json.loads(x)["my_field"] == {"k": [1, "v"]} for x in extra)
    out = tmp_path / "back.json"
    r = cli("export", str(reference["nonstandard_fields"]), "-o", str(out))
    assert r.returncode == 0, r.stderr
    events = json.loads(out.read_text())["traceEvents"]
    assert sum(e.get("my_field") == {"k": [1, "v"]} for e in events) == 8


def test_the_last_traceevents_wins_even_when_it_is_not_a_list(tmp_path: Path) -> None:
    for size in SIZES.values():
        src = tmp_path / "doc.json"
        src.write_bytes(document("duplicate_padded_first", size)[:-1] + b', "traceEvents": "none"}')
        one_error_line(cli("convert", str(src), "-o", str(tmp_path / "x.parquet")), "traceEvents is not a list")


def test_a_legacy_neuron_section_that_is_an_object_is_refused_in_one_line(tmp_path: Path) -> None:
    seed = json.loads((CLEAN.parents[1] / "neuron" / "clean.json").read_text())
    seed["instruction"] = seed["instruction"][0]  # one record, not a list of them
    src = tmp_path / "profile.json"
    src.write_text(json.dumps(seed))
    out = tmp_path / "x.parquet"
    one_error_line(cli("convert", str(src), "-o", str(out)), str(src), "'instruction' should be a list of records")
    assert not out.exists()


def test_metadata_too_large_for_a_parquet_footer_is_left_out_and_the_trace_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 100 MB metadata string made a trace whose footer pyarrow refuses to read ("Exceeded
    size limit"): members past ``METADATA_BYTES`` are not kept (a repair), and the rest is."""
    import warnings

    import neuron_explorer as ne
    from neuron_explorer.collectors.kineto import kineto_json

    monkeypatch.setattr(kineto_json, "METADATA_BYTES", 4096)
    src, out = tmp_path / "doc.json", tmp_path / "doc.parquet"
    src.write_bytes(document("key_in_values", 20_000))  # (a 19.6 KB "pad" member)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ne.load(src).write(out)
    assert any(kineto_json.BIG_METADATA in str(w.message) for w in caught)
    trace = ne.Trace.read(out)
    assert trace.num_events == 8
    kept = trace.metadata["trace_metadata"]
    assert "pad" not in kept and kept["distributedInfo"]["rank"] == 0 and kept["note"] == "traceEvents"
