"""The Parquet trace: schema, atomic writes, version checks, run directories."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neuron_explorer as ne
from neuron_explorer.trace import SchemaVersionError, TraceFormatError, TraceNotFoundError
from neuron_explorer.trace.atomic import OutputError
from neuron_explorer.trace.schema import COLUMNS, EVENTS_SCHEMA, METADATA_KEY, SCHEMA_VERSION
from tests.conftest import KINETO, REPO

SMALL = KINETO / "local" / "example_cpu_small.json"


@pytest.fixture
def small_trace() -> ne.Trace:
    return ne.load(SMALL)


def test_written_trace_reads_back_identical_with_metadata(small_trace: ne.Trace, tmp_path: Path) -> None:
    path = small_trace.write(tmp_path / "t.parquet")
    back = ne.load(path)
    assert back.events.equals(small_trace.events)
    assert back.metadata["schema_version"] == SCHEMA_VERSION
    assert back.metadata["source_file"].endswith("example_cpu_small.json")
    assert back.events.schema == EVENTS_SCHEMA


def test_parquet_is_zstd_with_dictionary_strings(small_trace: ne.Trace, tmp_path: Path) -> None:
    path = small_trace.write(tmp_path / "t.parquet")
    meta = pq.ParquetFile(path).metadata
    col = meta.row_group(0).column(EVENTS_SCHEMA.get_field_index("name"))
    assert col.compression == "ZSTD"
    assert "RLE_DICTIONARY" in col.encodings or "PLAIN_DICTIONARY" in col.encodings


def test_failed_write_leaves_no_file_behind(
    small_trace: ne.Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args, **kwargs):
        raise OSError("No space left on device")

    # The write fails after the file is opened, with a row group half written.
    monkeypatch.setattr(pq.ParquetWriter, "write_table", boom)
    with pytest.raises(OutputError, match="No space left on device"):
        small_trace.write(tmp_path / "t.parquet")
    assert list(tmp_path.iterdir()) == []


def test_newer_major_schema_is_refused_with_upgrade_hint(small_trace: ne.Trace, tmp_path: Path) -> None:
    path = small_trace.write(tmp_path / "t.parquet")
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["schema_version"] = "2.0.0"
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), path)
    with pytest.raises(SchemaVersionError, match="upgrade"):
        ne.load(path)


def test_newer_minor_schema_is_read(small_trace: ne.Trace, tmp_path: Path) -> None:
    path = small_trace.write(tmp_path / "t.parquet")
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["schema_version"] = "1.7.0"
    extra = table.append_column("future_column", pa.array([1] * table.num_rows))
    pq.write_table(extra.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), path)
    assert ne.load(path).num_events == small_trace.num_events


def test_plain_parquet_is_not_mistaken_for_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), path)
    with pytest.raises(TraceFormatError, match="not a Neuron Explorer trace"):
        ne.load(path)


def test_truncated_parquet_is_reported(small_trace: ne.Trace, tmp_path: Path) -> None:
    path = small_trace.write(tmp_path / "t.parquet")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(TraceFormatError, match=r"t\.parquet"):
        ne.load(path)


def test_missing_path_is_reported() -> None:
    with pytest.raises(TraceNotFoundError, match=r"nope\.parquet"):
        ne.load("nope.parquet")


def test_run_directory_reads_all_ranks_as_one_table(tmp_path: Path) -> None:
    r0 = ne.load(KINETO / "hta" / "sampled_rank-0.json.gz")
    r1 = ne.load(KINETO / "hta" / "sampled_rank-1.json.gz")
    r0.write(tmp_path / "run" / "rank=0" / "trace.parquet")
    r1.write(tmp_path / "run" / "rank=1" / "trace.parquet")
    run = ne.load(tmp_path / "run")
    assert run.ranks == [0, 1]
    assert run.num_events == r0.num_events + r1.num_events
    assert set(run.rank_metadata) == {0, 1}


def test_views_select_kinds(small_trace: ne.Trace) -> None:
    ops = small_trace.ops(columns=["kind", "name"])
    assert set(ops["kind"].astype(str)) == {"cpu_op"}
    assert len(small_trace.steps()) == 1


def test_schema_doc_describes_every_column() -> None:
    doc = (REPO / "docs" / "schema.md").read_text()
    doc = doc.split("## Columns", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(\w+)` \|", doc, flags=re.M))
    assert documented == {c.name for c in COLUMNS}
