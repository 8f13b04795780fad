"""Write the planted run as a legacy ``neuron-profile view --output-format json`` export."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.collectors.neuron.synth.timeline import (
    LAYER_ATTN,
    LAYER_MLP,
    SPILL_QUEUE,
    USER_FILE,
    SynthSpec,
    active_time,
    packets,
    summary,
    timeline,
    with_waits,
)


def write_legacy_json(path: str | Path, spec: SynthSpec | None = None, gz: bool = False) -> dict[str, Any]:
    """Write the ``neuron-profile view --output-format json`` export of the planted run, with the
    conventions of real files: string flags, hardware timestamps in ns beside a
    ``ticks_per_nanosec`` of 1000, packets listed beside their aggregated transfer,
    ``dma_queues_info``, ``active_time`` without the semaphore waits, and ``warnings``."""
    spec = spec or SynthSpec()
    tl = timeline(spec)
    ins, dma = with_waits(tl["instructions"], tl["waits"]), tl["dmas"]
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
