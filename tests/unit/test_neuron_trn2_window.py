"""The kernel window on real trn2 exports (tests/data/neuron/trn2_attention, issue 42).

Eight ``neuron-profile view --output-format json`` files of one attention kernel (baseline and
fused, bf16 and fp32, sequence 512 and 1024) captured on a trn2 (two physical cores per logical
core, profiler 2.28). Every expected value is recomputed here from the raw gzip JSON, by hand:
the kernel layer's row of ``layer_summary`` sets the start, the last instruction that is not a
semaphore wait (or DMA packet) runs on ~1.7 us past the layer's end (the runtime's epilogue:
DRAIN, NOTIFY, COMPARE_BRANCH), which the window leaves to ``after_kernel_ns``, and AWS's own
per-layer MFU bounds ours.
"""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from neuron_explorer.collectors.neuron import import_neuron_profile
from tests.conftest import TRN2

FILES = sorted(TRN2.glob("*.json.gz"))


def _raw(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as f:
        return json.load(f)


def _metrics(path: Path) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_neuron_profile(path)
    return trace.metadata["neuron"]["devices"][0]


def _kernel_layer(doc: dict[str, Any]) -> dict[str, Any]:
    """The row below a subgraph (``/sg00/Unknown``), not a subgraph's own row (``/sg00``)."""
    rows = [r for r in doc["layer_summary"] if len([p for p in r["name"].split("/") if p]) >= 2]
    assert len(rows) == 1, [r["name"] for r in doc["layer_summary"]]
    return rows[0]


def test_the_files_are_what_the_conventions_say() -> None:
    assert len(FILES) == 8
    for path in FILES:
        doc = _raw(path)
        names = sorted(r["name"] for r in doc["layer_summary"])
        assert names == ["/sg00", "/sg00/Unknown", "/sg01"], path.name
        meta = doc["metadata"][0]
        assert meta["ticks_per_nanosec"] == 1000 and meta["num_physical_cores"] == 2
        first = min(r["timestamp"] for r in doc["instruction"])
        assert first < 200  # device-relative ns: the first instruction starts near 0


@pytest.mark.parametrize("path", FILES, ids=[p.name.split(".")[0] for p in FILES])
def test_the_kernel_window_is_the_kernel_layer_to_the_last_work(path: Path) -> None:
    doc, dev = _raw(path), _metrics(path)
    m = dev["metrics"]
    layer = _kernel_layer(doc)
    ends = [r["timestamp"] + r["duration"] for r in doc["instruction"] if r["opcode"] != "EVENT_SEMAPHORE"]
    ends += [r["timestamp"] + r["duration"] for r in doc["dma"]]
    assert m["kernel_start_ns"] == layer["start"]
    assert m["kernel_end_ns"] == layer["end"]
    assert m["kernel_time_ns"] == layer["end"] - layer["start"]
    assert abs(layer["duration"] - m["kernel_time_ns"]) <= 1  # AWS rounds its duration apart
    assert m["kernel_window_source"] == "layer"
    assert dev["kernel_window"]["layer"] == "/sg00/Unknown"
    # What runs after the layer is the epilogue: no MATMUL, no layer, ~1.7 us.
    tail = [r for r in doc["instruction"] if r["timestamp"] + r["duration"] > layer["end"]]
    assert tail and not [r for r in tail if r["opcode"] == "MATMUL" or r["layer"]]
    assert 1_000 < max(ends) - layer["end"] < 3_000
    assert m["after_kernel_ns"] == doc["metadata"][0]["last_hw_timestamp"] - layer["end"]
    # No MATMUL runs before the kernel layer starts.
    first_mm = min(r["timestamp"] for r in doc["instruction"] if r["opcode"] == "MATMUL")
    assert first_mm >= layer["start"]
    assert m["preamble_matmul_instructions"] == 0
    assert m["kernel_matmul_instructions"] == sum(1 for r in doc["instruction"] if r["opcode"] == "MATMUL")


@pytest.mark.parametrize("path", FILES, ids=[p.name.split(".")[0] for p in FILES])
def test_mfu_over_the_kernel_scales_aws_mfu_and_agrees_with_the_layer_mfu(path: Path) -> None:
    doc, m = _raw(path), _metrics(path)["metrics"]
    s, layer = doc["summary"][0], _kernel_layer(doc)
    total_ns = s["total_time"] * 1e9
    kernel_ns = layer["end"] - layer["start"]
    # total_time is float seconds (102669.84 ns); the window uses the integer span.
    assert m["mfu_kernel_pct"] == pytest.approx(100 * s["mfu_estimated_percent"] * total_ns / kernel_ns, rel=1e-4)
    # AWS's layer MFU (its own FLOP count over the layer's duration) within 25%.
    assert m["mfu_kernel_pct"] == pytest.approx(100 * layer["tensor_engine_mfu"], rel=0.25)


def test_the_fused_kernel_is_faster_and_says_so_in_its_window() -> None:
    base = _metrics(TRN2 / "baseline_bf16_s1024.json.gz")["metrics"]
    fused = _metrics(TRN2 / "fused_bf16_s1024.json.gz")["metrics"]
    raw_base = _kernel_layer(_raw(TRN2 / "baseline_bf16_s1024.json.gz"))["duration"]
    raw_fused = _kernel_layer(_raw(TRN2 / "fused_bf16_s1024.json.gz"))["duration"]
    assert raw_fused < 0.7 * raw_base  # 87.7 -> 51.3 us in AWS's layer rows
    assert fused["kernel_time_ns"] < 0.7 * base["kernel_time_ns"]


def test_dma_queues_are_named_only_where_dma_queues_info_names_one() -> None:
    path = TRN2 / "fused_bf16_s1024.json.gz"
    doc, dev = _raw(path), _metrics(path)
    names: dict[tuple[str, int], set[str]] = {}
    for q in doc["dma_queues_info"]:
        names.setdefault((q["subgraph"], int(q["q_idx"])), set()).add(q["q_name"])
    expected: dict[tuple[int, str], str] = {}  # (physical core, queue name) -> row queue_type
    for r in doc["dma"]:
        key = (r["subgraph"], int(r["dma_queue"]))
        found = names.get(key, set())
        name = next(iter(found)) if len(found) == 1 else f"queue {key[1]}"
        expected[(int(r["subgraph"][2:]), name)] = r["queue_type"]
    got = {(r["core"], r["unit"]): r["queue_type"] for r in dev["engines"] if r["type"] == "dma"}
    assert got == expected
    # q_idx 14 of sg00 is two queues in dma_queues_info: neither name is borrowed.
    assert (0, "queue 14") in got and got[(0, "queue 14")] == "instruction"
    assert got[(0, "qGpSimdDynamic")] == "software_dynamic"  # the rows' type, not q_type "weights"
