"""Joining a Neuron device profile with the framework (torch.profiler) trace."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json
from neuron_explorer.collectors.neuron import NeuronProfileWarning, join_device_profile, join_inspect_output_dir, synth
from neuron_explorer.trace.errors import CollectorError


@pytest.fixture()
def run_files(tmp_path: Path) -> tuple[Path, Path, dict]:
    truth = synth.write_parquet_export(tmp_path / "device")
    synth.write_framework_trace(tmp_path / "fw.json")
    return tmp_path / "fw.json", tmp_path / "device", truth


def test_device_work_is_linked_to_the_launching_runtime_call_and_its_op(run_files) -> None:
    fw, device, _truth = run_files
    joined = join_device_profile(import_kineto_json(fw), device)
    df = joined.to_pandas()
    dev = df[df["device_type"].astype(str) == "neuron"]
    work = dev[dev["kind"].isin(["kernel", "memcpy"])]
    assert work["launch_id"].notna().all() and work["op_id"].notna().all()
    launches = df.set_index("event_id").loc[work["launch_id"].astype(int)]
    assert set(launches["name"].astype(str)) == {"nrt_execute"}
    ops = df.set_index("event_id").loc[work["op_id"].astype(int)]
    assert set(ops["name"].astype(str)) == {"neuron::graph_execute"}
    # Each execution's work takes the step its launch ran in.
    assert set(work["step"].astype(int)) == {0, 1, 2}
    report = joined.metadata["neuron"]["join"]
    assert report["linked_executions"] == 3 and report["unlinked_events"] == 0


def test_ids_stay_consistent_after_the_merge(run_files) -> None:
    fw, device, _ = run_files
    framework = import_kineto_json(fw)
    joined = join_device_profile(framework, device)
    df = joined.to_pandas()
    assert df["event_id"].tolist() == list(range(len(df)))
    assert (np.diff(df["start_ns"].to_numpy()) >= 0).all()
    by_id = df.set_index("event_id")
    for col in ("parent_id", "op_id"):
        ids = df[col].dropna().astype(int)
        assert ids.isin(by_id.index).all()
    # The python frame still encloses the framework op after renumbering.
    op = df[df["name"] == "neuron::graph_execute"].iloc[0]
    assert by_id.loc[int(op["parent_id"]), "kind"] == "python"


def test_device_rows_without_stack_frames_inherit_the_ops_line(run_files) -> None:
    fw, device, _ = run_files
    df = join_device_profile(import_kineto_json(fw), device).to_pandas()
    iota = df[df["name"] == "IOTA"]
    assert set(iota["src_precision"].astype(str)) == {"launch"}
    assert set(iota["src_line"].astype(int)) == {88}
    mm = df[df["name"] == "MATMUL"]
    assert set(mm["src_precision"].astype(str)) == {"line"} and set(mm["src_line"].astype(int)) == {42}


def test_device_times_land_inside_the_framework_steps(run_files) -> None:
    fw, device, _truth = run_files
    df = join_device_profile(import_kineto_json(fw), device).to_pandas()
    steps = df[df["kind"] == "step"].sort_values("start_ns")
    k = df[df["kind"] == "kernel"]
    for step, row in zip(range(3), steps.itertuples()):
        mine = k[k["step"] == step]
        assert (
            mine["start_ns"].min() >= row.start_ns
            and (mine["start_ns"] + mine["dur_ns"]).max() <= row.start_ns + row.dur_ns
        )


def test_unlinkable_executions_are_counted_with_a_reason(tmp_path: Path) -> None:
    synth.write_parquet_export(tmp_path / "device")
    synth.write_framework_trace(tmp_path / "fw.json", launches=False)
    spec = synth.SynthSpec()
    framework = import_kineto_json(tmp_path / "fw.json")
    joined = join_device_profile(framework, tmp_path / "device", max_gap_ns=1)
    report = joined.metadata["neuron"]["join"]
    assert report["launch_kind"] == "cpu_op"  # no runtime calls: the op running at the execution start
    assert report["linked_executions"] == spec.executions
    # A framework trace whose launches come too early to be the launch is not linked.
    synth.write_framework_trace(tmp_path / "fw2.json")
    joined = join_device_profile(import_kineto_json(tmp_path / "fw2.json"), tmp_path / "device", max_gap_ns=1_000)
    report = joined.metadata["neuron"]["join"]
    assert report["linked_events"] == 0
    assert report["unlinked_reasons"] == {"nearest_launch_too_early": 3}


def test_without_system_profile_the_first_ts_wall_clock_aligns(tmp_path: Path) -> None:
    synth.write_parquet_export(tmp_path / "device", drop=("SystemProfileEvents",))
    synth.write_framework_trace(tmp_path / "fw.json")
    joined = join_device_profile(import_kineto_json(tmp_path / "fw.json"), tmp_path / "device")
    d = joined.metadata["neuron"]["devices"][0]
    assert d["alignment"]["method"] == "first_ts"
    assert joined.metadata["neuron"]["join"]["linked_executions"] == 3


def test_legacy_json_without_any_clock_is_placed_at_the_first_launch_with_a_warning(tmp_path: Path) -> None:
    synth.write_legacy_json(tmp_path / "p.json")
    fw = synth.write_framework_trace(tmp_path / "fw.json")
    with pytest.warns(NeuronProfileWarning, match="approximate"):
        joined = join_device_profile(import_kineto_json(tmp_path / "fw.json"), tmp_path / "p.json")
    assert joined.metadata["neuron"]["devices"][0]["alignment"]["method"] == "framework_first_launch"
    k = joined.to_pandas().query("kind == 'kernel'")
    assert k["start_ns"].min() >= int(fw["launch_starts"][0])


def test_inspect_output_dir_joins_exports_found_below_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synth.write_parquet_export(tmp_path / "inspect" / "i-1_pid_7" / "1700000000" / "export")
    synth.write_framework_trace(tmp_path / "fw.json")
    monkeypatch.setenv("NEURON_RT_INSPECT_OUTPUT_DIR", str(tmp_path / "inspect"))
    joined = join_inspect_output_dir(import_kineto_json(tmp_path / "fw.json"))
    assert joined.metadata["neuron"]["join"]["linked_executions"] == 3


def test_inspect_output_dir_with_only_raw_files_is_a_collector_error(tmp_path: Path) -> None:
    (tmp_path / "i-1_pid_7" / "1").mkdir(parents=True)
    (tmp_path / "i-1_pid_7" / "1" / "ntrace.pb").write_bytes(b"\0")
    synth.write_framework_trace(tmp_path / "fw.json")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(CollectorError, match="output-format parquet"):
            join_inspect_output_dir(import_kineto_json(tmp_path / "fw.json"), tmp_path)
