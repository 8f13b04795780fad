"""Pieces of advice that depend on the hardware and the kind of run (``TraceFrames.hardware``,
``TraceFrames.run_kind``): graph capture only where the device has it, optimizer and training
fixes only on a trace that trains. Every API is spelled as it is called."""

from __future__ import annotations

from neuron_explorer.analyzers.core.columns import name_mask
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.hardware import Hardware
from neuron_explorer.analyzers.core.run_kind import RunKind


def compile_advice(hw: Hardware, compiled: bool = False) -> str:
    """torch.compile, with graph capture only on the devices that have it: CUDA graphs on NVIDIA,
    HIP graphs on ROCm (``torch.cuda.graphs`` works on ROCm builds); none on CPU, MTIA, Neuron.
    ``compiled``: the trace already runs compiled code (``compiled_in_trace``), so plain
    ``torch.compile(model)`` is no advice: graph capture's mode where the device has it, else
    fewer graph breaks."""
    if hw.device_type == "cuda":
        return (
            'torch.compile(model, mode="reduce-overhead")'
            + (" in place of the default mode the trace's compiled code runs in" if compiled else "")
            + " (CUDA graphs: one launch replays the whole graph)"
        )
    if hw.device_type == "hip":
        return (
            'torch.compile(model, mode="reduce-overhead")'
            + (" in place of the default mode the trace's compiled code runs in" if compiled else "")
            + " (HIP graphs through the torch.cuda.graphs API of ROCm builds: one launch replays the whole graph)"
        )
    if compiled:
        return (
            "fewer graph breaks, so more of the step runs compiled (torch._dynamo.explain(model)(*inputs) lists them)"
        )
    return "torch.compile(model) (fuses ops into fewer kernels)"


#: a compiled region's runtime span (Dynamo) or AOTAutograd's function (the trace runs compiled code)
COMPILED_CODE = r"^Torch-Compiled Region|^CompiledFunction(?:Backward)?$"


def compiled_in_trace(frames: TraceFrames) -> bool:
    """The trace runs torch.compile'd code: a ``Torch-Compiled Region`` or ``CompiledFunction`` span."""

    def compute() -> bool:
        host = frames.host
        return bool(len(host)) and bool(name_mask(host["name"], COMPILED_CODE).any())

    return bool(frames.memo("compiled_in_trace", compute))


def fused_optimizer_advice(hw: Hardware, kind: RunKind) -> str | None:
    """A fused or multi-tensor optimizer, only for a run that trains (None otherwise)."""
    if not kind.training:
        return None
    arg = "fused=True" if hw.fused_optimizer else "foreach=True"
    return f"a fused or multi-tensor optimizer (torch.optim.AdamW(model.parameters(), lr=..., {arg}))"


def python_advice(families: dict[str, float], compile_words: str | None, optimizer_words: str | None) -> str:
    """Advice for the families that hold at least a fifth of the time, largest first.
    ``compile_words``: the torch.compile advice that fits the device and run (None: the run is
    compiled and graph capture is not available, so no compile advice)."""
    parts = []
    for fam, share in sorted(families.items(), key=lambda kv: -kv[1]):
        if share < 20.0:
            continue
        if fam == "preprocessing":
            parts.append(
                "move the input preprocessing (NumPy, PIL, video decoding, image processors) into DataLoader "
                "workers (DataLoader(..., num_workers=N, pin_memory=True)) or do it once ahead of training: "
                "torch.compile cannot speed up NumPy, PIL or decoding"
            )
        elif fam == "autograd":
            parts.append(
                "the autograd engine runs between backward ops (C++ the trace records no events for): fewer, larger "
                "ops in the backward shorten it" + (f", as {compile_words} does" if compile_words else "")
            )
        elif fam == "optimizer":
            parts.append(
                f"the optimizer's Python per parameter: {optimizer_words}"
                if optimizer_words
                else "the optimizer's Python per parameter: a fused or multi-tensor optimizer"
            )
        elif fam == "profiler":
            parts.append(
                "part of it is the profiler's own bookkeeping (record_function), absent without the profiler: "
                "fewer record_function markers, or profile without with_stack to measure the rest"
            )
        elif fam == "user":
            parts.append("vectorize or cache the Python of the lines named")
        else:
            parts.append("the library frames named hold it: call them less often, or batch what they are given")
    if not parts:
        parts.append("vectorize or cache the Python between ops (the frames named)")
    return "; ".join(parts)[0].upper() + "; ".join(parts)[1:] + "."
