"""Neuron profile import: both formats, every field we rely on with its unit, and degradation."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuron_explorer.collectors.neuron import (
    NeuronProfileWarning,
    import_neuron_profile,
    read_device_profile,
    synth,
)
from neuron_explorer.trace.errors import TraceFormatError, TraceNotFoundError


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    d = tmp_path_factory.mktemp("neuron") / "profile"
    truth = synth.write_parquet_export(d, synth.SynthSpec(collectives=True))
    return d, truth


@pytest.fixture(scope="module")
def export_trace(export: tuple[Path, dict]):
    with warnings.catch_warnings():
        warnings.simplefilter("error", NeuronProfileWarning)  # a complete export imports without warnings
        return import_neuron_profile(export[0])


def _device(trace) -> dict:
    return trace.metadata["neuron"]["devices"][0]


def test_parquet_instructions_become_kernels_on_one_queue_per_engine(export, export_trace) -> None:
    _, truth = export
    ins = truth["timeline"]["instructions"]
    df = export_trace.to_pandas()
    kernels = df[df["kind"] == "kernel"]
    assert len(kernels) == len(ins)
    assert set(kernels["device_type"].astype(str)) == {"neuron"}
    by_stream = kernels.groupby("stream").size().to_dict()
    expected = ins.groupby("engine").size()
    assert by_stream == {
        0: expected["Tensor"],
        1: expected["Vector"],
        2: expected["Scalar"],
        3: expected["GpSimd"],
        4: expected["Sync"],
    }
    names = {s["stream"]: s["name"] for s in export_trace.metadata["neuron"]["streams"]}
    assert [names[i] for i in range(5)] == ["Tensor", "Vector", "Scalar", "GpSimd", "Sync"]


def test_parquet_times_are_ns_on_the_host_clock_via_nc_exec_running(export, export_trace) -> None:
    _, truth = export
    ins = truth["timeline"]["instructions"].sort_values(["start_ns", "id"])
    host = truth["host_exec_starts"]
    df = export_trace.to_pandas()
    k = df[df["kind"] == "kernel"].sort_values("start_ns")
    # Execution i's events are shifted by host_start_i - device_start_i exactly (int64, no float rounding).
    ex_of = ins["execution"].to_numpy()
    dev_starts = truth["timeline"]["executions"]["start_ns"].to_numpy()
    expected = np.sort(ins["start_ns"].to_numpy() + (host - dev_starts)[ex_of])
    assert np.array_equal(np.sort(k["start_ns"].to_numpy()), expected)
    assert sorted(k["dur_ns"].tolist()) == sorted(ins["dur_ns"].tolist())
    assert _device(export_trace)["alignment"]["method"] == "nc_exec_running"
    assert _device(export_trace)["alignment"]["executions_paired"] == 3


def test_parquet_dma_transfers_become_memcpy_with_bytes_direction_and_bandwidth(export, export_trace) -> None:
    _, truth = export
    dma = truth["timeline"]["dmas"]
    df = export_trace.to_pandas()
    m = df[df["kind"] == "memcpy"]
    assert len(m) == len(dma)
    assert int(m["bytes"].sum()) == int(dma["bytes"].sum())
    kinds = set(m["memcpy_kind"].astype(str))
    assert {"DtoD (HBM->SBUF)", "DtoD (SBUF->HBM)"} <= kinds
    assert (m["stream"] >= 100).all() and (m["stream"] < 900).all()
    # throughput is bytes/s in the export; our column is GB/s.
    row = m.iloc[0]
    assert row["bandwidth_gbps"] == pytest.approx(row["bytes"] / row["dur_ns"], rel=1e-6)


def test_parquet_collectives_become_collective_events(export_trace) -> None:
    df = export_trace.to_pandas()
    cc = df[df["kind"] == "collective"]
    assert len(cc) == 3
    assert set(cc["collective_name"].astype(str)) == {"allreduce"}
    assert (cc["bytes"] == 8 * 1024 * 1024).all()
    assert (cc["stream"] == 900).all()


def test_summary_percent_fractions_become_0_to_100_and_seconds_become_ns(export, export_trace) -> None:
    _, truth = export
    s = truth["summary"]
    metrics = _device(export_trace)["metrics"]
    assert 0 < s["mfu_estimated_percent"] < 1  # the export writes a fraction
    assert metrics["mfu_estimated_pct"] == pytest.approx(100 * s["mfu_estimated_percent"])
    assert metrics["tensor_engine_active_time_pct"] == pytest.approx(100 * s["tensor_engine_active_time_percent"])
    assert metrics["dma_active_time_pct"] == pytest.approx(100 * s["dma_active_time_percent"])
    assert metrics["total_time_ns"] == round(s["total_time"] * 1e9)
    assert metrics["dma_active_time_ns"] == round(s["dma_active_time"] * 1e9)
    assert metrics["hbm_read_bytes"] == s["hbm_read_bytes"] and isinstance(metrics["hbm_read_bytes"], int)
    assert metrics["spill_reload_bytes"] == s["spill_reload_bytes"]
    assert _device(export_trace)["metric_source"]["mfu_estimated_pct"] == "summary"


def test_a_percent_field_above_1_is_read_as_0_to_100_alone_the_others_stay_fractions(tmp_path: Path) -> None:
    truth = synth.write_parquet_export(tmp_path / "p")
    summary = dict(truth["summary"], mfu_estimated_percent=35.0)
    pq.write_table(pa.Table.from_pylist([summary]), tmp_path / "p" / "Summary.parquet")
    with pytest.warns(NeuronProfileWarning, match="mfu_estimated_percent") as record:
        trace = import_neuron_profile(tmp_path / "p")
    assert all("dma_active_time_percent" not in str(w.message) for w in record)
    metrics = _device(trace)["metrics"]
    assert metrics["mfu_estimated_pct"] == 35.0
    assert metrics["dma_active_time_pct"] == pytest.approx(100 * summary["dma_active_time_percent"])


def test_summary_already_on_a_0_to_100_scale_is_kept_with_a_warning(tmp_path: Path) -> None:
    synth.write_parquet_export(tmp_path / "p", synth.SynthSpec(percent_as_fraction=False))
    with pytest.warns(NeuronProfileWarning, match="0-100"):
        trace = import_neuron_profile(tmp_path / "p")
    truth = synth.summary(synth.SynthSpec(percent_as_fraction=False), synth.timeline(synth.SynthSpec()))
    assert _device(trace)["metrics"]["dma_active_time_pct"] == pytest.approx(truth["dma_active_time_percent"])


def test_stack_frames_give_the_user_line_not_the_library_frame(export_trace) -> None:
    df = export_trace.to_pandas()
    k = df[df["kind"] == "kernel"]
    mm = k[k["name"] == "MATMUL"]
    assert set(mm["src_file"].astype(str)) == {synth.USER_FILE}
    assert set(mm["src_line"]) == {42} and set(mm["src_func"].astype(str)) == {"attention"}
    assert set(mm["src_precision"].astype(str)) == {"line"}
    act = k[k["name"] == "ACTIVATE"]
    assert set(act["src_line"]) == {57}
    assert k[k["name"] == "IOTA"]["src_line"].isna().all()


def test_flops_and_raw_fields_are_kept(export, export_trace) -> None:
    _, truth = export
    df = export_trace.to_pandas()
    mm = df[df["name"] == "MATMUL"]
    assert int(mm["flops"].sum()) == int(truth["timeline"]["instructions"]["raw_flops"].sum())
    args = json.loads(mm.iloc[0]["args"])
    assert {"hlo_name", "bir_id", "opcode", "operands", "hbm_read_bytes", "tensor_instruction_type"} <= set(args)


def test_trace_round_trips_through_parquet(export_trace, tmp_path: Path) -> None:
    from neuron_explorer.trace.model import Trace

    path = export_trace.write(tmp_path / "t.parquet")
    back = Trace.read(path)
    assert back.num_events == export_trace.num_events
    assert (
        back.metadata["neuron"]["devices"][0]["metrics"]["hbm_read_bytes"]
        == _device(export_trace)["metrics"]["hbm_read_bytes"]
    )


# --------------------------------------------------------------------------- legacy JSON
def test_legacy_json_hw_timestamps_are_ns_whatever_ticks_per_nanosec_says(tmp_path: Path) -> None:
    spec = synth.SynthSpec(bottleneck="tensor")
    assert spec.ticks_per_nanosec == 1000  # as real inf2 files say, while their timestamps are ns
    truth = synth.write_legacy_json(tmp_path / "p.json", spec)
    trace = import_neuron_profile(tmp_path / "p.json")
    df = trace.to_pandas()
    ins, dma = truth["timeline"]["instructions"], truth["timeline"]["dmas"]
    k = df[df["kind"] == "kernel"]
    assert len(k) == len(ins)
    # TensorMatrix and Tensor tracks are both the Tensor engine (queue 0).
    assert int((k["stream"] == 0).sum()) == int((ins["engine"] == "Tensor").sum())
    assert sorted(k["start_ns"].tolist()) == sorted(ins["start_ns"].tolist())  # device-relative ns, unaligned
    m = df[df["kind"] == "memcpy"]
    assert int(m["bytes"].sum()) == int(dma["bytes"].sum())
    assert "DtoD (HBM->SBUF)" in set(m["memcpy_kind"].astype(str))
    d = trace.metadata["neuron"]["devices"][0]
    meta = truth["metadata"]
    assert d["span_ns"] == meta["last_hw_timestamp"] - meta["first_hw_timestamp"]
    assert d["span_ns"] == round(truth["summary"]["total_time"] * 1e9)
    assert d["metrics"]["tensor_engine_active_time_pct"] == pytest.approx(
        100 * truth["summary"]["tensor_engine_active_time_percent"]
    )
    assert d["alignment"]["method"] == "none"
    mm = k[k["name"] == "MATMUL"]
    assert set(mm["src_line"]) == {42}  # from nki_source_location


def test_legacy_json_gzip_is_read(tmp_path: Path) -> None:
    synth.write_legacy_json(tmp_path / "p.json.gz", gz=True)
    assert import_neuron_profile(tmp_path / "p.json.gz").num_events > 0


# --------------------------------------------------------------------------- degradation
def test_missing_summary_and_stack_frames_warn_and_fall_back_to_derived_metrics(tmp_path: Path) -> None:
    truth = synth.write_parquet_export(tmp_path / "p", drop=("Summary", "StackFrame"))
    with pytest.warns(NeuronProfileWarning) as record:
        trace = import_neuron_profile(tmp_path / "p")
    text = " ".join(str(w.message) for w in record)
    assert "Summary table missing" in text and "StackFrame" in text
    d = trace.metadata["neuron"]["devices"][0]
    assert d["metric_source"]["tensor_engine_active_time_pct"] == "derived"
    assert d["metrics"]["tensor_engine_active_time_pct"] == pytest.approx(
        100 * truth["summary"]["tensor_engine_active_time_percent"]
    )
    assert any("Summary" in w for w in d["warnings"])
    assert trace.to_pandas().query("kind == 'kernel'")["src_line"].isna().all()


def test_newer_schema_version_and_unknown_columns_are_read_with_a_warning(tmp_path: Path) -> None:
    spec = synth.SynthSpec(schema_version="99.1.0", extra={"instruction_columns": {"quantum_flux_bytes": 7}})
    synth.write_parquet_export(tmp_path / "p", spec)
    with pytest.warns(NeuronProfileWarning, match="99.1.0"):
        trace = import_neuron_profile(tmp_path / "p")
    d = trace.metadata["neuron"]["devices"][0]
    assert d["unknown_columns"]["Instruction"] == ["quantum_flux_bytes"]
    args = json.loads(trace.to_pandas().query("kind == 'kernel'").iloc[0]["args"])
    assert args["quantum_flux_bytes"] == 7


def test_a_required_field_missing_is_a_format_error_naming_table_and_file(tmp_path: Path) -> None:
    synth.write_parquet_export(tmp_path / "p")
    f = tmp_path / "p" / "Instruction_0.parquet"
    pq.write_table(pq.read_table(f).drop(["engine", "timeline_track"]), f)
    with pytest.raises(
        TraceFormatError, match=r"Instruction table lacks required field\(s\) engine or timeline_track"
    ) as exc:
        read_device_profile(tmp_path / "p")
    assert exc.value.path and exc.value.path.endswith("Instruction_0.parquet")


def test_a_truncated_parquet_table_is_a_format_error_naming_the_file(tmp_path: Path) -> None:
    synth.write_parquet_export(tmp_path / "p")
    f = tmp_path / "p" / "DmaPacketAggregated.parquet"
    f.write_bytes(f.read_bytes()[:300])
    with pytest.raises(TraceFormatError, match="DmaPacketAggregated table is not readable Parquet") as exc:
        import_neuron_profile(tmp_path / "p")
    assert "DmaPacketAggregated.parquet" in str(exc.value)


def test_a_truncated_json_export_is_a_format_error(tmp_path: Path) -> None:
    synth.write_legacy_json(tmp_path / "p.json")
    data = (tmp_path / "p.json").read_bytes()
    (tmp_path / "p.json").write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="truncated"):
        import_neuron_profile(tmp_path / "p.json")


def test_json_that_is_not_a_neuron_export_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"traceEvents": []}')
    with pytest.raises(TraceFormatError, match="neither a neuron-profile export"):
        import_neuron_profile(tmp_path / "x.json")


def test_directory_of_raw_capture_files_says_to_export_first(tmp_path: Path) -> None:
    (tmp_path / "i-1_pid_7" / "1").mkdir(parents=True)
    (tmp_path / "i-1_pid_7" / "1" / "graph_vnc_0.ntff").write_bytes(b"\0")
    with pytest.raises(TraceFormatError, match="--output-format parquet"):
        import_neuron_profile(tmp_path)


def test_missing_path_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(TraceNotFoundError):
        import_neuron_profile(tmp_path / "nope")


def test_dma_packets_are_used_when_aggregated_table_is_absent(tmp_path: Path) -> None:
    truth = synth.write_parquet_export(tmp_path / "p", drop=("DmaPacketAggregated",))
    dma = truth["timeline"]["dmas"]
    pq.write_table(
        pa.Table.from_pandas(
            pd.DataFrame(
                {
                    "start_ts": dma["start_ns"] + truth["origin"],
                    "duration_ns": dma["dur_ns"],
                    "id": dma["id"],
                    "packet_idx": np.zeros(len(dma), np.int32),
                    "packet_aggregation_id": dma["id"],
                    "engine_idx": dma["queue_idx"],
                    "read_bytes": dma["bytes"],
                    "write_bytes": dma["bytes"],
                    "transfer_bytes": dma["bytes"],
                    "throughput": 1e9,
                    "queue_type": "input",
                    "queue_name": dma["queue"],
                    "crc": 0,
                }
            )
        ),
        tmp_path / "p" / "DmaPacket.parquet",
    )
    trace = import_neuron_profile(tmp_path / "p")
    assert trace.metadata["neuron"]["devices"][0]["dma_granularity"] == "packet"
    assert int(trace.to_pandas().query("kind == 'memcpy'")["bytes"].sum()) == int(dma["bytes"].sum())
