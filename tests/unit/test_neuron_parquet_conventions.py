"""The Parquet export holds the same meanings as the legacy JSON (issue 14): ActiveTime without
semaphore waits, DmaPacket beside DmaPacketAggregated, queue types. Expected values come from
the tables written to disk, read back here with pyarrow."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.collectors.neuron import import_neuron_profile, read_device_profile, synth


def _import(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return import_neuron_profile(path)


def _union(starts, ends) -> int:
    total, end = 0, None
    for s, e in sorted(zip(starts, ends)):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pq") / "export"
    synth.write_parquet_export(d, synth.SynthSpec(bottleneck="balanced"), drop=("Summary",))
    return d


def _table(d: Path, name: str) -> pd.DataFrame:
    parts = sorted(p for p in d.glob("*.parquet") if p.stem == name or p.stem.rsplit("_", 1)[0] == name)
    return pd.concat([pq.read_table(p).to_pandas() for p in parts], ignore_index=True)


def test_engine_active_time_is_the_union_of_active_time_not_of_the_waits(export: Path) -> None:
    trace = _import(export)
    active = _table(export, "ActiveTime")
    span = int(pq.read_table(export / "Metadata.parquet").to_pylist()[0]["last_hw_timestamp"]) - int(
        pq.read_table(export / "Metadata.parquet").to_pylist()[0]["first_hw_timestamp"]
    )
    m = trace.metadata["neuron"]["devices"][0]["derived_metrics"]
    for engine in ("tensor", "vector", "scalar", "gpsimd", "sync"):
        rows = active[active["engine"] == engine]
        expected = _union(rows["start_ts"].tolist(), rows["end_ts"].tolist())
        assert m[f"{engine}_engine_active_time_ns"] == expected
    assert m["total_active_time_pct"] == pytest.approx(
        100 * _union(active["start_ts"].tolist(), active["end_ts"].tolist()) / span
    )


def test_semaphore_wait_instructions_become_annotations(export: Path) -> None:
    ins = _table(export, "Instruction")
    waits = int((ins["opcode"] == "EVENT_SEMAPHORE").sum())
    assert waits > 0
    df = _import(export).to_pandas()
    assert int((df["kind"].astype(str) == "kernel").sum()) == len(ins) - waits
    ann = df[(df["kind"].astype(str) == "device_annotation") & (df["name"].astype(str) == "EVENT_SEMAPHORE")]
    assert len(ann) == waits


def test_waits_are_found_by_opcode_when_active_time_is_missing(tmp_path: Path) -> None:
    synth.write_parquet_export(tmp_path / "p", synth.SynthSpec(), drop=("Summary", "ActiveTime"))
    ins = _table(tmp_path / "p", "Instruction")
    work = ins[ins["opcode"] != "EVENT_SEMAPHORE"]
    m = _import(tmp_path / "p").metadata["neuron"]["devices"][0]["derived_metrics"]
    rows = work[work["engine"] == "tensor"]
    assert m["tensor_engine_active_time_ns"] == _union(rows["start_ts"].tolist(), rows["end_ts"].tolist())


def test_packets_beside_aggregated_transfers_are_not_counted_twice(export: Path) -> None:
    transfers, packets = _table(export, "DmaPacketAggregated"), _table(export, "DmaPacket")
    assert len(packets) > len(transfers)
    trace = _import(export)
    df = trace.to_pandas()
    memcpy = df[df["kind"].astype(str) == "memcpy"]
    assert len(memcpy) == len(transfers)
    assert int(memcpy["bytes"].sum()) == int(transfers["transfer_bytes"].sum())
    kept = df[df["name"].astype(str).str.startswith("DMA packet")]
    assert len(kept) == len(packets)
    d = trace.metadata["neuron"]["devices"][0]
    assert d["dma_granularity"] == "transfer"
    assert d["derived_metrics"]["dma_transfer_count"] == len(transfers)


def test_queue_types_decide_spill_not_queue_names(export: Path) -> None:
    transfers = _table(export, "DmaPacketAggregated")
    trace = _import(export)
    streams = {s["name"]: s["queue_type"] for s in trace.metadata["neuron"]["streams"] if s["type"] == "dma"}
    assert streams == dict(zip(transfers["queue_name"], transfers["queue_type"]))
    assert streams["qSyncSpillReload0"] == "weights"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (profile,) = read_device_profile(export)
    spill_by_queue = profile.dmas.groupby("queue")["is_spill"].agg(["all", "any"])
    typed_spill = set(transfers.loc[transfers["queue_type"] == "spill", "queue_name"])
    assert set(spill_by_queue.index[spill_by_queue["all"]]) == typed_spill == {"qScalarSpillReload0"}
    assert not spill_by_queue.loc["qSyncSpillReload0", "any"]


def test_transpose_share_above_aws_10_percent_is_reported_with_a_time_cost(tmp_path: Path) -> None:
    synth.write_parquet_export(tmp_path / "p", synth.SynthSpec(bottleneck="balanced", transpose_fraction=0.12))
    (f,) = analyze(_import(tmp_path / "p"), rules=["neuron_transpose_matmul"]).findings
    assert f.threshold["max_transpose_share_pct"]["value"] == 10
    assert f.cost_ns > 0
    s = pq.read_table(tmp_path / "p" / "Summary.parquet").to_pylist()[0]
    assert f.cost_ns == int(s["tensor_engine_active_time"] * 1e9 * (s["transpose_flops"] / s["hardware_flops"]))


def test_small_dma_uses_aws_4_kib_and_reads_transfers_not_packets(tmp_path: Path) -> None:
    # 32 KiB transfers split in 16 packets of 2 KiB: the packets are small, the transfers are not.
    spec = synth.SynthSpec(bottleneck="balanced", transfer_bytes=32 * 1024, packets_per_transfer=16)
    synth.write_parquet_export(tmp_path / "p", spec)
    a = analyze(_import(tmp_path / "p"), rules=["neuron_small_dma"])
    assert not a.findings
    spec = synth.SynthSpec(bottleneck="balanced", small_transfer_bytes=2048)
    synth.write_parquet_export(tmp_path / "q", spec)
    (f,) = analyze(_import(tmp_path / "q"), rules=["neuron_small_dma"]).findings
    assert f.threshold["small_bytes"]["value"] == 4096
    assert f.metrics["median_small_bytes"]["value"] == 2048


def test_an_export_with_only_summary_and_metadata_is_metrics_only(tmp_path: Path) -> None:
    synth.write_parquet_export(tmp_path / "full", synth.SynthSpec())
    (tmp_path / "p").mkdir()
    for name in ("Summary", "Metadata"):
        (tmp_path / "p" / f"{name}.parquet").write_bytes((tmp_path / "full" / f"{name}.parquet").read_bytes())
    with pytest.warns(UserWarning, match="metrics, no instruction"):
        trace = import_neuron_profile(tmp_path / "p")
    s = pq.read_table(tmp_path / "p" / "Summary.parquet").to_pylist()[0]
    d = trace.metadata["neuron"]["devices"][0]
    assert trace.num_events == 0 and d["metrics_only"]
    assert d["metrics"]["mfu_estimated_pct"] == pytest.approx(100 * s["mfu_estimated_percent"])
    assert analyze(trace).summary["verdict"].startswith("NeuronCore 0")
