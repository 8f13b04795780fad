"""Advice for the run that was traced: training advice only on a trace that trains, graph
capture only where the device has it, bandwidth (not overlap) when communication exceeds
compute, the link table's peak for slow collectives, and a DataLoader wait named inside the
library frame that holds it, its last (exhausted) call not counted as a batch.

Every figure is recomputed from the raw events (the Kineto JSON, or the recorded trace's own
rows) by code written here."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.analyzers.core.hardware import Hardware
from neuron_explorer.analyzers.ranks.links import peak_for

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "kineto"
INFERENCE = ["tracelens/qwen_h100.json.gz", "tracelens/qwen_mi300.json.gz", "tracelens/b200_eager.json.gz"]
TRAINING_ADVICE = ("fused=True", "foreach=True", "GradScaler", "checkpoint", "no_sync", "bucket_cap_mb", "optimizer")


def _raw(rel: str) -> dict:
    p = DATA / rel
    with gzip.open(p, "rt") if p.suffix == ".gz" else open(p) as fh:
        return json.load(fh)


@cache
def _analysis(rel: str, rules: tuple[str, ...] | None = None) -> Analysis:
    return analyze(ne.load(DATA / rel), rules=list(rules) if rules else None)


@pytest.mark.parametrize("rel", INFERENCE)
def test_an_inference_trace_gets_no_training_advice(rel: str) -> None:
    # independent: the raw trace has no backward op and no optimizer step
    names = {e.get("name", "") for e in _raw(rel)["traceEvents"]}
    assert not any("Backward" in n or n.startswith(("Optimizer.step#", "autograd::engine")) for n in names)
    a = _analysis(rel)
    assert a.findings, "the fixture should fire some rule"
    for f in a.findings:
        for word in TRAINING_ADVICE:
            assert word not in f.recommendation, (f.rule_id, word, f.recommendation)


def test_a_training_trace_keeps_its_training_advice() -> None:
    # df_index_resolver: V100, SGD, backward pass; fp32 GEMMs get float16 + GradScaler
    names = [e.get("name", "") for e in _raw("hta/df_index_resolver.json.gz")["traceEvents"]]
    assert sum(n.startswith("Optimizer.step#") for n in names) == 5
    a = _analysis("hta/df_index_resolver.json.gz", ("tensor_cores", "launch_bound", "exposed_comm"))
    by = {f.rule_id: f for f in a.findings}
    assert 'torch.amp.GradScaler("cuda")' in by["tensor_cores"].recommendation
    assert "fused=True" in by["launch_bound"].recommendation
    assert "no_sync()" in by["exposed_comm"].recommendation


def test_inference_reduced_precision_advice_has_no_gradscaler() -> None:
    # event_sync_multi_stream: A100, forward only; fp32 SGEMMs
    names = {e.get("name", "") for e in _raw("hta/event_sync_multi_stream.json.gz")["traceEvents"]}
    assert not any("Backward" in n or n.startswith("Optimizer.step#") for n in names)
    (f,) = _analysis("hta/event_sync_multi_stream.json.gz", ("tensor_cores",)).findings
    assert "GradScaler" not in f.recommendation and "optimizer" not in f.recommendation
    assert 'torch.autocast(device_type="cuda", dtype=torch.bfloat16)' in f.recommendation


@pytest.mark.parametrize(
    ("rel", "graphs"),
    [
        ("hta/df_index_resolver.json.gz", "CUDA graphs"),
        ("hta/amd_mi250.json.gz", "HIP graphs"),
        ("hta/old_categories_inference_rank_1.json.gz", "CUDA graphs"),
    ],
)
def test_graph_capture_advice_names_the_devices_own_graphs(rel: str, graphs: str) -> None:
    (f,) = [f for f in _analysis(rel, ("launch_bound", "host_bound")).findings]
    assert graphs in f.recommendation
    other = "HIP graphs" if graphs == "CUDA graphs" else "CUDA graphs"
    assert other not in f.recommendation


@pytest.mark.parametrize(
    "rel", ["local/cpu_mlp_step4.json", "local/example_cpu_small.json", "hta/mtia_inference_rank_0.json.gz"]
)
def test_no_graph_capture_advice_where_the_device_has_none(rel: str) -> None:
    for f in _analysis(rel).findings:
        assert "CUDA graph" not in f.recommendation and "HIP graph" not in f.recommendation, f.rule_id
        assert "reduce-overhead" not in f.recommendation, f.rule_id


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, -np.inf
    for s, e in sorted(intervals):
        if e > end:
            total += e - max(s, end)
            end = e
    return total


def test_exposed_comm_names_bandwidth_when_communication_exceeds_compute() -> None:
    # sampled_rank-0: NCCL kernels hold more device time than the compute kernels
    ev = [e for e in _raw("hta/sampled_rank-0.json.gz")["traceEvents"] if e.get("cat") == "kernel"]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith("nccl")]
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in ev if not e["name"].startswith("nccl")]
    comm_us, comp_us = _union(comm), _union(comp)
    assert comm_us > comp_us
    (f,) = _analysis("hta/sampled_rank-0.json.gz", ("exposed_comm",)).findings
    assert f.metrics["comm_ns"]["value"] == pytest.approx(comm_us * 1000, rel=0.01)
    assert f.metrics["compute_ns"]["value"] == pytest.approx(comp_us * 1000, rel=0.01)
    assert "Overlap communication" not in f.recommendation and "bandwidth" in f.recommendation
    assert "exceeds compute" in f.message


def test_exposed_comm_advises_overlap_when_compute_can_hide_it() -> None:
    ev = [e for e in _raw("hta/df_index_resolver.json.gz")["traceEvents"] if e.get("cat") == "kernel"]
    comm = _union([(e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith("nccl")])
    comp = _union([(e["ts"], e["ts"] + e["dur"]) for e in ev if not e["name"].startswith("nccl")])
    assert comm < comp
    (f,) = _analysis("hta/df_index_resolver.json.gz", ("exposed_comm",)).findings
    assert f.recommendation.startswith("Overlap communication with compute")


def test_link_table_peaks() -> None:
    def peak(name: str, dtype: str, n: int, instance: str | None = None) -> float | None:
        link, _ = peak_for(Hardware(dtype, name), n, instance)
        return None if link is None else link.busbw_gbps

    # vendor figures are both directions; NCCL's bus bandwidth is compared per direction
    assert peak("Tesla V100-SXM2-32GB", "cuda", 8) == 150.0
    assert peak("NVIDIA A100-PG509-200", "cuda", 2) == 300.0
    assert peak("NVIDIA H100 80GB HBM3", "cuda", 8) == 450.0
    assert peak("NVIDIA B200", "cuda", 8) == 900.0
    assert peak("AMD Instinct MI300X", "hip", 8) == 448.0
    assert peak("NVIDIA H100 PCIe", "cuda", 4) == 64.0
    # a group larger than a node: the network, known only from the instance type
    assert peak("NVIDIA H100 80GB HBM3", "cuda", 16) is None
    assert peak("NVIDIA H100 80GB HBM3", "cuda", 16, "p5.48xlarge") == 400.0
    assert peak("NVIDIA A100-SXM4-40GB", "cuda", 64, "p4d.24xlarge") == 50.0
    assert peak("", "cpu", 2) is None


def test_slow_collective_fires_with_the_tables_peak_on_an_a100_trace() -> None:
    # nccl_data: A100 (NVLink 3: 300 GB/s per direction), a group of 2; no threshold given
    size = {"Float": 4, "Long": 8}
    busbw = []
    for e in _raw("hta/nccl_data.json.gz")["traceEvents"]:
        args = e.get("args", {})
        if e.get("cat") != "kernel" or "Collective name" not in args:
            continue
        nbytes = max(args["In msg nelems"], args["Out msg nelems"]) * size[args["dtype"]]
        n = args["Group size"]
        name = args["Collective name"]
        factor = (
            2 * (n - 1) / n
            if name == "allreduce"
            else (n - 1) / n
            if name in ("allgather", "reduce_scatter", "all_to_all")
            else 1.0
        )
        if nbytes >= 1 << 20:
            busbw.append(nbytes * factor / (e["dur"] * 1000))  # bytes per ns = GB/s
    slow = [b for b in busbw if b < 0.25 * 300]
    (f,) = _analysis("hta/nccl_data.json.gz", ("slow_collective",)).findings
    assert f.metrics["peak_busbw_gbps"]["value"] == 300.0
    assert f.metrics["slow_collectives"]["value"] == len(slow)
    assert f.metrics["median_busbw_gbps"]["value"] == pytest.approx(float(np.median(slow)), rel=1e-3)
    assert "intra-node" in f.message and "NVLink 3" in f.message
    assert "bucket_cap_mb" in f.recommendation  # the trace trains (backward ops, optimizer steps)


def test_slow_collective_is_skipped_when_the_link_is_unknown() -> None:
    a = _analysis("hta/sampled_rank-0.json.gz", ("slow_collective",))
    assert not a.findings and "link" in a.skipped[0][1]


# ------------------------------------------------------------------ a DataLoader wait in a library
_LIBRARY = '''
"""A library-like package: a slow pure-Python resize, like scipy.ndimage.zoom per sample."""
import time


def zoom(x, factor):
    t = time.perf_counter()
    acc = 0.0
    while time.perf_counter() - t < 0.004:
        acc += 1.0
    return x * factor
'''
_SCRIPT = """
import sys
import torch
from torch.utils.data import DataLoader, Dataset
import fakezoom
import neuron_explorer as ne


