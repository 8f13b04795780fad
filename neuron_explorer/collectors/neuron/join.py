"""Joining a Neuron device profile with the framework (torch.profiler) trace of the same run.

1. Align: device time -> host clock (``align.align``: ``nc_exec_running`` events paired with
   ``ExecutionInfo``, else the Metadata wall clock). With neither, the first device execution
   is placed at the framework trace's first launch and the metadata says it is approximate.
2. Link: each device execution is attributed to the framework launch that started it: the last
   runtime call (``privateuse1_runtime``/``_driver``, e.g. the TorchNeuron execute call) that
   began at or before the execution's host start and no more than ``max_gap_ns`` earlier; with
   no runtime calls in the framework trace, the innermost framework op running at that moment.
   Every device event of the execution gets that call as ``launch_id``, its op as ``op_id``,
   its step, and (where the device profile had no StackFrame line) its source line.
3. Merge: one events table, sorted by start, every id column renumbered.

What could not be linked is counted, with the reason, in ``metadata["neuron"]["join"]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.collectors.neuron.align import Alignment, align, exec_events
from neuron_explorer.collectors.neuron.events import build_device_trace
from neuron_explorer.collectors.neuron.model import DeviceProfile
from neuron_explorer.trace.model import Trace, conform
from neuron_explorer.trace.schema import DEVICE_KINDS, Kind, Precision

ID_COLUMNS = ("parent_id", "launch_id", "op_id", "fwd_id", "capture_op_id")
#: Longest accepted delay between a framework launch call and the execution it started.
DEFAULT_MAX_GAP_NS = 50_000_000


def _np(col: pa.ChunkedArray | pa.Array, fill: int = -1) -> np.ndarray:
    return pc.fill_null(col, fill).to_numpy().astype(np.int64)


def _strings(col: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.cast(col, pa.string()).fill_null("").to_numpy(zero_copy_only=False), dtype=object)


def launch_candidates(framework: pa.Table) -> tuple[np.ndarray, str]:
    """Rows of the framework table that can launch device work, and what they are."""
    kind = _strings(framework["kind"])
    runtime = np.nonzero(kind == Kind.RUNTIME)[0]
    if runtime.size:
        return runtime, "runtime"
    return np.nonzero(kind == Kind.CPU_OP)[0], "cpu_op"


def fallback_alignment(profile: DeviceProfile, framework: pa.Table) -> Alignment:
    rows, _ = launch_candidates(framework)
    start = _np(framework["start_ns"])
    anchor = int(start[rows].min()) if rows.size else (int(start.min()) if start.size else 0)
    first_dev = int(profile.executions["start_ns"].min()) if len(profile.executions) else 0
    note = "no nc_exec_running events or wall clock: first device execution placed at the framework's first launch (approximate)"
    profile.warn(note)
    return Alignment("framework_first_launch", np.zeros(1, np.int64), np.array([anchor - first_dev], np.int64), 0, note)


def merge_tables(framework: pa.Table, device: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """One table sorted by start (longer first), ids renumbered; returns it and, for each new
    row, whether it came from ``device``."""
    n, m = framework.num_rows, device.num_rows
    framework, device = conform(framework), conform(device)
    start = np.concatenate([_np(framework["start_ns"], 0), _np(device["start_ns"], 0)])
    dur = np.concatenate([_np(framework["dur_ns"], 0), _np(device["dur_ns"], 0)])
    order = np.lexsort((np.arange(n + m), -dur, start))
    new_of_old = np.empty(n + m, np.int64)
    new_of_old[order] = np.arange(n + m)
    table = pa.concat_tables([framework, device], promote_options="permissive").combine_chunks()
    cols = {}
    for name in table.column_names:
        col = table[name]
        if name == "event_id":
            cols[name] = pa.array(np.arange(n + m, dtype=np.int64))
            continue
        if name in ID_COLUMNS:
            old = _np(col)
            # Device ids were 0..m-1 in their own table: shift them past the framework rows.
            old[n:] = np.where(old[n:] >= 0, old[n:] + n, -1)
            new = np.where(old >= 0, new_of_old[np.maximum(old, 0)], -1)[order]
            cols[name] = pa.array(new, pa.int64(), mask=new < 0)
            continue
        cols[name] = col.take(pa.array(order))
    merged = pa.table(cols)
    from_device = np.zeros(n + m, bool)
    from_device[n:] = True
    return conform(merged), from_device[order]


def link_device_work(
    table: pa.Table, from_device: np.ndarray, exec_host_starts: np.ndarray, max_gap_ns: int
) -> tuple[pa.Table, dict[str, Any]]:
    """Set launch_id / op_id / step / source of imported device rows (see the module docstring)."""
    kind = _strings(table["kind"])
    start = _np(table["start_ns"], 0)
    framework_rows = np.nonzero(~from_device)[0]
    cand_all, cand_kind = launch_candidates(table.filter(pa.array(~from_device)))
    cand = framework_rows[cand_all]
    is_dev_work = from_device & np.isin(kind, DEVICE_KINDS)
    dev_rows = np.nonzero(is_dev_work)[0]
    report: dict[str, Any] = {
        "device_events": int(dev_rows.size),
        "launch_kind": cand_kind,
        "max_gap_ns": int(max_gap_ns),
    }
    execs = np.sort(np.asarray(exec_host_starts, np.int64))
    if dev_rows.size == 0:
        report.update(linked_events=0, unlinked_events=0, executions=int(execs.size), linked_executions=0)
        return table, report
    if execs.size == 0:
        execs = np.array([start[dev_rows].min()], np.int64)
    # Execution of each device event; launch of each execution.
    ex_of = np.clip(np.searchsorted(execs, start[dev_rows], side="right") - 1, 0, execs.size - 1)
    launch_of_exec = np.full(execs.size, -1, np.int64)
    reasons: dict[str, int] = {}
    if cand.size:
        if cand_kind == "cpu_op":
            # Innermost op running at the execution start: among ops that began before it and
            # end after it, the latest-starting one.
            end = start + _np(table["dur_ns"], 0)
            for i, t in enumerate(execs.tolist()):  # one pass per execution, not per event
                live = cand[(start[cand] <= t) & (end[cand] >= t)]
                if live.size:
                    launch_of_exec[i] = live[np.argmax(start[live])]
        else:
            c_sorted = cand[np.argsort(start[cand], kind="stable")]
            pos = np.searchsorted(start[c_sorted], execs, side="right") - 1
            ok = pos >= 0
            pick = np.where(ok, c_sorted[np.maximum(pos, 0)], -1)
            ok &= (execs - start[np.maximum(pick, 0)]) <= max_gap_ns
            launch_of_exec = np.where(ok, pick, -1)
            before = int((pos < 0).sum())
            if before:
                reasons["no_launch_before_execution"] = before
            late = int(((pos >= 0) & ~ok).sum())
            if late:
                reasons["nearest_launch_too_early"] = late
    else:
        reasons["framework_trace_has_no_launch_events"] = int(execs.size)
    launch = launch_of_exec[ex_of]
    linked = launch >= 0
    op = _np(table["op_id"])
    step = _np(table["step"])
    launch_col = _np(table["launch_id"])
    op_col = op.copy()
    step_col = step.copy()
    rows = dev_rows[linked]
    la = launch[linked]
    if cand_kind == "runtime":
        launch_col[rows] = la
        op_col[rows] = op[la]
    else:
        op_col[rows] = la
    step_col[rows] = np.where(step[la] >= 0, step[la], step_col[rows])
    cols = {"launch_id": launch_col, "op_id": op_col, "step": step_col}
    table = table.set_column(
        table.schema.get_field_index("launch_id"), "launch_id", pa.array(launch_col, pa.int64(), mask=launch_col < 0)
    )
    table = table.set_column(
        table.schema.get_field_index("op_id"), "op_id", pa.array(op_col, pa.int64(), mask=op_col < 0)
    )
    table = table.set_column(
        table.schema.get_field_index("step"), "step", pa.array(step_col, pa.int32(), mask=step_col < 0)
    )
    table = _inherit_source(table, rows, cols["op_id"][rows] if cand_kind == "runtime" else la)
    report.update(
        executions=int(execs.size),
        linked_executions=int((launch_of_exec >= 0).sum()),
        linked_events=int(linked.sum()),
        unlinked_events=int((~linked).sum()),
        unlinked_reasons=reasons,
    )
    return table, report


def _inherit_source(table: pa.Table, rows: np.ndarray, ops: np.ndarray) -> pa.Table:
    """Device rows without a StackFrame line take their framework op's line (precision 'launch')."""
    line = _np(table["src_line"])
    ok = (line[rows] < 0) & (ops >= 0)
    ok &= line[np.maximum(ops, 0)] >= 0
    targets, sources = rows[ok], ops[ok]
    if not targets.size:
        return table
    idx = np.arange(table.num_rows)
    take = idx.copy()
    take[targets] = sources
    for name in ("src_file", "src_line", "src_func", "src_module"):
        col = table[name].combine_chunks() if isinstance(table[name], pa.ChunkedArray) else table[name]
        new = col.take(pa.array(take))
        table = table.set_column(table.schema.get_field_index(name), name, new)
    prec = np.asarray(pc.cast(table["src_precision"], pa.string()).to_numpy(zero_copy_only=False), dtype=object)
    prec[targets] = Precision.LAUNCH
    table = table.set_column(
        table.schema.get_field_index("src_precision"), "src_precision", pa.array(prec, pa.string()).dictionary_encode()
    )
    return table


