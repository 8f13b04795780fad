"""Real neuron-profile exports, field by field (issue 14): each row of what real files hold.

The export below is written by hand in this test, modeled on a real legacy
``neuron-profile view --output-format json`` file of a mostly idle inf2 core (a single small
matmul, profiler 2.27): string flags, hardware timestamps already in ns beside a
``ticks_per_nanosec`` of 1000, EVENT_SEMAPHORE waits covering most of the run, an aggregated
transfer listed beside its packets, queue names only in ``dma_queues_info``, ``unknown``
memories, no per-instruction FLOPs, 0-1 fractions beside a throttle limit above 1, warnings.
Every expected value is computed here from that raw JSON, never by the importer's code.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.collectors.neuron import import_neuron_profile
from neuron_explorer.collectors.neuron.frames import flags

FIRST_HW = 1_734_000_000_000  # hardware timestamps are ns already
TOTAL_NS = 1_870_000
QUEUES = [
    {"q_name": "qSyncIO0", "q_type": "io", "q_idx": 0, "q_eng_idx": 0},
    {"q_name": "qSyncSpillReload0", "q_type": "weights", "q_idx": 1, "q_eng_idx": 0},
    {"q_name": "qPoolIO0", "q_type": "io", "q_idx": 2, "q_eng_idx": 0},
]


def idle_core_export() -> dict[str, Any]:
    """A mostly idle core: a few microseconds of work in 1.87 ms, the rest semaphore waits."""
    work = [  # (engine label, opcode, start, duration, hlo_name, layer)
        ("Sync", "DMA_TRIGGER", 10_000, 1_200, "copy.3", "model/input"),
        ("TensorMatrix", "MATMUL", 900_000, 2_400, "dot.7", "model/linear"),
        ("Tensor", "MATMUL", 903_000, 1_800, "dot.7", "model/linear"),
        ("Vector", "TENSOR_TENSOR", 905_500, 1_500, "add.8", "model/linear"),
        ("Scalar", "ACTIVATE", 1_200_000, 900, "tanh.9", "model/act"),
    ]
    waits = [  # the engines wait on semaphores for most of the run
        ("Tensor", "EVENT_SEMAPHORE", 20_000, 879_000, None, None),
        ("Vector", "EVENT_SEMAPHORE", 20_000, 884_000, None, None),
        ("Scalar", "EVENT_SEMAPHORE", 30_000, 1_169_000, None, None),
        ("Sync", "EVENT_SEMAPHORE", 12_000, 1_850_000, None, None),
    ]
    instruction = [
        {
            "timestamp": s,
            "duration": d,
            "label": label,
            "subgroup": label,
            "opcode": op,
            "operands": "src=0x0 dst=0x0",
            "hlo_name": hlo,
            "layer": layer,
            "hlo_attrs": "{}",
            "predecessors": "[]",
            "evt_wait_time": 0,
        }
        for label, op, s, d, hlo, layer in work + waits
    ]
    engine = {"TensorMatrix": "Tensor"}
    active_time = [
        {"engine": engine.get(label, label), "start_ts": s, "end_ts": s + d, "duration_ns": d}
        for label, _, s, d, _, _ in work
    ]
    dma = [
        {  # the aggregated transfer: what the summary counts
            "timestamp": 5_000,
            "duration": 40_000,
            "transfer_size": 591_116,
            "source": [["WEIGHT"]],
            "dest": ["SB"],
            "subgroup": "Q1-E0",
            "dma_queue": 1,
            "dma_engine": 0,
            "aggregated": "yes",
            "duplicate": "no",
            "is_cc_dma": "no",
            "packet_aggregation_id": 1,
        }
    ]
    rng = np.random.default_rng(3)
    sizes = rng.multinomial(32_768 - 227 * 16, np.ones(227) / 227) + 16
    for i, size in enumerate(sizes.tolist()):
        q, e = i % 3, (i // 3) % 12
        dma.append(
            {
                "timestamp": 5_000 + 150 * i,
                "duration": 120,
                "transfer_size": size,
                "source": [["unknown"]] if i % 5 == 0 else [["INPUT"]],
                "dest": ["unknown"] if i % 7 == 0 else ["SB"],
                "subgroup": f"Q{q}-E{e}",  # 36 (queue x engine) subgroups, 3 real queues
                "dma_queue": q,
                "dma_engine": e,
                "aggregated": "no",
                "duplicate": "no",
                "is_cc_dma": "no",
                "packet_aggregation_id": 1,
            }
        )
    summary = {
        "total_time": TOTAL_NS / 1e9,
        "total_active_time": 0.0000078,
        "total_active_time_percent": 0.0000078 / (TOTAL_NS / 1e9),  # a 0-1 fraction
        "tensor_engine_active_time_percent": 4_200 / TOTAL_NS,
        "mfu_estimated_percent": 0.0000314,
        "mfu_max_achievable_estimated_percent": 0.62,
        "dma_active_time_percent": 0.021,
        "power_throttle_limit_percent": 1.0967,  # above 1: must not flip the others
        "dma_transfer_count": 1,
        "dma_transfer_total_bytes": 591_116,
        "spill_reload_bytes": 0,
        "instance_type": "inf2.xlarge",
        "nc_idx": 0,
    }
    metadata = {
        "ticks_per_nanosec": 1000,
        "first_hw_timestamp": FIRST_HW,
        "last_hw_timestamp": FIRST_HW + TOTAL_NS,
        "pe_clock_freq": 2.8,
        "pe_num_rows": 128,
        "pe_num_cols": 128,
        "data_version": "2.27.0",
    }
    return {
        "summary": [summary],
        "metadata": [metadata],
        "instruction": instruction,
        "active_time": active_time,
        "dma": dma,
        "dma_queues_info": QUEUES,
        "dma_throughput": [{"timestamp": 0, "throughput": 1.0, "uses_hbm": "true"}],
        "layer_summary": [{"layer": "model/linear", "time": 0.000004}],
        "warnings": [{"message": "Missing DGE notifications: DMA values may be inaccurate"}],
    }


def _union_ns(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return idle_core_export()


@pytest.fixture(scope="module")
def trace(raw: dict[str, Any], tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("real") / "profile.json"
    path.write_text(json.dumps(raw))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return import_neuron_profile(path)


@pytest.fixture(scope="module")
def events(trace) -> pd.DataFrame:
    df = trace.to_pandas()
    df["kind"] = df["kind"].astype(str)
    return df


def _device(trace) -> dict[str, Any]:
    return trace.metadata["neuron"]["devices"][0]


# ---------------------------------------------------------------- the acceptance case
def test_dmas_are_memcpy_events_and_nothing_is_a_collective(raw, events) -> None:
    transfers = [r for r in raw["dma"] if r["aggregated"] == "yes"]
    memcpy = events[events["kind"] == "memcpy"]
    assert len(memcpy) == len(transfers) == 1
    assert not (events["kind"] == "collective").any()


def test_span_equals_summary_total_time_within_one_percent(raw, trace, events) -> None:
    total_ns = raw["summary"][0]["total_time"] * 1e9
    assert _device(trace)["span_ns"] == pytest.approx(total_ns, rel=0.01)
    assert _device(trace)["metrics"]["total_time_ns"] == pytest.approx(total_ns, rel=0.01)
    span = (events["start_ns"] + events["dur_ns"]).max() - events["start_ns"].min()
    assert span == pytest.approx(total_ns, rel=0.01)  # what `info` shows as the span


def test_engine_active_percent_from_active_time_matches_the_summary(raw, trace) -> None:
    active = _union_ns([(r["start_ts"], r["end_ts"]) for r in raw["active_time"]])
    expected_pct = 100.0 * active / (raw["summary"][0]["total_time"] * 1e9)
    derived = _device(trace)["derived_metrics"]["total_active_time_pct"]
    assert derived == pytest.approx(expected_pct, abs=0.01)
    assert derived == pytest.approx(100 * raw["summary"][0]["total_active_time_percent"], abs=0.5)


def test_verdict_is_not_compute_bound_and_says_idle(trace) -> None:
    a = analyze(trace)
    verdict = a.summary["verdict"]
    assert "compute-bound" not in verdict
    assert "idle" in verdict
    (core,) = a.summary["neuron"]
    assert core["engines_active_pct"] < 1


def test_no_flops_means_null_never_negative(events) -> None:
    flops = events.loc[events["device_type"].astype(str) == "neuron", "flops"]
    assert flops.isna().all() or (flops.dropna() >= 0).all()
    assert not (flops.fillna(0) < 0).any()


def test_dma_bytes_are_the_files_transfers_counted_once(raw, trace, events) -> None:
    transfer_bytes = sum(r["transfer_size"] for r in raw["dma"] if r["aggregated"] == "yes")
    assert int(events.loc[events["kind"] == "memcpy", "bytes"].sum()) == transfer_bytes == 591_116
    m = _device(trace)["derived_metrics"]
    assert m["dma_transfer_total_bytes"] == transfer_bytes
    assert m["dma_transfer_count"] == 1
    assert m["dma_packet_count"] == len(raw["dma"]) - 1


# ---------------------------------------------------------------- each row of the table
def test_flags_read_yes_no_true_false_strings_and_booleans() -> None:
    values = pd.Series(["yes", "no", "true", "false", "Yes", " NO ", True, False, None, 1, 0, "maybe"], dtype=object)
    expected = [True, False, True, False, True, False, True, False, False, True, False, False]
    assert flags(values).tolist() == expected
    assert flags(pd.Series([True, None, False], dtype="boolean")).tolist() == [True, False, False]
    assert flags(pd.Series([True, False])).tolist() == [True, False]


def test_semaphore_waits_are_not_engine_work(raw, events) -> None:
    waits = [r for r in raw["instruction"] if r["opcode"] == "EVENT_SEMAPHORE"]
    kernels = events[events["kind"] == "kernel"]
    assert len(kernels) == len(raw["instruction"]) - len(waits)
    assert "EVENT_SEMAPHORE" not in set(kernels["name"].astype(str))
    kept = events[(events["kind"] == "device_annotation") & (events["name"].astype(str) == "EVENT_SEMAPHORE")]
    assert len(kept) == len(waits)  # kept in the trace, as annotations


def test_packets_are_kept_beside_the_transfer(raw, events) -> None:
    packets = [r for r in raw["dma"] if r["aggregated"] == "no"]
    kept = events[(events["kind"] == "device_annotation") & events["name"].astype(str).str.startswith("DMA packet")]
    assert len(kept) == len(packets)
    assert int(kept["bytes"].sum()) == sum(r["transfer_size"] for r in packets)


def test_dma_queues_come_from_dma_queues_info_not_subgroup(raw, trace) -> None:
    names = {q["q_name"] for q in raw["dma_queues_info"]}
    streams = [s for s in trace.metadata["neuron"]["streams"] if s["type"] == "dma"]
    assert {s["name"] for s in streams} == names
    assert len({r["subgroup"] for r in raw["dma"]}) > 30  # what used to become 35 "queues"
    types = {s["name"]: s["queue_type"] for s in streams}
    assert types == {q["q_name"]: q["q_type"] for q in raw["dma_queues_info"]}


def test_unknown_source_or_destination_stays_unknown(events) -> None:
    kinds = set(events.loc[events["name"].astype(str).str.startswith("DMA"), "memcpy_kind"].dropna().astype(str))
    assert any("unknown" in k for k in kinds)
    assert not any(k.startswith("DtoD") and "unknown" in k for k in kinds)
    assert "DtoD (HBM->SBUF)" in kinds  # INPUT/WEIGHT are HBM


def test_weights_queue_named_spill_reload_is_not_spill(trace) -> None:
    m = _device(trace)["derived_metrics"]
    assert m["spill_reload_bytes"] == 0  # packets to SB on qSyncSpillReload0 would count otherwise
    a = analyze(trace, rules=["neuron_spill_reload"])
    assert not a.findings


def test_instance_type_clock_and_tensor_size_are_read(raw, trace) -> None:
    (props,) = trace.metadata["device_properties"]
    assert props["instance_type"] == raw["summary"][0]["instance_type"]
    assert "inf2.xlarge" in props["name"]
    assert props["tensor_engine_clock_freq_ghz"] == raw["metadata"][0]["pe_clock_freq"]
    assert (props["pe_num_rows"], props["pe_num_cols"]) == (128, 128)


def test_percent_fields_are_read_per_field(raw, trace) -> None:
    s, m = raw["summary"][0], _device(trace)["metrics"]
    assert m["mfu_estimated_pct"] == pytest.approx(100 * s["mfu_estimated_percent"])
    assert m["dma_active_time_pct"] == pytest.approx(100 * s["dma_active_time_percent"])
    assert m["power_throttle_limit_percent"] == s["power_throttle_limit_percent"]  # kept raw
    assert "power_throttle_limit_pct" not in m


def test_hlo_and_layer_become_grouping_columns_and_an_operator_table(raw, trace, events) -> None:
    kernels = events[events["kind"] == "kernel"]
    assert set(kernels["src_module"].dropna().astype(str)) == {
        r["layer"] for r in raw["instruction"] if r["opcode"] != "EVENT_SEMAPHORE"
    }
    assert sorted(kernels["hlo_name"].astype(str)) == sorted(
        r["hlo_name"] for r in raw["instruction"] if r["opcode"] != "EVENT_SEMAPHORE"
    )
    ops = analyze(trace).neuron_operators
    expected: dict[tuple[str, str], int] = {}
    for r in raw["instruction"]:
        if r["opcode"] != "EVENT_SEMAPHORE":
            key = (r["layer"], r["hlo_name"])
            expected[key] = expected.get(key, 0) + r["duration"]
    got = {(r.layer, r.hlo_name): r.device_ns for r in ops.itertuples()}
    assert got == expected
    assert ops.iloc[0]["hlo_op"] == "dot"  # dot.7 -> dot


def test_the_files_warnings_are_surfaced(raw, trace) -> None:
    text = raw["warnings"][0]["message"]
    assert text in trace.metadata["neuron"]["file_warnings"]
    assert text in analyze(trace).summary["profile_warnings"]


def test_low_mfu_is_measured_against_the_achievable_mfu(raw, trace) -> None:
    (f,) = analyze(trace, rules=["neuron_low_mfu"]).findings
    assert f.metrics["mfu_max_achievable_pct"]["value"] == pytest.approx(
        100 * raw["summary"][0]["mfu_max_achievable_estimated_percent"]
    )
    assert "could reach" in f.title


def test_exposed_collectives_skip_without_collectives(trace) -> None:
    a = analyze(trace, rules=["neuron_exposed_collectives"])
    assert not a.findings and "collective" in dict(a.skipped)["neuron_exposed_collectives"]


def test_a_summary_json_export_is_metrics_only(raw, tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(raw["summary"][0]))
    with pytest.warns(UserWarning, match="metrics only"):
        trace = import_neuron_profile(path)
    assert trace.num_events == 0
    d = _device(trace)
    assert d["metrics_only"]
    assert d["metrics"]["total_time_ns"] == round(raw["summary"][0]["total_time"] * 1e9)
    assert "idle" in analyze(trace).summary["verdict"]


def _import_doc(doc: dict[str, Any], path: Path):
    path.write_text(json.dumps(doc))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        trace = import_neuron_profile(path)
    return trace, [str(w.message) for w in record]


def test_tables_on_the_absolute_hardware_clock_are_made_relative_per_table(raw, trace, tmp_path: Path) -> None:
    doc = json.loads(json.dumps(raw))
    for r in doc["instruction"] + doc["dma"]:
        r["timestamp"] += FIRST_HW
    # active_time stays relative: the origin is decided per table
    shifted, _ = _import_doc(doc, tmp_path / "abs.json")
    a, b = _device(shifted)["derived_metrics"], _device(trace)["derived_metrics"]
    assert a["total_active_time_pct"] == b["total_active_time_pct"]
    assert shifted.to_pandas()["start_ns"].tolist() == trace.to_pandas()["start_ns"].tolist()


def test_an_active_time_table_on_another_clock_is_not_trusted(raw, tmp_path: Path) -> None:
    doc = json.loads(json.dumps(raw))
    for r in doc["active_time"]:
        r["start_ts"] += 5 * TOTAL_NS
        r["end_ts"] += 5 * TOTAL_NS
    trace, messages = _import_doc(doc, tmp_path / "skew.json")
    assert any("does not line up" in m for m in messages)
    work = [r for r in raw["instruction"] if r["opcode"] != "EVENT_SEMAPHORE"]
    df = trace.to_pandas()
    assert int((df["kind"].astype(str) == "kernel").sum()) == len(work)  # waits by opcode only
    expected = _union_ns([(r["timestamp"], r["timestamp"] + r["duration"]) for r in work])
    assert _device(trace)["derived_metrics"]["total_active_time_ns"] == expected


def test_without_aggregated_rows_every_row_but_duplicates_is_a_transfer(raw, tmp_path: Path) -> None:
    doc = json.loads(json.dumps(raw))
    doc["dma"] = [r for r in doc["dma"] if r["aggregated"] == "no"]
    for i, r in enumerate(doc["dma"]):
        del r["aggregated"]
        r["duplicate"] = "yes" if i % 4 == 0 else "no"
    doc["dma"][1]["is_cc_dma"] = "true"
    trace, _ = _import_doc(doc, tmp_path / "packets.json")
    df = trace.to_pandas()
    kept = [r for r in doc["dma"] if r["duplicate"] == "no"]
    assert int((df["kind"].astype(str) == "memcpy").sum()) == len(kept) - 1
    assert int((df["kind"].astype(str) == "collective").sum()) == 1  # the one "true" CC DMA
    assert _device(trace)["derived_metrics"]["dma_transfer_total_bytes"] == sum(r["transfer_size"] for r in kept)
    assert _device(trace)["dma_granularity"] == "packet"


def test_tables_and_fields_not_imported_are_listed(raw, trace, tmp_path: Path) -> None:
    d = _device(trace)
    assert d["tables_not_imported"] == {"dma_throughput": 1}
    assert d["unknown_columns"] == {}  # every field of this export is one we read
    doc = json.loads(json.dumps(raw))
    doc["instruction"][0]["mystery_field"] = 1
    doc["dma"][0]["dge_mode"] = "hw"
    traced, _ = _import_doc(doc, tmp_path / "more.json")
    assert _device(traced)["unknown_columns"] == {"instruction": ["mystery_field"], "dma": ["dge_mode"]}
    assert '"mystery_field":1' in traced.to_pandas()["args"].dropna().str.cat()  # kept in args


def test_the_step_time_breakdown_covers_the_profiled_window(raw, trace) -> None:
    from neuron_explorer.analyzers.core.context import PROFILE_WINDOW_CATEGORY
    from neuron_explorer.collectors.neuron.events import CAT_WINDOW

    assert CAT_WINDOW == PROFILE_WINDOW_CATEGORY  # the importer and the analyzers agree
    a = analyze(trace)
    total_ns = raw["summary"][0]["total_time"] * 1e9
    assert a.summary["wall_ns"] == pytest.approx(total_ns, rel=0.01)
    (row,) = a.breakdown.itertuples()
    compute_pct = 100.0 * row.compute_ns / row.wall_ns
    assert compute_pct == pytest.approx(100 * raw["summary"][0]["total_active_time_percent"], abs=0.5)


def test_hardware_timestamps_in_ticks_are_recognized_by_the_summary_total_time(raw, tmp_path: Path) -> None:
    doc = json.loads(json.dumps(raw))
    meta = doc["metadata"][0]
    meta["last_hw_timestamp"] = meta["first_hw_timestamp"] + TOTAL_NS * meta["ticks_per_nanosec"]
    trace, messages = _import_doc(doc, tmp_path / "ticks.json")
    assert _device(trace)["span_ns"] == TOTAL_NS
    assert not any("span" in m for m in messages)
    meta["last_hw_timestamp"] = meta["first_hw_timestamp"] + 3 * TOTAL_NS  # neither reading fits
    trace, messages = _import_doc(doc, tmp_path / "odd.json")
    assert _device(trace)["span_ns"] == 3 * TOTAL_NS
    assert any("summary.total_time" in m for m in messages)
