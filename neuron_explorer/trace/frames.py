"""Names of Python frame events as torch.profiler writes them (``"train.py(22): step"``,
``"nn.Module: Linear_1"``): part of the trace vocabulary, read by collectors and analyzers."""

from __future__ import annotations

import os
import re
import sys
import sysconfig

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
    "/lib/pypy3",
    "<",  # <frozen ...>, <built-in ...>, <string>
    "neuron_explorer/",
    "_distutils_hack/",
)
#: torch writes frames of installed packages relative to site-packages ("torch/nn/modules/
#: linear.py"), so a relative path whose first component is a well-known library (or a stdlib
#: module, see ``_STDLIB_TOP``) is library code too.
LIBRARY_ROOTS: tuple[str, ...] = (
    *(
        f"{p}/"
        for p in (
            "torch", "torchvision", "torchaudio", "torchtune", "torchao", "numpy", "scipy", "pandas", "sklearn",
            "transformers", "accelerate", "datasets", "diffusers", "peft", "timm", "vllm", "flashinfer", "triton",
            "xformers", "aiter", "flash_attn", "deepspeed", "megatron", "apex", "fairscale", "lightning", "pytorch_lightning", "tqdm",
            "PIL", "cv2", "einops", "safetensors", "tokenizers", "huggingface_hub", "jax", "torch_xla",
            "torch_neuronx", "torchneuron", "libneuronxla", "neuronx_distributed", "setuptools", "pkg_resources",
            "_pytest", "pytest", "pluggy", "IPython", "ipykernel", "wandb", "tensorboard", "google", "yaml",
            "pyarrow", "fsspec", "filelock", "sympy", "networkx", "jinja2", "packaging",
        )
    ),
    "typing_extensions.py", "six.py",
)  # fmt: skip
#: Generated code: Inductor's output (``/tmp/torchinductor_<user>/..``), Triton's cache and FX graph
#: modules. TorchDynamo's own source (``torch/_dynamo/eval_frame.py``, whose ``disable`` wrappers
#: every eager call passes through) is library code, not generated (``<eval_with_key>.3``, ``<fx ...>``). Not the user's code, but run on
#: behalf of the user's compiled function.
GENERATED_MARKERS: tuple[str, ...] = (
    "torchinductor_",
    "/.triton/cache/",
    "<eval_with_key>",
    "<fx",
    "__compiled_fn",
    "__resume_at_",
)
#: This tool's own files are user code only where they are what is profiled (the bundled demo).
TOOL_USER_CODE: tuple[str, ...] = ("neuron_explorer/examples/",)
#: The launcher scripts pip writes for this tool (``.venv/bin/neuron-explorer``).
_LAUNCHERS = frozenset({"neuron-explorer", "neuron-explorer.exe", "neuron-explorer-script.py"})
#: Standard-library top-level names that a relative trace path may start with (``linecache.py``,
#: ``logging/__init__.py``). Names users often give their own scripts are left out: a relative
#: ``test.py`` or ``profile.py`` is more likely the user's than the standard library's.
_STDLIB_TOP = frozenset(getattr(sys, "stdlib_module_names", ())) - {"test", "code", "profile", "trace", "this"}


def _local_library_dirs() -> tuple[str, ...]:
    """This interpreter's standard library and package directories (absolute paths of frames
    recorded on this machine): ``sys.prefix``, ``base_prefix`` and ``exec_prefix``'s ``lib``
    and ``bin`` folders and the sysconfig paths. Not the prefixes themselves: with a system
    Python ``sys.prefix`` is ``/usr``, and ``/usr/src/app/train.py`` is user code."""
    dirs = {sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib", "scripts")}
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", sys.prefix)}:
        dirs.update(os.path.join(prefix, sub) for sub in ("lib", "lib64", "Lib", "bin", "Scripts"))
    return tuple(sorted(d.replace("\\", "/").rstrip("/") + "/" for d in dirs if d))


LOCAL_LIBRARY_DIRS: tuple[str, ...] = _local_library_dirs()


def is_generated_path(path: str) -> bool:
    """True for code that torch.compile, Inductor, Triton or FX generated (see
    ``GENERATED_MARKERS``), as traces write it."""
    p = path.replace("\\", "/")
    return any(m in p for m in GENERATED_MARKERS)


def path_origin(path: str | None, extra: tuple[str, ...] = (), include: tuple[str, ...] = ()) -> str:
    """Whose code a frame's file is: ``"user"``, ``"generated"`` (see ``is_generated_path``) or
    ``"library"`` (torch, the standard library, installed packages, this tool and its launcher,
    and ``extra`` patterns). ``include`` patterns are user code even inside a library folder.

    The one definition of user code: the collectors (capture and import) and the rules call it."""
    if not path:
        return "library"
    p = path.replace("\\", "/")
    extra = tuple(m for m in extra if m not in LIBRARY_MARKERS)  # UserCode passes the defaults too
    if include and any(s in p for s in include):
        return "user"
    if is_generated_path(p):
        return "generated"
    if extra and any(m in p for m in extra):
        return "library"
    if any(s in p for s in TOOL_USER_CODE):
        return "user"
    return "library" if _is_library(p) else "user"


#: What no file path a frame name carries looks like: a type annotation or call text that a
#: garbled frame name put where the file goes (``CANN(version: packaging.version.Version, ...)``),
#: control characters. Such a "file" is nobody's code, so never the user's line.
_NOT_A_PATH = re.compile(r": |\(.*(?:, |: )|[\x00-\x1f]")
#: A source checkout of a well-known library (an editable install: ``/app/aiter/aiter/...``, ``/src/transformers/src/transformers/...``,
#: ``~/src/vllm/vllm/...``): the package folder inside the repository folder of the same name.
_CHECKOUT = re.compile(
    r"(?:^|/)(" + "|".join(re.escape(r.rstrip("/")) for r in LIBRARY_ROOTS if r.endswith("/")) + r")/(?:src/)?\1/"
)


def _is_library(p: str) -> bool:
    if any(m in p for m in LIBRARY_MARKERS) or p.startswith(LIBRARY_ROOTS):
        return True
    if _NOT_A_PATH.search(p) or _CHECKOUT.search(p):
        return True
    if p.rsplit("/", 1)[-1] in _LAUNCHERS:
        return True
    if p.startswith(LOCAL_LIBRARY_DIRS):
        return True
    if not p.startswith("/") and not re.match(r"^[A-Za-z]:/", p):
        # torch writes a frame relative to the sys.path entry it was imported from
        top = p.split("/", 1)[0]
        return top.removesuffix(".py") in _STDLIB_TOP
    return False


def is_library_path(path: str, extra: tuple[str, ...] = ()) -> bool:
    """True for anything that is not user code (library or generated): see ``path_origin``."""
    return path_origin(path, extra) != "user"
