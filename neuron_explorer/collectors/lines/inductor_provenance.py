"""Inductor's provenance: which lines of the user's code each generated kernel came from.

With ``torch._inductor.config.trace.provenance_tracking_level = 1`` (``INDUCTOR_PROVENANCE=1``)
Inductor keeps, per compiled graph, a map from each kernel call it generates to the stack
traces of the FX nodes fused into it (``torch._inductor.debug._inductor_kernel_stack_trace``)::

    {"triton_poi_fused_add_gelu_3:7": ["  File \\"model.py\\", line 46, in forward\\n    x = ...\\n"], ...}

The ``:7`` is a debug handle, counted up per kernel *call* in the order the wrapper code makes
them (``extern_kernels.mm:1``, ``triton_per_fused_sum_view_1:4``, ``...:21``: the same kernel
called twice has two handles), so the j-th call of a kernel in one run of the graph is its j-th
handle. Each stack trace is the Dynamo-traced stack of one node, outermost frame first.

This module reads those maps, from wherever torch left them, into ``GraphProvenance`` objects
(one per compiled graph: its compile id, forward or backward, its kernel calls in handle
order):

- in process (``profile()``, ``record``): ``torch._dynamo.utils.get_compilation_metrics()``
  holds one ``CompilationMetrics`` per Dynamo compile (forward) and per lazy backward compile,
  each with its compile id and ``inductor_provenance``: the map's JSON for each graph compiled
  there, fresh or loaded from Inductor's cache (``provenance_from_metrics``);
- a file the user kept (``read_provenance_file``, gzipped or not, or a directory of them): a
  structured trace log written with ``TORCH_TRACE=DIR`` (its
  ``inductor_provenance_tracking_kernel_stack_traces`` artifacts, with their frame and compile
  ids), one such artifact's JSON alone (as ``tlparse`` extracts it), or
  ``{"kernel_stack_traces": {...}}`` as tests/gpu/capture_fixtures.py writes it.

Torch keeps one global map while it compiles a lazy backward graph and restores it after each
frame compile, so a map can repeat kernels an earlier map of the same scope already named
(same name and handle): each graph keeps only the calls no earlier graph of its scope held.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_explorer.trace.errors import TraceFormatError

#: The name torch's structured trace gives the kernel -> stack traces artifact.
STACK_TRACES_ARTIFACT = "inductor_provenance_tracking_kernel_stack_traces"
_FRAME = re.compile(r'File "(?P<file>[^"\n]+)", line (?P<line>\d+), in (?P<func>[^\n]+)')
_KEY = re.compile(r"^(?P<name>.+):(?P<handle>\d+)$")

#: A user frame: (file, line, function).
Frame = tuple[str, int, str]


@dataclass(frozen=True)
class KernelCall:
    """One kernel call of a generated graph: Inductor's kernel name, its handle, and the stack
    traces (each a list of frames, outermost first) of the nodes fused into it."""

    kernel: str
    handle: int
    stacks: tuple[tuple[Frame, ...], ...]

    @property
    def op_name(self) -> str:
        """The name the profiler records for this call (``op_name_of``)."""
        return op_name_of(self.kernel)


@dataclass
class GraphProvenance:
    """The kernel calls of one compiled graph, in handle (call) order."""

    compile_id: str | None
    backward: bool | None
    calls: list[KernelCall] = field(default_factory=list)


def op_name_of(kernel: str) -> str:
    """The profiler's event name for a kernel call: generated kernels (``triton_*``,
    ``cpp_fused_*``) keep their name; extern calls are recorded as the aten op they run
    (``extern_kernels.mm`` -> ``aten::mm``, ``torch.ops.aten.convolution.default`` ->
    ``aten::convolution``)."""
    if kernel.startswith("extern_kernels."):
        return "aten::" + kernel[len("extern_kernels.") :]
    for prefix in ("torch.ops.", ""):
        if kernel.startswith(prefix):
            parts = kernel[len(prefix) :].split(".")
            if len(parts) in (2, 3) and parts[0] in ("aten", "prims", "quantized", "_c10d_functional"):
                return f"{parts[0]}::{parts[1]}"
    return kernel


def frames_of(stack_trace: str) -> tuple[Frame, ...]:
    """The frames of one FX node stack trace (torch's ``traceback`` text), outermost first."""
    return tuple((m["file"], int(m["line"]), m["func"].strip()) for m in _FRAME.finditer(stack_trace))


def calls_from_map(mapping: dict[str, Any]) -> list[KernelCall]:
    """``{"name:handle": [stack trace, ...]}`` as kernel calls in handle order; entries that
    are not of that form are skipped."""
    calls = []
    for key, traces in mapping.items():
        m = _KEY.match(str(key))
        if m is None or not isinstance(traces, list):
            continue
        stacks = tuple(frames_of(t) for t in traces if isinstance(t, str))
        calls.append(KernelCall(m["name"], int(m["handle"]), tuple(s for s in stacks if s)))
    calls.sort(key=lambda c: c.handle)
    return calls


@dataclass
class CompileMaps:
    """The maps one compile left, in the order torch wrote them: a frame compile's (its forward
    graph's, then its backward graph's when that was not compiled lazily) or one lazy backward
    compile's."""

    compile_id: str | None
    lazy_backward: bool
    maps: list[dict[str, Any]] = field(default_factory=list)
    #: forward or backward when nothing says (a lone map from a file): None
    direction_known: bool = True


def split_graphs(compiles: Iterable[CompileMaps]) -> list[GraphProvenance]:
    """One ``GraphProvenance`` per map, each keeping only its own calls.

    torch's map is global while it compiles: a frame compile starts it empty (handles from 1)
    and restores it after, so a backward graph compiled in the same frame compile repeats its
    forward graph's calls, and a lazy backward compile repeats every earlier lazy backward
    compile's calls (their handles keep counting, so the repeated keys are exactly those)."""
    graphs = []
    lazy_seen: set[tuple[str, int]] = set()
    for entry in compiles:
        seen = lazy_seen if entry.lazy_backward else set()
        for i, mapping in enumerate(entry.maps):
            calls = [c for c in calls_from_map(mapping) if (c.kernel, c.handle) not in seen]
            seen.update((c.kernel, c.handle) for c in calls)
            backward = entry.lazy_backward or i > 0
            graphs.append(GraphProvenance(entry.compile_id, backward if entry.direction_known else None, calls))
    return [g for g in graphs if g.calls]


def provenance_from_metrics(metrics: Iterable[Any]) -> list[GraphProvenance]:
    """Graphs from ``torch._dynamo.utils.get_compilation_metrics()`` entries (in order)."""
    compiles = []
    for m in metrics:
        texts = getattr(m, "inductor_provenance", None)
        if not texts:
            continue
        compile_id = getattr(m, "compile_id", None)
        # a set: a forward and a not-lazy backward map, the second holding the first, so the
        # smaller goes first
        maps = sorted((d for d in (_json_object(t) for t in texts) if d is not None), key=len)
        lazy = getattr(m, "is_forward", None) is False
        compiles.append(CompileMaps(str(compile_id) if compile_id else None, lazy, maps))
    return split_graphs(compiles)


def _json_object(text: Any) -> dict[str, Any] | None:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# ------------------------------------------------------------------------------- files
def read_provenance_file(path: str | Path) -> list[GraphProvenance]:
    """Provenance a user kept: a ``TORCH_TRACE`` structured log (or a directory of them), an
    artifact's JSON, or ``{"kernel_stack_traces": {...}}``. Raises ``TraceFormatError``."""
    path = Path(path)
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    if not files:
        raise TraceFormatError("holds no provenance file", path)
    graphs: list[GraphProvenance] = []
    for f in files:
        try:
            opener = gzip.open if f.name.endswith(".gz") else open
            with opener(f, "rt", encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except (OSError, EOFError) as exc:
            why = getattr(exc, "strerror", None) or exc
            raise TraceFormatError(f"cannot read the provenance file ({why})", f) from None
        graphs.extend(_parse_provenance_text(text, f))
    if not graphs:
        raise TraceFormatError(
            "holds no Inductor kernel provenance (record the program with INDUCTOR_PROVENANCE=1 and TORCH_TRACE=DIR)",
            path,
        )
    return graphs


def _parse_provenance_text(text: str, path: Path) -> list[GraphProvenance]:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        value = _json_object(stripped)
        if value is None:
            raise TraceFormatError("is not valid JSON", path)
        if isinstance(value.get("kernel_stack_traces"), dict):
            value = value["kernel_stack_traces"]
        return split_graphs([CompileMaps(None, False, [value], direction_known=False)])
    return split_graphs(_structured_log_maps(text))


#: A structured trace line: glog prefix ``V1204 14:58:13.785854 12319 file.py:123] `` then JSON.
_LOG_LINE = re.compile(r"^[A-Z]\d{4} [\d:.]+ +\d+ [^\]]*\] (?P<json>\{.*)$")


def _structured_log_maps(text: str) -> list[CompileMaps]:
    """The kernel stack trace artifacts of a ``TORCH_TRACE`` log (torch/_logging/_internal.py:
    each record is one line of JSON metadata after a glog prefix, its payload the following
    lines, each indented by a tab), grouped as torch wrote them: the first map of a compile id
    is its forward graph's; a later one holding all of it, its backward graph compiled in the
    same frame compile; any other, a lazy backward compile's."""
    out: list[CompileMaps] = []
    forward: dict[str | None, CompileMaps] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _LOG_LINE.match(lines[i])
        i += 1
        if m is None:
            continue
        meta = _json_object(m["json"])
        payload = []
        while i < len(lines) and lines[i].startswith("\t"):
            payload.append(lines[i][1:])
            i += 1
        if meta is None:
            continue
        artifact = meta.get("artifact")
        if not isinstance(artifact, dict) or artifact.get("name") != STACK_TRACES_ARTIFACT:
            continue
        mapping = _json_object("\n".join(payload))
        if mapping is None:
            continue
        frame, frame_compile = meta.get("frame_id"), meta.get("frame_compile_id")
        compile_id = f"{frame}/{frame_compile}" if frame is not None and frame_compile is not None else None
        first = forward.get(compile_id)
        if first is None:
            forward[compile_id] = entry = CompileMaps(compile_id, False, [mapping])
            out.append(entry)
        elif all(mapping.get(k) == v for k, v in first.maps[0].items()):
            first.maps.append(mapping)
        else:
            out.append(CompileMaps(compile_id, True, [mapping]))
    return out
