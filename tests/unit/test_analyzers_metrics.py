"""Metric invariants on real traces: parts sum to wall time, totals agree across tables, units
hold, empty traces do not crash, and every exported field is described."""

from __future__ import annotations

import io
import json
import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.rules import all_rules
from neuron_explorer.trace.model import Trace, conform
from neuron_explorer.trace.schema import EVENTS_SCHEMA

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto"
ROOT = Path(__file__).resolve().parents[2]
TRACES = [
    "hta/alexnet_a100.json.gz",
    "hta/sampled_rank-0.json.gz",
    "hta/amd_mi250.json.gz",
    "local/cpu_mlp_step4.json",
    "local/example_cpu_small.json",
    "tracelens/qwen_h100.json.gz",
]


@cache
def loaded(name: str) -> tuple[Trace, Analysis]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = ne.load(DATA / name)
    return t, analyze(t)


def empty_trace() -> Trace:
    return Trace(conform(pa.Table.from_pylist([], schema=EVENTS_SCHEMA)), {"rank": 0})


@pytest.mark.parametrize("name", TRACES)
def test_breakdown_parts_sum_to_wall_time(name):
    _, a = loaded(name)
    bd = a.breakdown
    assert len(bd)
    parts = bd[["compute_ns", "memcpy_ns", "memset_ns", "communication_ns", "host_exposed_ns", "idle_ns"]]
    assert (parts >= 0).all().all()
    assert (parts.sum(axis=1) == bd["wall_ns"]).all()
    pct = bd[[c for c in bd.columns if c.endswith("_pct")]].sum(axis=1)
    assert np.allclose(pct, 100.0)


@pytest.mark.parametrize("name", TRACES)
def test_kernel_table_accounts_for_every_device_event(name):
    t, a = loaded(name)
    dev = TraceFrames(t).device
    assert a.kernels["count"].sum() == len(dev)
    assert a.kernels["total_ns"].sum() == dev["dur_ns"].sum()
    if len(a.kernels):
        assert a.kernels["pct"].sum() == pytest.approx(100.0)
        assert set(a.kernels["category"]) <= {
            "gemm",
            "attention",
            "conv",
            "elementwise",
            "reduction",
            "communication",
            "memory",
            "other",
        }
        assert a.kernel_categories["total_ns"].sum() == a.kernels["total_ns"].sum()


@pytest.mark.parametrize("name", TRACES)
def test_op_self_time_is_within_total_and_device_time_is_attributed(name):
    t, a = loaded(name)
    ops = a.ops
    assert (ops["host_self_ns"] <= ops["host_total_ns"]).all()
    dev = TraceFrames(t).device
    host_ids = set(TraceFrames(t).host.query("kind == 'cpu_op'")["event_id"])
    attributed = dev[dev["op_id"].isin(host_ids)]["dur_ns"].sum()
    assert ops["device_ns"].sum() == attributed


@pytest.mark.parametrize("name", TRACES)
def test_idle_and_temporal_parts_add_up(name):
    _, a = loaded(name)
    idle = a.idle
    assert (idle["host_wait_ns"] + idle["kernel_wait_ns"] + idle["other_ns"] == idle["idle_ns"]).all()
    tb = a.temporal
    assert (tb["idle_ns"] + tb["compute_ns"] + tb["non_compute_ns"] == tb["span_ns"]).all()


def test_steps_of_a_scheduled_cpu_capture():
    _, a = loaded("local/cpu_mlp_step4.json")
    assert a.step_stats["num_steps"] == len(a.steps) >= 1
    assert a.summary["wall_ns"] >= a.steps["dur_ns"].max()


def test_source_lines_attribute_host_time_to_user_lines():
    _, a = loaded("local/example_cpu_small.json")
    sl = a.source_lines
    assert len(sl) and (sl["host_ns"] >= 0).all()
    cost = (sl["host_ns"] + sl["device_ns"]).to_numpy()
    assert (np.diff(cost) <= 0).all()  # most costly first


