"""A generator of realistic Neuron exports, for tests and demos (no Trainium needed).

``write_parquet_export`` writes a Neuron Explorer Parquet export directory (Instruction split
in two parts, DmaPacketAggregated, CcOp, ActiveTime, ExecutionInfo, SystemProfileEvents,
StackFrame*, Summary, Metadata, SchemaFields); ``write_legacy_json`` the ``neuron-profile``
JSON of the same run; ``write_framework_trace`` the torch.profiler (Kineto) JSON that launched
it. All three are built from the documented schema (docs/neuron.md), from one timeline with a
planted bottleneck, and return the ground truth the tests compare against.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from neuron_explorer.collectors.neuron.model import ENGINES

USER_FILE = "/home/user/project/model.py"
LIB_FILE = "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py"
_OPCODE = {"Tensor": "MATMUL", "Vector": "TENSOR_TENSOR", "Scalar": "ACTIVATE", "GpSimd": "IOTA", "Sync": "DMA_TRIGGER"}
#: Busy fraction of each engine and of the DMA queues, per planted bottleneck.
PROFILES: dict[str, dict[str, float]] = {
    "dma": {"Tensor": 0.15, "Vector": 0.08, "Scalar": 0.06, "GpSimd": 0.03, "Sync": 0.04, "dma": 0.95},
    "tensor": {"Tensor": 0.92, "Vector": 0.10, "Scalar": 0.08, "GpSimd": 0.03, "Sync": 0.04, "dma": 0.25},
    "balanced": {"Tensor": 0.70, "Vector": 0.55, "Scalar": 0.50, "GpSimd": 0.20, "Sync": 0.10, "dma": 0.45},
}
TE_PEAK_FLOPS_PER_S = 2 * 128 * 128 * 1.4e9  # 2 x PE elements x clock
SPILL_QUEUE = "qScalarSpillReload0"
LAYER_MLP, LAYER_ATTN = "model/layers.0/mlp", "model/layers.0/attn"
WAIT_OPCODE = "EVENT_SEMAPHORE"


@dataclass
class SynthSpec:
    bottleneck: str = "dma"  # "dma" | "tensor" | "balanced"
    executions: int = 3
    exec_ns: int = 2_000_000
    gap_ns: int = 500_000
    instructions_per_engine: int = 60
    #: ``qSyncSpillReload0`` carries weights (its q_type says so), as on real inf2 files.
    dma_queues: tuple[str, ...] = ("qSyncIO0", "qSyncSpillReload0", "qVectorAct0")
    queue_types: tuple[str, ...] = ("io", "weights", "activations")
    packets_per_transfer: int = 2  # packets listed beside each aggregated transfer
    semaphore_waits: bool = True  # EVENT_SEMAPHORE waits between executions (not engine activity)
    mfu_max_achievable: float = 0.85  # Summary mfu_max_achievable_estimated_percent (fraction)
    transfers_per_queue: int = 40
    transfer_bytes: int = 256 * 1024
    small_transfer_bytes: int | None = None  # plant tiny DMAs
    spill_reload_fraction: float = 0.05  # of HBM reads
    transpose_fraction: float = 0.05  # of Tensor engine instructions
    collectives: bool = False
    exposed_collective_ns: int = 400_000
    system_profile: bool = True
    stack_frames: bool = True
    schema_version: str = "7.4.0"
    percent_as_fraction: bool = True
    first_hw_timestamp: int = 9_000_000_000
    host_origin_ns: int = 1_766_072_156_592_459_482
    host_jitter_ns: tuple[int, ...] = (0, 3_000, -2_000, 1_000)
    #: Real legacy files say 1000 while their hardware timestamps are already nanoseconds.
    ticks_per_nanosec: float = 1000.0
    instance_type: str = "trn1.32xlarge"
    file_warnings: tuple[str, ...] = ("Missing DGE notifications: DMA values may be inaccurate",)
    seed: int = 7
    extra: dict[str, Any] = field(default_factory=dict)


def timeline(spec: SynthSpec) -> dict[str, pd.DataFrame]:
    """The run both formats describe: device-relative instructions, DMAs, collectives, executions."""
    rng = np.random.default_rng(spec.seed)
    busy = PROFILES[spec.bottleneck]
    period = spec.exec_ns + spec.gap_ns
    ex_start = np.arange(spec.executions, dtype=np.int64) * period
    rows = []
    cc_rows = []
    for e, t0 in enumerate(ex_start.tolist()):
        work_ns = spec.exec_ns - (spec.exposed_collective_ns if spec.collectives else 0)
        for engine in ENGINES:
            k = spec.instructions_per_engine
            slot = work_ns // k
            dur = max(int(slot * busy[engine]), 1)
            jitter = rng.integers(0, max(slot - dur, 1), k)
            starts = t0 + np.arange(k, dtype=np.int64) * slot + np.minimum(jitter, slot - dur)
            for j, s in enumerate(starts.tolist()):
                rows.append((e, engine, int(s), dur, j))
        if spec.collectives:
            cc_rows.append((e, t0 + work_ns, spec.exposed_collective_ns))
    ins = pd.DataFrame(rows, columns=["execution", "engine", "start_ns", "dur_ns", "seq"])
    ins["pc"] = ins.groupby("engine").cumcount()
    ins["id"] = np.arange(len(ins), dtype=np.int64)
    ins["opcode"] = ins["engine"].map(_OPCODE)
    tensor = ins["engine"] == "Tensor"
    n_tensor = int(tensor.sum())
    transpose = np.zeros(len(ins), bool)
    tidx = np.nonzero(tensor.to_numpy())[0]
    transpose[tidx[: round(n_tensor * spec.transpose_fraction)]] = True
    ins["is_transpose"] = transpose
    # Each matmul runs at 80% of the Tensor engine's peak while it runs, so MFU follows its busy time.
    flops = np.rint(ins["dur_ns"].to_numpy() * TE_PEAK_FLOPS_PER_S / 1e9 * 0.8).astype(np.int64)
    ins["raw_flops"] = np.where(tensor, flops, 0).astype(np.int64)
    ins["flops_transpose"] = np.where(transpose, ins["raw_flops"], 0).astype(np.int64)
    ins["hbm_read_bytes"] = np.where(tensor, 4096, 0).astype(np.int64)
    ins["hbm_write_bytes"] = np.where(ins["engine"] == "Vector", 2048, 0).astype(np.int64)
    ins["stack_frame"] = np.where(tensor, 1, np.where(ins["engine"].isin(["Vector", "Scalar"]), 3, 0))

    drows = []
    for e, t0 in enumerate(ex_start.tolist()):
        for q, queue in enumerate(spec.dma_queues):
            k = spec.transfers_per_queue
            slot = spec.exec_ns // k
            dur = max(int(slot * busy["dma"]), 1)
            for j in range(k):
                load = j % 4 != 3
                size = spec.transfer_bytes
                if spec.small_transfer_bytes is not None and q == 0:
                    size = spec.small_transfer_bytes
                drows.append(
                    (
                        e,
                        queue,
                        q,
                        t0 + j * slot,
                        dur,
                        size,
                        "[INPUT]" if load else "[SB]",
                        "[SB]" if load else "[OUTPUT]",
                        f"t{q}_{j}",
                    )
                )
    dma = pd.DataFrame(
        drows, columns=["execution", "queue", "queue_idx", "start_ns", "dur_ns", "bytes", "source", "dest", "variable"]
    )
    hbm_reads = int(dma.loc[dma["source"] != "[SB]", "bytes"].sum())
    reload_total = int(hbm_reads * spec.spill_reload_fraction / max(1 - spec.spill_reload_fraction, 1e-9))
    if reload_total > 0:
        per = max(reload_total // (2 * spec.executions), 1)
        spill = []
        for e, t0 in enumerate(ex_start.tolist()):
            spill.append(
                (
                    e,
                    SPILL_QUEUE,
                    len(spec.dma_queues),
                    t0 + 100_000,
                    50_000,
                    per,
                    "[SB]",
                    "[SPILL]",
                    "spill_save",
                )
            )
            spill.append(
                (
                    e,
                    SPILL_QUEUE,
                    len(spec.dma_queues),
                    t0 + 600_000,
                    50_000,
                    per,
                    "[SPILL]",
                    "[SB]",
                    "spill_reload",
                )
            )
            spill.append(
                (
                    e,
                    SPILL_QUEUE,
                    len(spec.dma_queues),
                    t0 + 900_000,
                    50_000,
                    per,
                    "[SPILL]",
                    "[SB]",
                    "spill_reload",
                )
            )
        dma = pd.concat([dma, pd.DataFrame(spill, columns=dma.columns)], ignore_index=True)
    dma["id"] = np.arange(len(dma), dtype=np.int64)
    dma["is_reload"] = dma["variable"] == "spill_reload"
    qtype = dict(zip(spec.dma_queues, spec.queue_types)) | {SPILL_QUEUE: "spill"}
    dma["queue_type"] = dma["queue"].map(qtype).fillna("data")
    # Engines wait on semaphores between executions: instructions, but no engine activity.
    waits = pd.DataFrame(
        [
            (engine, int(ex_start[e] + spec.exec_ns), int(spec.gap_ns))
            for e in range(spec.executions - 1 if spec.semaphore_waits else 0)
            for engine in ENGINES
        ],
        columns=["engine", "start_ns", "dur_ns"],
    )
    cc = pd.DataFrame(cc_rows, columns=["execution", "start_ns", "dur_ns"])
    ex = pd.DataFrame(
        {
            "execution_index": np.arange(spec.executions, dtype=np.int32),
            "start_ns": ex_start,
            "end_ns": ex_start + spec.exec_ns,
        }
    )
    return {"instructions": ins, "dmas": dma, "ccops": cc, "executions": ex, "waits": waits}


def _union(starts: np.ndarray, ends: np.ndarray) -> int:
    from neuron_explorer.collectors.neuron.model import union_ns

    return union_ns(starts, ends)


def summary(spec: SynthSpec, tl: dict[str, pd.DataFrame]) -> dict[str, Any]:
    """The Summary row, computed from the timeline the way the schema reference defines it."""
    ins, dma = tl["instructions"], tl["dmas"]
    total_ns = int(tl["executions"]["end_ns"].max())
    frac = 1.0 if spec.percent_as_fraction else 100.0
    out: dict[str, Any] = {"total_time": total_ns / 1e9}
    for engine in ENGINES:
        r = ins[ins["engine"] == engine]
        active = _union(r["start_ns"].to_numpy(), (r["start_ns"] + r["dur_ns"]).to_numpy())
        key = engine.lower()
        out[f"{key}_engine_active_time"] = active / 1e9
        out[f"{key}_engine_active_time_percent"] = active / total_ns * frac
        out[f"{key}_engine_instruction_time"] = float(r["dur_ns"].sum()) / 1e9
        out[f"{key}_engine_instruction_count"] = len(r)
    active = _union(ins["start_ns"].to_numpy(), (ins["start_ns"] + ins["dur_ns"]).to_numpy())
    out["total_active_time"] = active / 1e9
    out["total_active_time_percent"] = active / total_ns * frac
    out["instance_type"] = spec.instance_type
    dma_active = _union(dma["start_ns"].to_numpy(), (dma["start_ns"] + dma["dur_ns"]).to_numpy())
    hardware = int(ins["raw_flops"].sum())
    transpose = int(ins["flops_transpose"].sum())
    hbm_read = int(dma.loc[~dma["source"].isin(["[SB]"]), "bytes"].sum())
    hbm_write = int(dma.loc[~dma["dest"].isin(["[SB]"]), "bytes"].sum())
    out.update(
        {
            "dma_active_time": dma_active / 1e9,
            "dma_active_time_percent": dma_active / total_ns * frac,
            "dma_transfer_count": len(dma),
            "dma_transfer_total_bytes": int(dma["bytes"].sum()),
            "dma_transfer_average_bytes": float(dma["bytes"].mean()),
            "hardware_flops": hardware,
            "transpose_flops": transpose,
            "model_flops": hardware - transpose,
            "mfu_estimated_percent": (hardware - transpose) / (TE_PEAK_FLOPS_PER_S * total_ns / 1e9) * frac,
            "hfu_estimated_percent": hardware / (TE_PEAK_FLOPS_PER_S * total_ns / 1e9) * frac,
            "mfu_max_achievable_estimated_percent": spec.mfu_max_achievable * frac,
            "mbu_estimated_percent": (hbm_read + hbm_write) / (total_ns / 1e9) / 4.1e11 * frac,
            "hbm_read_bytes": hbm_read,
            "hbm_write_bytes": hbm_write,
            "spill_save_bytes": int(dma.loc[dma["variable"] == "spill_save", "bytes"].sum()),
            "spill_reload_bytes": int(dma.loc[dma["is_reload"], "bytes"].sum()),
            "matmul_instruction_count": int((ins["opcode"] == "MATMUL").sum()),
        }
    )
    if len(tl["ccops"]):
        cc = tl["ccops"]
        out["cc_op_count"] = len(cc)
        out["cc_op_time"] = float(cc["dur_ns"].sum()) / 1e9
        out["cc_op_active_time"] = float(cc["dur_ns"].sum()) / 1e9
        out["cc_op_active_time_percent"] = float(cc["dur_ns"].sum()) / total_ns * frac
    return out


def host_exec_starts(spec: SynthSpec, tl: dict[str, pd.DataFrame]) -> np.ndarray:
    """Host-clock start of each execution (what ``nc_exec_running`` records)."""
    j = np.array([spec.host_jitter_ns[i % len(spec.host_jitter_ns)] for i in range(spec.executions)], np.int64)
    return spec.host_origin_ns + tl["executions"]["start_ns"].to_numpy(np.int64) + j


def _with_waits(ins: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """The instructions plus the semaphore waits (instructions that are not engine activity)."""
    if not len(waits):
        return ins.assign(is_wait=False)
    w = pd.DataFrame(
        {
            "execution": -1,
            "engine": waits["engine"],
            "start_ns": waits["start_ns"],
            "dur_ns": waits["dur_ns"],
            "seq": -1,
            "pc": -1,
            "id": np.arange(len(ins), len(ins) + len(waits), dtype=np.int64),
            "opcode": WAIT_OPCODE,
            "is_transpose": False,
            "raw_flops": 0,
            "flops_transpose": 0,
            "hbm_read_bytes": 0,
            "hbm_write_bytes": 0,
            "stack_frame": 0,
        }
    )
    return pd.concat([ins.assign(is_wait=False), w.assign(is_wait=True)], ignore_index=True)


def active_time(ins: pd.DataFrame) -> pd.DataFrame:
    """Each engine's merged busy intervals (what ``active_time``/``ActiveTime`` hold): no waits."""
    rows = []
    for engine, r in ins.groupby("engine"):  # five engines
        order = np.argsort(r["start_ns"].to_numpy(np.int64), kind="stable")
        s, e = r["start_ns"].to_numpy(np.int64)[order], (r["start_ns"] + r["dur_ns"]).to_numpy(np.int64)[order]
        run_end = np.maximum.accumulate(e)
        new = np.ones(len(s), bool)
        new[1:] = s[1:] > run_end[:-1]
        ends = np.maximum.reduceat(run_end, np.nonzero(new)[0])
        rows.append(pd.DataFrame({"engine": engine, "start_ns": s[new], "end_ns": ends}))
    out = pd.concat(rows, ignore_index=True)
    out["duration_ns"] = out["end_ns"] - out["start_ns"]
    return out


