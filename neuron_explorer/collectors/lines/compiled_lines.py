"""Compiled regions to user lines: each Inductor kernel call in a trace gets the lines it fuses.

Without this, the ops and kernels of a ``torch.compile`` region carry the line that called the
compiled module (or its forward line in the backward pass). With Inductor's provenance
(``collectors.lines.inductor_provenance``: per compiled graph, its kernel calls in call order, each
with the stack traces of the nodes fused into it) every call is matched to its event:

1. graph runs: each ``## Call CompiledFxGraph <key> ##`` span (torch 2.11 and later), else the
   innermost ``CompiledFunction`` / ``CompiledFunctionBackward`` / ``Torch-Compiled Region: X``
   span, is one run of one graph;
2. its kernel calls: the ops directly inside the run (no other op between) named as a kernel
   of the provenance names them: ``triton_*`` / ``cpp_fused_*`` as is (Triton launches are
   recorded as cpu_ops of that name; Inductor's C++ kernels only with
   ``torch._inductor.config.cpp.enable_kernel_profile``), extern calls as their aten op
   (``extern_kernels.mm`` -> ``aten::mm``);
3. which graph: a run inside a ``CompiledFunctionBackward`` is a backward graph; its compile id
   is that of the ``Torch-Compiled Region`` around it (the backward's through its forward op,
   ``fwd_id``). Of the graphs with that compile id and direction (either unknown on one side
   matches any), the one holding every generated kernel the run calls, preferring a compile id
   and direction that agree; a run calling only extern kernels needs both to agree;
4. the j-th call of a kernel in a run is that kernel's j-th handle in the graph (a kernel with
   one handle takes it for every call).

A matched op, the events nested in it and the device work it launched get
``src_precision = 'compiled'``, the first user line as ``src_file``/``src_line``/``src_func``
and all of them in ``src_lines``. A line is a stack trace's innermost frame that is user code
(``UserCode``); a kernel whose stacks hold none keeps its attribution. Nothing is guessed: an
op left unmatched keeps what capture or import gave it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from neuron_explorer.collectors.build.event_links import _map_keys_first
from neuron_explorer.collectors.build.source_map import UserCode
from neuron_explorer.collectors.lines.inductor_provenance import GraphProvenance
from neuron_explorer.trace.arrow import dict_parts, dictionary_from_codes, from_numpy, string_array, to_numpy
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import EVENTS_SCHEMA, SOURCE_LINE, Kind, Precision

GRAPH_CALL_PREFIX = "## Call CompiledFxGraph"
REGION_PREFIX = "Torch-Compiled Region: "
FORWARD_FN = "CompiledFunction"
BACKWARD_FN = "CompiledFunctionBackward"
_GRAPH_PREFIX = re.compile(r"^graph_\d+_(?=cpp_)")
_DEVICE_OR_LINKED = (Kind.KERNEL, Kind.COLLECTIVE, Kind.MEMCPY, Kind.MEMSET, Kind.RUNTIME, Kind.MEMORY)


def apply_compiled_lines(
    trace: Trace, graphs: Sequence[GraphProvenance], user_code: UserCode | None = None, source: str = "in_process"
) -> Trace:
    """``trace`` with its compiled-region kernels and ops attributed to the lines Inductor's
    provenance names; ``metadata["compiled_lines"]`` says how many (docs/schema.md)."""
    user_code = user_code or UserCode.default()
    table = _base_table(trace)
    summary: dict[str, Any] = {
        "source": source,
        "graphs": len(graphs),
        "kernel_calls": sum(len(g.calls) for g in graphs),
    }
    owner, entry_lines = _match(table, graphs, user_code, summary)
    if owner is not None:
        table = _attribute(table, owner, entry_lines)
    _set_base_table(trace, table)
    trace.metadata["compiled_lines"] = summary
    return trace


def _base_table(trace: Trace) -> pa.Table:
    # a DeferredTrace keeps its widest columns aside until written: leave them there
    return getattr(trace, "_table", None) if hasattr(trace, "_deferred") else trace.events


def _set_base_table(trace: Trace, table: pa.Table) -> None:
    if hasattr(trace, "_deferred"):
        trace._table = table  # type: ignore[attr-defined]
    else:
        trace.events = table


def _match(
    table: pa.Table, graphs: Sequence[GraphProvenance], user_code: UserCode, summary: dict[str, Any]
) -> tuple[np.ndarray | None, list[list[tuple[str, int, str]]]]:
    """Per event, the provenance entry whose lines it takes (-1: none), and each entry's lines."""
    from neuron_explorer.collectors.build.nesting import nearest_marked_ancestor

    n = table.num_rows
    summary.update(matched_calls=0, matched_events=0, graph_runs=0)
    if n == 0 or not graphs:
        return None, []
    words, codes = dict_parts(table.column("name"))
    words = [w if w is not None else "" for w in words]
    codes = np.where(codes < 0, len(words), codes)
    words.append("")
    kind_words, kind_codes = dict_parts(table.column("kind"))
    kinds = np.array([w if w is not None else "" for w in kind_words] + [""], dtype=object)[kind_codes]
    is_op = kinds == Kind.CPU_OP
    parent = to_numpy(table.column("parent_id"), fill=-1).astype(np.int64)
    rows = np.arange(n, dtype=np.int64)

    def rows_named(test: Any) -> np.ndarray:
        return np.array([bool(test(w)) for w in words])[codes]

    is_call = rows_named(lambda w: w.startswith(GRAPH_CALL_PREFIX))
    is_fwd_fn, is_bwd_fn = rows_named(lambda w: w == FORWARD_FN), rows_named(lambda w: w == BACKWARD_FN)
    is_region = rows_named(lambda w: w.startswith(REGION_PREFIX))
    runs = is_call | is_fwd_fn | is_bwd_fn | is_region
    if not runs.any():
        return None, []
    run_of = nearest_marked_ancestor(parent, np.where(runs, rows, -1))
    # kernel calls: ops named as a provenance kernel whose nearest enclosing op or run is a run
    # kernel ids: Inductor's C++ kernels are recorded as graph_<N>_<kernel name>
    op_index: dict[str, int] = {}
    kernel_id = np.array([op_index.setdefault(_GRAPH_PREFIX.sub("", w), len(op_index)) for w in words], np.int64)
    kcodes = kernel_id[codes]
    kernel_words: dict[int, bool] = {}  # kernel id -> generated (not an extern aten op)
    for g in graphs:
        for c in g.calls:
            code = op_index.get(c.op_name)
            if code is not None:
                kernel_words[code] = c.op_name == c.kernel
    if not kernel_words:
        return None, []
    named = np.zeros(len(op_index), bool)
    named[list(kernel_words)] = True
    container = nearest_marked_ancestor(parent, np.where(is_op | runs, rows, -1))
    outer = np.where(parent >= 0, container[np.maximum(parent, 0)], -1)
    cand = np.nonzero(is_op & named[kcodes] & (outer >= 0) & runs[np.maximum(outer, 0)])[0]
    if cand.size == 0:
        return None, []
    cand_run = run_of[parent[cand]]

    # each run: backward or not, and its compile id
    in_bwd = nearest_marked_ancestor(parent, np.where(is_bwd_fn, rows, -1))
    region_of = nearest_marked_ancestor(parent, np.where(is_region, rows, -1))
    fwd = to_numpy(table.column("fwd_id"), fill=-1).astype(np.int64) if "fwd_id" in table.column_names else None
    run_rows = np.unique(cand_run)
    backward = in_bwd[run_rows] >= 0
    region = region_of[run_rows]
    if fwd is not None and backward.any():
        # a backward run: the region of the forward op its backward node differentiates
        bwd_node = in_bwd[run_rows]
        f = np.where(backward, fwd[np.maximum(bwd_node, 0)], -1)
        region = np.where(backward, np.where(f >= 0, region_of[np.maximum(f, 0)], -1), region)
    compile_ids = [words[codes[r]][len(REGION_PREFIX) :] if r >= 0 else None for r in region.tolist()]
    summary["graph_runs"] = int(run_rows.size)

    # generated kernels each run calls (sets of name codes), then its graph
    gen = np.array([kernel_words.get(c, False) for c in range(len(op_index))])
    pos_of_run = np.searchsorted(run_rows, cand_run)
    pairs = np.unique(np.stack([pos_of_run, kcodes[cand]]), axis=1) if cand.size else np.zeros((2, 0), np.int64)
    called: list[set[int]] = [set() for _ in range(run_rows.size)]
    for p, c in zip(pairs[0].tolist(), pairs[1].tolist()):
        if gen[c]:
            called[p].add(c)
    graph_names = [{op_index[c.op_name] for c in g.calls if c.op_name in op_index} for g in graphs]
    choice_cache: dict[tuple[Any, ...], int] = {}
    graph_of_run = np.full(run_rows.size, -1, np.int64)
    for i in range(run_rows.size):
        key = (compile_ids[i], bool(backward[i]), frozenset(called[i]))
        hit = choice_cache.get(key)
        if hit is None:
            hit = choice_cache[key] = _choose_graph(graphs, graph_names, *key)
        graph_of_run[i] = hit

    # the j-th call of a kernel in a run -> the kernel's j-th handle in its graph
    entries: list[list[tuple[str, int, str]]] = []
    table_keys: list[tuple[int, int, int]] = []
    table_entry: list[int] = []
    handles_of: dict[tuple[int, int], int] = {}
    for gi, g in enumerate(graphs):
        ordinal: dict[int, int] = {}
        for c in g.calls:
            code = op_index.get(c.op_name)
            if code is None:
                continue
            j = ordinal.get(code, 0)
            ordinal[code] = j + 1
            lines = _user_lines(c.stacks, user_code)
            table_keys.append((gi, code, j))
            table_entry.append(len(entries) if lines else -1)
            entries.append(lines)
        for code, count in ordinal.items():
            handles_of[(gi, code)] = count
    cand_graph = graph_of_run[pos_of_run]
    ok = cand_graph >= 0
    cand, cand_graph, cand_run = cand[ok], cand_graph[ok], cand_run[ok]
    # ordinal of each call within (run, name): candidates are in event (start) order
    order = np.lexsort((cand, kcodes[cand], cand_run))
    grouped = np.stack([cand_run[order], kcodes[cand][order]])
    new_group = np.ones(order.size, bool)
    new_group[1:] = (grouped[:, 1:] != grouped[:, :-1]).any(axis=0)
    start_of = np.maximum.accumulate(np.where(new_group, np.arange(order.size), 0))
    ordinal_sorted = np.arange(order.size) - start_of
    ordinal_arr = np.empty(order.size, np.int64)
    ordinal_arr[order] = ordinal_sorted
    # one int64 key per (graph, kernel, ordinal); a kernel with one handle takes it every call
    width = len(op_index) + 1
    deepest = max((j for _, _, j in table_keys), default=0) + 1
    keys = np.array([(gi * width + code) * deepest + j for gi, code, j in table_keys], np.int64)
    base_keys = np.array(sorted(handles_of), np.int64).reshape(-1, 2)
    base = base_keys[:, 0] * width + base_keys[:, 1]
    counts = np.array([handles_of[(int(a), int(b))] for a, b in base_keys], np.int64)
    cand_base = cand_graph * width + kcodes[cand]
    count = _map_keys_first(cand_base, base, counts)
    j = np.where(count == 1, 0, ordinal_arr)
    found = _map_keys_first(np.where(j < deepest, cand_base * deepest + j, -1), keys, np.array(table_entry, np.int64))
    entry_of = np.full(n, -1, np.int64)
    entry_of[cand] = found
    matched = entry_of >= 0
    summary["matched_calls"] = int(np.count_nonzero(matched))
    if not matched.any():
        return None, entries

    # the events nested in a matched op, and the device work (and its launch) it issued
    owner = nearest_marked_ancestor(parent, np.where(matched, rows, -1))
    owner = np.where(owner >= 0, entry_of[np.maximum(owner, 0)], -1)
    if "op_id" in table.column_names:
        op = to_numpy(table.column("op_id"), fill=-1).astype(np.int64)
        linked = np.isin(kinds, _DEVICE_OR_LINKED) & (op >= 0)
        owner = np.where(linked & (owner < 0), entry_of[np.maximum(op, 0)], owner)
    summary["matched_events"] = int(np.count_nonzero(owner >= 0))
    return owner, entries


