"""Pieces of advice that depend on the hardware and the kind of run (``TraceFrames.hardware``,
``TraceFrames.run_kind``): graph capture only where the device has it, optimizer and training
fixes only on a trace that trains. Every API is spelled as it is called."""

from __future__ import annotations

from neuron_explorer.analyzers.hardware import Hardware
from neuron_explorer.analyzers.run_kind import RunKind


def compile_advice(hw: Hardware) -> str:
    """torch.compile, with graph capture only on the devices that have it: CUDA graphs on NVIDIA,
    HIP graphs on ROCm (``torch.cuda.graphs`` works on ROCm builds); none on CPU, MTIA, Neuron."""
    if hw.device_type == "cuda":
        return 'torch.compile(model, mode="reduce-overhead") (CUDA graphs: one launch replays the whole graph)'
    if hw.device_type == "hip":
        return (
            'torch.compile(model, mode="reduce-overhead") (HIP graphs through the torch.cuda.graphs API of ROCm '
            "builds: one launch replays the whole graph)"
        )
    return "torch.compile(model) (fuses ops into fewer kernels)"


def fused_optimizer_advice(hw: Hardware, kind: RunKind) -> str | None:
    """A fused or multi-tensor optimizer, only for a run that trains (None otherwise)."""
    if not kind.training:
        return None
    arg = "fused=True" if hw.fused_optimizer else "foreach=True"
    return f"a fused or multi-tensor optimizer (torch.optim.AdamW(model.parameters(), lr=..., {arg}))"