def join_profiles(
    trace: Trace, profiles: list[DeviceProfile], source: Path, max_gap_ns: int = DEFAULT_MAX_GAP_NS
) -> Trace:
    alignments = []
    for p in profiles:
        a = align(p)
        if a.method == "none":
            a = fallback_alignment(p, trace.events)
        alignments.append(a)
        # Framework events of the system profile duplicate torch.profiler's own: drop them.
        if len(p.system):
            p.system = p.system[p.system["source"].astype(str) != "framework"]
    device_trace = build_device_trace(profiles, alignments)
    exec_starts = np.concatenate([_exec_host_starts(p, a) for p, a in zip(profiles, alignments)])
    merged, from_device = merge_tables(trace.events, device_trace.events)
    merged, report = link_device_work(merged, from_device, exec_starts, max_gap_ns)
    meta = dict(trace.metadata)
    neuron = dict(device_trace.metadata["neuron"])
    neuron["join"] = report | {"framework_trace": meta.get("source_file"), "device_profile": str(source)}
    meta["neuron"] = neuron
    meta["device_properties"] = list(meta.get("device_properties") or []) + device_trace.metadata["device_properties"]
    meta["device_types"] = sorted(
        set(meta.get("device_types") or []) | set(device_trace.metadata.get("device_types") or [])
    )
    meta["device_profile"] = str(source)
    for key in ("repairs", "dropped_events"):  # (the device profile's, after the framework trace's)
        if key in device_trace.metadata:
            meta[key] = device_trace.metadata[key] if key not in meta else meta[key] + device_trace.metadata[key]
    return Trace(merged, meta, path=None)


def _exec_host_starts(profile: DeviceProfile, alignment: Alignment) -> np.ndarray:
    if len(profile.executions):
        return alignment.apply(profile.executions["start_ns"].to_numpy(np.int64))
    host = exec_events(profile)
    if len(host):
        return host["start_ns"].to_numpy(np.int64)
    return alignment.apply(np.zeros(1, np.int64))
