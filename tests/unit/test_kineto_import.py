"""The Kineto JSON importer against real traces: nothing lost, links honest, units exact."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow.compute as pc
import pytest

import neuron_explorer as ne
import neuron_explorer.collectors.kineto.kineto_json as kineto_json
from neuron_explorer.reports.chrome_trace import write_chrome_trace
from tests._kineto_reference import category_counts, read_json
from tests.conftest import BUNDLED_TRACES, KINETO, all_shared_traces, shared_fixture

ALL_TRACES = BUNDLED_TRACES + [p for p in all_shared_traces() if p.stat().st_size < 1_500_000]
ids = [p.name for p in ALL_TRACES]


@pytest.mark.parametrize("path", ALL_TRACES, ids=ids)
def test_every_event_becomes_one_row_with_its_category_and_phase(path: Path) -> None:
    doc = read_json(path)
    trace = ne.load(path)
    df = trace.to_pandas(columns=["category", "ph"])
    got = Counter(zip(df["category"].astype(object).where(df["category"].notna(), None), df["ph"].astype(str)))
    assert got == category_counts(doc)


@pytest.mark.parametrize("path", ALL_TRACES, ids=ids)
def test_no_argument_is_dropped(path: Path) -> None:
    doc = read_json(path)
    trace = ne.load(path)
    expected = Counter(json.dumps(e["args"], sort_keys=True, default=str) for e in doc["traceEvents"] if "args" in e)
    args = [a for a in trace.events["args"].to_pylist() if a is not None]
    got = Counter(json.dumps(json.loads(a, parse_float=Decimal), sort_keys=True, default=str) for a in args)
    assert got == expected


@pytest.mark.parametrize("path", ALL_TRACES, ids=ids)
def test_timestamps_are_exact_nanoseconds(path: Path) -> None:
    doc = read_json(path)
    base = doc.get("baseTimeNanoseconds") or 0
    expected = sorted(base + int(Decimal(e["ts"]) * 1000) for e in doc["traceEvents"] if "ts" in e)
    trace = ne.load(path)
    has_ts = [e for e in doc["traceEvents"] if "ts" not in e]
    got = sorted(trace.events["start_ns"].to_pylist())
    if has_ts:  # events without ts (metadata) sit at the base time
        got = sorted(got)
        for _ in has_ts:
            got.remove(base)
    assert got == expected


@pytest.mark.parametrize("path", ALL_TRACES, ids=ids)
def test_export_then_import_gives_the_same_table(path: Path, tmp_path: Path) -> None:
    trace = ne.load(path)
    out = write_chrome_trace(trace, tmp_path / "exported.json.gz")
    again = ne.load(out)
    assert again.events.equals(trace.events)
    assert again.metadata["trace_metadata"] == trace.metadata["trace_metadata"]


@pytest.mark.parametrize("path", ALL_TRACES, ids=ids)
def test_streamed_decoding_matches_whole_file_decoding(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = ne.load(path)
    monkeypatch.setattr(kineto_json, "STREAM_THRESHOLD", 2_000)
    monkeypatch.setattr(kineto_json, "CHUNK_BYTES", 7_000)
    streamed = ne.load(path)
    assert streamed.events.equals(whole.events)
    assert streamed.metadata["trace_metadata"] == whole.metadata["trace_metadata"]


_DEVICE_CATEGORIES = ("kernel", "Kernel", "gpu_memcpy", "gpu_memset", "Memcpy", "Memset")


def _device_reference(doc: dict) -> tuple[list[dict], dict[int, dict], dict[int, dict]]:
    events = doc["traceEvents"]
    runtime = {
        e["args"]["correlation"]: e
        for e in events
        if str(e.get("cat", "")).lower().endswith(("runtime", "driver")) and "correlation" in e.get("args", {})
    }
    ops = {
        e["args"]["External id"]: e
        for e in events
        if e.get("cat") in ("cpu_op", "Operator") and "External id" in e.get("args", {})
    }
    device = [e for e in events if e.get("cat") in _DEVICE_CATEGORIES]
    return device, runtime, ops


@pytest.mark.parametrize("path", ALL_TRACES, ids=ids)
def test_device_work_links_to_its_launch_and_op_exactly_when_the_trace_has_them(path: Path) -> None:
    doc = read_json(path)
    device, runtime, ops = _device_reference(doc)
    trace = ne.load(path)
    df = trace.to_pandas(
        columns=["event_id", "kind", "category", "name", "correlation_id", "external_id", "launch_id", "op_id"]
    )
    by_id = df.set_index("event_id")
    dev = df[df["category"].isin(_DEVICE_CATEGORIES)]
    assert len(dev) == len(device)
    expected_launched = sum(1 for e in device if e.get("args", {}).get("correlation") in runtime)
    assert dev["launch_id"].notna().sum() == expected_launched
    linked = dev[dev["launch_id"].notna()]
    launch = by_id.loc[linked["launch_id"].astype(int)]
    assert (launch["correlation_id"].to_numpy() == linked["correlation_id"].to_numpy()).all()
    assert (launch["kind"].astype(str) == "runtime").all()
    # Where the launch names an op by External id and that op is in the trace, that is the op.
    named = linked[launch["external_id"].isin(list(ops)).to_numpy()]
    op_ext = by_id.loc[named["op_id"].astype(int), "external_id"].to_numpy()
    assert (op_ext == by_id.loc[named["launch_id"].astype(int), "external_id"].to_numpy()).all()
    # Never an invented link: an op link always points at a cpu_op.
    has_op = dev[dev["op_id"].notna()]
    assert (by_id.loc[has_op["op_id"].astype(int), "kind"].astype(str) == "cpu_op").all()


def test_backward_ops_link_to_their_forward_op_and_inherit_its_source() -> None:
    trace = ne.load(KINETO / "local" / "cpu_mlp_step4.json")
    df = trace.to_pandas(
        columns=["event_id", "kind", "name", "fwd_id", "src_file", "src_func", "src_precision"]
    ).set_index("event_id")
    nodes = df[df["name"].astype(str).str.fullmatch(r"\w+Backward\d+")]
    assert len(nodes) > 0 and nodes["fwd_id"].notna().all()
    fwd = df.loc[nodes["fwd_id"].astype(int)]
    # AddmmBackward0 differentiates an addmm (or the linear that called it).
    pairs = set(zip(nodes["name"].astype(str), fwd["name"].astype(str)))
    assert any(b.startswith("AddmmBackward") and f in ("aten::addmm", "aten::linear") for b, f in pairs)
    assert (nodes["src_precision"].astype(str) == "forward").all()
    assert (nodes["src_file"].astype(str).to_numpy() == fwd["src_file"].astype(str).to_numpy()).all()


def test_ops_take_the_innermost_user_function_from_python_frames() -> None:
    trace = ne.load(KINETO / "local" / "cpu_mlp_step4.json")
    ops = trace.ops(columns=["name", "src_file", "src_line", "src_func", "src_precision", "fwd_id"])
    forward_ops = ops[ops["fwd_id"].isna() & ops["src_file"].notna()]
    assert len(forward_ops) > 0
    assert not forward_ops["src_file"].astype(str).str.contains("site-packages|/torch/", regex=True).any()
    assert set(forward_ops["src_precision"].astype(str)) == {"function"}


def test_steps_come_from_profiler_step_annotations() -> None:
    trace = ne.load(KINETO / "local" / "cpu_mlp_step4.json")
    steps = trace.steps(columns=["name", "step", "start_ns", "dur_ns"])
    assert sorted(steps["step"].tolist()) == [2, 3]
    ops = trace.ops(columns=["step", "start_ns"])
    first, _second = steps.sort_values("step").itertuples()
    inside = ops[(ops["start_ns"] >= first.start_ns) & (ops["start_ns"] < first.start_ns + first.dur_ns)]
    assert (inside["step"] == 2).all()


def test_hip_trace_reads_as_hip_and_old_categories_as_kernels() -> None:
    amd = ne.load(KINETO / "hta" / "amd_mi250.json.gz")
    kinds = amd.to_pandas(columns=["kind", "device_type"])
    assert set(kinds.loc[kinds["kind"] == "kernel", "device_type"].astype(str)) == {"hip"}
    old = ne.load(KINETO / "hta" / "old_categories_inference_rank_1.json.gz").to_pandas(
        columns=["kind", "category", "launch_id"]
    )
    assert set(old.loc[old["category"] == "Kernel", "kind"].astype(str)) == {"kernel"}
    assert set(old.loc[old["category"] == "Runtime", "kind"].astype(str)) == {"runtime"}
    assert old.loc[old["kind"] == "kernel", "launch_id"].notna().all()


def test_mtia_device_events_read_as_mtia() -> None:
    trace = ne.load(shared_fixture("kineto/hta/mtia_inference_trace/mtia_inference_rank_0.json.gz"))
    df = trace.to_pandas(columns=["kind", "device_type", "category"])
    assert set(df.loc[df["category"] == "mtia_ccp_events", "device_type"].astype(str)) == {"mtia"}
    assert set(df.loc[df["category"] == "mtia_runtime", "kind"].astype(str)) == {"runtime"}


def test_graph_replayed_kernels_link_to_the_single_graph_launch() -> None:
    trace = ne.load(KINETO / "tracelens" / "vllm_cuda_graph_execution.json.gz")
    df = trace.to_pandas(columns=["event_id", "kind", "name", "correlation_id", "launch_id"]).set_index("event_id")
    kernels = df[df["kind"] == "kernel"]
    shared = kernels.groupby("correlation_id").size()
    graph_corr = shared[shared > 1].index
    assert len(graph_corr) > 0
    replayed = kernels[kernels["correlation_id"].isin(graph_corr)]
    launches = df.loc[replayed["launch_id"].dropna().astype(int), "name"].astype(str)
    assert launches.str.contains("Graph").all()
    from neuron_explorer.trace.summary import link_coverage

    links = link_coverage(trace)
    assert sum(links["unlinked_reasons"].values()) == links["device_events"] - links["launch_linked"]


def test_nanosecond_resolution_trace_keeps_every_digit() -> None:
    path = shared_fixture("kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    trace = ne.load(path)
    # 1712195495519689.047 us is not representable as a float64 to the nanosecond.
    assert 1712195495519689047 in set(trace.events["start_ns"].to_pylist())


def test_metadata_after_trace_events_and_missing_rank_are_handled(tmp_path: Path) -> None:
    doc = json.loads((KINETO / "local" / "example_cpu_small.json").read_text())
    events = doc.pop("traceEvents")
    reordered = {"traceEvents": events, **doc}
    path = tmp_path / "after.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump(reordered, fh)
    a = ne.load(KINETO / "local" / "example_cpu_small.json")
    b = ne.load(path)
    # json.dump re-spaces the args text; everything else is identical.
    assert b.events.drop_columns(["args"]).equals(a.events.drop_columns(["args"]))
    assert [json.loads(x) if x else x for x in b.events["args"].to_pylist()] == [
        json.loads(x) if x else x for x in a.events["args"].to_pylist()
    ]
    assert b.metadata["base_time_ns"] == doc["baseTimeNanoseconds"]
    assert b.metadata["rank"] == 0 and b.metadata["rank_known"] is False


def test_chrome_array_format_without_metadata_imports(tmp_path: Path) -> None:
    events = json.loads((KINETO / "local" / "example_cpu_small.json").read_text())["traceEvents"]
    path = tmp_path / "array.json"
    path.write_text(json.dumps(events))
    trace = ne.load(path)
    assert trace.num_events == len(events)


def test_memory_events_carry_sizes_and_their_op() -> None:
    trace = ne.load(KINETO / "local" / "example_cpu_small.json")
    mem = trace.to_pandas(kinds=["memory"], columns=["bytes", "mem_total_allocated_bytes", "op_id", "device_type"])
    assert len(mem) > 0
    assert mem["bytes"].notna().all() and mem["mem_total_allocated_bytes"].notna().all()
    # Every allocation happens inside the op that asked for it; frees may run outside any op
    # (a tensor dropped by Python), so they are not required to have one.
    assert mem.loc[mem["bytes"] > 0, "op_id"].notna().all()
    assert set(mem["device_type"].astype(str)) == {"cpu"}


def test_string_pids_survive_export(tmp_path: Path) -> None:
    trace = ne.load(KINETO / "hta" / "cpu_only_rank34.json.gz")
    pids = pc.unique(trace.events["pid"]).to_pylist()
    assert any(p < 0 for p in pids)  # "Spans"-like labels
    out = write_chrome_trace(trace, tmp_path / "x.json")
    text = out.read_text()
    assert json.loads(text)["traceEvents"]


def test_device_work_without_an_op_takes_its_launch_line(tmp_path: Path) -> None:
    # A CUDA graph replayed from user code: the launch sits under a user frame, not under an op.
    events = [
        {"ph": "X", "cat": "python_function", "name": "train.py(40): replay", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "cudaGraphLaunch",
            "pid": 1,
            "tid": 1,
            "ts": 110,
            "dur": 5,
            "args": {"correlation": 7},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 120,
            "dur": 20,
            "args": {"correlation": 7, "device": 0, "stream": 7, "graph id": 3},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "relu",
            "pid": 0,
            "tid": 7,
            "ts": 141,
            "dur": 5,
            "args": {"correlation": 7, "device": 0, "stream": 7, "graph id": 3},
        },
    ]
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"traceEvents": events}))
    kernels = ne.load(path).to_pandas(
        kinds=["kernel"], columns=["src_file", "src_line", "src_func", "src_precision", "op_id"]
    )
    assert kernels["op_id"].isna().all()
    assert set(zip(kernels["src_file"].astype(str), kernels["src_line"], kernels["src_precision"].astype(str))) == {
        ("train.py", 40, "launch")
    }
