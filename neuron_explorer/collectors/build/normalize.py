"""From raw profiler records to a ``Trace``: ``build_trace``, the in-memory build.

Every collector (JSON import, in-process capture, Neuron import) hands ``build_trace`` the same
``RawEvents`` columns (``raw_events``); it resolves, once, everything later code would otherwise
re-derive:

- ``kind`` and ``device_type`` from category, phase and name (``event_kinds``);
- ``parent_id``: the call tree of host spans per thread (``nesting.enclosing_spans``);
- string columns (category, ph, name, src_*) as integer codes into their distinct values:
  classification, lower-casing and matching run once per distinct value, never per event;
- ``launch_id`` (device work -> runtime call, by correlation id, else by ac2g flow),
  ``op_id`` (-> the framework op named by External id, else the innermost enclosing op),
  ``fwd_id`` (backward op -> forward op, by fwdbwd flow) (``event_links``), ``step``
  (ProfilerStep spans, ``steps``);
- the columns of each event's own arguments (``event_columns``);
- source attribution: the collector's exact lines when it has them, else the innermost user
  Python frame (function level); backward ops inherit their forward op's line, device work
  its launching op's (``source_attribution``).

Ancestor look-ups ("nearest enclosing X") use pointer jumping over ``parent_id`` arrays
(``nesting.nearest_marked_ancestor``): log2(depth) whole-column steps instead of a walk per
event. The out-of-core build (``collectors.kineto.spooled``) shares every step above but the
call tree and the joins.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.build import graph_replay
from neuron_explorer.collectors.build._conversion import release_freed_memory
from neuron_explorer.collectors.build.deferred import DeferredTrace
from neuron_explorer.collectors.build.event_columns import _narrow_int32, _nullable, schema_table, typed_columns
from neuron_explorer.collectors.build.event_kinds import (
    _GRAPH_FAMILY_OF,
    _HOST_CHILD_CODES,
    _HOST_LINKED_CODES,
    _HOST_SPAN_CODES,
    _ON_DEVICE_CODES,
    _classify,
    _Words,
)
from neuron_explorer.collectors.build.event_links import (
    _bind_flow_endpoints,
    _map_keys,
    is_ac2g_category,
    is_autograd_wrapper,
    is_fwdbwd_category,
)
from neuron_explorer.collectors.build.nesting import enclosing_spans, nearest_marked_ancestor
from neuron_explorer.collectors.build.raw_events import CARRIED, KINDS, K, RawEvents, _int_column
from neuron_explorer.collectors.build.source_attribution import attribute_source
from neuron_explorer.collectors.build.source_map import UserCode
from neuron_explorer.collectors.build.steps import _assign_steps, _drop_trailing_step
from neuron_explorer.trace.arrow import dictionary_from_codes, from_numpy, string_array
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.repairs import Repairs
from neuron_explorer.trace.schema import COLUMN_BY_NAME, SCHEMA_VERSION, Kind
from neuron_explorer.version import __version__

#: Traces with at least this many events give freed memory back to the system while they are
#: built (``release_freed_memory``).
TRIM_MIN_EVENTS = 1 << 20


def _no_trim() -> None:
    return None


def build_trace(
    raw: RawEvents,
    metadata: dict[str, Any],
    source: str | Path | None = None,
    user_code: UserCode | None = None,
) -> Trace:
    """Normalize raw records into a ``Trace`` (see the module docstring for what is resolved)."""
    user_code = user_code or UserCode.default()
    n = raw.n
    issues = dict(raw.issues)
    # Handing freed heap pages back pays on millions of events; on a capture of 100k it is
    # only ~30 calls walking the program's whole heap.
    trim = release_freed_memory if n >= TRIM_MIN_EVENTS else _no_trim
    base = metadata.get("base_time_ns")
    start_rel = np.asarray(raw.start_ns, np.int64)
    start_abs = start_rel + (int(base) if isinstance(base, int) else 0)
    dur_all = np.maximum(np.asarray(raw.dur_ns, np.int64), 0)

    # Rows sorted by start, the longer (enclosing) event first, then source order.
    order = np.lexsort((np.arange(n), -dur_all, start_abs))
    take = from_numpy(order, pa.int64())
    ph, cat, name = _Words.of(raw.ph), _Words.of(raw.cat), _Words.of(raw.name)
    ph.codes, cat.codes, name.codes = ph.codes[order], cat.codes[order], name.codes[order]
    pid = _int_column(raw.pid, n)[order]
    tid = _int_column(raw.tid, n)[order]
    start, dur = start_abs[order], dur_all[order]
    del start_rel, start_abs, dur_all
    # Reorder column by column on a shallow copy, so that (when the caller passed its last
    # reference) each input column is freed as soon as its reordered copy exists.
    raw = dataclasses.replace(raw, ph=None, cat=None, name=None, pid=None, tid=None, start_ns=None, dur_ns=None)
    raw.typed, raw.src, raw.columns = dict(raw.typed), dict(raw.src), dict(raw.columns)
    # The wide text columns stay in input order: the trace gathers them in event order one
    # row group at a time when it is written (see collectors.build.deferred).
    deferred = {"args": raw.args, "extra": raw.extra}
    for out_name, key in (("input_shapes", "input_dims"), ("input_types", "input_type")):
        if key in raw.typed:
            deferred[out_name] = raw.typed.pop(key)
    for out_name in _DEFERRED_COLUMNS:
        if out_name in raw.columns:  # a collector's own column wins, as below
            deferred[out_name] = raw.columns.pop(out_name)
    raw.args = raw.extra = None
    trim()
    raw.flow_id = _reorder(raw.flow_id, take)
    for d in (raw.typed, raw.src, raw.columns):
        for k in list(d):
            d[k] = _reorder(d[k], take)
            trim()  # the input chunks just freed
    del take
    typed = raw.typed
    # Columns a Chrome export of ours carried (``collectors.kineto.kineto_carry``) win where carried.
    # (one mask per carried column: a row carries only the columns the importer would not
    # derive back the same, so each is restored where carried and derived elsewhere)
    carried = {k[len(CARRIED) + 1 :]: raw.columns.pop(k) for k in list(raw.columns) if k.startswith(CARRIED + ":")}

    kind, dev_code, dtypes = _classify(ph, cat, name, typed, metadata)
    on_device = np.isin(kind, _ON_DEVICE_CODES)
    is_cpu_op = kind == K[Kind.CPU_OP]
    is_runtime = kind == K[Kind.RUNTIME]
    is_mem = kind == K[Kind.MEMORY]

    # --- device and stream
    # (Each input and intermediate is dropped as soon as it is used: on millions of events
    # every int64 column is tens of MB.)
    dev_arg = _int_column(typed.pop("device", None), n)
    device = np.where(on_device, np.where(dev_arg >= 0, dev_arg, pid), -1)
    del dev_arg
    mem_dev = _int_column(typed.pop("mem_device_id", None), n)
    not_cpu = np.array([d != "cpu" for d in dtypes])[dev_code]  # per device type, not per event
    device = _nullable(_narrow_int32(np.where(is_mem & not_cpu, mem_dev, device), "device", issues), pa.int32())
    del mem_dev, not_cpu
    stream_arg = _int_column(typed.pop("stream", None), n)
    stream = _nullable(np.where(on_device, np.where(stream_arg >= 0, stream_arg, tid), -1), pa.int64())
    del stream_arg
    typed.pop("mem_device_type", None)
    trim()

    # --- call tree
    parent = _host_parents(kind, pid, tid, start, dur)

    # --- links
    external = _int_column(typed.pop("external_id", None), n)
    correlation = _int_column(typed.pop("correlation", None), n)
    flow_id = _int_column(raw.flow_id, n)
    is_flow = kind == K[Kind.FLOW]
    is_s = ph.isin(("s",))

    # Device work without a correlation arg (old traces) takes it from its ac2g flow's id.
    ac2g = is_flow & cat.test(is_ac2g_category)
    if ac2g.any() and (on_device & (correlation < 0)).any():
        f_rows = np.nonzero(ac2g & ~is_s)[0]
        bound = _bind_flow_endpoints(f_rows, np.nonzero(on_device)[0], pid, tid, start)
        ok = (bound >= 0) & (correlation[np.maximum(bound, 0)] < 0)
        correlation[bound[ok]] = flow_id[f_rows[ok]]
        s_rows = np.nonzero(ac2g & is_s)[0]
        bound = _bind_flow_endpoints(s_rows, np.nonzero(is_runtime)[0], pid, tid, start)
        ok = (bound >= 0) & (correlation[np.maximum(bound, 0)] < 0)
        correlation[bound[ok]] = flow_id[s_rows[ok]]

    rows = np.arange(n, dtype=np.int64)
    launch = np.where(
        on_device, _map_keys(np.where(on_device, correlation, -1), np.where(is_runtime, correlation, -1), rows), -1
    )

    op_by_ext = _map_keys(external, np.where(is_cpu_op, external, -1), rows)
    enclosing_op = nearest_marked_ancestor(parent, np.where(is_cpu_op, rows, -1))
    enclosing_op_excl = np.where(parent >= 0, enclosing_op[np.maximum(parent, 0)], -1)
    del enclosing_op
    op = np.full(n, -1, np.int64)
    host_linked = np.isin(kind, _HOST_LINKED_CODES)
    op[host_linked] = np.where(op_by_ext[host_linked] >= 0, op_by_ext[host_linked], enclosing_op_excl[host_linked])
    del host_linked, enclosing_op_excl
    via_launch = on_device & (launch >= 0)
    op[via_launch] = op[launch[via_launch]]
    del via_launch
    direct = on_device & (op < 0)
    op[direct] = op_by_ext[direct]
    del direct, op_by_ext
    trim()

    # fwdbwd flows: 's' sits on the forward op, 'f' on the backward node; they share an id.
    fwd = np.full(n, -1, np.int64)
    fb = is_flow & cat.test(is_fwdbwd_category)
    if fb.any():
        s_rows = np.nonzero(fb & is_s)[0]
        f_rows = np.nonzero(fb & ph.isin(("f",)))[0]
        cpu_rows = np.nonzero(is_cpu_op)[0]
        s_op = _bind_flow_endpoints(s_rows, cpu_rows, pid, tid, start)
        f_op = _bind_flow_endpoints(f_rows, cpu_rows, pid, tid, start)
        fwd_of_flow = _map_keys(flow_id[f_rows], np.where(s_op >= 0, flow_id[s_rows], -1), s_op)
        ok = (f_op >= 0) & (fwd_of_flow >= 0)
        fwd[f_op[ok]] = fwd_of_flow[ok]
        # The autograd engine wraps each node in "evaluate_function: XBackward0"; it is the
        # same backward work, so it links to the same forward op.
        wrapper = parent[f_op[ok]]
        has_wrapper = wrapper >= 0
        if has_wrapper.any():
            w = wrapper[has_wrapper]
            is_wrap = name.test(is_autograd_wrapper)[w]
            fwd[w[is_wrap]] = fwd_of_flow[ok][has_wrapper][is_wrap]
        # Ops nested inside a backward node belong to the same forward op.
        fwd = np.where(is_cpu_op, nearest_marked_ancestor(parent, fwd), -1)
    del flow_id, is_flow, is_s, ac2g, fb
    trim()

    # --- steps (a trailing partial step is demoted to a plain annotation, see collectors.build.step_tail)
    # (inferred steps, collectors.capture.inferred_steps, end where the work ends: none is a tail)
    dropped_steps = [] if metadata.get("steps_from") else _drop_trailing_step(kind, name, start, dur)
    step = _narrow_int32(_assign_steps(kind, name, start, dur, op, launch, on_device), "step number", issues)

    # --- source attribution (work replayed from a CUDA/HIP graph: the lines of its capture)
    graph = _graph_replays(kind, name, pid, tid, start, launch, typed.get("graph_id"))
    src = attribute_source(
        raw.src, name, kind, parent, op, fwd, on_device | is_runtime | is_mem, user_code, launch, graph
    )
    raw.src = {}
    capture_op = np.full(n, -1, np.int64)
    if graph is not None:
        capture_op[graph.rows] = op[graph.calls]

    kind_arr = pa.DictionaryArray.from_arrays(from_numpy(kind, pa.int32()), string_array(list(KINDS)))
    dtype_arr = pa.DictionaryArray.from_arrays(from_numpy(dev_code, pa.int32()), string_array(dtypes))
    if "device_type" in raw.columns:  # a collector that knows better (in-process capture)
        given = raw.columns["device_type"].cast(pa.string())
        dtype_arr = pc.if_else(pc.is_null(given), dtype_arr.cast(pa.string()), given)

    rank = int(metadata.get("rank", 0) or 0)

    def pop(key: str) -> Any:  # each typed input is released as soon as its output column exists
        trim()  # (the previous one's)
        return typed.pop(key, None)

    cols: dict[str, Any] = {
        "event_id": from_numpy(rows, pa.int64()),
        "rank": from_numpy(np.full(n, rank, np.int32), pa.int32()),
        "kind": kind_arr,
        "category": dictionary_from_codes(cat.codes, cat.words),
        "ph": dictionary_from_codes(ph.codes, ph.words),
        "name": dictionary_from_codes(name.codes, name.words),
        "device_type": dtype_arr,
        "device": device,
        "stream": stream,
        "pid": from_numpy(pid, pa.int64()),
        "tid": from_numpy(tid, pa.int64()),
        "start_ns": from_numpy(start, pa.int64()),
        "dur_ns": from_numpy(dur, pa.int64()),
        "parent_id": _nullable(parent, pa.int64()),
        "correlation_id": _nullable(correlation, pa.int64()),
        "external_id": _nullable(external, pa.int64()),
        "launch_id": _nullable(launch, pa.int64()),
        "op_id": _nullable(op, pa.int64()),
        "fwd_id": _nullable(fwd, pa.int64()),
        "capture_op_id": _nullable(capture_op, pa.int64()),
        "step": _nullable(step, pa.int32()),
        "cycle": _zero_null(raw.columns.get("cycle"), n),
        **src,
        **typed_columns(typed, kind, name, n, issues, pop),
        "flow_id": raw.flow_id,
    }
    for k, v in raw.columns.items():
        if k in COLUMN_BY_NAME and k not in ("device_type", "cycle"):
            mask = carried.get(k)
            if mask is not None and k not in cols:  # a column this importer never derives (hlo_name)
                cols[k] = pa.nulls(n, _plain_type(COLUMN_BY_NAME[k].type))
            cols[k] = v if mask is None else _where(mask, v, cols[k])
    raw.flow_id = None
    del pid, tid, start, dur, parent, correlation, external, launch, op, fwd, step, device, stream, src, capture_op
    trim()
    table = schema_table(cols, n, skip=deferred)
    meta = dict(metadata)
    meta.setdefault("collector_version", __version__)
    meta["schema_version"] = SCHEMA_VERSION
    repairs = Repairs()
    repairs.merge(issues)
    repairs.record(meta)
    meta["device_types"] = sorted({dtypes[c] for c in np.unique(dev_code).tolist()}) if n else []
    if dropped_steps:
        meta["dropped_steps"] = [{"rank": rank, **d} for d in dropped_steps]
    if graph is not None:
        meta["graph_replay"] = graph.metadata
    trim()
    return DeferredTrace(table, deferred, order, meta)


def _host_parents(kind: np.ndarray, pid: np.ndarray, tid: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Innermost enclosing host span of every host event on its thread (rows already sorted
    by start, longer first)."""
    n = len(kind)
    parent = np.full(n, -1, np.int64)
    rows = np.nonzero(np.isin(kind, _HOST_CHILD_CODES))[0]
    if rows.size == 0:
        return parent
    order = rows[np.lexsort((rows, tid[rows], pid[rows]))]  # stable by thread, keeps start order
    p, t = pid[order], tid[order]
    new_thread = np.ones(order.size, bool)
    new_thread[1:] = (p[1:] != p[:-1]) | (t[1:] != t[:-1])
    del p, t
    is_span = np.isin(kind[order], _HOST_SPAN_CODES) & (dur[order] > 0)
    s_ord = start[order]
    found = enclosing_spans(s_ord, s_ord + dur[order], is_span, new_thread)
    parent[order] = np.where(found >= 0, order[np.maximum(found, 0)], -1)
    return parent