class Images(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, i):
        x = torch.ones(16)
        return fakezoom.zoom(x, 2.0)  # TRANSFORM


def main(out):
    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 4)
    loader = DataLoader(Images(), batch_size=4, num_workers=0)
    with torch.no_grad(), ne.profile(activities=[torch.profiler.ProfilerActivity.CPU], output=out, on_error="raise"):
        for x in loader:
            model(x)


if __name__ == "__main__":
    main(sys.argv[1])
"""


@pytest.fixture(scope="module")
def library_loader(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Record a loop over a DataLoader whose transform spends its time in a package installed in
    a site-packages folder (the whole loop, so the loader's final exhausted call is traced)."""
    tmp = tmp_path_factory.mktemp("libloader")
    pkg = tmp / "site-packages" / "fakezoom"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(_LIBRARY))
    script = tmp / "train_loader.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    out = tmp / "trace.parquet"
    env_path = f"{ROOT}{':' + str(tmp / 'site-packages')}"
    proc = subprocess.run(
        [sys.executable, str(script), str(out)],
        cwd=tmp,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, script


def test_dataloader_wait_is_named_inside_the_library_with_the_users_line(library_loader: tuple[Path, Path]) -> None:
    out, script = library_loader
    ev = pq.read_table(out, columns=["event_id", "kind", "name", "start_ns", "dur_ns", "parent_id"]).to_pandas()
    ev["name"] = ev["name"].astype(str)
    spans = ev[ev["name"].str.startswith("enumerate(DataLoader)")]
    # independent: a span that fetched a batch has a fetch frame under it (via parent links)
    parent = dict(zip(ev["event_id"], ev["parent_id"]))
    in_span: dict[int, int] = {}
    span_ids = set(spans["event_id"])
    for eid in ev["event_id"]:
        p = parent.get(eid)
        while p is not None and p == p and p >= 0:
            if p in span_ids:
                in_span[eid] = int(p)
                break
            p = parent.get(p)
    fetching = {in_span[e] for e, n in zip(ev["event_id"], ev["name"]) if e in in_span and "fetch" in n}
    assert len(spans) == 4 and len(fetching) == 3  # 12 samples / batch 4, then StopIteration
    zoom = ev[ev["name"].str.endswith(": zoom")]
    child = ev[ev["parent_id"].isin(zoom["event_id"])].groupby("parent_id")["dur_ns"].sum()
    zoom_self = float((zoom.set_index("event_id")["dur_ns"] - child.reindex(zoom["event_id"]).fillna(0)).sum())
    share = 100.0 * zoom_self / float(spans["dur_ns"].sum())
    assert share > 50

    a = analyze(ne.load(out), rules=["dataloader_stall"], thresholds={"dataloader_stall.max_pct": 1})
    (f,) = a.findings
    assert f.metrics["batches"]["value"] == 3
    load_ns = float(a.attribution["data_loading_ns"].sum())
    assert f.metrics["per_batch_ns"]["value"] == pytest.approx(load_ns / 3)
    assert f.metrics["library_share_pct"]["value"] == pytest.approx(share, abs=0.5)
    assert "inside fakezoom.zoom (library)" in f.title
    line = next(i for i, t in enumerate(script.read_text().splitlines(), 1) if "# TRANSFORM" in t)
    assert f"train_loader.py:{line}" in f.message
    assert "StopIteration" in f.message
    # the library file is never named as the user's line
    assert all("site-packages" not in str(x["file"]) and "fakezoom" not in str(x["file"]) for x in f.source_lines)
    # and the library's Python is not the line's own Python: no host hotspot at the calling line
    b = analyze(ne.load(out), rules=["host_hotspot"])
    assert not b.findings
    sl = b.source_lines
    own = sl[(sl["src_line"] == line) & sl["src_file"].astype(str).str.endswith("train_loader.py")]
    assert float(own["python_ns"].sum()) < 0.1 * zoom_self


# ------------------------------------------------------------------ one line holding all the time
_BENCH = """
import sys
import torch
import neuron_explorer as ne


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(64, 256)
        self.down = torch.nn.Linear(256, 64)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))  # ONE LINE


def main(out):
    torch.set_num_threads(1)
    model = torch.nn.Sequential(Block(), Block())
    x = torch.randn(256, 64)
    with torch.no_grad(), ne.profile(activities=[torch.profiler.ProfilerActivity.CPU], output=out, on_error="raise"):
        for _ in range(20):
            model(x)


if __name__ == "__main__":
    main(sys.argv[1])
"""


def test_a_line_holding_all_the_time_is_split_by_module_and_op(tmp_path: Path) -> None:
    from neuron_explorer.analyzers.core.context import TraceFrames
    from neuron_explorer.analyzers.rules._evidence import lines_from
    from neuron_explorer.reports.location import Locations

    script = tmp_path / "bench.py"
    script.write_text(textwrap.dedent(_BENCH))
    out = tmp_path / "bench.parquet"
    proc = subprocess.run(
        [sys.executable, str(script), str(out)], cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(i for i, t in enumerate(script.read_text().splitlines(), 1) if "# ONE LINE" in t)
    # independent: self time of each framework op (duration minus its direct children), by module and op
    ev = pq.read_table(
        out, columns=["event_id", "kind", "name", "dur_ns", "parent_id", "src_file", "src_line", "src_module"]
    ).to_pandas()
    ops = ev[ev["kind"].astype(str) == "cpu_op"].copy()
    kids = ev[ev["kind"].astype(str) == "cpu_op"].groupby("parent_id")["dur_ns"].sum()
    ops["self"] = ops["dur_ns"] - ops["event_id"].map(kids).fillna(0)
    at_line = ops[(ops["src_line"] == line) & ops["src_file"].astype(str).str.endswith("bench.py")]
    assert at_line["self"].sum() > 0.9 * ops.loc[ops["src_file"].notna(), "self"].sum()
    ref = at_line.groupby([at_line["src_module"].astype(str), at_line["name"].astype(str)])["self"].sum().sort_values()
    frames = TraceFrames(ne.load(out))
    host = frames.host
    cpu = host[(host["kind"] == "cpu_op").to_numpy()]
    got = lines_from(cpu, frames.host_self_ns.reindex(cpu.index).to_numpy())
    assert (got[0]["module"], got[0]["op"]) == ref.index[-1]
    assert got[0]["line"] == line and got[0]["value"] == int(ref.iloc[-1])
    text = Locations.for_files([str(script)]).finding_line(got[0])
    assert text.endswith(f" in {ref.index[-1][0]}: {ref.index[-1][1]}") and f":{line}" in text


# ------------------------------------------------------------------ DtoD copies from compiled code
def test_exposed_dtod_copies_name_the_compiled_region_that_issued_them() -> None:
    from tests.unit.graph_layout import Layout

    lay = Layout()
    lay.host("step", "ProfilerStep#1", 0, 1000)
    region = lay.host("annotation", "Torch-Compiled Region: 0/1", 10, 400)
    inner = lay.host("annotation", "CompiledFunction", 20, 390, parent=region)
    copies = []  # (start, end, launched in the region)
    t = 30.0
    for _i in range(6):  # six copies launched in the compiled function, each alone on the device
        call = lay.host("runtime", "cudaMemcpyAsync", t, t + 5, parent=inner)
        lay.device("Memcpy DtoD (Device -> Device)", 7, t + 100, t + 140, call, kind="memcpy", memcpy_kind="DtoD")
        copies.append((t + 100, t + 140, True))
        t += 50
    k = lay.host("runtime", "cudaLaunchKernel", 500, 505)
    lay.device("gemm_kernel", 7, 510, 700, k)
    # one copy outside compiled code, half under the kernel
    c = lay.host("runtime", "cudaMemcpyAsync", 600, 605)
    lay.device("Memcpy DtoD (Device -> Device)", 7, 650, 750, c, kind="memcpy", memcpy_kind="DtoD")
    copies.append((650, 750, False))
    a = analyze(lay.trace(), rules=["exposed_dtod"])
    (f,) = a.findings
    # by hand: each compiled copy 40 us alone; the last one alone from 700 to 750
    exposed_us = sum(e - s for s, e, _ in copies[:6]) + (750 - 700)
    assert f.metrics["exposed_dtod_ns"]["value"] == exposed_us * 1000
    assert f.metrics["exposed_dtod_pct"]["value"] == pytest.approx(100.0 * exposed_us / 1000)
    assert f.metrics["dtod_copies"]["value"] == 7 and f.metrics["compiled_copies"]["value"] == 6
    assert f.metrics["compiled_copy_ns"]["value"] == 6 * 40 * 1000
    assert "Torch-Compiled Region: 0/1 (6)" in f.message and "Torch-Compiled Region: 0/1" in f.title
    assert f.category == "copy"


def test_exposed_dtod_copies_outside_compiled_code_name_no_region() -> None:
    # b200_eager: 146 DtoD copies, none launched inside its compiled region (checked from the raw JSON)
    raw = _raw("tracelens/b200_eager.json.gz")["traceEvents"]
    regions = [
        (e["ts"], e["ts"] + e["dur"]) for e in raw if e.get("ph") == "X" and e["name"].startswith("Torch-Compiled")
    ]
    calls = {
        e["args"]["correlation"]: e["ts"]
        for e in raw
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    dtod = [e for e in raw if e.get("cat") == "gpu_memcpy" and "DtoD" in e["name"]]
    assert len(dtod) == 146
    assert not any(a <= calls[e["args"]["correlation"]] < b for e in dtod for a, b in regions)
    a = analyze(
        ne.load(DATA / "tracelens/b200_eager.json.gz"), rules=["exposed_dtod"], thresholds={"exposed_dtod.min_pct": 0}
    )
    for f in a.findings:
        assert f.metrics["compiled_copies"]["value"] == 0 and "Compiled" not in f.title


def test_exposed_dtod_time_on_b200_equals_the_raw_json() -> None:
    # no steps: the whole trace; time a DtoD copy runs with no kernel on its device
    raw = _raw("tracelens/b200_eager.json.gz")["traceEvents"]
    exposed = 0.0
    for dev in {e["args"].get("device") for e in raw if e.get("cat") in ("kernel", "gpu_memcpy")}:
        kern = [
            (e["ts"], e["ts"] + e["dur"]) for e in raw if e.get("cat") == "kernel" and e["args"].get("device") == dev
        ]
        cp = [(e["ts"], e["ts"] + e["dur"]) for e in raw
              if e.get("cat") == "gpu_memcpy" and "DtoD" in e["name"] and e["args"].get("device") == dev]  # fmt: skip
        exposed += _union(kern + cp) - _union(kern)
    a = analyze(
        ne.load(DATA / "tracelens/b200_eager.json.gz"), rules=["exposed_dtod"], thresholds={"exposed_dtod.min_pct": 0}
    )
    (f,) = a.findings
    assert f.metrics["exposed_dtod_ns"]["value"] == pytest.approx(exposed * 1000, rel=0.01)
    assert f.metrics["dtod_copies"]["value"] == 146


@pytest.mark.parametrize("on_device", [True, False])
def test_warmup_advice_names_cudnn_autotuning_only_where_cudnn_runs(on_device: bool) -> None:
    from tests.unit.graph_layout import Layout

    lay = Layout()
    durations_ms = [400, 100, 100, 100, 100]  # the first step 300 ms over the steady median
    t = 0.0
    for i, d in enumerate(durations_ms):
        step = lay.host("step", f"ProfilerStep#{i}", t * 1000, (t + d) * 1000, step=i)
        op = lay.host("cpu_op", "aten::mm", t * 1000 + 1, (t + d) * 1000 - 1, parent=step, step=i)
        if on_device:
            call = lay.host("runtime", "cudaLaunchKernel", t * 1000 + 2, t * 1000 + 3, parent=op, step=i)
            lay.device("gemm", 7, t * 1000 + 4, (t + d) * 1000 - 2, call)
        t += d
    a = analyze(lay.trace(), rules=["warmup_cost"])
    (f,) = a.findings
    assert f.metrics["warmup_extra_ns"]["value"] == pytest.approx(300e6, rel=0.01)
    assert ("cudnn.benchmark" in f.recommendation) == on_device


@pytest.mark.parametrize(
    ("device_type", "expect", "absent"),
    [("cuda", "CUDA graph", "HIP graph"), ("hip", "HIP graph", "CUDA graph"), ("cpu", "torch.compile", "graph")],
)
def test_op_below_roofline_names_graph_capture_only_where_the_device_has_it(
    device_type: str, expect: str, absent: str
) -> None:
    import pandas as pd

    from neuron_explorer.analyzers.rules.perf import likely_cause

    # a GEMM too small to fill the device (2 x 2 tiles of 128 for 132 SMs): the advice batches it,
    # or runs other work beside it, captured in a graph where the device has graphs
    row = pd.Series({"category": "gemm", "compute_dtype": "bf16", "params": json.dumps({"M": 256, "N": 256, "K": 4096}),
                     "bound": "compute", "data_moved_mb": 10.0})  # fmt: skip
    _, fix = likely_cause(row, None, 0, Hardware(device_type, sms=132), training=False)
    assert expect in fix and absent not in fix


def test_op_below_roofline_gives_no_gradscaler_to_inference() -> None:
    import pandas as pd

    from neuron_explorer.analyzers.perf.devices import lookup
    from neuron_explorer.analyzers.rules.perf import likely_cause

    v100 = lookup("V100")
    assert v100 is not None and not v100.supports("bf16")
    row = pd.Series(
        {"category": "gemm", "compute_dtype": "fp32", "params": "{}", "bound": "compute", "data_moved_mb": 10.0}
    )
    hw = Hardware("cuda", "Tesla V100-SXM2-32GB", 7, 0)
    assert "GradScaler" in likely_cause(row, v100, 0, hw, training=True)[1]
    assert "GradScaler" not in likely_cause(row, v100, 0, hw, training=False)[1]


def test_a_graph_launchs_kernels_are_not_launch_overhead() -> None:
    # The H200 capture trace replays a CUDA graph 3 times beside one eager forward. The short
    # share is recomputed here over the kernels whose launch call is not cudaGraphLaunch (one
    # graph launch runs all its kernels), and the advice is the graph the step already has.
    doc = _raw("h200/cuda_graph.json.gz")
    spans = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    calls = {
        e["args"]["correlation"]: e["name"]
        for e in spans
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    device = [e for e in spans if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    one_by_one = [
        e for e in device if not calls.get(e["args"].get("correlation"), "cudaGraphLaunch").endswith("GraphLaunch")
    ]
    by_graph = [e for e in device if calls.get(e["args"].get("correlation"), "").endswith("GraphLaunch")]
    assert by_graph and one_by_one
    short = 100.0 * sum(e["dur"] < 10.0 for e in one_by_one) / len(one_by_one)
    f = next(f for f in _analysis("h200/cuda_graph.json.gz").findings if f.rule_id == "launch_bound")
    assert f.metrics["short_kernel_pct"]["value"] == pytest.approx(short, abs=0.01)
    assert "into the graph the step already replays" in f.recommendation
    assert "reduce-overhead" not in f.recommendation
