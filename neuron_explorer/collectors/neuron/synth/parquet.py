"""Write the planted run as a Neuron Explorer Parquet export directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from neuron_explorer.collectors.neuron.synth.timeline import (
    LAYER_ATTN,
    LAYER_MLP,
    LIB_FILE,
    USER_FILE,
    SynthSpec,
    active_time,
    host_exec_starts,
    packets,
    summary,
    timeline,
    with_waits,
)


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
    ins, dma = with_waits(tl["instructions"], tl["waits"]), tl["dmas"]
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