def _graph_replays(
    kind: np.ndarray,
    name: _Words,
    pid: np.ndarray,
    tid: np.ndarray,
    start: np.ndarray,
    launch: np.ndarray,
    graph_id: Any,
) -> graph_replay.GraphReplays | None:
    """The CUDA/HIP graph replay plan of the trace (``collectors.build.graph_replay``), or None."""
    is_runtime = kind == K[Kind.RUNTIME]
    role_w, family_w = graph_replay.runtime_roles(name.words, np.unique(name.codes[is_runtime]))
    role = role_w[name.codes]
    calls = np.nonzero(is_runtime & (role != graph_replay.NONE))[0]
    if not (role[calls] == graph_replay.GRAPH_LAUNCH).any() and not (role[calls] == graph_replay.BEGIN).any():
        return None
    launched = launch[launch >= 0]
    ran = np.zeros(len(kind), bool)
    ran[launched] = True
    family_of_kind = np.full(len(KINDS), -1, np.int8)
    for k, fam in _GRAPH_FAMILY_OF.items():
        family_of_kind[K[k]] = fam
    dev = np.nonzero((family_of_kind[kind] >= 0) & (launch >= 0))[0]
    gid = _int_column(graph_id, len(kind))
    return graph_replay.plan_replays(
        calls,
        role[calls],
        family_w[name.codes[calls]],
        pid[calls],
        tid[calls],
        start[calls],
        ran[calls],
        dev,
        launch[dev],
        family_of_kind[kind[dev]],
        start[dev],
        gid[dev],
    )


#: Text columns left in input order until the trace is written (``collectors.build.deferred``).
_DEFERRED_COLUMNS = ("args", "extra", "input_shapes", "input_types")


def _zero_null(arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None:
        return from_numpy(np.zeros(n, np.int32), pa.int32())
    return arr.fill_null(0) if arr.null_count else arr


def _plain_type(typ: pa.DataType) -> pa.DataType:
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def _where(mask: pa.Array, given: pa.Array, derived: pa.Array) -> pa.Array:
    """``given`` where ``mask`` is true, else ``derived`` (as plain, undictionaried types)."""
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks()
    given, derived = ((a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a) for a in (given, derived))
    given, derived = (a.cast(a.type.value_type) if pa.types.is_dictionary(a.type) else a for a in (given, derived))
    if given.type != derived.type:
        given = given.cast(derived.type)
    return pc.if_else(mask.fill_null(False), given, derived)


def _reorder(arr: pa.Array | pa.ChunkedArray, take: pa.Array) -> pa.Array:
    out = arr.take(take)
    return out.chunk(0) if isinstance(out, pa.ChunkedArray) and out.num_chunks == 1 else out
