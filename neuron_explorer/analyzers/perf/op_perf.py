"""The op_perf table: per op group (name + shapes + dtypes), FLOPs, bytes and the roofline.

1. Every unit of measured work gets the op that owns it (``perf.ownership``): a device event
   its issuing op or a composite ancestor of it (SDPA owns its flash kernel); on a host-only
   trace the leaf framework ops, with their own host time, stand in for kernels.
2. Owners are grouped by (name, input_shapes, input_types) strings; each *group* is modelled
   once (``models.model``) from its first call's arguments, so the cost is per distinct shape,
   not per event.
3. Achieved FLOP/s and bytes/s are the group's FLOPs and bytes over the device time of all its
   kernels (memsets included, as TraceLens counts them); the roofline places the group's
   arithmetic intensity against the device's compute and memory roofs (``perf.devices``).
Device events without an op (a profiling window that cut off their launch, CUDA graph replays)
are still counted in the category table, classified by kernel name.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neuron_explorer.analyzers.core.columns import lookup, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.perf import models
from neuron_explorer.analyzers.perf.devices import DeviceSpec
from neuron_explorer.analyzers.perf.ownership import CAT_INDEX, Work, work_units
from neuron_explorer.analyzers.perf.shapes import non_contiguous, parse_args
from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.validate import conform

OP_PERF_COLUMNS = (
    "name",
    "category",
    "shapes",
    "dtypes",
    "count",
    "kernel_time_us",
    "gflops",
    "data_moved_mb",
    "tflops_per_s",
    "tb_per_s",
    "flops_per_byte",
    "bound",
    "pct_of_peak",
    "peak_tflops_per_s",
    "compute_dtype",
    "params",
    "device_time_pct",
    "src_file",
    "src_line",
)
CATEGORY_COLUMNS = ("category", "kernel_time_us", "device_time_pct", "modelled_pct", "tflops_per_s", "tb_per_s")
MB = 1024.0 * 1024.0  # TraceLens's "MB" is MiB


def empty_op_perf() -> pd.DataFrame:
    text = {"name", "category", "shapes", "dtypes", "bound", "compute_dtype", "params", "src_file"}
    ints = {"count", "src_line"}
    return pd.DataFrame(
        {c: pd.Series(dtype="object" if c in text else "int64" if c in ints else "float64") for c in OP_PERF_COLUMNS}
    )


def _shape_rows(trace: Trace) -> pa.Table | None:
    """rank, event_id, input_shapes, input_types and the events-table row of every op that
    recorded shapes; None when the trace has none (then nothing can be modelled)."""
    ev = trace.events
    if "input_shapes" not in ev.column_names or ev.num_rows == 0:
        return None
    shapes = ev["input_shapes"]
    if shapes.null_count == len(shapes):
        return None
    idx = pc.indices_nonzero(pc.is_valid(shapes))
    cols = ["rank", "event_id", "input_shapes"] + (["input_types"] if "input_types" in ev.column_names else [])
    sub = ev.select(cols).take(idx)
    return sub.append_column("row", pc.cast(idx, pa.int64()))


def _args_of(trace: Trace, rows: np.ndarray) -> list[str | None]:
    """The raw ``args`` JSON of the given events-table rows: from the loaded table, else read
    from the trace file (``analyze`` loads only the columns it needs; the models need strides
    and concrete inputs of a few hundred representative calls, so only the row groups that
    hold them are read)."""
    if not len(rows):
        return []
    if "args" in trace.events.column_names:
        return trace.events["args"].take(pa.array(rows, pa.int64())).to_pylist()
    path = trace.path
    if path is not None and path.is_dir():  # a run directory: the ranks' args, in read order
        try:
            col = Trace.read(path, columns=["args"]).events["args"]
        except NeuronExplorerError:
            return [None] * len(rows)
        if len(col) != trace.events.num_rows:
            return [None] * len(rows)
        return col.take(pa.array(rows, pa.int64())).to_pylist()
    if path is None or not path.is_file() or path.suffix not in (".parquet", ".pq"):
        return [None] * len(rows)
    try:
        with pq.ParquetFile(path) as pf:
            if pf.metadata.num_rows != trace.events.num_rows or "args" not in pf.schema_arrow.names:
                return [None] * len(rows)
            bounds = np.cumsum([0] + [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)])
            groups = np.unique(np.searchsorted(bounds, rows, side="right") - 1)
            col = conform(pf.read_row_groups([int(g) for g in groups], columns=["args"]), path)["args"]
    except (OSError, pa.ArrowException):  # a file we cannot re-read just gives no concrete inputs
        return [None] * len(rows)
    # rows -> positions in the concatenation of the row groups read
    offsets = np.cumsum([0] + [int(bounds[g + 1] - bounds[g]) for g in groups])
    g_of = np.searchsorted(bounds, rows, side="right") - 1
    local = rows - bounds[g_of] + offsets[np.searchsorted(groups, g_of)]
    return col.take(pa.array(local, pa.int64())).to_pylist()


def op_perf(frames: TraceFrames, spec: DeviceSpec | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(op_perf table, category table); see the module docstring and docs/rules.md."""
    work = work_units(frames)
    if not len(work.dur_ns):
        return empty_op_perf(), pd.DataFrame({c: pd.Series(dtype="object") for c in CATEGORY_COLUMNS})
    dur = work.dur_ns
    total_ns = float(dur.sum())
    owner = work.owner
    event_cat = work.category.copy()
    modelled = np.zeros(len(dur), bool)
    flops_ev = np.zeros(len(dur))
    bytes_ev = np.zeros(len(dur))
    table = empty_op_perf()
    if (owner >= 0).any():
        table, event_group, share = _group_table(frames, work, spec, total_ns)
        # each work unit's row in the table, so a finding on a row can name its work (rules/_edits.py)
        frames.memo("op_perf_units", lambda: (event_group, owner, dur, work.host_only))
        has = event_group >= 0
        g = event_group[has]
        event_cat[has] = np.array([CAT_INDEX[c] for c in table["category"]], np.int64)[g]
        modelled[has] = table["gflops"].notna().to_numpy()[g]
        flops_ev[has] = (table["gflops"].fillna(0).to_numpy(np.float64) * 1e9)[g] * share[has]
        bytes_ev[has] = (table["data_moved_mb"].fillna(0).to_numpy(np.float64) * MB)[g] * share[has]
    return table, _category_table(event_cat, dur, modelled, flops_ev, bytes_ev, total_ns)


