"""Issues 27 and 42 on exports written to the real conventions (``synth.matmul``): every DMA
byte, the kernel window (a preamble, a fixed wait, the kernel) and MFU over it, waits, labels,
per-engine table, refusals.

Every expected figure is recomputed here from the raw rows of the written document with plain
Python (sums, min/max, the Tensor-engine peak from the metadata), never taken from the code
under test.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.metrics.neuron_summary import (
    engine_table,
    neuron_overview,
    neuron_verdict,
    summary_table,
)
from neuron_explorer.collectors.load import load
from neuron_explorer.collectors.neuron import import_neuron_profile, read_device_profile
from neuron_explorer.collectors.neuron.synth.matmul import MatmulSpec, write_matmul_json
from neuron_explorer.trace.errors import TraceFormatError
from tests.conftest import neuron_kernel_from_rows as _kernel_from_rows


def _quiet(fn, *a, **k):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


@pytest.fixture(params=[136, 1024], ids=["N136", "N1024"])
def matmul(request, tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / f"matmul_N{request.param}.json"
    doc = write_matmul_json(path, MatmulSpec(n=request.param))
    return path, doc, _quiet(import_neuron_profile, path)


def test_the_fixture_follows_the_real_conventions(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, _ = matmul
    groups = {r["packet_aggregation_id"] for r in doc["dma"]}
    aggregated = {r["packet_aggregation_id"] for r in doc["dma"] if r["aggregated"] == "yes"}
    assert len(groups) == 3 and len(aggregated) == 1
    (agg,) = [r for r in doc["dma"] if r["aggregated"] == "yes"]
    assert agg["transfer_size"] == 32 * 1024
    same = [
        r for r in doc["dma"] if r["packet_aggregation_id"] == agg["packet_aggregation_id"] and r["aggregated"] == "no"
    ]
    assert sum(r["transfer_size"] for r in same) == 32_832  # the aggregated row omits 16 semaphore packets
    fetch = [r for r in doc["dma"] if r.get("queue_type") == "instruction"]
    assert sorted(r["transfer_size"] for r in fetch) == [4, 8, 1024] and {r["dma_queue"] for r in fetch} == {14}
    first = min(r["timestamp"] for r in doc["instruction"])
    assert first < 10  # the preamble starts at ~7 ns, not with the wait
    start, _ = _kernel_from_rows(doc)
    assert 1.85e6 <= start <= 1.86e6
    waits = [r for r in doc["instruction"] if r["opcode"] == "EVENT_SEMAPHORE" and r["duration"] > 1e6]
    assert {r["subgroup"] for r in waits} == {"Tensor", "Vector", "Scalar", "GpSimd", "Sync"}
    wait_start = max(r["timestamp"] for r in waits)
    # The identity matrix and 2 of the 3 fetch packets move in the preamble; no DMA in the wait.
    assert sum(1 for r in fetch if r["timestamp"] < wait_start) == 2
    assert all(r["timestamp"] < wait_start for r in same)
    assert not [r for r in doc["dma"] if wait_start < r["timestamp"] < start]
    first_mm = min(r["timestamp"] for r in doc["instruction"] if r["opcode"] == "MATMUL")
    assert 800 <= first_mm - start <= 1_200


def test_the_window_has_three_parts_with_their_own_bytes_and_matmuls(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, trace = matmul
    dev = trace.metadata["neuron"]["devices"][0]
    m, w = dev["metrics"], dev["kernel_window"]
    start, _ = _kernel_from_rows(doc)
    waits = [r for r in doc["instruction"] if r["opcode"] == "EVENT_SEMAPHORE" and r["duration"] > 1e6]
    pre_work_end = max(
        r["timestamp"] + r["duration"]
        for r in [*doc["instruction"], *doc["dma"]]
        if r["timestamp"] < min(x["timestamp"] for x in waits) and r.get("opcode") != "EVENT_SEMAPHORE"
    )
    assert w["source"] == "wait" and (w["wait_start_ns"], w["wait_end_ns"]) == (pre_work_end, start)
    assert m["preamble_ns"] == pre_work_end and m["fixed_wait_ns"] == start - pre_work_end
    packets = [r for r in doc["dma"] if r["aggregated"] == "no"]
    assert m["preamble_dma_bytes"] == sum(r["transfer_size"] for r in packets if r["timestamp"] < pre_work_end)
    assert m["kernel_dma_bytes"] == sum(r["transfer_size"] for r in packets if r["timestamp"] >= start)
    assert m["fixed_wait_dma_bytes"] == 0 and m["fixed_wait_instructions"] == 0
    assert m["preamble_matmul_instructions"] == 0
    assert m["kernel_matmul_instructions"] == sum(1 for r in doc["instruction"] if r["opcode"] == "MATMUL")


def test_dma_bytes_are_every_packet_group_and_equal_the_summary_sizes(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, trace = matmul
    packets = sum(r["transfer_size"] for r in doc["dma"] if r["aggregated"] == "no")
    s = doc["summary"][0]
    assert packets == s["static_dma_size"] + s["software_dynamic_dma_size"]
    m = trace.metadata["neuron"]["devices"][0]["metrics"]
    assert m["dma_transfer_total_bytes"] == packets
    assert m["dma_transfer_total_bytes"] > 32 * 1024  # what was counted before: the aggregated group only
    # The Summary's deprecated dma_transfer_* fields (the aggregated group only) stay beside it.
    assert m["summary_dma_transfer_total_bytes"] == s["dma_transfer_total_bytes"] == 32 * 1024
    assert m["dma_total_size"] == packets
    assert m["dma_transfer_count"] == 3
    assert m["dma_packet_count"] == sum(1 for r in doc["dma"] if r["aggregated"] == "no")
    # The trace's copies (memcpy events) carry the same bytes, each packet group once, and are
    # busy only while their packets are (the fetch: 3 packets, 1.85 ms apart).
    df = trace.to_pandas()
    copies = df[df["kind"] == "memcpy"]
    assert len(copies) == 3 and int(copies["bytes"].sum()) == packets
    fetch = [r for r in doc["dma"] if r.get("queue_type") == "instruction"]
    (row,) = copies[copies["bytes"] == sum(r["transfer_size"] for r in fetch)].itertuples()
    assert row.dur_ns == sum(r["duration"] for r in fetch)  # they do not overlap


def test_kernel_window_and_mfu_over_it_match_the_instruction_rows(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, trace = matmul
    start, end = _kernel_from_rows(doc)
    m = trace.metadata["neuron"]["devices"][0]["metrics"]
    assert (m["kernel_start_ns"], m["kernel_end_ns"], m["kernel_time_ns"]) == (start, end, end - start)
    meta, s = doc["metadata"][0], doc["summary"][0]
    peak = 2 * meta["pe_num_rows"] * meta["pe_num_cols"] * meta["pe_clock_freq"] * 1e9
    mfu_kernel = 100 * s["hardware_flops"] / (peak * (end - start) / 1e9)
    assert m["mfu_kernel_pct"] == pytest.approx(mfu_kernel, rel=1e-6)
    assert m["mfu_estimated_pct"] == pytest.approx(100 * s["mfu_estimated_percent"])
    assert m["mfu_kernel_pct"] > 50 * m["mfu_estimated_pct"]  # the wait dominates the span


def test_range_clear_is_work_and_waits_stay_annotations(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, trace = matmul
    df = trace.to_pandas()
    clear = df[df["name"] == "EVENT_SEMAPHORE_RANGE_CLEAR"]
    assert len(clear) == 1 and clear["kind"].iloc[0] == "kernel"
    waits = df[df["name"] == "EVENT_SEMAPHORE"]
    assert len(waits) == sum(1 for r in doc["instruction"] if r["opcode"] == "EVENT_SEMAPHORE")
    assert set(waits["kind"]) == {"device_annotation"}


def test_engines_alone_and_engines_plus_dma_are_told_apart(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, trace = matmul
    o = neuron_overview(trace.metadata)[0]
    s = doc["summary"][0]
    assert o["engines_dma_active_pct"] == pytest.approx(100 * s["total_active_time_percent"])
    # engines alone: the union of the non-wait instructions (they do not overlap on one engine here)
    work = sorted(
        (r["timestamp"], r["timestamp"] + r["duration"]) for r in doc["instruction"] if r["opcode"] != "EVENT_SEMAPHORE"
    )
    covered, reach = 0, None
    for a, b in work:
        if reach is None or a >= reach:
            covered += b - a
            reach = b
        elif b > reach:
            covered += b - reach
            reach = b
    span = doc["metadata"][0]["last_hw_timestamp"] - doc["metadata"][0]["first_hw_timestamp"]
    assert o["engines_active_pct"] == pytest.approx(100 * covered / span)
    assert o["engines_active_pct"] < o["engines_dma_active_pct"]
    verdict = neuron_verdict([o])
    assert verdict is not None and "kernel" in verdict and "engines alone" in verdict and "engines plus DMA" in verdict
    assert "mostly idle" not in verdict  # the kernel is busy; the wait before it is not the kernel's


def test_engine_table_has_every_engine_and_queue_with_kernel_and_span_utilization(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, trace = matmul
    t = engine_table(trace.metadata)
    start, end = _kernel_from_rows(doc)
    span = doc["metadata"][0]["last_hw_timestamp"]
    tensor = t[t["unit"] == "Tensor"].iloc[0]
    work = [r for r in doc["instruction"] if r["subgroup"] == "Tensor" and r["opcode"] != "EVENT_SEMAPHORE"]
    busy = sum(r["duration"] for r in work)  # the preamble's TENSOR_LOAD, then the MATMULs back to back
    in_kernel = sum(r["duration"] for r in work if r["timestamp"] >= start)
    assert in_kernel == sum(r["duration"] for r in doc["instruction"] if r["opcode"] == "MATMUL")
    assert tensor["instructions"] == sum(1 for r in doc["instruction"] if r["subgroup"] == "Tensor")
    assert tensor["active_ns"] == busy
    assert tensor["kernel_util_pct"] == pytest.approx(100 * in_kernel / (end - start))
    assert tensor["span_util_pct"] == pytest.approx(100 * busy / span)
    # Queue names from dma_queues_info where the queue index names one queue; q_idx 14 is two
    # (qScalarTable, qDveTable), so its rows stay "queue 14".
    names: dict[int, set[str]] = {}
    for q in doc["dma_queues_info"]:
        names.setdefault(q["q_idx"], set()).add(q["q_name"])
    per_queue: dict[str, int] = {}
    for r in doc["dma"]:
        if r["aggregated"] == "no":
            found = names.get(r["dma_queue"], set())
            q = next(iter(found)) if len(found) == 1 else f"queue {r['dma_queue']}"
            per_queue[q] = per_queue.get(q, 0) + r["transfer_size"]
    assert "queue 14" in per_queue
    dma = t[t["type"] == "dma"].set_index("unit")
    assert dma["bytes"].astype(int).to_dict() == per_queue
    assert set(t.loc[t["type"] == "engine", "unit"]) == {"Tensor", "Vector", "Scalar", "GpSimd", "Sync"}


def test_analyze_gives_neuron_tables_and_neuron_advice(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, trace = matmul
    a = _quiet(analyze, trace)
    assert len(a.neuron_engines) >= 8 and len(a.neuron_summary) == 1
    row = a.neuron_summary.iloc[0]
    assert row["dma_transfer_total_bytes"] == sum(r["transfer_size"] for r in doc["dma"] if r["aggregated"] == "no")
    ids = {f.rule_id for f in a.findings}
    assert "device_idle" not in ids and "neuron_fixed_wait" in ids
    text = " ".join(f.recommendation + " " + f.message for f in a.findings).lower()
    for cuda in ("pin_memory", "dataloader", "non_blocking", "with_stack", "cuda", "untraced host"):
        assert cuda not in text
    assert "not paid per execution" in text and "batch inputs" not in text and "128x128" in text
    assert "Kernel" in a.summary["verdict"] or "kernel" in a.summary["verdict"]


def test_summary_table_of_the_old_synth_keeps_aggregated_transfers(tmp_path: Path) -> None:
    """Files where every packet group has its aggregated row count each transfer once, as before."""
    from neuron_explorer.collectors.neuron.synth import SynthSpec, write_legacy_json

    truth = write_legacy_json(tmp_path / "p.json", SynthSpec(bottleneck="dma"))
    trace = _quiet(import_neuron_profile, tmp_path / "p.json")
    aggregated = [r for r in truth["document"]["dma"] if r["aggregated"] == "yes"]
    t = summary_table(trace.metadata)
    assert int(t["dma_transfer_count"].iloc[0]) == len(aggregated)


def test_the_parquet_export_counts_packet_groups_without_an_aggregated_row(tmp_path: Path) -> None:
    doc = write_matmul_json(tmp_path / "m.json", MatmulSpec(n=512))
    d = tmp_path / "export"
    d.mkdir()
    ins = pd.DataFrame(doc["instruction"])
    pq.write_table(
        pa.Table.from_pandas(
            pd.DataFrame(
                {
                    "start_ts": ins["timestamp"],
                    "end_ts": ins["timestamp"] + ins["duration"],
                    "duration_ns": ins["duration"],
                    "engine": ins["subgroup"].str.lower(),
                    "opcode": ins["opcode"],
                    "hlo_name": ins["hlo_name"],
                    "layer": ins["layer"],
                }
            ),
            preserve_index=False,
        ),
        d / "Instruction.parquet",
    )
    dma = pd.DataFrame(doc["dma"])

    def cols(df: pd.DataFrame) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "start_ts": df["timestamp"],
                "end_ts": df["timestamp"] + df["duration"],
                "duration_ns": df["duration"],
                "transfer_bytes": df["transfer_size"],
                "queue_name": df["variable"],
                "queue_idx": df["dma_queue"],
                "engine_idx": df["dma_engine"],
            }
        )

    packets, agg = dma[dma["aggregated"] == "no"], dma[dma["aggregated"] == "yes"]
    pq.write_table(
        pa.Table.from_pandas(
            cols(packets).assign(
                id=range(len(packets)), packet_aggregation_id=packets["packet_aggregation_id"].to_numpy()
            ),
            preserve_index=False,
        ),
        d / "DmaPacket.parquet",
    )
    pq.write_table(
        pa.Table.from_pandas(cols(agg).assign(id=agg["packet_aggregation_id"].to_numpy()), preserve_index=False),
        d / "DmaPacketAggregated.parquet",
    )
    pq.write_table(pa.Table.from_pylist(doc["active_time"]), d / "ActiveTime.parquet")
    trace = _quiet(import_neuron_profile, d)
    m = trace.metadata["neuron"]["devices"][0]["metrics"]
    assert m["dma_transfer_total_bytes"] == int(packets["transfer_size"].sum())
    assert m["dma_transfer_count"] == 3
    start, end = _kernel_from_rows(doc)
    assert m["kernel_time_ns"] == end - start


def test_a_compiler_kernel_info_and_a_raw_ntff_are_refused_in_one_line(tmp_path: Path) -> None:
    info = tmp_path / "kernel_info.json"
    info.write_text(json.dumps({"kernels": [{"name": "matmul"}], "summary": {"total_time": 1.0, "x_percent": 0.1}}))
    with pytest.raises(TraceFormatError, match=r"kernel_info\.json") as e:
        load(info)
    assert "\n" not in str(e.value)
    ntff = tmp_path / "run_vnc_0.ntff"
    ntff.write_bytes(b"\x00NTFF")
    with pytest.raises(TraceFormatError, match=r"neuron-profile view -n MODEL.neff -s run_vnc_0.ntff") as e:
        load(ntff)
    assert "\n" not in str(e.value)


def test_a_directory_of_separate_profiles_points_at_compare(tmp_path: Path) -> None:
    for n in (128, 256):
        write_matmul_json(tmp_path / f"mm_N{n}.json", MatmulSpec(n=n))
    (tmp_path / "kernel_info.json").write_text(json.dumps({"kernels": [], "summary": {}}))
    with pytest.raises(TraceFormatError, match=r"2 separate device profiles.*neuron-explorer compare"):
        _quiet(import_neuron_profile, tmp_path)
    assert len(_quiet(read_device_profile, tmp_path)) == 2  # the reader itself still lists them
