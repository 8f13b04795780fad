"""torch.compile while a profile records: the compiler paused, each compile one span, provenance kept.

Recording a torch.compile program otherwise records the compiler: importing Inductor, Dynamo's
bytecode analysis, AOTAutograd's tracing and Inductor's lowering are millions of Python calls
(2.7 million in a 6-step GPT block on the CPU, ~5 GB of torch's result objects and most of the
recording time), none of which says anything about the user's program. ``CompileWatch``, live
between a profile's start and stop:

- **pauses torch's Python tracer** while torch compiles, on the compiling thread: during
  ``torch.compile(...)`` itself (where Inductor is imported) and between torch's compile
  callbacks (``torch._dynamo.callback``: start/end of each Dynamo frame compile, trigger
  ``DYNAMO``, and of each lazy backward compile, ``LAZY_BACKWARD``). The tracer is a C profile
  function torch installs with ``PyEval_SetProfile``; it is taken out of the thread state and put
  back (same function, same object) through the C API. The function is found two pointers before
  its object (``sys.getprofile()``) in the thread state (``c_profilefunc``, ``c_tracefunc``,
  ``c_profileobj``: CPython 3.9-3.13); when that check fails nothing is paused. Between the
  take and the put-back the pausing frame makes no Python call the tracer could see half of,
  so its call tree stays balanced (one frame of ours spans each pause);
- **marks each compile** with a user annotation (``record_function``) named ``compile: <what>``
  (``compile: 0/0``, ``compile: 0/0 backward``, ``compile: torch.compile``): the compile stays in
  the trace as one span with its duration, kind ``annotation``, one-time work
  (docs/schema.md). The compile id is the one the region's runtime span carries
  (``Torch-Compiled Region: 0/0``);
- **keeps Inductor's provenance** (``collectors.lines.inductor_provenance``): at the first compile it
  sets ``torch._inductor.config.trace.provenance_tracking_level = 1`` and, for Inductor's C++
  kernels to be recorded at all, ``cpp.enable_kernel_profile = True`` (both restored when the
  profile stops); both are part of Inductor's cache key, so the first recorded run compiles
  afresh (its cache entries are its own). Each compile's provenance is read from torch's
  compilation metrics as compiles end (``graphs``).

``NEURON_EXPLORER_TRACE_COMPILE=1`` records the compiler's Python as before (still marked);
``provenance=False`` leaves Inductor's configuration alone.

torch._dynamo is not imported for this (~2 s): when it is not loaded, an import hook registers
the callbacks the moment ``torch._dynamo.callback`` is.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Any

from neuron_explorer.collectors.lines.inductor_provenance import GraphProvenance, provenance_from_metrics

#: torch._dynamo.callback.CallbackTrigger names that are compiling, and the span's suffix.
#: CUDAGRAPH_RECORDING is not: it runs the user's model, whose lines the capture needs.
PAUSED_TRIGGERS = {"DYNAMO": "", "LAZY_BACKWARD": " backward"}
#: Prefix of the annotation marking one compile (docs/schema.md, "One-time work").
SPAN_PREFIX = "compile: "
_CALLBACK_MODULE = "torch._dynamo.callback"
#: Inductor settings turned on while a profile records (see the module docstring).
INDUCTOR_SETTINGS = (("trace", "provenance_tracking_level", 1), ("cpp", "enable_kernel_profile", True))


class _Tracer:
    """The calling thread's C profile function, found and put back (see the module docstring)."""

    offset: int | None = None
    api: Any = None

    @classmethod
    def find(cls) -> tuple[int, Any] | None:
        """(function pointer, profile object) of this thread's profiler, or None."""
        obj = sys.getprofile()
        if obj is None:
            return None
        if cls.api is None:
            api = ctypes.pythonapi
            api.PyThreadState_Get.restype = ctypes.c_void_p
            api.PyEval_SetProfile.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            api.PyEval_SetProfile.restype = None
            cls.api = api
        slots = (ctypes.c_void_p * 64).from_address(cls.api.PyThreadState_Get())
        if cls.offset is None:
            found = [i for i in range(2, 64) if slots[i] == id(obj)]
            if len(found) != 1:
                return None
            cls.offset = found[0]
        i = cls.offset
        if slots[i] != id(obj) or not slots[i - 2]:
            return None
        return int(slots[i - 2]), obj


def _find() -> tuple[int, Any] | None:
    """``_Tracer.find``, never failing the user's compile: on any error nothing is paused."""
    try:
        return _Tracer.find()
    except Exception:
        return None


def _take(held: tuple[int, Any] | None) -> None:
    """Take the tracer out (``held`` keeps a reference to its object meanwhile)."""
    if held is not None:
        _Tracer.api.PyEval_SetProfile(None, None)


def _put_back(held: tuple[int, Any] | None) -> None:
    if held is not None:
        _Tracer.api.PyEval_SetProfile(held[0], id(held[1]))


def _span_enter(name: str) -> Any:
    try:
        import torch

        # (record_function's own op: a user annotation, where _RecordFunctionFast is a cpu_op)
        return torch.ops.profiler._record_function_enter_new(name, None)
    except Exception:
        return None