def _choose_graph(
    graphs: Sequence[GraphProvenance], names: list[set[int]], compile_id: str | None, backward: bool, called: frozenset
) -> int:
    """The graph a run ran (see the module docstring, step 3), or -1."""

    def agrees(g: GraphProvenance) -> tuple[bool, bool]:
        same_id = g.compile_id is not None and compile_id is not None and g.compile_id == compile_id
        same_dir = g.backward is not None and g.backward == backward
        id_ok = g.compile_id is None or compile_id is None or same_id
        dir_ok = g.backward is None or same_dir
        return id_ok and dir_ok, same_id and same_dir

    fits = []
    for i, g in enumerate(graphs):
        ok, exact = agrees(g)
        if not ok:
            continue
        if called:
            if called <= names[i]:
                fits.append((exact, i))
        elif exact:
            fits.append((exact, i))
    if not fits:
        return -1
    # the latest graph of the best agreement (a recompile replaces the graph it guards)
    best = max(e for e, _ in fits)
    return max(i for e, i in fits if e == best)


def _user_lines(stacks: Sequence[Sequence[tuple[str, int, str]]], user_code: UserCode) -> list[tuple[str, int, str]]:
    """Each stack's innermost user frame, in order, without repeats."""
    out: list[tuple[str, int, str]] = []
    for stack in stacks:
        for frame in reversed(stack):
            if user_code.is_user(frame[0]):
                if frame not in out:
                    out.append(frame)
                break
    return out


