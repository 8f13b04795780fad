"""Names of Python frame events as torch.profiler writes them (``"train.py(22): step"``,
``"nn.Module: Linear_1"``): part of the trace vocabulary, read by collectors and analyzers."""

from __future__ import annotations

import os
import re

_PY_FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): (?P<func>.*)$")
_MODULE_PREFIX = "nn.Module: "


def parse_python_frame(name: str) -> tuple[str, int, str] | None:
    """``"train.py(22): step"`` -> ``("train.py", 22, "step")``; None for other names."""
    m = _PY_FRAME.match(name)
    if m is None:
        return None
    return m.group("file"), int(m.group("line")), m.group("func")


def module_name(name: str) -> str | None:
    """``"nn.Module: Linear_1"`` -> ``"Linear_1"``; None for other names."""
    return name[len(_MODULE_PREFIX) :] if name.startswith(_MODULE_PREFIX) else None


#: Substrings that mark library code in any path (also in traces recorded on other machines).
LIBRARY_MARKERS: tuple[str, ...] = (
    "site-packages/",
    "dist-packages/",
    "/torch/",
    "/lib/python3",
    "/lib64/python3",
    "<",  # <frozen ...>, <built-in ...>, <string>
    "neuron_explorer/",
)
#: torch writes frames of installed packages relative to site-packages ("torch/nn/modules/
#: linear.py"), so a relative path whose first component is a well-known library (or a stdlib
#: module file) is library code too.
LIBRARY_ROOTS: tuple[str, ...] = (
    *(
        f"{p}/"
        for p in (
            "torch", "torchvision", "torchaudio", "torchtune", "torchao", "numpy", "scipy", "pandas", "sklearn",
            "transformers", "accelerate", "datasets", "diffusers", "peft", "timm", "vllm", "flashinfer", "triton",
            "xformers", "deepspeed", "megatron", "apex", "fairscale", "lightning", "pytorch_lightning", "tqdm",
            "collections", "importlib", "concurrent", "multiprocessing", "asyncio", "json", "logging", "unittest",
        )
    ),
    "typing.py", "functools.py", "contextlib.py", "threading.py", "abc.py", "enum.py", "warnings.py", "weakref.py",
    "copy.py", "inspect.py", "dataclasses.py", "queue.py", "selectors.py", "socket.py", "runpy.py",
)  # fmt: skip


def env_excludes() -> tuple[str, ...]:
    """Extra library patterns from ``NEURON_EXPLORER_EXCLUDE`` (``os.pathsep``-separated)."""
    return tuple(x for x in os.environ.get("NEURON_EXPLORER_EXCLUDE", "").split(os.pathsep) if x)


def is_library_path(path: str, extra: tuple[str, ...] = ()) -> bool:
    """True for torch, the standard library, installed packages and this tool, as traces write
    them (absolute, or relative to site-packages)."""
    p = path.replace("\\", "/")
    return any(m in p for m in (*LIBRARY_MARKERS, *extra)) or p.startswith(LIBRARY_ROOTS)
