"""torch.profiler's in-memory results -> ``RawEvents`` -> ``Trace``, with no JSON in between.

Two sources, read once each:

- ``kineto_results.trace_activities()``: the records torch would write to JSON (ops,
  annotations, allocations, runtime calls, kernels, memcpys; integer ns, correlation and flow
  ids, args as a JSON fragment). Read column by column (``map`` over the pybind getters).
  Python calls are skipped here: the event tree gives them more cheaply and with more detail.
- ``kineto_results.experimental_event_tree()`` (``capture_tree``): exact calling lines.

Rows look exactly like the Kineto JSON import's (same categories, phases, args keys, fwdbwd and
ac2g flow endpoints), so ``build_trace`` resolves kinds, links, steps and inheritance the same
way for both; the exact lines travel in ``RawEvents.src``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.build.event_links import _map_keys_first
from neuron_explorer.collectors.build.normalize import build_trace
from neuron_explorer.collectors.build.raw_events import RawEvents
from neuron_explorer.collectors.build.source_map import MARKER_PREFIX, UserCode
from neuron_explorer.collectors.capture.capture_tree import _BACKWARD_PREFIX, FileResolver, TreeSources, walk_tree
from neuron_explorer.collectors.capture.inferred_steps import infer_steps
from neuron_explorer.collectors.capture.tree_columns import _python_rows, _src_columns
from neuron_explorer.collectors.kineto.kineto_json import _ARG_FIELDS, _args_decoder, _loose_array, _raw_text
from neuron_explorer.collectors.lines.operator_lines import OperatorLines
from neuron_explorer.trace.model import Trace

_PY_CAT = "python_function"
#: Activity types whose correlation id is a framework op's own id (the tree's TorchOp ids).
_OP_TYPES = ("cpu_op", "user_annotation")
_INSTANT_TYPES = ("cpu_instant_event",)
#: Kineto link types (ActivityType.h: kLinkFwdBwd = 1, kLinkAsyncCpuGpu = 2).
_FLOW_CAT = {1: "fwdbwd", 2: "ac2g"}


def convert_results(
    results: Any,
    metadata: dict[str, Any],
    user_code: UserCode | None = None,
    search_path: list[str] | None = None,
    cycle: int = 0,
    step_on: str | None = None,
) -> Trace:
    """Convert one profiler cycle's ``kineto_results`` into a ``Trace``; ``step_on``: see
    ``collectors.capture.inferred_steps``."""
    user_code = user_code or UserCode.default()
    pruned: dict[str, int] = {}
    operator_lines: dict[str, int] = {}
    markers = bool((metadata.get("profiler_options") or {}).get("exact_lines"))
    try:
        raw = results_to_raw(
            results,
            FileResolver(user_code, search_path),
            pruned=pruned,
            operator_lines=operator_lines,
            markers=markers,
        )
    except (AttributeError, ImportError, TypeError) as exc:
        # A torch whose in-memory results differ from what this reader knows (seen: torch 2.11
        # has no ``trace_activities()``): the trace comes through torch's own JSON export, with
        # the event tree's exact lines put back (``capture_fallback``), and says why.
        why = f"{type(exc).__name__}: {exc}"
        return _convert_through_json(results, metadata, cycle, why, user_code, search_path, step_on)
    raw, steps_from = infer_steps(raw, step_on)
    raw.columns["cycle"] = pa.array(np.full(raw.n, cycle, np.int32))
    meta = {**metadata, "pruned": pruned, "operator_lines": operator_lines}
    if steps_from:
        meta["steps_from"] = steps_from
    return build_trace(raw, meta, user_code=user_code)


def _convert_through_json(
    results: Any,
    metadata: dict[str, Any],
    cycle: int,
    why: str,
    user_code: UserCode,
    search_path: list[str] | None,
    step_on: str | None = None,
) -> Trace:
    """``results.save()`` (what ``export_chrome_trace`` writes) converted with the capture's
    metadata and ``capture_fallback`` naming the reason (``capture_fallback.convert_saved``).
    torch saves a result once only, so the file is kept (``saved_export``) for the user's own
    ``export_chrome_trace`` and removed when the process exits."""
    from neuron_explorer.collectors.capture.capture_fallback import convert_saved

    fd, path = tempfile.mkstemp(prefix=f"neuron-explorer-cycle{cycle}-", suffix=".json")
    os.close(fd)
    if not _SAVED:
        atexit.register(_remove_saved)
    _SAVED[id(results)] = path
    results.save(path)
    return convert_saved(path, results, metadata, cycle, why, user_code, search_path, step_on)


#: id(results) -> the Chrome JSON a fallback conversion saved them to (see _convert_through_json).
_SAVED: dict[int, str] = {}


def saved_export(results: Any) -> str | None:
    """The JSON file ``results`` were already saved to by a fallback conversion, if any."""
    path = _SAVED.get(id(results))
    return path if path is not None and os.path.exists(path) else None


def _remove_saved() -> None:
    for path in _SAVED.values():
        with contextlib.suppress(OSError):
            os.unlink(path)


def results_to_raw(
    results: Any,
    resolve: FileResolver,
    prune: bool | None = None,
    pruned: dict[str, int] | None = None,
    operator_lines: dict[str, int] | None = None,
    markers: bool = False,
) -> RawEvents:
    """``prune``, ``markers``: see ``capture_tree.walk_tree``; what was pruned is written into
    ``pruned``, what operator syntax was placed on lines into ``operator_lines``. Exact-lines
    markers are read by the walk and are no rows of their own."""
    acts = results.trace_activities()
    A = _activity_type(acts)
    types = _strings(A.type, acts)
    if markers:
        names = _strings(A.name, acts)
        keep = [i for i, (t, nm) in enumerate(zip(types, names)) if t != _PY_CAT and not nm.startswith(MARKER_PREFIX)]
    else:
        keep = [i for i, t in enumerate(types) if t != _PY_CAT]
    sub = [acts[i] for i in keep] if len(keep) != len(acts) else acts
    types = [types[i] for i in keep] if len(keep) != len(types) else types
    cols = _activity_columns(sub, types)
    try:
        since = int(results.trace_start_ns())
    except (AttributeError, TypeError, ValueError):
        since = None
    tree = walk_tree(
        results.experimental_event_tree(),
        resolve,
        _op_info(cols),
        prune=prune,
        markers=markers,
        operator_lines=OperatorLines(unchanged_since_ns=since),
    )
    if pruned is not None:
        pruned.update(tree.pruned_metadata())
    if operator_lines is not None:
        operator_lines.update(tree.operator_lines)
    return _assemble(sub, cols, tree)


def _activity_type(acts: list[Any]) -> Any:
    """The class of torch's activity records, whose unbound getters ``map`` calls at C speed.
    Read off the records themselves: its name and module moved between torch releases."""
    if not acts:
        return _NoActivities()
    kinds = {type(a) for a in acts}
    if len(kinds) != 1:
        raise TypeError(f"activity records of {len(kinds)} types; expected one")
    return kinds.pop()


class _NoActivities:
    """Getters for an empty record list (never called: ``map`` over nothing)."""

    def __getattr__(self, name: str) -> Any:  # pragma: no cover - nothing to read
        return lambda activity: None


def _ints(getter: Any, items: list[Any]) -> np.ndarray:
    return np.fromiter(map(getter, items), np.int64, len(items))


#: Stands in for a name torch can no longer read (see ``_strings``).
UNREADABLE = "<unreadable: code object freed during profiling>"


def _strings(getter: Any, items: list[Any]) -> list[str]:
    """``getter`` over ``items``, in one C-level pass when every value decodes.

    torch's Python tracer keeps borrowed pointers to code objects' file and function names; a
    code object freed while profiling (the top-level code of a module imported mid-run) leaves
    garbage behind, which pybind fails to decode. Those values become ``UNREADABLE`` instead of
    failing the whole capture (torch's own ``key_averages()`` raises on them)."""
    try:
        return list(map(getter, items))
    except UnicodeDecodeError:
        out = []
        for item in items:
            try:
                out.append(getter(item))
            except UnicodeDecodeError:
                out.append(UNREADABLE)
        return out


def _activity_columns(acts: list[Any], types: list[str]) -> dict[str, Any]:
    """The activities' own columns, read once through the pybind getters."""
    A = _activity_type(acts)
    n_act = len(acts)
    c: dict[str, Any] = {"n": n_act, "types": types}
    c["names"] = pa.array(_strings(A.name, acts), pa.string())
    c["start"] = _ints(A.timestamp, acts)
    c["dur"] = _ints(A.duration, acts)
    c["pid"] = _ints(A.device_id, acts)
    c["tid"] = _ints(A.resource_id, acts)
    c["corr"] = corr = _ints(A.correlation_id, acts)
    c["linked"] = linked = _ints(A.linked_correlation_id, acts)
    c["flow_id"] = _ints(A.flow_id, acts)
    meta = _strings(A.metadata_json, acts)

    c["cat"] = cat_arr = pa.array(types, pa.string())
    c["is_op"] = (
        np.asarray(pc.is_in(cat_arr, pa.array(_OP_TYPES)).to_numpy(zero_copy_only=False), bool)
        if n_act
        else np.zeros(0, bool)
    )
    c["is_instant"] = (
        np.asarray(pc.is_in(cat_arr, pa.array(_INSTANT_TYPES)).to_numpy(zero_copy_only=False), bool)
        if n_act
        else np.zeros(0, bool)
    )

    # args: {"External id": <linked op id, else own id>, <metadata>} as Kineto writes it
    ext = np.where(linked != 0, linked, corr)
    ext_text = pc.binary_join_element_wise('"External id": ', pa.array(ext, mask=corr == 0).cast(pa.string()), "")
    meta_arr = pa.array(meta, pa.string())
    meta_arr = pc.if_else(pc.equal(pc.utf8_length(meta_arr), 0), pa.scalar(None, pa.string()), meta_arr)
    meta_arr = pc.if_else(pc.equal(meta_arr, UNREADABLE), pa.scalar(None, pa.string()), meta_arr)
    body = pc.binary_join_element_wise(ext_text, meta_arr, ", ", null_handling="skip")
    c["args"] = args = pc.binary_join_element_wise("{", body, "}", "")
    c["typed"] = _typed(args, n_act)
    return c


def _op_info(c: dict[str, Any]) -> dict[int, tuple[bool, int]]:
    """Correlation id -> (is a backward node's root, autograd sequence number) of every op,
    from the activities: the tree walk then reads neither through pybind."""
    is_op = c["is_op"]
    if not is_op.any():
        return {}
    rows = np.nonzero(is_op)[0]
    names = c["names"].take(pa.array(rows))
    backward = np.asarray(pc.starts_with(names, _BACKWARD_PREFIX).to_numpy(zero_copy_only=False), bool)
    seq_col = c["typed"].get("sequence_nr")
    if seq_col is not None and not pa.types.is_integer(seq_col.type):
        return {}  # not what torch writes: let the walk read every op from the tree
    if seq_col is None:
        seq = np.full(rows.size, -1, np.int64)
    else:
        seq_all = np.asarray(pc.fill_null(seq_col.cast(pa.int64()), -1).to_numpy(zero_copy_only=False), np.int64)
        seq = seq_all[rows]
    return dict(zip(c["corr"][rows].tolist(), zip(backward.tolist(), seq.tolist())))


def _assemble(acts: list[Any], c: dict[str, Any], tree: TreeSources) -> RawEvents:
    A = _activity_type(acts)

    n_act = c["n"]
    names, start, dur, pid, tid = c["names"], c["start"], c["dur"], c["pid"], c["tid"]
    corr, flow_id, cat_arr, args = c["corr"], c["flow_id"], c["cat"], c["args"]
    is_op, is_instant = c["is_op"], c["is_instant"]

    # Exact sources: ops by correlation id, allocations by time.
    src_act = np.zeros(n_act, np.int64)
    if tree.op_corr:
        src_act = np.where(
            is_op, _map_keys_first(corr, np.asarray(tree.op_corr, np.int64), np.asarray(tree.op_src, np.int64)), 0
        )
    if tree.alloc_start:
        at = _map_keys_first(start, np.asarray(tree.alloc_start, np.int64), np.asarray(tree.alloc_src, np.int64))
        src_act = np.where(is_instant, at, src_act)
    src_act = np.maximum(src_act, 0)

    # Python calls, from the tree; their threads mapped to system thread ids through the ops.
    py = _python_rows(tree, corr[is_op], tid[is_op], pid)

    # Flow endpoints (fwdbwd: forward op -> backward node; ac2g: launch -> device work).
    flow_rows = np.nonzero(flow_id != 0)[0]
    flow_type = _ints(A.flow_type, [acts[i] for i in flow_rows.tolist()]) if flow_rows.size else np.zeros(0, np.int64)
    flow_start = np.fromiter(map(A.flow_start, [acts[i] for i in flow_rows.tolist()]), bool, flow_rows.size)
    flow_ok = np.isin(flow_type, list(_FLOW_CAT))
    flow_rows, flow_type, flow_start = flow_rows[flow_ok], flow_type[flow_ok], flow_start[flow_ok]
    nf = flow_rows.size

    ph_act = np.where(is_instant, "i", "X").astype(object)
    extra_act = pa.array(np.where(is_instant, '{"s": "t"}', None).astype(object), pa.string())

    n = n_act + py["n"] + nf
    raw = RawEvents(
        n=n,
        ph=pa.array(
            np.concatenate([ph_act, np.full(py["n"], "X", object), np.where(flow_start, "s", "f").astype(object)]),
            pa.string(),
        ),
        cat=pa.concat_arrays(
            [
                cat_arr,
                pa.array([_PY_CAT] * py["n"], pa.string()),
                pa.array([_FLOW_CAT[int(t)] for t in flow_type], pa.string()),
            ]
        ),
        name=pa.concat_arrays([names, py["name"], pa.array([_FLOW_CAT[int(t)] for t in flow_type], pa.string())]),
        pid=pa.array(np.concatenate([pid, py["pid"], pid[flow_rows]])),
        tid=pa.array(np.concatenate([tid, py["tid"], tid[flow_rows]])),
        start_ns=np.concatenate([start, py["start"], start[flow_rows]]),
        dur_ns=np.concatenate([dur, py["dur"], np.zeros(nf, np.int64)]),
        flow_id=pa.array(
            np.concatenate([np.zeros(n_act + py["n"], np.int64), flow_id[flow_rows]]),
            mask=np.concatenate([np.ones(n_act + py["n"], bool), np.zeros(nf, bool)]),
        ),
        args=pa.concat_arrays([args, py["args"], pa.nulls(nf, pa.string())]),
        extra=pa.concat_arrays(
            [
                extra_act,
                pa.nulls(py["n"], pa.string()),
                pa.array(np.where(flow_start, None, '{"bp": "e"}').astype(object), pa.string()),
            ]
        ),
        typed={k: pa.concat_arrays([v, pa.nulls(n - n_act, v.type)]) for k, v in c["typed"].items()},
        src=_src_columns(tree, np.concatenate([src_act, py["src"], np.zeros(nf, np.int64)])),
    )
    return raw


def _typed(args: pa.Array, n_act: int) -> dict[str, pa.Array]:
    """Decode the typed fields build_trace uses from the activities' args in one call."""
    if n_act == 0:
        return {}
    # One blob "[{...},{...}]" from the array's own buffers: each value gets a trailing comma
    # in one vectorized join, the data buffer is then contiguous JSON.
    with_comma = pc.binary_join_element_wise(args.fill_null("{}"), "", ",").cast(pa.large_string())
    offsets = np.frombuffer(with_comma.buffers()[1], np.int64)[with_comma.offset : with_comma.offset + n_act + 1]
    data = memoryview(with_comma.buffers()[2])[int(offsets[0]) : int(offsets[-1]) - 1]
    decoded = _args_decoder.decode(b"".join((b"[", data, b"]")))
    # Every field is decoded and absent ones dropped: cheaper than searching the text per key.
    fields = list(_ARG_FIELDS)
    out: dict[str, pa.Array] = {}
    for f in fields:
        values = list(map(attrgetter(f), decoded))
        if f in ("input_dims", "input_type"):
            if any(values):
                out[f] = _raw_text(values)[0]
        elif values.count(None) != len(values):
            out[f] = _loose_array(values)
    return out