def _attribute(table: pa.Table, owner: np.ndarray, entries: list[list[tuple[str, int, str]]]) -> pa.Table:
    """Rewrite the src_* columns of the owned rows and fill ``src_lines``."""
    has = owner >= 0
    e = np.maximum(owner, 0)
    first = [lines[0] if lines else (None, -1, None) for lines in entries] + [(None, -1, None)]

    def dictionary(column: str, values: list[Any]) -> pa.Array:
        words, codes = dict_parts(table.column(column))
        words = list(words)
        index: dict[Any, int] = {w: i for i, w in enumerate(words)}
        new = np.empty(len(values), np.int64)
        for i, v in enumerate(values):
            if v not in index:
                index[v] = len(words)
                words.append(v)
            new[i] = index[v]
        codes = codes.astype(np.int64, copy=True)
        codes[has] = new[e[has]]
        return dictionary_from_codes(codes, words)

    line = to_numpy(table.column("src_line"), fill=-1).astype(np.int64, copy=True)
    entry_line = np.array([f[1] for f in first], np.int64)
    line[has] = entry_line[e[has]]
    columns = {
        "src_file": dictionary("src_file", [f[0] for f in first[:-1]]),
        "src_func": dictionary("src_func", [f[2] for f in first[:-1]]),
        "src_line": from_numpy(line, pa.int32(), line < 0),
        "src_precision": dictionary("src_precision", [Precision.COMPILED] * len(entries)),
        "src_lines": _lines_column(owner, entries),
    }
    for name, values in columns.items():
        typ = EVENTS_SCHEMA.field(name).type
        if values.type != typ:
            values = values.cast(typ)
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), EVENTS_SCHEMA.field(name), values)
        else:
            index = EVENTS_SCHEMA.get_field_index(name)
            position = sum(EVENTS_SCHEMA.get_field_index(c) < index for c in table.column_names)
            table = table.add_column(position, EVENTS_SCHEMA.field(name), values)
    return table


def _lines_column(owner: np.ndarray, entries: list[list[tuple[str, int, str]]]) -> pa.Array:
    flat = [line for lines in entries for line in lines]
    offsets = np.zeros(len(entries) + 1, np.int64)
    np.cumsum([len(lines) for lines in entries], out=offsets[1:])
    values = pa.StructArray.from_arrays(
        [
            string_array([f for f, _, _ in flat]),
            from_numpy(np.array([ln for _, ln, _ in flat], np.int64), pa.int32()),
            string_array([fn for _, _, fn in flat]),
        ],
        fields=list(SOURCE_LINE),
    )
    per_entry = pa.ListArray.from_arrays(from_numpy(offsets, pa.int32()), values, type=pa.list_(SOURCE_LINE))
    return per_entry.take(from_numpy(np.maximum(owner, 0), pa.int64(), owner < 0))
