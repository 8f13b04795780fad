"""The tables agents query: the events of every served trace and the analyzers' metrics tables.

Each table gets a leading ``trace`` column (the served trace's name) so one SQL connection
answers across traces. ``describe_tables`` is the self-description the ``schema`` tool
returns: every table, every column, its type, unit and meaning. The metrics tables are the
very tables ``neuron-explorer metrics`` writes to Parquet (``reports.metrics_parquet``), so SQL
here and DuckDB over the exported files give the same answers. Column meanings come from
their sources of truth: ``trace.schema.COLUMNS`` for events, ``analyzers.fields`` for metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from neuron_explorer.agents.catalog import TraceCatalog
from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.trace.schema import COLUMNS

#: What one row of each metrics table is (the tables `neuron-explorer metrics` writes, same columns).
METRICS_TABLES: dict[str, str] = {
    "steps": "One row per rank and profiler step: start_ns, end_ns, dur_ns, warm-up and outlier flags.",
    "attribution": "One row per rank, step and device: wall_ns split into exclusive categories by priority (one_time, compute, "
    "communication, copy, host_blocked, device_wait, data_loading, host_launch, host_python, untraced; *_ns and *_pct); "
    "they sum to wall_ns. The verdict and every finding's cost come from it.",
    "breakdown": "One row per rank, step and device: the TensorBoard-plugin split of wall_ns into compute, memcpy, "
    "memset, communication, host_exposed and idle ns (+ *_pct); kept for comparison; use attribution.",
    "temporal": "One row per rank and device over the whole trace: span, busy, idle and compute time (HTA's definitions).",
    "idle": "One row per rank, device and stream: idle_ns split into host_wait_ns, kernel_wait_ns and other_ns.",
    "kernels": "One row per kernel name: category, device_type, count, total/mean/min/max ns, pct of device time.",
    "ops": "One row per framework op name: count, host_total_ns, host_self_ns, device_ns, kernel_count.",
    "source_lines": "One row per user source line (src_file, src_line): host_ns, device_ns, kernel_count, alloc_bytes.",
    "launches": "One row per rank and device: kernel launch duration, launch delay and queue depth statistics.",
    "overlap": "One row per rank and device: communication time overlapped with compute, and exposed.",
    "neuron_operators": "Trainium only (AWS's Operator Table): one row per NeuronCore, framework layer and HLO op: "
    "instructions, device_ns, device_pct.",
    "neuron_summary": "Trainium only: one row per NeuronCore: AWS's Summary fields as columns (our units: _ns, _pct "
    "0-100) plus the kernel window (kernel_time_ns), MFU/HFU/MBU over it, DMA bytes of every packet group, bound.",
    "neuron_engines": "Trainium only: one row per NeuronCore engine (Tensor, Vector, Scalar, GpSimd, Sync) and DMA "
    "queue: instructions, waits, bytes, active_ns, kernel_util_pct, span_util_pct.",
    "op_perf": "One row per op group (name, shapes, dtypes): count, kernel_time_us, gflops and data_moved_mb per call, "
    "tflops_per_s, tb_per_s, flops_per_byte, bound (compute/memory), pct_of_peak, src_file, src_line.",
    "op_categories": "One row per op category: kernel_time_us, device_time_pct, modelled_pct, tflops_per_s, tb_per_s.",
    "rank_steps": "One row per rank and step: wall_ns, the attribution categories (*_ns) and busy_ns (compute + copy).",
    "collectives": "One row per collective instance matched across ranks (process group, step, order): arrival skew, "
    "last_rank (the one the others wait for), wait_ns it causes, bytes, xfer_ns, algbw_gbps, busbw_gbps, and the "
    "NCCL algorithm and protocol the kernel name carries.",
    "collective_sizes": "One row per collective, NCCL algorithm, protocol and power-of-two message size (size_bytes): "
    "count, median/min/max bus bandwidth (busbw_*_gbps), xfer_ns: what to hold against the link's peak.",
    "memory_at_peak": "Live memory at the trace's peak (scope trace) and each step's peak (scope step), per rank and "
    "device: live_bytes by phase (before_trace, before_first_step, activations, gradients, optimizer_state, "
    "temporaries, retained), source line, nn.Module path and op; pct_of_peak.",
    "memory_live": "One row per rank, device and step: allocated at start, end and peak, peak reserved, bytes "
    "allocated, survived_bytes (outlived the step) and retained_bytes (never freed in the trace: leaks).",
    "memory_replay": "One row per rank and device: whether the allocation/free replay agrees with the trace's Total "
    "Allocated at every event, the offset allocated before the trace, and where and why not.",
    "memory_fragmentation": "One row per rank and device with a caching allocator: reserved against allocated, the "
    "largest gap, reserved growth over steady steps, cudaMalloc/cudaFree calls inside steps.",
    "findings": "One row per finding: rule_id, severity, title, message, cost_ns, recommendation; metrics, "
    "threshold, time_ranges, event_ids and source_lines as JSON text.",
    "fields": "One row per column of every metrics table: table, field, type, unit, description (what fields.parquet holds).",
}

_TRACE_COLUMN = {
    "name": "trace",
    "type": "string",
    "unit": "",
    "description": "Name of the served trace the row belongs to.",
}

_SUFFIX_UNITS = (
    ("_ns", "ns"), ("_pct", "%"), ("_bytes", "bytes"), ("_gbps", "GB/s"), ("_count", "count"), ("_id", "id"),
    ("_ids", "id"),
)  # fmt: skip


def _with_trace(table: pa.Table, name: str) -> pa.Table:
    trace_col = pa.DictionaryArray.from_arrays(pa.array([0] * table.num_rows, pa.int32()), pa.array([name]))
    return table.add_column(0, "trace", trace_col)


def events_table(catalog: TraceCatalog) -> pa.Table:
    """Every served trace's events, one table, with a leading ``trace`` column (no copy of the columns)."""
    parts = [_with_trace(s.trace.events, s.name) for s in catalog]
    return pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]


