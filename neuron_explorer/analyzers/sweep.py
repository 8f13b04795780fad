"""``compare_traces(paths)``: one row per trace with its headline metrics (``neuron-explorer compare``).

A directory of independent profiles (a sweep of matrix sizes, of batch sizes, of compiler
options) is not one run of many cores: each file is its own run, so each becomes one row.
Neuron device profiles give AWS's Summary fields and what we derive (span, kernel window,
per-engine active time and instruction counts, HBM/SBUF/PSUM bytes, FLOPs, MFU/HFU/MBU over the
span and the kernel, arithmetic intensity, DMA transfers and bytes, throttling); other traces
(GPU, CPU) their span, steps and step-time attribution.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from neuron_explorer.trace.errors import NeuronExplorerError, TraceFormatError, TraceNotFoundError

_TRACE_SUFFIXES = (".json", ".json.gz", ".parquet", ".pt.trace.json", ".pt.trace.json.gz")
_ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")
#: Leading columns of a Neuron row; every other Summary field follows.
NEURON_COLUMNS = (
    "file",
    "kind",
    "m",
    "k",
    "n",
    "seq",
    "batch",
    "dtype",
    "pe_tiles",
    "total_time_ns",
    "kernel_time_ns",
    "kernel_start_ns",
    *(f"{e}_engine_active_time_ns" for e in _ENGINES),
    *(f"{e}_engine_instruction_count" for e in _ENGINES),
    *(f"kernel_{e}_engine_active_pct" for e in _ENGINES),
    "hbm_read_bytes",
    "hbm_write_bytes",
    "sbuf_read_bytes",
    "sbuf_write_bytes",
    "psum_read_bytes",
    "psum_write_bytes",
    "hardware_flops",
    "mfu_estimated_pct",
    "mfu_kernel_pct",
    "hfu_estimated_pct",
    "hfu_kernel_pct",
    "mbu_estimated_pct",
    "mbu_kernel_pct",
    "mfu_max_achievable_estimated_pct",
    "arithmetic_intensity",
    "bound",
    "dma_transfer_count",
    "dma_packet_count",
    "dma_transfer_total_bytes",
    "static_dma_size",
    "software_dynamic_dma_size",
)
TRACE_COLUMNS = ("file", "kind", "span_ns", "events", "num_steps", "step_p50_ns", "wall_ns", "verdict")
#: What the text table shows (all columns go to CSV, Parquet and JSON).
HEADLINE = (
    "file",
    "kind",
    "m",
    "k",
    "n",
    "seq",
    "batch",
    "dtype",
    "pe_tiles",
    "total_time_ns",
    "kernel_time_ns",
    "span_ns",
    "step_p50_ns",
    "mfu_kernel_pct",
    "mbu_kernel_pct",
    "dma_transfer_total_bytes",
    "tensor_engine_active_time_ns",
    "bound",
)


#: What a sweep's file names say: matrix sizes, sequence length, batch, dtype.
#:
#: A sweep is usually a folder of files named after what changed. The conventions read here
#: (assumed: common in public benchmark scripts, none of them required; a name that says none
#: of them gives no columns):
#:
#: - matrix sizes ``M128_K256_N512``, ``m128-k256-n512``, ``m=128``, ``m128k128n512`` and
#:   ``128x256x512`` (M x K x N, the order ``nki.isa.nc_matmul`` tutorials and BLAS benchmarks
#:   use);
#: - the sequence length ``s512``, ``seq1024``, ``seqlen2048``, ``seq_len=4096``;
#: - the batch ``b8``, ``bs8``, ``batch8``;
#: - the dtype ``bf16``, ``fp16``, ``fp32``, ``fp8``, ``int8``, ``tf32`` (also ``bfloat16``,
#:   ``float32``, ...).
#:
#: Numbers in other words of a name are left alone (``exec_2``, ``v3``), and a name is read only
#: at word boundaries (``_ - . =`` and the ends), so ``s512`` inside ``fused_bf16_s512`` is a
#: sequence length and ``version512`` is not.
_SEP = r"(?:^|(?<=[_\-./=]))"
_END = r"(?=$|[_\-./=x])"
_MKN_JOINED = re.compile(_SEP + r"m(\d+)k(\d+)n(\d+)" + _END, re.I)
_MKN_X = re.compile(_SEP + r"(\d+)x(\d+)x(\d+)" + r"(?=$|[_\-./=])", re.I)
_ONE = re.compile(_SEP + r"([MKN])[_=\-]?(\d+)" + _END, re.I)
_SEQ = re.compile(_SEP + r"(?:seq_?len|seq|s)[_=\-]?(\d+)" + _END, re.I)
_BATCH = re.compile(_SEP + r"(?:batch|bs|b)[_=\-]?(\d+)" + _END, re.I)
_DTYPE = re.compile(
    _SEP + r"(bf16|bfloat16|fp16|float16|f16|fp32|float32|f32|tf32|fp8(?:_?e4m3|_?e5m2)?|float8\w*|int8)" + _END, re.I
)
_DTYPE_NAMES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "f16": "fp16",
    "float32": "fp32",
    "f32": "fp32",
}


def _stem(name: str) -> str:
    base = Path(name).name
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".parquet", ".ntff"):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base


def sizes_from_name(name: str) -> dict[str, Any]:
    """``m``, ``k``, ``n``, ``seq``, ``batch`` (ints) and ``dtype`` where the file name says them."""
    stem = _stem(name)
    out: dict[str, Any] = {}
    joined = _MKN_JOINED.search(stem) or _MKN_X.search(stem)
    if joined:
        out.update(zip("mkn", map(int, joined.groups())))
    else:
        for m in _ONE.finditer(stem):
            out.setdefault(m.group(1).lower(), int(m.group(2)))
    if m := _SEQ.search(stem):
        out["seq"] = int(m.group(1))
    if m := _BATCH.search(stem):
        out["batch"] = int(m.group(1))
    if m := _DTYPE.search(stem):
        token = m.group(1).lower()
        out["dtype"] = _DTYPE_NAMES.get(token, "fp8" if token.startswith(("fp8", "float8")) else token)
    return out


def natural_key(name: str) -> list[Any]:
    """Sort key that orders the numbers in a name by value (``N136`` before ``N1000``)."""
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", str(name))]


def size_axis(columns: list[str]) -> str | None:
    """The parsed size to chart and sort a sweep by: ``m*k*n`` with all three, else the first
    of ``seq``, ``batch``, ``n``, ``m``, ``k`` present."""
    if all(c in columns for c in ("m", "k", "n")):
        return "m*k*n"
    return next((c for c in ("seq", "batch", "n", "m", "k") if c in columns), None)


class CompareError(NeuronExplorerError):
    """Nothing to compare, or a bad compare option."""


def expand(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """The traces named: files as given; a directory that is itself a trace (a Parquet export
    or a run directory) as one; any other directory by its trace files, sorted. Returns the
    traces and one note per file skipped in a directory."""
    from neuron_explorer.collectors.neuron.parquet_export import is_parquet_export

    out: list[Path] = []
    notes: list[str] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            raise TraceNotFoundError("no such file or directory", p)
        if p.is_file() or is_parquet_export(p) or _is_run_dir(p):
            out.append(p)
            continue
        found = []
        for f in sorted(p.rglob("*")):
            if (f.is_dir() and is_parquet_export(f)) or (
                f.is_file()
                and f.name.lower().endswith(_TRACE_SUFFIXES)
                and not any(is_parquet_export(a) for a in f.parents)
            ):
                found.append(f)
            elif f.is_file() and f.suffix.lower() in (".ntff", ".neff", ".pb"):
                notes.append(f"{f}: a raw Neuron capture, skipped (export it first with AWS's tool)")
        if not found:
            raws = [n for n in notes if "raw Neuron capture" in n]
            if raws:
                from neuron_explorer.collectors.neuron import export_hint

                files = [Path(n.split(": ", 1)[0]) for n in raws]
                first = next((f for f in files if f.suffix.lower() == ".ntff"), files[0])
                raise CompareError(
                    f"{p}: no trace or profile files in this directory, only raw Neuron captures "
                    f"({len(raws)} such as {first.name}); {export_hint(first.name)}"
                )
            raise CompareError(f"{p}: no trace or profile files in this directory")
        out.extend(found)
    return out, notes


def _is_run_dir(p: Path) -> bool:
    return p.is_dir() and any(c.name.startswith("rank=") for c in p.iterdir())


def _load(path: Path) -> Any:
    """(kind, trace) of one input: a Neuron device profile, or any other trace."""
    from neuron_explorer.collectors.load import load
    from neuron_explorer.collectors.neuron import import_neuron_profile
    from neuron_explorer.collectors.neuron.legacy_json import is_compiler_kernel_info, is_device_json, load_json

    if path.is_file() and path.name.lower().endswith((".json", ".json.gz")):
        obj = load_json(path)
        if is_compiler_kernel_info(obj) or is_device_json(obj):
            return import_neuron_profile(path)
    return load(path)


def trace_row(path: Path, trace: Any) -> dict[str, Any]:
    """The row of one trace."""
    from neuron_explorer.analyzers.metrics.neuron_summary import summary_table

    meta = trace.metadata or {}
    if (meta.get("neuron") or {}).get("devices"):
        rows = summary_table(meta).to_dict(orient="records")
        row: dict[str, Any] = {"file": str(path), "kind": "neuron", **sizes_from_name(str(path))}
        if all(k in row for k in ("m", "k", "n")):
            # Tensor-engine tiles of the matmul: the contraction (k) and the stationary free size
            # (m) in 128s, the moving free size (n) in 512s (nki.isa.nc_matmul's limits): latency
            # steps where a size crosses one of these boundaries.
            row["pe_tiles"] = -(-row["m"] // 128) * -(-row["k"] // 128) * -(-row["n"] // 512)
        first = rows[0]
        row.update({k: v for k, v in first.items() if k not in ("device", "source")})
        if "dtype" not in row and first.get("matmul_dtype") not in (None, "unknown"):
            row["dtype"] = first["matmul_dtype"]  # what most MATMULs read, where the name does not say
        if len(rows) > 1:
            row["neuron_cores"] = len(rows)
        return row
    from neuron_explorer.analyzers.analysis import analyze
    from neuron_explorer.trace.summary import describe

    a = analyze(trace, rules=[])
    s = a.summary
    return {
        "file": str(path),
        "kind": ",".join(s.get("device_types") or ["cpu"]),
        "span_ns": describe(trace).get("span_ns"),
        "events": int(trace.num_events),
        "num_steps": s.get("num_steps"),
        "step_p50_ns": s.get("step_p50_ns"),
        "wall_ns": s.get("wall_ns"),
        **{k: v for k, v in s.items() if k.endswith("_pct")},
        "verdict": s.get("verdict"),
    }


def compare_traces(
    paths: Iterable[str | Path], on_skip: Callable[[str], None] | None = None, strict: bool = False
) -> pd.DataFrame:
    """One row per trace at ``paths`` (see ``expand``), in the order found. A file in a
    directory that is not a trace (a compiler ``kernel_info.json``, a corrupt file) is left
    out with one line to ``on_skip``; a file named on its own that is not one raises."""
    paths = list(paths)
    items, notes = expand(paths)
    named = {Path(p) for p in paths}
    for n in notes:
        if on_skip:
            on_skip(n)
    rows = []
    for item in items:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trace = _load(item)
                rows.append(trace_row(item, trace))
        except (TraceFormatError, TraceNotFoundError) as exc:
            if strict or item in named:
                raise
            if on_skip:
                on_skip(f"{item}: skipped ({exc.message if hasattr(exc, 'message') else exc})")
    if not rows:
        raise CompareError("none of the inputs is a trace or device profile")
    df = pd.DataFrame(rows)
    lead = [c for c in (*NEURON_COLUMNS, *TRACE_COLUMNS) if c in df]
    df = df[list(dict.fromkeys(lead)) + [c for c in df.columns if c not in lead]]
    return default_order(df)


def default_order(df: pd.DataFrame) -> pd.DataFrame:
    """Rows by the parsed sizes (numerically: m, k, n, seq, batch), then dtype, then the file
    name with its numbers compared by value (``N136`` before ``N1000``), never lexicographically."""
    keys = [c for c in ("m", "k", "n", "seq", "batch") if c in df]
    order = sorted(
        range(len(df)),
        key=lambda i: (
            *(_num_key(df[c].iloc[i]) for c in keys),
            str(df["dtype"].iloc[i]) if "dtype" in df and isinstance(df["dtype"].iloc[i], str) else "~",
            natural_key(str(df["file"].iloc[i])),
        ),
    )
    return df.iloc[order].reset_index(drop=True)


def _num_key(v: Any) -> tuple[int, float]:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return (1, 0.0)
    return (0, f) if f == f else (1, 0.0)


def chart_axis(df: pd.DataFrame) -> str | None:
    """The parsed size a sweep's chart puts on X (``size_axis``), when every row has it."""
    axis = size_axis([c for c in df.columns if df[c].notna().all()])
    return axis


def sort_rows(df: pd.DataFrame, keys: list[str] | None) -> pd.DataFrame:
    """Sorted by ``keys`` (a leading ``-`` sorts that key descending); unknown keys raise."""
    if not keys:
        return df
    cols, asc = [], []
    for k in keys:
        desc = k.startswith("-")
        name = k.lstrip("-")
        if name not in df.columns:
            import difflib

            close = difflib.get_close_matches(name, list(map(str, df.columns)), n=3, cutoff=0.5)
            lead = [c for c in HEADLINE if c in df.columns]
            hint = f"did you mean {', '.join(close)}?" if close else f"try one of {', '.join(lead[:10])}"
            raise CompareError(f"--sort {name!r}: no such column ({hint}; --format csv lists all {len(df.columns)})")
        cols.append(name)
        asc.append(not desc)
    return df.sort_values(cols, ascending=asc, kind="stable", na_position="last").reset_index(drop=True)
