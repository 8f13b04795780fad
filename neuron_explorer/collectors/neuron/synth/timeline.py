"""The planted run every synthetic export describes: spec, timeline, Summary, packets, waits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

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


def with_waits(ins: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
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
