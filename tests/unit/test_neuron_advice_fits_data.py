"""Neuron rules say only what the profile supports (issue 42): the runtime's DMA is not the
user's, the dtype advice follows the MATMULs' own operands, the fixed wait gets the cause the
data supports. Run on the real trn2 exports and on the matmul documents written to the real
inf2 conventions; every figure is recounted here from the raw rows.
"""

from __future__ import annotations

import gzip
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.collectors.neuron import import_neuron_profile
from neuron_explorer.collectors.neuron.synth.matmul import MatmulSpec, write_matmul_json
from tests.conftest import TRN2, neuron_kernel_from_rows


def _analyze(path: Path):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_neuron_profile(path)
        return trace, analyze(trace)


def _raw(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def matmul(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("mm") / "matmul_N1024.json"
    doc = write_matmul_json(path, MatmulSpec(n=1024))
    return path, doc, *_analyze(path)


def _cases() -> list[Path]:
    return [TRN2 / "baseline_bf16_s1024.json.gz", TRN2 / "fused_fp32_s512.json.gz"]


@pytest.mark.parametrize("path", _cases(), ids=lambda p: p.name.split(".")[0])
def test_no_small_dma_finding_blames_the_runtimes_queues(path: Path) -> None:
    trace, a = _analyze(path)
    doc = _raw(path)
    runtime = {r["id"] for r in doc["dma"] if r["queue_type"] == "instruction" or r["transfer_size"] <= 8}
    assert runtime  # both kinds are in the file
    ev = trace.to_pandas().set_index("event_id")
    for f in a.findings:
        if f.rule_id != "neuron_small_dma":
            continue
        shown = ev.loc[f.event_ids]
        assert (shown["bytes"] > 8).all()
        streams = {s["stream"] for s in trace.metadata["neuron"]["streams"] if s.get("queue_type") == "instruction"}
        assert not set(shown["stream"]) & streams
        # Its count is of the user's transfers: every row but the runtime's.
        users = [r for r in doc["dma"] if r["queue_type"] != "instruction" and r["transfer_size"] > 8]
        small = [r for r in users if r["transfer_size"] < 4096]
        assert f"{len(small):,} of {len(users):,} transfers" in f.message


def test_the_runtimes_instruction_fetch_is_never_a_small_dma(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, _, a = matmul
    fetch = [r for r in doc["dma"] if r.get("queue_type") == "instruction"]
    assert sum(r["transfer_size"] for r in fetch) == 1036  # 1,024 + 8 + 4 B: small, and not the user's
    assert "neuron_small_dma" not in {f.rule_id for f in a.findings}


def test_low_mfu_names_the_fp32_matmuls_and_nki_casts_on_a_kernel_without_hlo() -> None:
    path = TRN2 / "baseline_bf16_s1024.json.gz"
    doc = _raw(path)
    mm = [r for r in doc["instruction"] if r["opcode"] == "MATMUL"]
    fp32 = sum(1 for r in mm if re.search(r"\bsrc=fp32@", r["operands"]))
    assert not [r for r in doc["instruction"] if r["hlo_name"]]  # no HLO: an NKI kernel
    _, a = _analyze(path)
    (f,) = [f for f in a.findings if f.rule_id == "neuron_low_mfu"]
    fp32_ns = sum(r["duration"] for r in mm if re.search(r"\bsrc=fp32@", r["operands"]))
    all_ns = sum(r["duration"] for r in mm)
    assert (
        f"{fp32:,} of {len(mm):,} MATMULs read fp32 operands (src=fp32, {fp32_ns / 1e3:,.1f} us of their {all_ns / 1e3:,.1f} us)"
        in f.message
    )
    assert "nl.load(tensor, dtype=nl.bfloat16)" in f.recommendation
    assert "neuronx-cc" not in f.recommendation and "--model-type" not in f.recommendation
    assert "Shown as error" not in f.message or "Shown as info" not in f.message
    (t,) = [f for f in a.findings if f.rule_id == "neuron_transpose_matmul"]
    assert "nl.load_transpose2d" in t.recommendation and ".t()" not in t.recommendation


def test_low_mfu_never_advises_casting_16_bit_matmuls(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, _, a = matmul
    mm = [r for r in doc["instruction"] if r["opcode"] == "MATMUL"]
    assert all("src=fp16@" in r["operands"] for r in mm)
    for f in a.findings:
        text = f.message + " " + f.recommendation
        assert "auto-cast" not in text and "bfloat16" not in text and "--model-type" not in text
    (f,) = [f for f in a.findings if f.rule_id == "neuron_low_mfu"]
    assert f"{len(mm):,} of {len(mm):,} MATMULs already read 16-bit operands" in f.message


def test_the_fixed_wait_is_information_with_its_own_bounds_and_no_batching_advice(matmul) -> None:  # type: ignore[no-untyped-def]
    _, doc, _, a = matmul
    start, end = neuron_kernel_from_rows(doc)
    work_before = [
        r["timestamp"] + r["duration"]
        for r in [*doc["instruction"], *doc["dma"]]
        if r.get("opcode") != "EVENT_SEMAPHORE" and r["timestamp"] + r["duration"] <= start - 1_000_000
    ]
    wait = start - max(work_before)
    (f,) = [f for f in a.findings if f.rule_id == "neuron_fixed_wait"]
    assert f.severity == "info" and f.cost_ns == 0
    assert f.metrics["fixed_wait_ns"]["value"] == wait
    assert f.metrics["kernel_time_ns"]["value"] == end - start
    assert f.time_ranges == [[max(work_before), start]]
    assert "not paid per execution" in f.message
    assert "batch" not in (f.message + f.recommendation).lower()


@pytest.mark.parametrize("path", _cases(), ids=lambda p: p.name.split(".")[0])
def test_no_fixed_wait_on_files_that_have_none(path: Path) -> None:
    _, a = _analyze(path)
    assert "neuron_fixed_wait" not in {f.rule_id for f in a.findings}