def metrics_tables(catalog: TraceCatalog) -> tuple[dict[str, pa.Table], dict[str, str]]:
    """The analyzers' tables of every served trace, exactly as ``neuron-explorer metrics`` writes
    them, by name; and the traces whose analysis failed (with why)."""
    from neuron_explorer.reports.metrics_parquet import fields_table
    from neuron_explorer.reports.metrics_parquet import tables as analysis_tables

    parts: dict[str, list[pa.Table]] = {}
    errors: dict[str, str] = {}
    for served in catalog:
        try:
            tabs = analysis_tables(served.analysis())
        except Exception as exc:  # SQL over the events must outlive a failed analysis; say why it is missing
            errors[served.name] = str(exc) if isinstance(exc, NeuronExplorerError) else f"{type(exc).__name__}: {exc}"
            continue
        tabs["fields"] = fields_table(tabs)
        for name, table in tabs.items():
            parts.setdefault(name, []).append(_with_trace(table, served.name))
    return {name: _concat(p) for name, p in parts.items()}, errors


def _concat(parts: list[pa.Table]) -> pa.Table:
    """One table from the per-trace tables, even where their pandas-inferred types differ."""
    # An empty metrics frame (a CPU trace has no kernels) carries placeholder dtypes: drop it.
    parts = [p for p in parts if p.num_rows] or parts[:1]
    try:
        return pa.concat_tables(parts, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        names = list(dict.fromkeys(n for p in parts for n in p.column_names))
        clashing = {n for n in names if len({str(p.schema.field(n).type) for p in parts if n in p.column_names}) > 1}
        # The same column typed differently per trace: text is the one type every value converts to.
        fixed = []
        for part in parts:
            for n in clashing & set(part.column_names):
                part = part.set_column(part.column_names.index(n), n, part[n].cast(pa.string()))
            fixed.append(part)
        parts = fixed
        return pa.concat_tables(parts, promote_options="permissive")


def unit_of(column: str) -> str:
    for suffix, unit in _SUFFIX_UNITS:
        if column.endswith(suffix):
            return unit
    return "count" if column == "count" else ""


def describe_tables(tables: dict[str, pa.Table], only: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every queryable table: what a row is, its row count, and each column's type, unit and meaning."""
    wanted = set(only) if only else None
    out = []
    for name, table in tables.items():
        if wanted is not None and name not in wanted:
            continue
        if name == "events":
            desc = "One row per trace event (host ops, Python calls, runtime calls, kernels, copies, memory, ...): the Parquet trace."
            columns = [_TRACE_COLUMN] + [
                {"name": c.name, "type": _type_name(c.type), "unit": c.unit, "description": c.description}
                for c in COLUMNS
            ]
        else:
            desc = METRICS_TABLES.get(name, "")
            columns = [_TRACE_COLUMN]
            for field in table.schema:
                if field.name == "trace":
                    continue
                unit, meaning = _field_meaning(name, field.name)
                columns.append(
                    {"name": field.name, "type": _type_name(field.type), "unit": unit, "description": meaning}
                )
        out.append({"name": name, "description": desc, "rows": table.num_rows, "columns": columns})
    return out


def _field_meaning(table: str, column: str) -> tuple[str, str]:
    """(unit, meaning) from the analyzers' field descriptions, the one place they are written."""
    if table == "fields":
        return "", {"table": "Metrics table the field belongs to.", "field": "Column name.", "type": "Arrow type.",
                    "unit": "Unit (ns, %, bytes, ...).", "description": "What the field means."}.get(column, "")  # fmt: skip
    from neuron_explorer.analyzers.fields import describe

    try:
        return describe(table, column)
    except KeyError:  # a column the analyzers have not described yet: at least its unit
        return unit_of(column), ""


def _type_name(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t) or pa.types.is_large_string(t):
        return "string"
    return str(t)
