"""Advice follows the hardware in the trace: the device model and capability come from the trace."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.hardware import hardware_of
from neuron_explorer.analyzers.rules.device import reduced_precision_advice
from neuron_explorer.analyzers.rules.optimizer import optimizer_advice
from tests.conftest import KINETO, shared_fixture


def _raw_props(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)["deviceProperties"][0]


@pytest.mark.parametrize(
    ("rel", "device_type", "bf16"),
    [
        ("hta/alexnet_a100.json.gz", "cuda", True),
        ("tracelens/qwen_h100.json.gz", "cuda", True),
        ("hta/amd_mi250.json.gz", "hip", True),
    ],
)
def test_the_model_and_capability_come_from_device_properties(rel: str, device_type: str, bf16: bool) -> None:
    path = KINETO / rel
    raw = _raw_props(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = TraceFrames(ne.load(path)).hardware
    assert (hw.device_type, hw.name, hw.compute_major) == (device_type, raw["name"], raw["computeMajor"])
    assert hw.bf16 is bf16
    assert hw.torch_device == "cuda"  # ROCm runs through the torch.cuda APIs


def test_no_bf16_on_a_v100() -> None:
    path = shared_fixture("kineto/hta/df_index_resolver/df_index_resolver.json.gz")
    assert _raw_props(path)["computeMajor"] == 7
    a = analyze(ne.load(path))
    (tc,) = [f for f in a.findings if f.rule_id == "tensor_cores"]
    assert "bfloat16" not in tc.recommendation and "TF32" not in tc.recommendation.replace("no bf16 or TF32", "")
    assert 'torch.autocast(device_type="cuda", dtype=torch.float16)' in tc.recommendation
    assert 'torch.amp.GradScaler("cuda")' in tc.recommendation


def test_bf16_and_tf32_from_compute_capability_8() -> None:
    hw = hardware_of({"device_properties": [{"name": "NVIDIA A100", "computeMajor": 8}]}, ["cpu", "cuda"])
    advice = reduced_precision_advice(hw)
    assert 'torch.autocast(device_type="cuda", dtype=torch.bfloat16)' in advice
    assert 'torch.set_float32_matmul_precision("high")' in advice


@pytest.mark.parametrize("device_type", ["mtia", "neuron", "hip", "cpu"])
def test_no_cuda_wording_off_nvidia(device_type: str) -> None:
    hw = hardware_of({}, ["cpu", device_type])
    for advice in (reduced_precision_advice(hw), optimizer_advice("AdamW", hw), optimizer_advice("MyOpt", hw)):
        assert "CUDA" not in advice
    if device_type == "hip":  # ROCm users call the torch.cuda APIs: device_type="cuda" is right
        assert 'device_type="cuda"' in reduced_precision_advice(hw)
    else:
        assert "cuda" not in reduced_precision_advice(hw)


def test_the_neuron_instance_type_names_the_hardware() -> None:
    hw = hardware_of({"neuron": {"instance_type": "trn1.32xlarge"}}, ["cpu", "neuron"])
    assert hw.label == "trn1.32xlarge (Neuron)"


def test_optimizer_advice_names_constructor_arguments() -> None:
    cuda = hardware_of({}, ["cuda"])
    advice = optimizer_advice("AdamW", cuda)
    assert "torch.optim.AdamW(model.parameters(), lr=..., fused=True)" in advice
    assert "torch.optim.AdamW(model.parameters(), lr=..., foreach=True)" in advice
    assert ".step(" not in advice and "FusedAdam" not in advice
    # RMSprop has foreach but no fused implementation; MTIA has no fused optimizers
    assert "fused=True" not in optimizer_advice("RMSprop", cuda)
    assert "fused=True" not in optimizer_advice("AdamW", hardware_of({}, ["mtia"]))
    assert "torch.optim.FusedAdam" not in optimizer_advice("FusedAdam", cuda)