def test_launch_statistics_on_a_gpu_trace():
    _, a = loaded("hta/sampled_rank-0.json.gz")
    ls = a.launch_summary
    assert ls["launches"] > 1000
    assert ls["launch_delay_mean_ns"] > 0 and ls["queue_depth_max"] >= 1
    assert (a.launches["launch_delay_p95_ns"] >= a.launches["launch_delay_p50_ns"]).all()


def test_overlap_of_communication_with_compute():
    _, a = loaded("hta/sampled_rank-0.json.gz")
    ov = a.overlap
    assert len(ov) == 1
    r = ov.iloc[0]
    assert r.overlapped_ns + r.exposed_comm_ns == r.comm_ns
    assert 0 <= r.overlap_pct <= 100


def test_memory_summary_peaks_against_device_capacity():
    _, a = loaded("tracelens/qwen_h100.json.gz")
    cuda = next(d for d in a.memory_summary["devices"] if d["device_type"] == "cuda")
    assert cuda["capacity_bytes"] == 85018279936
    assert cuda["peak_reserved_bytes"] >= cuda["peak_allocated_bytes"] > 0
    assert len(a.memory) > 1000


def test_empty_trace_analyzes_and_renders_without_error():
    from neuron_explorer.reports import json_report, markdown, text

    a = analyze(empty_trace())
    assert a.findings == []
    assert {r for r, _ in a.skipped} | set() <= set(a.rules_run)
    buf = io.StringIO()
    text.render(a, buf)
    assert "No problems detected" in buf.getvalue()
    assert "Findings (0)" in markdown.render(a)
    json.loads(json_report.render(a))


@pytest.mark.parametrize("name", TRACES)
def test_json_document_is_strict_json_with_the_documented_keys(name):
    from neuron_explorer.reports.json_report import render

    doc = json.loads(render(loaded(name)[1]))
    assert set(doc) == {
        "schema_version",
        "summary",
        "step_stats",
        "findings",
        "skipped",
        "rules_run",
        "rule_errors",
        "memory_summary",
        "launch_summary",
        "perf_summary",
        "tables",
        "fixes",
    }
    for f in doc["findings"]:
        assert set(f) >= {
            "rule_id",
            "severity",
            "title",
            "message",
            "metrics",
            "threshold",
            "cost_ns",
            "time_ranges",
            "event_ids",
            "source_lines",
            "recommendation",
        }
    assert doc["summary"]["verdict"].endswith(".")


def test_every_exported_field_has_a_unit_and_description():
    from neuron_explorer.reports.metrics_parquet import fields_table, tables

    for name in [*TRACES[:3], None]:
        a = analyze(empty_trace()) if name is None else loaded(name)[1]
        fields = fields_table(tables(a)).to_pylist()
        assert fields and all(f["description"] for f in fields)


def test_every_rule_and_threshold_is_documented():
    doc = (ROOT / "docs" / "rules.md").read_text()
    for r in all_rules().values():
        if r.family == "neuron":  # documented by the Trainium rules' authors
            continue
        assert f"`{r.id}`" in doc, r.id
        for name in r.thresholds:
            assert f"`{name}`" in doc, f"{r.id}.{name}"
        assert r.doc, f"{r.id} has no docstring"


def test_unknown_rule_selection_is_a_clear_error():
    from neuron_explorer.trace.errors import AnalysisError

    with pytest.raises(AnalysisError, match="unknown rule or family: no_such_rule"):
        analyze(empty_trace(), rules=["no_such_rule"])


def test_rule_selection_by_family_runs_only_that_family():
    _, _a = loaded("hta/alexnet_a100.json.gz")
    a = analyze(loaded("hta/alexnet_a100.json.gz")[0], rules=["memory"])
    assert set(a.rules_run) == {r.id for r in all_rules().values() if r.family == "memory"}
