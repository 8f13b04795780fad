"""The in-memory Neuron device profile both importers produce, and its vocabulary.

``DeviceProfile`` holds the tables we use, already normalized: device-relative nanoseconds,
canonical engine names, resolved source lines, and the summary metrics converted to the units
our trace uses (``_ns``, ``_pct`` as 0-100, ``_bytes``). The Parquet-export and legacy-JSON
readers fill it; ``events.py`` turns it into trace rows and ``join.py`` aligns it with a
framework trace. Every assumption about the AWS formats is listed in docs/neuron.md.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.trace.repairs import Repairs

#: Compute engines, in the order of their queue (``stream``) numbers 0-4.
ENGINES: tuple[str, ...] = ("Tensor", "Vector", "Scalar", "GpSimd", "Sync")
ENGINE_STREAM: dict[str, int] = {e: i for i, e in enumerate(ENGINES)}
#: Every spelling seen for an engine: Parquet ``engine`` ("tensor"), legacy ``label`` tracks
#: ("TensorMatrix") and the hardware names (PE, DVE, ACT, POOL, SP).
_ENGINE_ALIASES: dict[str, str] = {
    "tensor": "Tensor",
    "tensormatrix": "Tensor",
    "pe": "Tensor",
    "pe_array": "Tensor",
    "vector": "Vector",
    "dve": "Vector",
    "scalar": "Scalar",
    "act": "Scalar",
    "activation": "Scalar",
    "gpsimd": "GpSimd",
    "pool": "GpSimd",
    "gp_simd": "GpSimd",
    "sync": "Sync",
    "sp": "Sync",
}
#: Queue numbers: engines 0-4, DMA queues from 100, collective streams from 900; a physical
#: core (``pcore_idx``, LNC2) adds ``PCORE_STRIDE`` so its queues never collide.
DMA_STREAM_BASE = 100
CC_STREAM_BASE = 900
PCORE_STRIDE = 10_000

#: Parquet-export schema majors this importer was written against (7.4.0 at SDK 2.31 through
#: 12.0.1 at SDK 2.33). Newer majors are read by field name with a warning.
KNOWN_SCHEMA_MAJORS = range(1, 13)


class NeuronProfileWarning(UserWarning):
    """A Neuron profile was imported with something missing or guessed; the text says what."""


def canonical_engine(name: Any) -> str | None:
    if name is None or (isinstance(name, float) and name != name):
        return None
    key = re.sub(r"[\s\-]", "", str(name)).lower()
    return _ENGINE_ALIASES.get(key) or _ENGINE_ALIASES.get(re.sub(r"\d+$", "", key))


@dataclass
class DeviceProfile:
    """One NeuronCore's device profile (and the system profile, when exported with it).

    Times in ``instructions``, ``dmas``, ``ccops`` and ``executions`` are device-relative ns
    (0 = the profile's first hardware timestamp); ``system`` times are host-clock Unix ns.
    """

    source: Path
    format: str  # "parquet" | "json"
    schema_version: str | None = None
    instructions: pd.DataFrame = field(default_factory=pd.DataFrame)
    dmas: pd.DataFrame = field(default_factory=pd.DataFrame)
    ccops: pd.DataFrame = field(default_factory=pd.DataFrame)
    system: pd.DataFrame = field(default_factory=pd.DataFrame)
    executions: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Engine active intervals from the export (``active_time`` / ``ActiveTime``), waits excluded.
    active: pd.DataFrame = field(default_factory=pd.DataFrame)
    summary_raw: dict[str, Any] = field(default_factory=dict)
    metadata_raw: dict[str, Any] = field(default_factory=dict)
    #: Unix ns of device-relative 0 when the export says (Metadata ``first_ts``), else None.
    wall_origin_ns: int | None = None
    span_ns: int | None = None
    device: int = 0
    dma_granularity: str = "transfer"  # "transfer" (aggregated) | "packet"
    warnings: list[str] = field(default_factory=list)
    #: The export's own warnings (legacy ``warnings``), e.g. that its DMA figures may be wrong.
    file_warnings: list[str] = field(default_factory=list)
    #: A ``summary-json`` export: metrics only, no events.
    metrics_only: bool = False
    unknown_columns: dict[str, list[str]] = field(default_factory=dict)
    #: Tables of the export not imported (legacy ``dma_throughput``, ``nc_mem_usage``, ...): rows each.
    other_tables: dict[str, int] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    #: ``layer_summary`` (legacy JSON): ``name``, ``subgraph``, ``start_ns``, ``end_ns``.
    layers: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: Records dropped by the validation (``frames.event_times``): in the trace's ``repairs``.
    repairs: Repairs = field(default_factory=Repairs)

    def warn(self, message: str) -> None:
        """Record a degradation: kept in the trace metadata and raised as a Python warning."""
        text = f"{self.source}: {message}"
        self.warnings.append(message)
        warnings.warn(text, NeuronProfileWarning, stacklevel=3)


#: NeuronCore indices we accept from a file (the trace stores them as int32).
MAX_CORE_INDEX = 1 << 16


def core_index(value: Any, profile: DeviceProfile) -> int:
    """The NeuronCore index a profile names, or 0 (with a warning) when it is not a sane one."""
    if value is None or isinstance(value, bool):
        return 0
    try:
        f = float(value)
    except (TypeError, ValueError):
        f = float("nan")
    if f == f and f.is_integer() and 0 <= f < MAX_CORE_INDEX:
        return int(f)
    profile.warn(f"NeuronCore index {str(value)[:40]!r} is not a core number; read as 0")
    return 0


# ------------------------------------------------------------------------------ bounded numbers
#: The numbers a Summary or Metadata field may hold: int64's range (every count, time and byte
#: size fits it; the trace stores them as int64 or float64).
MAX_FIELD_NUMBER = 2**63


def bounded_record(record: dict[str, Any], profile: DeviceProfile, table: str) -> dict[str, Any]:
    """``record`` without the numbers no field of a profile holds: integers outside int64
    (a 400-digit count, 2**64), non-finite floats and floats beyond int64's range (+-1e308,
    which turn into inf once scaled or summed). Each is left out (null) and named in one
    warning, so that no analyzer ever sees it. Nested lists and objects (no metric reads
    them) are kept, their out-of-range numbers set to null and the field named likewise."""
    dropped: list[str] = []
    out: dict[str, Any] = {}
    for key, value in record.items():
        if _out_of_range(value):
            dropped.append(str(key))
            continue
        if isinstance(value, (list, dict)):
            value, nested = _bounded_nested(value)
            if nested:
                dropped.append(str(key))
        out[key] = value
    if dropped:
        names = ", ".join(sorted(dropped)[:8]) + (f" and {len(dropped) - 8} more" if len(dropped) > 8 else "")
        profile.warn(f"{table} field(s) {names} hold numbers outside int64's range (or not finite): left out")
    return out


def _out_of_range(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, np.integer)):
        return not -MAX_FIELD_NUMBER <= int(value) < MAX_FIELD_NUMBER
    if isinstance(value, (float, np.floating)):
        return not (np.isfinite(value) and -MAX_FIELD_NUMBER <= float(value) <= MAX_FIELD_NUMBER)
    return False


def _bounded_nested(value: Any) -> tuple[Any, bool]:
    """``value`` with its out-of-range numbers as None, and whether it had any (iterative:
    depth is bounded by the decoder already, but no recursion is needed)."""
    changed = False
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        item = parent[key]
        if isinstance(item, list):
            item = parent[key] = list(item)
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            item = parent[key] = dict(item)
            stack.extend((item, k) for k in item)
        elif _out_of_range(item):
            parent[key] = None
            changed = True
    return root[0], changed


# ------------------------------------------------------------------------------ summary units
#: ``*_percent`` fields that are not shares of the run: throttle limits and the like, seen above 1
#: (1.0967, 253) in real trn1 summaries. They keep their name and raw value.
_RAW_PERCENT = re.compile(r"throttl|limit", re.I)


def normalize_summary(raw: dict[str, Any], profile: DeviceProfile | None = None) -> dict[str, Any]:
    """Summary metrics with our units: seconds -> ``_ns``, 0-1 fractions -> ``_pct`` (0-100).

    Real exports write ``*_percent`` fields as 0-1 fractions despite the name. The unit is
    decided per field, never for the whole file: a fraction field holding a value above 1 is
    read as already 0-100 (with a warning naming that field only), and throttle/limit fields,
    which legitimately exceed 1, are kept raw under their own name.
    """
    numeric = {k: v for k, v in raw.items() if _is_number(v)}
    out: dict[str, Any] = {}
    odd, unusable = [], []
    for k, v in numeric.items():
        if k.endswith("_percent") and _RAW_PERCENT.search(k):
            out[k] = float(v)
        elif k.endswith("_percent"):
            f = float(v)
            if 0.0 <= f <= 1.0 + 1e-9:
                f *= 100.0
            else:
                odd.append(k)
            out[k[: -len("_percent")] + "_pct"] = f
        elif k in _SECONDS_FIELDS or (k.endswith("_time") and isinstance(v, float)):
            ns = float(v) * 1e9
            if 0.0 <= ns <= MAX_SUMMARY_NS:
                out[k + "_ns"] = round(ns)
            else:  # (a negative time, or one past the year 2096: not a duration of this run)
                unusable.append(k)
        else:
            out[k] = v.item() if hasattr(v, "item") else v
    if unusable and profile is not None:
        profile.warn(f"Summary time field(s) {', '.join(sorted(unusable))} negative or beyond 4e18 ns: left out")
    if odd and profile is not None:
        profile.warn(
            f"Summary field(s) {', '.join(sorted(odd))} hold values outside 0-1, so they are read as 0-100 "
            "percentages (the other *_percent fields stay 0-1 fractions)"
        )
    return out


#: Summary durations beyond this (ns, the trace's time range) are not durations of a run.
MAX_SUMMARY_NS = 4e18

_SECONDS_FIELDS = frozenset(
    {
        "total_time",
        "dma_active_time",
        "static_dma_active_time",
        "dma_packet_time",
        "dma_transfer_time",
        "software_dynamic_dma_active_time",
        "hardware_dynamic_dma_active_time",
        "cc_op_time",
        "cc_op_active_time",
        "cc_cores_instruction_time",
        "cc_cores_instruction_active_time",
        "total_exec_time",
        "total_active_time",
        "activate_instruction_time",
    }
    | {
        f"{e}_engine_{m}"
        for e in ("tensor", "vector", "scalar", "sync", "gpsimd")
        for m in ("active_time", "instruction_time")
    }
)


def _is_number(v: Any) -> bool:
    if isinstance(v, bool) or v is None:
        return False
    if isinstance(v, (int, float, np.integer, np.floating)):
        return not (isinstance(v, (float, np.floating)) and v != v)
    return False


def derived_metrics(profile: DeviceProfile) -> dict[str, Any]:
    """Metrics computed from the event tables, used where the Summary lacks them.

    Same names and units as ``normalize_summary`` output so rules read one dict. Engine active
    time is the union of the export's active-time intervals when it has them (semaphore waits
    excluded), else of the instructions that are not waits. DMA figures count transfers once
    (packets of an aggregated transfer are not counted again).
    """
    ins, dma, act = profile.instructions, profile.dmas, profile.active
    out: dict[str, Any] = {}
    span = profile.span_ns
    if span is None:
        ends = [int((df["start_ns"] + df["dur_ns"]).max()) for df in (ins, dma, profile.ccops) if len(df)]
        span = max(ends) if ends else None
    if span:
        out["total_time_ns"] = int(span)
    work = ins[~ins["is_wait"]] if len(ins) and "is_wait" in ins else ins
    busy = act if len(act) else work
    if len(busy):
        for engine in ENGINES:
            rows = busy[busy["engine"] == engine]
            key = engine.lower()
            if len(ins):
                out[f"{key}_engine_instruction_count"] = int((ins["engine"] == engine).sum())
            active = union_ns(rows["start_ns"].to_numpy(), (rows["start_ns"] + rows["dur_ns"]).to_numpy())
            out[f"{key}_engine_active_time_ns"] = active
            if span:
                out[f"{key}_engine_active_time_pct"] = 100.0 * active / span
        total = union_ns(busy["start_ns"].to_numpy(), (busy["start_ns"] + busy["dur_ns"]).to_numpy())
        out["total_active_time_ns"] = total
        if span:
            out["total_active_time_pct"] = 100.0 * total / span
    if len(ins):
        if "is_wait" in ins:
            out["semaphore_wait_instruction_count"] = int(ins["is_wait"].sum())
        for col in (
            "hbm_read_bytes",
            "hbm_write_bytes",
            "spill_save_bytes",
            "spill_reload_bytes",
            "sbuf_read_bytes",
            "sbuf_write_bytes",
        ):
            if col in ins and pd.to_numeric(ins[col], errors="coerce").notna().any():
                out[col] = int(pd.to_numeric(ins[col], errors="coerce").fillna(0).sum())
        for col, name in (("raw_flops", "hardware_flops"), ("flops_transpose", "transpose_flops")):
            if col in ins and pd.to_numeric(ins[col], errors="coerce").notna().any():
                out[name] = int(pd.to_numeric(ins[col], errors="coerce").fillna(0).clip(lower=0).sum())
    if len(busy):
        out["engines_active_time_ns"] = out["total_active_time_ns"]
        if span:
            out["engines_active_time_pct"] = out["total_active_time_pct"]
    if len(dma):
        tr = dma[dma["is_transfer"]] if "is_transfer" in dma else dma
        dma = real_dma_rows(dma)
        active = union_ns(dma["start_ns"].to_numpy(), (dma["start_ns"] + dma["dur_ns"]).to_numpy())
        out["dma_active_time_ns"] = active
        if span:
            out["dma_active_time_pct"] = 100.0 * active / span
        out["dma_transfer_count"] = len(tr)
        out["dma_packet_count"] = int(len(dma) - int(dma["is_transfer"].sum() if "is_transfer" in dma else len(dma)))
        if "synthetic" in tr:
            out["dma_transfers_from_packets"] = int(tr["synthetic"].sum())
        out["dma_transfer_total_bytes"] = int(tr["bytes"].fillna(0).sum())
        if len(tr):
            out["dma_transfer_average_bytes"] = float(tr["bytes"].fillna(0).mean())
        # DMA-side HBM traffic: what the Summary's hbm_* fields count.
        if "hbm_read_bytes" not in out and "src_mem" in tr:
            out["hbm_read_bytes"] = int(tr.loc[tr["src_mem"] == "HBM", "bytes"].fillna(0).sum())
            out["hbm_write_bytes"] = int(tr.loc[tr["dst_mem"] == "HBM", "bytes"].fillna(0).sum())
        if "spill_reload_bytes" not in out and "is_spill" in tr:
            reload = tr["is_spill"] & (tr["dst_mem"] == "SBUF")
            out["spill_reload_bytes"] = int(tr.loc[reload, "bytes"].fillna(0).sum())
    if len(profile.ccops):
        cc = profile.ccops
        out["cc_op_count"] = len(cc)
        out["cc_op_active_time_ns"] = union_ns(cc["start_ns"].to_numpy(), (cc["start_ns"] + cc["dur_ns"]).to_numpy())
    return out


def real_dma_rows(dma: pd.DataFrame) -> pd.DataFrame:
    """DMA rows as the export lists them (without the transfers added for packet groups that
    have no aggregated row: their packets are there already)."""
    return dma[~dma["synthetic"].to_numpy(bool)] if "synthetic" in dma and len(dma) else dma


def busy_rows(profile: DeviceProfile) -> pd.DataFrame:
    """Engine busy intervals: the export's active-time table, else the instructions that are
    not waits."""
    ins, act = profile.instructions, profile.active
    if len(act):
        return act
    return ins[~ins["is_wait"]] if len(ins) and "is_wait" in ins else ins


def union_ns(starts: np.ndarray, ends: np.ndarray) -> int:
    """Total length of the union of intervals (vectorized: sort, running max of ends)."""
    if len(starts) == 0:
        return 0
    order = np.argsort(starts, kind="stable")
    s = np.asarray(starts, np.int64)[order]
    e = np.asarray(ends, np.int64)[order]
    run_end = np.maximum.accumulate(e)
    prev_end = np.concatenate([[s[0]], run_end[:-1]])
    # Each interval contributes the part past everything before it.
    contrib = np.clip(e - np.maximum(s, prev_end), 0, None)
    contrib[0] = e[0] - s[0]
    return int(contrib.sum())
