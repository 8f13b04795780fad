"""Exact source lines from torch.profiler's in-memory event tree (``experimental_event_tree``).

The tree holds every op, Python call and allocation of a capture, nested per thread. A Python
call carries its ``caller`` (the frame and line that made the call) and, for Python functions,
its ``callsite`` (the function's own file and def line). Walking the tree once, top down, each
node inherits the attribution of its nearest Python ancestor that says something about user
code:

- a call whose *caller* is user code: the exact calling line (``line``), e.g. ``model(x)``;
- a call *into* a user function, with no nearer call out of it: only the function is known
  (``function``, def line);
- an op directly under a user function's frame (operator syntax, ``a @ b``, makes no Python
  call event): the line ``operator_lines`` finds for it in the function's bytecode between
  the recorded calls (``line``), else the function (``function``);
- under an exact-lines marker (``exact_lines``, ``markers=True``): the marker's line
  (``line``); the marker itself is no row;
- inside ``autograd::engine::evaluate_function: XBackward0``: the line of the forward op with the
  same autograd sequence number (``forward``), unless user code (a custom ``backward``) is
  nearer.

The walk also emits the Python calls themselves as rows (name, start, end, thread, caller
line), so Python events need no second, costlier pass over ``trace_activities()``.

This walk is the one per-node Python loop of the capture; each node costs a handful of
attribute reads, memoised per file name.

One-time Python is pruned while walking (``prune=True``, the default; ``NEURON_EXPLORER_NO_PRUNE=1``
turns it off): a call of a C function with no children that returns within ``PRUNE_CCALL_NS``
(``str.startswith``, ``isinstance``, ``dict.get``) anchors no line and is dropped, counted;
a library frame (import machinery, the standard library, site-packages, or a C function) whose
whole subtree holds no torch op, no allocation and no call into user code is emitted as one
span with its own name and duration, its subtree counted and skipped. No op's source depends on
a pruned event: sources flow down to ops, and pruned subtrees hold none.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from neuron_explorer.collectors.build.source_map import MARKER_PREFIX, UserCode, parse_marker
from neuron_explorer.collectors.lines import operator_lines as oplines
from neuron_explorer.trace.schema import Precision

_BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
_MODULE_PREFIX = "nn.Module: "

#: An attribution: (src_file, src_line, src_func, src_precision, src_module).
Source = tuple[Any, int, Any, Any, Any]
NO_SOURCE: Source = (None, -1, None, None, None)


@dataclass
class TreeSources:
    """What the walk found, as parallel lists (columns), plus the interned attributions."""

    sources: list[Source] = field(default_factory=lambda: [NO_SOURCE])
    # TorchOp nodes: correlation id -> source index
    op_corr: list[int] = field(default_factory=list)
    op_src: list[int] = field(default_factory=list)
    # Python calls (rows of their own)
    py_name: list[str] = field(default_factory=list)
    py_start: list[int] = field(default_factory=list)
    py_end: list[int] = field(default_factory=list)
    py_tid: list[int] = field(default_factory=list)
    py_id: list[int] = field(default_factory=list)
    py_parent: list[int] = field(default_factory=list)
    py_src: list[int] = field(default_factory=list)
    # Allocations: start time -> source index
    alloc_start: list[int] = field(default_factory=list)
    alloc_src: list[int] = field(default_factory=list)
    # profiler thread id -> system thread id, learned from ops (see capture_convert)
    op_tid: list[int] = field(default_factory=list)
    # what pruning removed (see the module docstring; ``pruned_metadata``)
    pruned_ccalls: int = 0
    pruned_ccall_ns: int = 0
    collapsed_spans: int = 0
    collapsed_events: int = 0
    collapsed_ns: int = 0
    # what operator_lines made of operator-syntax ops (``OperatorLines.stats``)
    operator_lines: dict[str, int] = field(default_factory=dict)

    def pruned_metadata(self) -> dict[str, int]:
        """The ``pruned`` entry of the trace metadata (docs/schema.md)."""
        return {
            "builtin_calls": self.pruned_ccalls,
            "builtin_call_ns": self.pruned_ccall_ns,
            "collapsed_spans": self.collapsed_spans,
            "collapsed_events": self.collapsed_events,
            "collapsed_ns": self.collapsed_ns,
        }


class FileResolver:
    """Maps the profiler's file names to (absolute path, is user code), memoised.

    The Python tracer writes paths relative to the ``sys.path`` entry they were found under
    (``torch/nn/modules/module.py``, ``train.py``), so they are resolved back to absolute paths
    before deciding what is user code.
    """

    def __init__(self, user_code: UserCode, search_path: list[str] | None = None) -> None:
        self.user_code = user_code
        self.search_path = [p or os.getcwd() for p in (search_path if search_path is not None else sys.path)]
        self._memo: dict[str, tuple[str, bool]] = {}

    def __call__(self, name: str) -> tuple[str, bool]:
        hit = self._memo.get(name)
        if hit is None:
            path = self._absolute(name)
            hit = (path, self.user_code.is_user(path))
            self._memo[name] = hit
        return hit

    def _absolute(self, name: str) -> str:
        if not name or name.startswith("<") or os.path.isabs(name):
            return name
        for base in self.search_path:
            candidate = os.path.join(base, name)
            if os.path.isfile(candidate):
                return os.path.normpath(candidate)
        return name


#: A Python call's name is ``"{file}({def line}): {function}"`` (torch/csrc/profiler/collection.cpp),
#: the same text as its ``callsite``: parsing the name once per distinct function saves three
#: pybind reads per call. ``nn.Module: X`` calls do not match and read the callsite.
_CALL_NAME = re.compile(r"^(.*)\((\d+)\): (.*)$", re.DOTALL)

#: A childless C call shorter than this is pruned; longer ones (``time.sleep``, a device
#: synchronize) stay, they are where the time went.
PRUNE_CCALL_NS = 20_000


def prune_enabled() -> bool:
    from neuron_explorer import environment

    return not environment.value(environment.NO_PRUNE)


def walk_tree(
    roots: list[Any],
    resolve: FileResolver,
    op_info: dict[int, tuple[bool, int]] | None = None,
    prune: bool | None = None,
    operator_lines: oplines.OperatorLines | None = None,
    markers: bool = False,
    syntax: bool = True,
) -> TreeSources:
    """Attribute every node of the event tree (see the module docstring).

    ``op_info`` maps an op's correlation id to (is a backward node's root, autograd sequence
    number) when the caller already has them from the activities; ops missing from it are read
    from the tree. Every node is read through pybind (~0.5-1.5 us an attribute), so the walk
    reads only what it cannot learn otherwise: a node's thread is its root's (torch nests
    events per thread), a function's file and def line come from its call's name.
    ``prune`` (default: unless ``NEURON_EXPLORER_NO_PRUNE`` is set) prunes one-time Python.
    ``operator_lines`` places operator-syntax ops on lines (default: a fresh one; its ``stats``
    land in ``TreeSources.operator_lines``; ``syntax=False`` leaves those ops at their function);
    ``markers`` reads exact-lines markers.
    """
    from torch._C._profiler import (
        _ExtraFields_Allocation,
        _ExtraFields_PyCall,
        _ExtraFields_PyCCall,
        _ExtraFields_TorchOp,
    )

    # type(extra_fields) tells the node's kind: one pybind call instead of two (tag is costly)
    TORCH_OP, PY_CALL, PY_CCALL, ALLOC = (
        _ExtraFields_TorchOp,
        _ExtraFields_PyCall,
        _ExtraFields_PyCCall,
        _ExtraFields_Allocation,
    )
    out = TreeSources()
    interned: dict[Source, int] = {NO_SOURCE: 0}
    sources = out.sources
    op_info = op_info or {}
    no_info = (None, -1)
    if prune is None:
        prune = prune_enabled()
    if operator_lines is None:
        operator_lines = oplines.OperatorLines()

    def intern(src: Source) -> int:
        idx = interned.get(src)
        if idx is None:
            idx = interned[src] = len(sources)
            sources.append(src)
        return idx

    # Node name -> its kind (the type of its extra_fields), learned from the first node with
    # that name: names of ops ("aten::mm"), Python functions ("train.py(12): step"), C functions
    # ("<built-in method ...>") and allocations ("[memory]") never coincide, and reading the
    # name (needed anyway) is half the cost of reading extra_fields. Device-side nodes
    # (``_ExtraFields_Kineto``: kernels, and a ``record_function`` range mirrored on the GPU as
    # a gpu_user_annotation of the same name, such as ``ProfilerStep#3``) can share an op's
    # name: a name seen with any other kind is ``MIXED`` and read node by node (seen on an
    # H200 with torch 2.11: a cached op kind made the walk read ``sequence_number`` off a
    # Kineto node and lose every exact line).
    kind_by_name: dict[str, Any] = {}
    MIXED = object()
    KNOWN = (TORCH_OP, PY_CALL, PY_CCALL, ALLOC)

    def kind_of(node: Any, name: str) -> tuple[Any, Any]:
        """(kind, extra_fields read for it or None), through the cache where it holds."""
        tag = kind_by_name.get(name)
        if tag is not None and tag is not MIXED:
            return tag, None
        ef = node.extra_fields
        real = type(ef)
        if tag is None:
            kind_by_name[name] = real if real in KNOWN else MIXED
        return real, ef

    # call name -> (absolute file, is user code, def line, function), or None (read the callsite)
    callsites: dict[str, tuple[str, bool, int, str] | None] = {}

    def callsite_of(name: str) -> tuple[str, bool, int, str] | None:
        m = _CALL_NAME.match(name)
        if m is None:
            hit = None
        else:
            sfile, suser = resolve(m.group(1))
            hit = (sfile, suser, int(m.group(2)), m.group(3))
        callsites[name] = hit
        return hit

    op_corr, op_src, op_tid = out.op_corr, out.op_src, out.op_tid
    py_name, py_start, py_end, py_tid, py_id, py_parent, py_src = (
        out.py_name,
        out.py_start,
        out.py_end,
        out.py_tid,
        out.py_id,
        out.py_parent,
        out.py_src,
    )
    alloc_start, alloc_src = out.alloc_start, out.alloc_src
    fwd_by_seq: dict[int, int] = {}
    # (node, inherited source index, module path, python parent id, thread, correlation id,
    # sequence number)
    deferred: list[tuple[Any, int, str | None, int, int, int, int]] = []
    # Stack entries: (node, inherited source index, module path, python parent id, in library
    # code). The last is True when the nearest enclosing Python function is known (from its
    # name) not to be user code: a call made there has a library caller, so its ``caller``
    # (three pybind reads) need not be read.
    next_py_id = 1

    def no_work_beneath(children: list[Any]) -> int:
        """The number of nodes under ``children`` when none is a torch op, an allocation or a
        call into user code; else -1. Stops at the first such node."""
        count = 0
        todo = list(children)
        pop, extend = todo.pop, todo.extend
        while todo:
            node = pop()
            try:
                name = node.name
            except UnicodeDecodeError:
                return -1  # let the walk handle it
            tag = kind_of(node, name)[0]
            if tag is TORCH_OP or tag is ALLOC:
                return -1
            if tag is PY_CALL:
                site = callsites[name] if name in callsites else callsite_of(name)
                if site is None or site[1]:
                    return -1  # user code (or a callsite only the walk reads)
            elif tag is not PY_CCALL:
                return -1
            count += 1
            kids = node.children
            if kids:
                extend(kids)
        return count

    def marker_source(name: str, module: str | None) -> int:
        """The source an exact-lines marker names (0 when not user code)."""
        parsed = parse_marker(name)
        if parsed is None:
            return 0
        mfile, muser = resolve(parsed[0])
        return intern((mfile, parsed[1], parsed[2], Precision.LINE, module)) if muser else 0

    def operator_sources(
        children: list[Any], site: tuple[str, bool, int, str], inner: int, module: str | None
    ) -> list[int] | None:
        """Per child of a user frame, its source: ops issued by operator syntax at their exact
        line where the bytecode says which (``operator_lines``), the rest ``inner``. None when
        no child is such an op."""
        tokens: list[oplines.Token] = []
        where: list[int] = []
        any_op = False
        for i, c in enumerate(children):
            try:
                name = c.name
            except UnicodeDecodeError:
                continue  # (a dropped token only loosens the match)
            tag = kind_of(c, name)[0]
            if tag is TORCH_OP:
                if name in oplines.KNOWN_OPS:
                    tokens.append(name)
                    where.append(i)
                    any_op = True
            elif tag is PY_CALL:
                called = callsites[name] if name in callsites else callsite_of(name)
                special = called is not None and called[3].startswith("__") and called[3].endswith("__")
                tokens.append(
                    oplines.anchor(
                        c.extra_fields.caller.line_number, oplines.PY_SPECIAL if special else oplines.PY_CALL
                    )
                )
                where.append(-1)
            elif tag is PY_CCALL:
                tokens.append(oplines.anchor(c.extra_fields.caller.line_number, oplines.C_CALL))
                where.append(-1)
        if not any_op:
            return None
        flow = operator_lines.flow(site[0], site[3], site[2])
        if flow is None:
            return None
        out = [inner] * len(children)
        for i, line in zip(where, operator_lines.resolve(flow, tokens, flow.starts(site[2]))):
            if i >= 0 and line >= 0:
                out[i] = intern((site[0], line, site[3], Precision.LINE, module))
        return out

    def run(stack: list[tuple[Any, int, str | None, int, bool]], in_backward: bool, tid: int) -> None:
        nonlocal next_py_id
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            node, src, module, parent_py, lib = pop()
            try:
                name = node.name
                tag, ef = kind_of(node, name)
                children = node.children
                if tag is TORCH_OP:
                    if markers and name.startswith(MARKER_PREFIX):
                        own = marker_source(name, module) or src
                        if children:
                            extend(zip(reversed(children), repeat(own), repeat(module), repeat(parent_py), repeat(lib)))
                        continue
                    corr = node.correlation_id
                    backward, seq = op_info.get(corr, no_info)
                    if backward is None:
                        if ef is None:
                            ef = node.extra_fields
                            if type(ef) is not TORCH_OP:  # a device node named like an op (above)
                                kind_by_name[name] = MIXED
                                if children:
                                    extend(
                                        zip(
                                            reversed(children),
                                            repeat(src),
                                            repeat(module),
                                            repeat(parent_py),
                                            repeat(lib),
                                        )
                                    )
                                continue
                        backward = name.startswith(_BACKWARD_PREFIX)
                        seq = ef.sequence_number
                    if backward and not in_backward:
                        deferred.append((node, src, module, parent_py, tid, corr, seq))
                        continue
                    op_corr.append(corr)
                    op_src.append(src)
                    op_tid.append(tid)
                    if not in_backward and seq >= 0 and seq not in fwd_by_seq:
                        fwd_by_seq[seq] = src
                    own = src
                elif tag is PY_CALL or tag is PY_CCALL:
                    collapse = False
                    if prune:
                        if tag is PY_CCALL and not children:
                            t0 = node.start_time_ns
                            dur = node.end_time_ns - t0
                            if dur < PRUNE_CCALL_NS:
                                out.pruned_ccalls += 1
                                out.pruned_ccall_ns += dur
                                continue
                        elif children:
                            if tag is PY_CCALL:
                                library = True
                            else:
                                site = callsites[name] if name in callsites else callsite_of(name)
                                library = site is not None and not site[1]
                            if library:
                                inner_count = no_work_beneath(children)
                                if inner_count >= 0:
                                    collapse = True
                                    out.collapsed_spans += 1
                                    out.collapsed_events += inner_count
                    own = src
                    if not lib:
                        caller = (ef or node.extra_fields).caller
                        cfile, cuser = resolve(caller.file_name)
                        if cuser:
                            own = intern((cfile, caller.line_number, caller.function_name, Precision.LINE, module))
                    if name.startswith(_MODULE_PREFIX):
                        own_mod = name[len(_MODULE_PREFIX) :]
                        module = f"{module}.{own_mod}" if module else own_mod
                        if own:
                            f, ln, fn, prec, _ = sources[own]
                            own = intern((f, ln, fn, prec, module))
                    inner = own
                    inner_lib = lib
                    if tag is PY_CALL:
                        site = callsites[name] if name in callsites else callsite_of(name)
                        if site is None:
                            cs = (ef or node.extra_fields).callsite
                            sfile, suser = resolve(cs.file_name)
                            if suser:
                                site = (sfile, True, cs.line_number, cs.function_name)
                        if site is not None and site[1]:
                            # inside a user function: only the function is known until a nearer call
                            inner = intern((site[0], site[2], site[3], Precision.FUNCTION, module))
                        inner_lib = site is not None and not site[1]
                    pid_ = next_py_id
                    next_py_id += 1
                    py_name.append(name)
                    t0, t1 = node.start_time_ns, node.end_time_ns
                    py_start.append(t0)
                    py_end.append(t1)
                    py_tid.append(tid)
                    py_id.append(pid_)
                    py_parent.append(parent_py)
                    py_src.append(own)
                    if collapse:
                        out.collapsed_ns += max(t1 - t0, 0)
                        continue
                    if syntax and children and tag is PY_CALL and site is not None and site[1]:
                        try:
                            per_child = operator_sources(children, site, inner, module)
                        except Exception:  # (a bytecode this reader misjudges: function-level lines)
                            per_child = None
                        if per_child is not None:
                            extend(
                                zip(
                                    reversed(children), reversed(per_child), repeat(module), repeat(pid_), repeat(False)
                                )
                            )
                            continue
                    if children:
                        extend(zip(reversed(children), repeat(inner), repeat(module), repeat(pid_), repeat(inner_lib)))
                    continue
                elif tag is ALLOC:
                    alloc_start.append(node.start_time_ns)
                    alloc_src.append(src)
                    own = src
                else:
                    own = src
                if children:
                    extend(zip(reversed(children), repeat(own), repeat(module), repeat(parent_py), repeat(lib)))
            except UnicodeDecodeError:
                # A name torch can no longer read (a code object freed while profiling, see
                # capture_convert.UNREADABLE): the node is dropped, its children keep the
                # parent's attribution.
                for c in reversed(node.children):
                    push((c, src, module, parent_py, lib))

    # Roots in order; each root's subtree is on the root's thread (torch builds the tree from
    # one stack per thread), so the thread is read once per root.
    for root in roots:
        run([(root, 0, None, -1, False)], False, root.start_tid)
    # Backward subtrees: every op in them takes its forward op's line (and module).
    for node, src, module, parent_py, tid, corr, seq in deferred:
        fwd = fwd_by_seq.get(seq, -1) if seq >= 0 else -1
        if fwd > 0:
            f, ln, fn, _, fmod = sources[fwd]
            start = intern((f, ln, fn, Precision.FORWARD, fmod))
            module = fmod
        else:
            start = src
        op_corr.append(corr)
        op_src.append(start)
        op_tid.append(tid)
        run([(c, start, module, parent_py, False) for c in reversed(node.children)], True, tid)
    out.operator_lines = dict(operator_lines.stats)
    return out
