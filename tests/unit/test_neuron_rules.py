"""Trainium rules: a planted bottleneck is diagnosed by the right rule, and only by it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.collectors.neuron import import_neuron_profile, synth

NEURON_RULES = (
    "neuron_low_mfu",
    "neuron_engine_bottleneck",
    "neuron_dma_bound",
    "neuron_small_dma",
    "neuron_spill_reload",
    "neuron_exposed_collectives",
    "neuron_transpose_matmul",
)


def _findings(tmp_path: Path, spec: synth.SynthSpec, fmt: str = "parquet") -> dict[str, list]:
    if fmt == "parquet":
        synth.write_parquet_export(tmp_path / "p", spec)
        path = tmp_path / "p"
    else:
        synth.write_legacy_json(tmp_path / "p.json", spec)
        path = tmp_path / "p.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = import_neuron_profile(path)
    a = analyze(trace, rules=list(NEURON_RULES))
    out: dict[str, list] = {r: [] for r in NEURON_RULES}
    for f in a.findings:
        out[f.rule_id].append(f)
    return out


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_planted_dma_bound_profile_is_diagnosed_as_dma_bound(tmp_path: Path, fmt: str) -> None:
    found = _findings(tmp_path, synth.SynthSpec(bottleneck="dma"), fmt)
    (f,) = found["neuron_dma_bound"]
    assert f.metrics["dma_bound_share_pct"]["value"] > 50
    assert f.time_ranges and f.cost_ns > 0 and f.event_ids
    assert found["neuron_low_mfu"], "a DMA-bound run also has low MFU"
    assert not found["neuron_engine_bottleneck"]


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_planted_tensor_bound_profile_is_diagnosed_as_engine_bottleneck(tmp_path: Path, fmt: str) -> None:
    found = _findings(tmp_path, synth.SynthSpec(bottleneck="tensor"), fmt)
    (f,) = found["neuron_engine_bottleneck"]
    assert "Tensor engine" in f.title
    assert f.metrics["tensor_active_pct"]["value"] > 70
    assert f.source_lines and f.source_lines[0]["line"] == 42
    assert not found["neuron_dma_bound"]
    assert not found["neuron_low_mfu"], "a Tensor-bound run at 80% efficiency has healthy MFU"


def test_balanced_profile_raises_no_neuron_finding(tmp_path: Path) -> None:
    found = _findings(tmp_path, synth.SynthSpec(bottleneck="balanced"))
    assert not any(found.values()), {k: [f.title for f in v] for k, v in found.items() if v}


def test_spill_reload_above_25_percent_of_hbm_reads_is_reported(tmp_path: Path) -> None:
    found = _findings(tmp_path, synth.SynthSpec(bottleneck="balanced", spill_reload_fraction=0.4))
    (f,) = found["neuron_spill_reload"]
    assert f.metrics["spill_reload_share_pct"]["value"] == pytest.approx(40, abs=1)
    assert f.threshold["max_reload_share_pct"]["value"] == 25


def test_spill_reload_below_threshold_is_not_reported(tmp_path: Path) -> None:
    assert not _findings(tmp_path, synth.SynthSpec(bottleneck="balanced", spill_reload_fraction=0.2))[
        "neuron_spill_reload"
    ]


def test_small_dma_transfers_are_reported(tmp_path: Path) -> None:
    found = _findings(tmp_path, synth.SynthSpec(bottleneck="balanced", small_transfer_bytes=512))
    (f,) = found["neuron_small_dma"]
    assert f.metrics["median_small_bytes"]["value"] == 512


def test_exposed_collectives_are_reported(tmp_path: Path) -> None:
    found = _findings(tmp_path, synth.SynthSpec(bottleneck="balanced", collectives=True))
    (f,) = found["neuron_exposed_collectives"]
    assert f.metrics["exposed_ns"]["value"] == 3 * 400_000


def test_transpose_heavy_matmuls_are_reported(tmp_path: Path) -> None:
    found = _findings(tmp_path, synth.SynthSpec(bottleneck="balanced", transpose_fraction=0.3))
    (f,) = found["neuron_transpose_matmul"]
    assert f.metrics["transpose_share_pct"]["value"] == pytest.approx(30, abs=1)


def test_rules_skip_a_trace_without_neuron_profile(tmp_path: Path) -> None:
    from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json

    synth.write_framework_trace(tmp_path / "fw.json")
    a = analyze(import_kineto_json(tmp_path / "fw.json"), rules=list(NEURON_RULES))
    skipped = dict(a.skipped)
    assert all("Neuron device profile" in skipped[r] for r in NEURON_RULES)