def _codes(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Integer codes (-1: null) and the category strings of a categorical (or any) column."""
    cat = series if isinstance(series.dtype, pd.CategoricalDtype) else series.astype("category")
    return cat.cat.codes.to_numpy().astype(np.int64), [str(c) for c in cat.cat.categories]


def _group_table(
    frames: TraceFrames, work: Work, spec: DeviceSpec | None, total_ns: float
) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The op_perf table, each work unit's row in it (-1: none) and its share of its call's time."""
    host = frames.host
    owner, dur, kernel_cat = work.owner, work.dur_ns, work.category
    linked = owner >= 0
    # one entry per owning op call: its device time and collective bytes
    calls, inv = np.unique(owner[linked], return_inverse=True)
    call_ns = np.bincount(inv, weights=dur[linked], minlength=len(calls))
    call_bytes = np.bincount(inv, weights=work.bytes[linked], minlength=len(calls))
    name_codes, name_values = _codes(host["name"])
    call_name = name_codes[calls]
    # shapes and dtypes of each call, as codes of their distinct strings
    call_row = np.full(len(calls), -1, np.int64)
    call_shape = np.full(len(calls), -1, np.int64)
    call_type = np.full(len(calls), -1, np.int64)
    shape_values: list[str] = []
    type_values: list[str] = []
    rows = _shape_rows(frames.trace)
    if rows is not None:
        at = lookup(
            ukey(rows["rank"].to_numpy(zero_copy_only=False), rows["event_id"].to_numpy(zero_copy_only=False)),
            ukey(host["rank"].to_numpy()[calls], host["event_id"].to_numpy()[calls]),
        )
        ok = at >= 0
        sh = pc.dictionary_encode(rows["input_shapes"]).combine_chunks()
        shape_values = sh.dictionary.to_pylist()
        call_shape[ok] = sh.indices.to_numpy(zero_copy_only=False)[at[ok]]
        if "input_types" in rows.column_names:
            ty = pc.dictionary_encode(pc.fill_null(rows["input_types"], "")).combine_chunks()
            type_values = ty.dictionary.to_pylist()
            call_type[ok] = ty.indices.to_numpy(zero_copy_only=False)[at[ok]]
        call_row[ok] = rows["row"].to_numpy()[at[ok]]
    ns_, nt_ = len(shape_values) + 1, len(type_values) + 1
    key = (call_name + 1) * (ns_ * nt_) + (call_shape + 1) * nt_ + (call_type + 1)
    _, first, gcall = np.unique(key, return_index=True, return_inverse=True)
    n_groups = len(first)
    count = np.bincount(gcall, minlength=n_groups)
    kernel_ns = np.bincount(gcall, weights=call_ns, minlength=n_groups)
    comm_bytes = np.bincount(gcall, weights=call_bytes, minlength=n_groups)
    # the kernels' category decides for ops whose name does not (most time wins)
    ev_group = np.full(len(owner), -1, np.int64)
    ev_group[linked] = gcall[inv]
    ncat = len(models.CATEGORIES)
    by_cat = np.bincount(ev_group[linked] * ncat + kernel_cat[linked], weights=dur[linked], minlength=n_groups * ncat)
    kernel_category = [models.CATEGORIES[i] for i in by_cat.reshape(n_groups, ncat).argmax(axis=1)]
    out = pd.DataFrame(
        {
            "name": [name_values[c] if c >= 0 else "" for c in call_name[first]],
            "shapes": [shape_values[c] if c >= 0 else None for c in call_shape[first]],
            "dtypes": [type_values[c] if c >= 0 else None for c in call_type[first]],
            "count": count.astype(np.int64),
            "kernel_ns": kernel_ns,
            "comm_bytes": comm_bytes,
            "row": call_row[first],
        }
    )
    out["src_file"], out["src_line"] = _top_lines(host, calls, gcall, call_ns, n_groups)
    # a host-only trace's wrapper ops (linear around addmm) carry no model: FLOPs count once
    no_model = (
        np.bincount(gcall, weights=work.wrapper[calls].astype(np.float64), minlength=n_groups) > 0
        if work.wrapper is not None
        else np.zeros(n_groups, bool)
    )
    # the share of each group's kernel time on the matrix units, by kernel name (TF32 vs fp32)
    tensor_core = np.zeros(n_groups, bool)
    if work.tensor_core is not None:
        tc_ns = np.bincount(ev_group[linked], weights=dur[linked] * work.tensor_core[linked], minlength=n_groups)
        tensor_core = tc_ns > 0.5 * kernel_ns
    _apply_models(out, frames, kernel_category, spec, no_model, tensor_core)
    out["device_time_pct"] = 100.0 * out["kernel_ns"] / total_ns if total_ns else np.nan
    order = np.argsort(-out["kernel_ns"].to_numpy(), kind="stable")
    rank_of = np.empty(n_groups, np.int64)
    rank_of[order] = np.arange(n_groups)
    out = out.iloc[order].reset_index(drop=True)
    out["kernel_time_us"] = out["kernel_ns"] / 1e3
    event_group = np.where(ev_group >= 0, rank_of[np.maximum(ev_group, 0)], -1)
    # each kernel's share of its call's time, to spread the call's FLOPs over its kernels
    share = np.zeros(len(owner))
    cns = call_ns[inv]
    share[linked] = np.divide(dur[linked], cns, out=np.zeros(len(cns)), where=cns > 0)
    return out[list(OP_PERF_COLUMNS)], event_group, share


def _top_lines(
    host: pd.DataFrame, calls: np.ndarray, gcall: np.ndarray, call_ns: np.ndarray, n_groups: int
) -> tuple[list[str | None], np.ndarray]:
    """Per group, the source line (file, line) that holds most of its device time."""
    files: list[str | None] = [None] * n_groups
    lines = np.full(n_groups, -1, np.int64)
    if "src_file" not in host.columns or "src_line" not in host.columns:
        return files, lines
    fcodes, fvalues = _codes(host["src_file"])
    fc = fcodes[calls]
    ln = host["src_line"].to_numpy()[calls].astype(np.int64)
    ok = (fc >= 0) & (ln >= 0)
    if not ok.any():
        return files, lines
    combo = pd.DataFrame({"g": gcall[ok], "f": fc[ok], "l": ln[ok], "ns": call_ns[ok]})
    agg = combo.groupby(["g", "f", "l"], sort=False)["ns"].sum().reset_index()
    agg = agg.sort_values(["g", "ns"], ascending=[True, False], kind="stable").drop_duplicates("g")
    for g, f, line in zip(agg["g"].to_numpy(), agg["f"].to_numpy(), agg["l"].to_numpy()):
        files[int(g)] = fvalues[int(f)]
        lines[int(g)] = int(line)
    return files, lines


def _apply_models(
    out: pd.DataFrame,
    frames: TraceFrames,
    kernel_category: list[str],
    spec: DeviceSpec | None,
    no_model: np.ndarray,
    tensor_core: np.ndarray,
) -> None:
    """Model each group once from its first call's arguments; fill the roofline columns.

    The peak is the one of the math the kernels ran: an fp32 matrix op whose kernels run on
    tensor cores (``cutlass_80_tensorop_s1688gemm``, ``sm80_xmma_..._tf32``) did TF32 math
    where the device has no fp32 matrix rate (NVIDIA: PyTorch's ``allow_tf32``), so it is held
    against the TF32 peak; on CDNA the matrix units take fp32 itself, at the fp32 matrix rate."""
    rows = out["row"].to_numpy()
    args = iter(_args_of(frames.trace, rows[rows >= 0]))
    flops, data, dtype, matrix, params, category, shapes_txt, dtypes_txt = [], [], [], [], [], [], [], []
    tf32 = spec is not None and "tf32" in spec.matrix and "fp32" not in spec.matrix
    for name, shapes, dtypes, row, kcat, comm, skip, tc in zip(
        out["name"], out["shapes"], out["dtypes"], rows, kernel_category, out["comm_bytes"], no_model, tensor_core
    ):
        parsed = parse_args(shapes, dtypes, next(args)) if row >= 0 else None
        shapes_txt.append(_compact(parsed.shapes) if parsed else None)
        dtypes_txt.append(_compact(parsed.types) if parsed else None)
        m = None if skip else models.model(name, parsed)
        cat = m.category if m else (models.category_of(name) or kcat)
        category.append(cat)
        if m is None and cat == "communication" and comm > 0:
            flops.append(0.0)
            data.append(float(comm))
            dtype.append(None)
            matrix.append(False)
            params.append('{"bytes":"collective message size"}')
            continue
        flops.append(m.flops if m else np.nan)
        data.append(m.bytes if m else np.nan)
        if m is not None and m.matrix and m.dtype == "fp32" and tc and tf32:
            m.params["math"] = "tf32 (tensor-core kernels)"
            dtype.append("tf32")
        else:
            dtype.append(m.dtype if m else None)
        matrix.append(bool(m.matrix) if m else False)
        if m is not None and parsed is not None:
            strided = non_contiguous(parsed, m.matrix)
            if strided:
                m.params["non_contiguous"] = strided
        params.append(_compact(m.params) if m else None)
    out["shapes"] = shapes_txt
    out["dtypes"] = dtypes_txt
    count = out["count"].to_numpy(np.float64)
    f = np.array(flops, np.float64)
    b = np.array(data, np.float64)
    # communication rows carry the summed message bytes of all calls: make them per call
    is_comm = np.array([c == "communication" for c in category]) & (out["comm_bytes"].to_numpy() > 0)
    b = np.where(is_comm & np.isfinite(b), b / np.maximum(count, 1), b)
    secs = out["kernel_ns"].to_numpy(np.float64) / 1e9
    with np.errstate(divide="ignore", invalid="ignore"):
        achieved_flops = np.where(secs > 0, f * count / secs, np.nan)
        achieved_bw = np.where(secs > 0, b * count / secs, np.nan)
        ai = np.where(b > 0, f / b, np.nan)
    out["category"] = category
    out["gflops"] = f / 1e9
    out["data_moved_mb"] = b / MB
    out["tflops_per_s"] = achieved_flops / 1e12
    out["tb_per_s"] = achieved_bw / 1e12
    out["flops_per_byte"] = ai
    out["compute_dtype"] = dtype
    out["params"] = params
    peak = np.array(
        [spec.peak_flops(d, mx) if spec is not None and d else np.nan for d, mx in zip(dtype, matrix)], np.float64
    )
    peak = np.where(np.isfinite(peak), peak, np.nan)
    out["peak_tflops_per_s"] = peak / 1e12
    bound = np.full(len(out), None, dtype=object)
    pct = np.full(len(out), np.nan)
    if spec is not None:
        bw = spec.mem_bw
        with np.errstate(divide="ignore", invalid="ignore"):
            ridge = peak / bw
            compute = np.isfinite(ai) & np.isfinite(ridge) & (ai >= ridge) & (f > 0)
            has_bytes = np.isfinite(b) & (b > 0)
            bound = np.where(compute, "compute", np.where(has_bytes, "memory", None))
            pct = np.where(
                compute, 100.0 * achieved_flops / peak, np.where(has_bytes, 100.0 * achieved_bw / bw, np.nan)
            )
        # above the memory roof with bytes that fit in the last-level cache: the cache fed it (an
        # H200 copy_ of 16 MiB just written reads at 106% of HBM), so no roof here bounds it
        cache = spec.cache_mib * MB if spec.cache_mib else 0.0
        cached = (bound == "memory") & (pct > 100.0) & (b <= cache)
        for i in np.flatnonzero(cached):
            note = f"{b[i] / MB:.1f} MiB per call fit in the {spec.cache_mib:g} MiB cache; {pct[i]:.0f}% of memory bandwidth"
            params[i] = _compact({**json.loads(params[i] or "{}"), "cache_resident": note})
        bound = np.where(cached, "cache", bound)
        pct = np.where(cached, np.nan, pct)
    out["bound"] = bound
    out["pct_of_peak"] = pct
    out["params"] = params


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def _category_table(
    event_cat: np.ndarray,
    dur: np.ndarray,
    modelled: np.ndarray,
    flops: np.ndarray,
    data: np.ndarray,
    total_ns: float,
) -> pd.DataFrame:
    ncat = len(models.CATEGORIES)
    ns = np.bincount(event_cat, weights=dur, minlength=ncat)
    mod_ns = np.bincount(event_cat, weights=np.where(modelled, dur, 0.0), minlength=ncat)
    f = np.bincount(event_cat, weights=flops, minlength=ncat)
    b = np.bincount(event_cat, weights=data, minlength=ncat)
    keep = ns > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = pd.DataFrame(
            {
                "category": [c for c, k in zip(models.CATEGORIES, keep) if k],
                "kernel_time_us": ns[keep] / 1e3,
                "device_time_pct": 100.0 * ns[keep] / total_ns if total_ns else np.nan,
                "modelled_pct": 100.0 * mod_ns[keep] / ns[keep],
                "tflops_per_s": np.where(mod_ns[keep] > 0, f[keep] / (mod_ns[keep] / 1e9) / 1e12, np.nan),
                "tb_per_s": np.where(mod_ns[keep] > 0, b[keep] / (mod_ns[keep] / 1e9) / 1e12, np.nan),
            }
        )
    return out