def _span_exit(handle: Any) -> None:
    if handle is not None:
        try:
            import torch

            torch.ops.profiler._record_function_exit._RecordFunction(handle)
        except Exception:  # the span stays open in the trace; the compile goes on
            pass


class CompileWatch:
    """Install at a profile's start, ``remove`` at its stop (see the module docstring)."""

    def __init__(self, pause: bool = True, provenance: bool = True) -> None:
        self.pause = pause
        self.provenance = provenance
        #: compile spans opened
        self.spans = 0
        self._local = threading.local()
        self._handler: Any = None
        self._finder: _CallbackImportHook | None = None
        self._compile: Any = None
        self._restore: list[tuple[Any, str, Any]] | None = None
        self._metrics: list[Any] = []
        self._seen: set[int] = set()

    # ------------------------------------------------------------------ install / remove
    def install(self) -> None:
        module = sys.modules.get(_CALLBACK_MODULE)
        if module is not None:
            self._register(module)
        else:
            self._finder = _CallbackImportHook(self._register)
            sys.meta_path.insert(0, self._finder)
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch.compile, "__wrapped_by_neuron_explorer__", False) is False:
            self._compile = torch.compile
            torch.compile = self._paused_torch_compile(torch.compile)

    def remove(self) -> None:
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        self._finder = None
        handler, self._handler = self._handler, None
        if handler is not None:
            for registered, cb in ((handler.start_callbacks, self._started), (handler.end_callbacks, self._ended)):
                if cb in registered:
                    registered.remove(cb)
        torch = sys.modules.get("torch")
        if self._compile is not None and torch is not None:
            torch.compile = self._compile
        self._compile = None
        self._sweep_metrics()
        for section, key, value in self._restore or ():
            setattr(section, key, value)
        self._restore = None

    @property
    def graphs(self) -> list[GraphProvenance]:
        """The provenance of every graph compiled while installed (so far)."""
        self._sweep_metrics()
        return provenance_from_metrics(self._metrics)

    # ------------------------------------------------------------------ hooks
    def _register(self, module: Any) -> None:
        handler = getattr(module, "callback_handler", None)
        if handler is None or self._handler is not None:
            return
        handler.register_start_callback(self._started)
        handler.register_end_callback(self._ended)
        self._handler = handler
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)

    def _paused_torch_compile(self, original: Any) -> Any:
        watch = self

        @functools.wraps(original)
        def compile(*args: Any, **kwargs: Any) -> Any:
            held = _find() if watch.pause else None
            _take(held)
            span = _span_enter(SPAN_PREFIX + "torch.compile")
            try:
                return original(*args, **kwargs)
            finally:
                _span_exit(span)
                _put_back(held)

        compile.__wrapped_by_neuron_explorer__ = True  # type: ignore[attr-defined]
        return compile

    def _started(self, args: Any) -> None:
        suffix = PAUSED_TRIGGERS.get(getattr(getattr(args, "callback_trigger", None), "name", ""))
        if suffix is None:
            return
        self._sweep_metrics()
        held = _find() if self.pause else None
        _take(held)  # from here to _ended's put-back, no Python call is recorded
        if self.provenance and self._restore is None:
            self._turn_on_inductor_settings()
        self._local.open = (_span_enter(f"{SPAN_PREFIX}{args.compile_id}{suffix}"), held)
        self.spans += 1

    def _ended(self, args: Any) -> None:
        span, held = getattr(self._local, "open", (None, None))
        self._local.open = (None, None)
        _span_exit(span)
        _put_back(held)

    def _turn_on_inductor_settings(self) -> None:
        self._restore = []
        try:
            import torch._inductor.config as config

            for section_name, key, value in INDUCTOR_SETTINGS:
                section = getattr(config, section_name, None)
                if section is None or not hasattr(section, key):
                    continue
                old = getattr(section, key)
                if old != value and not (isinstance(old, int) and old > value):
                    setattr(section, key, value)
                    self._restore.append((section, key, old))
        except Exception:  # an Inductor without these settings: compiled regions keep their lines
            return

    def _sweep_metrics(self) -> None:
        """Take torch's compilation metrics recorded since the last sweep (a bounded deque)."""
        utils = sys.modules.get("torch._dynamo.utils")
        get = getattr(utils, "get_compilation_metrics", None) if utils is not None else None
        if get is None:
            return
        try:
            metrics = list(get())
        except Exception:
            return
        for m in metrics:
            if id(m) not in self._seen:
                self._seen.add(id(m))
                self._metrics.append(m)  # (kept: their ids stay unique)


class _CallbackImportHook(importlib.abc.MetaPathFinder):
    """Calls ``on_load(module)`` once ``torch._dynamo.callback`` has been imported."""

    def __init__(self, on_load: Any) -> None:
        self.on_load = on_load

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _CALLBACK_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader, on_load = spec.loader, self.on_load

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: Any) -> None:
                loader.exec_module(module)
                on_load(module)

        spec.loader = _Loader()
        return spec