def packets(dma: pd.DataFrame, per_transfer: int) -> pd.DataFrame:
    """The packets each transfer is split into (bytes and time divided evenly), on DMA engines."""
    k = max(per_transfer, 1)
    rep = dma.loc[dma.index.repeat(k)].reset_index(drop=True)
    part = np.tile(np.arange(k), len(dma))
    size = rep["bytes"].to_numpy() // k
    size = np.where(part == k - 1, rep["bytes"].to_numpy() - size * (k - 1), size)
    dur = np.maximum(rep["dur_ns"].to_numpy() // k, 1)
    rep["start_ns"] = rep["start_ns"].to_numpy() + part * dur
    rep["dur_ns"] = dur
    rep["bytes"] = size
    rep["packet_idx"] = part
    rep["dma_engine"] = (rep["id"].to_numpy() + part) % 16
    return rep


def _write(table: pd.DataFrame | pa.Table, path: Path) -> None:
    t = table if isinstance(table, pa.Table) else pa.Table.from_pandas(table, preserve_index=False)
    pq.write_table(t, path)


def write_parquet_export(
    directory: str | Path, spec: SynthSpec | None = None, drop: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Write a Parquet export of the planted run; ``drop`` leaves tables out. Returns the truth."""
    spec = spec or SynthSpec()
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    tl = timeline(spec)
    ins, dma = _with_waits(tl["instructions"], tl["waits"]), tl["dmas"]
    origin = spec.first_hw_timestamp
    n = len(ins)
    instruction = pd.DataFrame(
        {
            "start_ts": ins["start_ns"] + origin,
            "end_ts": ins["start_ns"] + ins["dur_ns"] + origin,
            "duration_ns": ins["dur_ns"],
            "engine": ins["engine"].str.lower(),
            "timeline_track": np.where(ins["engine"] == "Tensor", "TensorMatrix", ins["engine"]),
            "pcore_idx": np.zeros(n, np.int64),
            "opcode": ins["opcode"],
            "operands": "src=0x1000 dst=0x2000 size=512",
            "id": ins["id"],
            "pc": ins["pc"],
            "bir_id": "sg0000:" + ins["id"].astype(str),
            "hlo_name": np.where(ins["engine"] == "Tensor", "dot.1", "add.2"),
            "layer": np.where(ins["engine"].isin(["Tensor", "Vector"]), LAYER_MLP, LAYER_ATTN),
            "stack_frame_ids": np.where(ins["stack_frame"] > 0, "[" + ins["stack_frame"].astype(str) + "]", None),
            "evt_wait_time_ns": np.full(n, 50, np.int64),
            "hbm_read_bytes": ins["hbm_read_bytes"],
            "hbm_write_bytes": ins["hbm_write_bytes"],
            "spill_save_bytes": np.zeros(n, np.int64),
            "spill_reload_bytes": np.zeros(n, np.int64),
            "tensor_instruction_type": np.where(
                ins["is_transpose"], "TRANSPOSE", np.where(ins["engine"] == "Tensor", "REGULAR", None)
            ),
            "raw_flops": ins["raw_flops"],
            "adjusted_flops": ins["raw_flops"],
            "flops_transpose": ins["flops_transpose"],
            **{k: v for k, v in spec.extra.get("instruction_columns", {}).items()},
        }
    )
    if "Instruction" not in drop:
        half = n // 2
        _write(instruction.iloc[:half], d / "Instruction_0.parquet")
        _write(instruction.iloc[half:], d / "Instruction_1.parquet")
    m = len(dma)
    aggregated = pd.DataFrame(
        {
            "start_ts": dma["start_ns"] + origin,
            "end_ts": dma["start_ns"] + dma["dur_ns"] + origin,
            "duration_ns": dma["dur_ns"],
            "id": dma["id"],
            "pcore_idx": np.zeros(m, np.int64),
            "block_id": np.arange(m, dtype=np.int32),
            "queue_idx": dma["queue_idx"].astype(np.int64),
            "queue_name": dma["queue"],
            "queue_type": dma["queue_type"],
            "op": "read",
            "variable": dma["variable"],
            "read_bytes": dma["bytes"],
            "write_bytes": dma["bytes"],
            "transfer_bytes": dma["bytes"],
            "throughput": dma["bytes"] / (dma["dur_ns"] / 1e9),
            "source": dma["source"],
            "dest": dma["dest"],
            "semaphore_id": "S[10] (qSyncIO0)",
        }
    )
    if "DmaPacketAggregated" not in drop:
        _write(aggregated, d / "DmaPacketAggregated.parquet")
    if spec.packets_per_transfer and "DmaPacket" not in drop:
        pk = packets(dma, spec.packets_per_transfer)
        _write(
            pd.DataFrame(
                {
                    "start_ts": pk["start_ns"] + origin,
                    "end_ts": pk["start_ns"] + pk["dur_ns"] + origin,
                    "duration_ns": pk["dur_ns"],
                    "pcore_idx": np.zeros(len(pk), np.int64),
                    "id": np.arange(len(pk), dtype=np.int64),
                    "packet_idx": pk["packet_idx"],
                    "packet_aggregation_id": pk["id"],
                    "engine_idx": pk["dma_engine"],
                    "read_bytes": pk["bytes"],
                    "write_bytes": pk["bytes"],
                    "transfer_bytes": pk["bytes"],
                    "throughput": pk["bytes"] / (pk["dur_ns"] / 1e9),
                    "queue_type": pk["queue_type"],
                    "variable": pk["variable"],
                    "queue_name": pk["queue"],
                    "queue_idx": pk["queue_idx"].astype(np.int64),
                }
            ),
            d / "DmaPacket.parquet",
        )
    if "ActiveTime" not in drop:
        act = active_time(tl["instructions"])
        _write(
            pd.DataFrame(
                {
                    "start_ts": act["start_ns"] + origin,
                    "end_ts": act["end_ns"] + origin,
                    "engine": act["engine"].str.lower(),
                    "pcore_idx": np.zeros(len(act), np.int64),
                    "duration_ns": act["duration_ns"],
                }
            ),
            d / "ActiveTime.parquet",
        )
    if len(tl["ccops"]) and "CcOp" not in drop:
        cc = tl["ccops"]
        nbytes = 8 * 1024 * 1024
        _write(
            pd.DataFrame(
                {
                    "start_ts": cc["start_ns"] + origin,
                    "end_ts": cc["start_ns"] + cc["dur_ns"] + origin,
                    "duration_ns": cc["dur_ns"],
                    "operation": "AllReduce",
                    "algorithm": "Ring",
                    "num_elements": np.full(len(cc), nbytes // 2, np.int64),
                    "dtype": "bf16",
                    "op_id": np.arange(len(cc), dtype=np.int64),
                    "stream_id": np.zeros(len(cc), np.int64),
                    "stream_index": np.zeros(len(cc), np.int64),
                    "trigger_engine": "Pool",
                    "input_size": np.full(len(cc), nbytes, np.int64),
                    "output_size": np.full(len(cc), nbytes, np.int64),
                    "bus_bandwidth": nbytes / (cc["dur_ns"] / 1e9),
                }
            ),
            d / "CcOp.parquet",
        )
    ex = tl["executions"]
    if "ExecutionInfo" not in drop:
        _write(
            pd.DataFrame(
                {
                    "execution_index": ex["execution_index"],
                    "neff_name": "model.neff",
                    "execution_start_ts": ex["start_ns"],
                    "execution_end_ts": ex["end_ns"],
                }
            ),
            d / "ExecutionInfo.parquet",
        )
    if spec.stack_frames and "StackFrame" not in drop:
        _write(
            pd.DataFrame(
                {
                    "id": ["1", "2", "3", "4"],
                    "file_location_id": np.array([1, 2, 3, 4], np.int32),
                    "parent_frame_id": ["2", "0", "4", "0"],
                }
            ),
            d / "StackFrame.parquet",
        )
        _write(
            pd.DataFrame(
                {
                    "id": ["1", "2", "3", "4"],
                    "file_name_id": np.array([1, 2, 1, 2], np.int32),
                    "function_name_id": np.array([1, 2, 1, 3], np.int32),
                    "line_number": np.array([125, 42, 130, 57], np.int32),
                }
            ),
            d / "StackFrameFileLocation.parquet",
        )
        _write(pd.DataFrame({"id": ["1", "2"], "name": [LIB_FILE, USER_FILE]}), d / "StackFrameFileName.parquet")
        _write(
            pd.DataFrame({"id": ["1", "2", "3"], "name": ["forward", "attention", "mlp"]}),
            d / "StackFrameFunctionName.parquet",
        )
    summ = summary(spec, tl)
    if "Summary" not in drop:
        _write(pd.DataFrame([summ]), d / "Summary.parquet")
    span = int(ex["end_ns"].max())
    meta = {
        "profile_schema_version": spec.schema_version,
        "ntff_version": 6,
        "num_physical_cores": 1,
        "vnc_enabled": False,
        "first_hw_timestamp": origin,
        "last_hw_timestamp": origin + span,
        "first_ts": pd.Timestamp(spec.host_origin_ns, unit="ns", tz="UTC").isoformat(),
        "last_ts": pd.Timestamp(spec.host_origin_ns + span, unit="ns", tz="UTC").isoformat(),
        "dma_ddr_bandwidth": 1.0e11,
        "num_dma_engines_per_neuroncore": 16,
        "hbm_ddr_bandwidth": 4.1e11,
        "tensor_engine_num_rows": 128,
        "tensor_engine_num_cols": 128,
        "tensor_engine_clock_freq": 1.4,
        "vector_engine_clock_freq": 1.4,
        "neuroncore_clock_freq": 1.4,
        "ticks_per_nanosec": 1,
        "instance_type": spec.instance_type,
        "runtime_version": "2.25.0",
        "neuroncore_idx": 0,
        "neuron_device_idx": 0,
    }
    if "Metadata" not in drop:
        _write(pd.DataFrame([meta]), d / "Metadata.parquet")
    _write(
        pd.DataFrame(
            {
                "table_name": ["Instruction", "Instruction", "Summary"],
                "field_name": ["start_ts", "duration_ns", "mfu_estimated_percent"],
                "field_description": ["start", "duration", "MFU"],
                "field_type": ["integer", "integer", "number"],
                "field_unit": ["nanoseconds", "nanoseconds", "percent"],
                "field_required": [True, True, False],
            }
        ),
        d / "SchemaFields.parquet",
    )
    host = host_exec_starts(spec, tl)
    if spec.system_profile and "SystemProfileEvents" not in drop:
        k = len(host)
        sp = pd.DataFrame(
            {
                "id": np.arange(2 * k, dtype=np.int64),
                "name": ["nrt_execute"] * k + ["nc_exec_running"] * k,
                "start_ts": np.concatenate([host - 30_000, host]),
                "end_ts": np.concatenate([host + spec.exec_ns + 20_000, host + spec.exec_ns]),
                "duration_ns": np.concatenate([np.full(k, spec.exec_ns + 50_000), np.full(k, spec.exec_ns)]),
                "trace_event_source": ["neuron_rt"] * k + ["neuron_hw"] * k,
                "instance_id": "i-0b1ea78ca2865fd32",
                "process_id": np.full(2 * k, 4242, np.int64),
                "thread_id": np.full(2 * k, 4243, np.int64),
                "nc_idx": np.zeros(2 * k, np.int64),
                "flow_id": [[str(100 + i)] for i in range(k)] * 2,
                "framework_stream_id": "0",
                "extra_attributes_json": '{"model_id": 1}',
            }
        )
        _write(sp, d / "SystemProfileEvents.parquet")
    return {"spec": spec, "timeline": tl, "summary": summ, "metadata": meta, "host_exec_starts": host, "origin": origin}


def write_legacy_json(path: str | Path, spec: SynthSpec | None = None, gz: bool = False) -> dict[str, Any]:
    """Write the ``neuron-profile view --output-format json`` export of the planted run, with the
    conventions of real files: string flags, hardware timestamps in ns beside a
    ``ticks_per_nanosec`` of 1000, packets listed beside their aggregated transfer,
    ``dma_queues_info``, ``active_time`` without the semaphore waits, and ``warnings``."""
    spec = spec or SynthSpec()
    tl = timeline(spec)
    ins, dma = _with_waits(tl["instructions"], tl["waits"]), tl["dmas"]
    label = np.where(
        ins["engine"] == "Tensor", np.where(np.arange(len(ins)) % 2 == 0, "Tensor", "TensorMatrix"), ins["engine"]
    )
    instruction = pd.DataFrame(
        {
            "timestamp": ins["start_ns"],
            "duration": ins["dur_ns"],
            "label": label,
            "subgroup": ins["engine"],
            "opcode": ins["opcode"],
            "operands": "src=0x1000 dst=0x2000",
            "hlo_name": np.where(ins["engine"] == "Tensor", "dot.1", "add.2"),
            "layer": np.where(ins["engine"].isin(["Tensor", "Vector"]), LAYER_MLP, LAYER_ATTN),
            "hlo_attrs": "{}",
            "bir_id": ins["id"],
            "evt_wait_time": 50,
            "hbm_read_bytes": ins["hbm_read_bytes"],
            "hbm_write_bytes": ins["hbm_write_bytes"],
            "predecessors": "[]",
            "nki_source_location": np.where(ins["engine"] == "Tensor", f"{USER_FILE}:42", None),
        }
    )
    # Stores of the first queue name no memory, as some real rows do: "unknown".
    store = (dma["dest"] != "[SB]").to_numpy()
    dest = np.where(store & (dma["queue_idx"].to_numpy() == 0), "unknown", dma["dest"].str.strip("[]"))
    transfers = pd.DataFrame(
        {
            "timestamp": dma["start_ns"],
            "duration": dma["dur_ns"],
            "transfer_size": dma["bytes"],
            "source": dma["source"].str.strip("[]"),
            "dest": dest,
            "variable": dma["variable"],
            "dma_queue": dma["queue_idx"],
            "dma_engine": dma["id"] % 16,
            "packet_aggregation_id": dma["id"],
            "aggregated": "yes",
        }
    )
    rows = [transfers]
    if spec.packets_per_transfer:
        pk = packets(dma.assign(dest=dest), spec.packets_per_transfer)
        rows.append(
            pd.DataFrame(
                {
                    "timestamp": pk["start_ns"],
                    "duration": pk["dur_ns"],
                    "transfer_size": pk["bytes"],
                    "source": pk["source"].str.strip("[]"),
                    "dest": pk["dest"].str.strip("[]"),
                    "variable": pk["variable"],
                    "dma_queue": pk["queue_idx"],
                    "dma_engine": pk["dma_engine"],
                    "packet_aggregation_id": pk["id"],
                    "aggregated": "no",
                }
            )
        )
    allrows = pd.concat(rows, ignore_index=True)
    allrows["read_size"] = allrows["transfer_size"]
    allrows["write_size"] = allrows["transfer_size"]
    allrows["transfer_rate"] = allrows["transfer_size"] / (allrows["duration"] / 1e9)
    allrows["subgroup"] = "Q" + allrows["dma_queue"].astype(str) + "-E" + allrows["dma_engine"].astype(str)
    allrows["semaphore_id"] = 10
    allrows["is_cc_dma"] = "no"
    allrows["duplicate"] = "no"
    records = json.loads(allrows.to_json(orient="records"))
    for r in records:  # real files nest the source memory: [["WEIGHT"]]; dest: ["SB"]
        r["source"] = [[r["source"]]]
        r["dest"] = [r["dest"]]
    queues = [
        {"q_name": q, "q_type": t, "q_idx": i, "q_eng_idx": 0}
        for i, (q, t) in enumerate([*zip(spec.dma_queues, spec.queue_types), (SPILL_QUEUE, "spill")])
    ]
    act = active_time(tl["instructions"])
    summ = summary(spec, tl)
    summ.update({"nc_idx": 0, "nd_idx": 0})
    span = int(tl["executions"]["end_ns"].max())
    meta = {
        "ticks_per_nanosec": spec.ticks_per_nanosec,
        "first_hw_timestamp": spec.first_hw_timestamp,
        "last_hw_timestamp": spec.first_hw_timestamp + span,
        "pe_clock_freq": 2.8,
        "pe_num_rows": 128,
        "pe_num_cols": 128,
        "num_physical_cores": 1,
        "ntff_version": 5,
        "data_version": "2.14.0",
    }
    doc = {
        "summary": [summ],
        "summary_groups": [],
        "summary_group_order": [],
        "terminology": [],
        "instruction": json.loads(instruction.to_json(orient="records")),
        "dma": records,
        "dma_queues_info": queues,
        "active_time": json.loads(
            pd.DataFrame(
                {
                    "engine": act["engine"],
                    "start_ts": act["start_ns"],
                    "end_ts": act["end_ns"],
                    "duration_ns": act["duration_ns"],
                }
            ).to_json(orient="records")
        ),
        "metadata": [meta],
        "warnings": [{"type": "dma", "message": w} for w in spec.file_warnings],
    }
    data = json.dumps(doc).encode()
    path = Path(path)
    path.write_bytes(gzip.compress(data) if gz else data)
    return {"spec": spec, "timeline": tl, "summary": summ, "metadata": meta, "document": doc}


def write_framework_trace(path: str | Path, spec: SynthSpec | None = None, launches: bool = True) -> dict[str, Any]:
    """The torch.profiler (Kineto) JSON of the host side: one ProfilerStep per execution, a
    user function, a framework op and (when ``launches``) its ``privateuse1_runtime`` call."""
    spec = spec or SynthSpec()
    tl = timeline(spec)
    host = host_exec_starts(spec, tl)
    events: list[dict[str, Any]] = []
    pid, tid = 4242, 4243

    def span(name: str, cat: str, start_ns: int, dur_ns: int, args: dict[str, Any] | None = None) -> None:
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": f"{start_ns // 1000}.{start_ns % 1000:03d}",
                "dur": dur_ns / 1000,
                "args": args or {},
            }
        )

    for i, t in enumerate(host.tolist()):
        s0 = t - 200_000
        span(f"ProfilerStep#{i}", "user_annotation", s0, spec.exec_ns + 400_000)
        span(f"{USER_FILE}(88): train_step", "python_function", s0 + 1_000, spec.exec_ns + 300_000)
        span("neuron::graph_execute", "cpu_op", s0 + 2_000, spec.exec_ns + 250_000, {"External id": 10 + i})
        if launches:
            span(
                "nrt_execute",
                "privateuse1_runtime",
                t - 30_000,
                25_000,
                {"External id": 10 + i, "correlation": 500 + i},
            )
    # Kineto writes ts as decimal microseconds with ns digits; write them as exact text.
    parts = [json.dumps({k: v for k, v in e.items() if k != "ts"})[:-1] + f', "ts": {e["ts"]}}}' for e in events]
    Path(path).write_text('{"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": [' + ",\n".join(parts) + "]}")
    return {"host_exec_starts": host, "launch_starts": host - 30_000, "timeline": tl}
