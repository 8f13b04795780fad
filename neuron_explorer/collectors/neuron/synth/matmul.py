"""A single-matmul ``neuron-profile`` JSON export written to the conventions of the 117 real
exports of issue 27 (matmul kernels on inf2/trn1, profiler 2.27), as corrected in issue 42
(reference neuron-formats.md: the files do not begin with the wait).

What the real files show, and this writer reproduces:

- a ~4 us **preamble** of real work from ~7 ns: Sync DRAIN, WRITE and SET_ORDERING_MODE, a
  Tensor TENSOR_LOAD and a Scalar ACT_TABLE_LOAD, the 32 KiB identity-matrix DMA and 2 of the 3
  instruction-fetch packets; then a ~1.85 ms **fixed wait** in which only ``EVENT_SEMAPHORE``
  rows run, on every engine (no other instruction, no DMA); then the **kernel**:
  ``EVENT_SEMAPHORE_RANGE_CLEAR``, the last instruction-fetch packet, the DGE loads, the MATMULs
  (the first ~1 us after the wait's end), the output store and a closing wait;
- three logical DMA transfers, grouped by ``packet_aggregation_id``: the identity matrix (the
  only group with an ``aggregated: "yes"`` row, 32,768 B, which leaves out its group's 16
  four-byte semaphore packets: 32,832 B in packets), the DGE software-dynamic input/output loads
  and the instruction fetch (1,024 + 8 + 4 B on queue 14, ``queue_type`` instruction), listed as
  packets only; all packets together are the Summary's ``static_dma_size +
  software_dynamic_dma_size``;
- ``dma_queues_info`` lists q_idx 14 twice under different names on different engines
  (qScalarTable, qDveTable), neither the fetch rows' DMA engine;
- the Summary's ``total_active_time_percent`` covers engines and DMA together; every
  ``*_percent`` is a 0-1 fraction; ``active_time`` excludes the semaphore waits.

Assumed, not read from a real file: the rows' ``queue_type`` of the identity and DGE groups
(``static``, ``software_dynamic``, as the trn2 files spell the latter) and the ``src=fp16@``
spelling of a 16-bit MATMUL operand (the trn2 files spell ``bfloat16`` and ``fp32``).

Kernel time, DMA bytes and FLOPs grow with the matrix sizes (``m``, ``k``, ``n``), so a sweep
of these files is a sweep of matmul sizes. The returned dict is the document written (tests
recompute their expectations from its raw rows, not from this module's arithmetic).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Tensor-engine peak of a trn1 NeuronCore-v2 in bf16: 128 x 128 PE array, 2 FLOPs a MAC, 1.4 GHz.
PE_ROWS = PE_COLS = 128
PE_CLOCK_GHZ = 1.4
PEAK_FLOPS_PER_S = 2 * PE_ROWS * PE_COLS * PE_CLOCK_GHZ * 1e9
HBM_BYTES_PER_S = 410e9
WEIGHTS_GROUP, DGE_GROUP, FETCH_GROUP = 1, 2, 3


@dataclass
class MatmulSpec:
    m: int = 128
    k: int = 128
    n: int = 512
    dtype_bytes: int = 2
    dtype: str = "fp16"
    initial_wait_ns: int = 1_850_000
    weights_bytes: int = 32 * 1024
    weights_semaphores: int = 16
    fetch_packets: tuple[int, ...] = (1024, 8, 4)
    preamble_ns: int = 4_100
    packet_bytes: int = 4096
    #: ns per byte a DMA queue moves (about 27 GB/s, one DMA engine's bandwidth)
    ns_per_byte: float = 1 / 27.2
    instance_type: str = "trn1.2xlarge"
    mfu_max_achievable: float = 0.62


def _packets(total: int, size: int) -> list[int]:
    full, rest = divmod(total, size)
    return [size] * full + ([rest] if rest else [])


def matmul_document(spec: MatmulSpec | None = None) -> dict[str, Any]:
    """The export (a dict) of one ``m x k @ k x n`` matmul kernel."""
    s = spec or MatmulSpec()
    ins: list[dict[str, Any]] = []
    dma: list[dict[str, Any]] = []

    def instruction(
        engine: str, opcode: str, start: int, dur: int, hlo: str | None, layer: str | None, operands: str = ""
    ) -> None:
        label = "TensorMatrix" if engine == "Tensor" and opcode == "MATMUL" else engine
        ins.append(
            {
                "timestamp": int(start),
                "duration": int(dur),
                "label": label,
                "subgroup": engine,
                "opcode": opcode,
                "operands": operands,
                "hlo_name": hlo,
                "layer": layer,
                "hlo_attrs": "{}",
                "bir_id": len(ins),
                "evt_wait_time": 0,
                "predecessors": "[]",
            }
        )

    def packets(
        group: int,
        queue: str,
        q_idx: int,
        engine: int | list[int],
        start: int,
        sizes: list[int],
        src: str,
        dst: str,
        qtype: str,
    ) -> int:
        """Packets back to back on each DMA engine, round-robin over ``engine``; returns the end."""
        engines = engine if isinstance(engine, list) else [engine]
        clock = {e: start for e in engines}
        for i, size in enumerate(sizes):
            engine = engines[i % len(engines)]
            t = clock[engine]
            dur = max(int(size * s.ns_per_byte), 1)
            dma.append(
                {
                    "timestamp": t,
                    "duration": dur,
                    "transfer_size": size,
                    "read_size": size,
                    "write_size": size,
                    "transfer_rate": size / (dur / 1e9),
                    "source": [[src]],
                    "dest": [dst],
                    "variable": queue,
                    "dma_queue": q_idx,
                    "dma_engine": engine,
                    "subgroup": f"Q{q_idx}-E{engine}",  # no queue name: that is in dma_queues_info
                    "queue_type": qtype,
                    "packet_aggregation_id": group,
                    "aggregated": "no",
                    "duplicate": "no",
                    "is_cc_dma": "no",
                    "semaphore_id": 3,
                    "packet_idx": sum(1 for r in dma if r["packet_aggregation_id"] == group),
                }
            )
            clock[engine] = t + dur
        return max(clock.values())

    fetch = list(s.fetch_packets)
    # The preamble: set-up work from ~7 ns, the identity matrix and 2 of the 3 fetch packets.
    instruction("Sync", "DRAIN", 7, 300, None, None)
    instruction("Sync", "WRITE", 320, 80, None, None)
    instruction("Sync", "SET_ORDERING_MODE", 410, 40, None, None)
    instruction("Tensor", "TENSOR_LOAD", 500, 900, None, None)
    instruction("Scalar", "ACT_TABLE_LOAD", 600, max(s.preamble_ns - 600, 1_200), None, None)
    fetch_end = packets(FETCH_GROUP, "qSyncInstFetch", 14, 5, 60, fetch[:-1], "INSTRUCTION", "SB", "instruction")
    w_start = max(fetch_end, 1_000)
    identity = _packets(s.weights_bytes, s.packet_bytes) + [4] * s.weights_semaphores
    w_end = packets(WEIGHTS_GROUP, "qSyncIO0", 0, 1, w_start, identity, "WEIGHT", "SB", "static")
    dma.append(
        {
            "timestamp": w_start,
            "duration": w_end - w_start,
            "transfer_size": s.weights_bytes,  # the aggregated row leaves out the semaphore packets
            "read_size": s.weights_bytes,
            "write_size": s.weights_bytes,
            "transfer_rate": s.weights_bytes / ((w_end - w_start) / 1e9),
            "source": [["WEIGHT"]],
            "dest": ["SB"],
            "variable": "weights",
            "dma_queue": 0,
            "dma_engine": 1,
            "subgroup": "Q0-E1",
            "queue_type": "static",
            "packet_aggregation_id": WEIGHTS_GROUP,
            "aggregated": "yes",
            "duplicate": "no",
            "is_cc_dma": "no",
            "semaphore_id": 3,
        }
    )
    pre_end = max(w_end, 1_800, s.preamble_ns)  # the last preamble row's end
    t0 = pre_end + s.initial_wait_ns  # the end of the fixed wait
    # The fixed wait: every engine parked on a semaphore, no DMA, nothing else.
    for j, engine in enumerate(("Tensor", "Vector", "Scalar", "GpSimd", "Sync")):
        instruction(engine, "EVENT_SEMAPHORE", pre_end + j * 3, t0 - pre_end - j * 3, None, None)
    # The kernel.
    instruction("Sync", "EVENT_SEMAPHORE_RANGE_CLEAR", t0, 40, None, None)
    packets(FETCH_GROUP, "qSyncInstFetch", 14, 5, t0 + 40, fetch[-1:], "INSTRUCTION", "SB", "instruction")
    # DGE software-dynamic loads of both inputs and the store of the output.
    in_bytes = (s.m * s.k + s.k * s.n) * s.dtype_bytes
    out_bytes = s.m * s.n * s.dtype_bytes
    sizes_in, sizes_out = _packets(in_bytes, s.packet_bytes), _packets(out_bytes, s.packet_bytes)
    dge = list(range(64, 80))  # 16 DMA engines, as the trn2 files' software-dynamic queue
    load_end = packets(DGE_GROUP, "qPoolIO0", 1, dge, t0 + 60, sizes_in, "INPUT", "SB", "software_dynamic")
    tiles = math.ceil(s.m / PE_ROWS) * math.ceil(s.k / PE_COLS) * math.ceil(s.n / 512)
    mm_start = max(load_end + 30, t0 + 1_000)  # the first MATMUL ~1 us after the wait's end
    instruction("Tensor", "EVENT_SEMAPHORE", t0, mm_start - t0, None, None)  # waits for its inputs
    t = mm_start
    per_tile = max(int(min(s.n, 512) * 64 / PE_CLOCK_GHZ / 64), 16)
    operands = f"acc_flags=3 src={s.dtype}@0x36ff8[1,0,0][512,1,1] dst=0x2000800[1,0,0][512,1,1] 128*128"
    for _ in range(tiles):
        instruction("Tensor", "MATMUL", t, per_tile, "dot.3", "model/linear", operands)
        instruction("Vector", "TENSOR_COPY", t + per_tile, per_tile // 2, "dot.3", "model/linear")
        t += per_tile
    instruction("Scalar", "ACTIVATE", t, 60, "copy.4", None)
    instruction("GpSimd", "IOTA", t0 + 100, 50, None, None)
    store_start = t + per_tile // 2 + 60
    # The store runs on one DMA engine (so the kernel grows with N, 6.5-12 us on the real files).
    store_end = packets(DGE_GROUP, "qPoolIO0", 1, dge[0], store_start, sizes_out, "SB", "OUTPUT", "software_dynamic")
    instruction("Sync", "EVENT_SEMAPHORE", store_end, 200, None, None)  # the closing wait
    last = store_end + 200

    flops = 2 * s.m * s.k * s.n
    span = last
    summary = _summary(s, ins, dma, span, flops, in_bytes, out_bytes)
    active = _active_time(ins)
    return {
        "summary": [summary],
        "metadata": [
            {
                "ticks_per_nanosec": 1000,
                "first_hw_timestamp": 0,
                "last_hw_timestamp": span,
                "pe_clock_freq": PE_CLOCK_GHZ,
                "pe_num_rows": PE_ROWS,
                "pe_num_cols": PE_COLS,
                "num_physical_cores": 1,
                "data_version": "2.27.0",
            }
        ],
        "instruction": ins,
        "dma": dma,
        "active_time": active,
        "dma_queues_info": [
            {"q_name": "qSyncIO0", "q_type": "weights", "q_idx": 0, "q_eng_idx": 1},
            {"q_name": "qPoolIO0", "q_type": "io", "q_idx": 1, "q_eng_idx": 2},
            {"q_name": "qScalarTable", "q_type": "unknown", "q_idx": 14, "q_eng_idx": 2},
            {"q_name": "qDveTable", "q_type": "unknown", "q_idx": 14, "q_eng_idx": 3},
        ],
        "model_info": [{"m": s.m, "k": s.k, "n": s.n}],
        "warnings": [],
    }


def _union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _active_time(ins: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in ins:
        if r["opcode"] == "EVENT_SEMAPHORE":
            continue
        engine = r["subgroup"]
        rows.append(
            {
                "engine": engine,
                "start_ts": r["timestamp"],
                "end_ts": r["timestamp"] + r["duration"],
                "duration_ns": r["duration"],
            }
        )
    return rows


def _summary(
    s: MatmulSpec, ins: list[dict[str, Any]], dma: list[dict[str, Any]], span: int, flops: int, ib: int, ob: int
) -> dict[str, Any]:
    out: dict[str, Any] = {"total_time": span / 1e9, "instance_type": s.instance_type, "nc_idx": 0, "nd_idx": 0}
    work = [
        (r["timestamp"], r["timestamp"] + r["duration"], r["subgroup"]) for r in ins if r["opcode"] != "EVENT_SEMAPHORE"
    ]
    moves = [(r["timestamp"], r["timestamp"] + r["duration"]) for r in dma if r["aggregated"] == "no"]
    for engine in ("Tensor", "Vector", "Scalar", "GpSimd", "Sync"):
        key = engine.lower()
        mine = [(a, b) for a, b, e in work if e == engine]
        active = _union(mine)
        out[f"{key}_engine_active_time"] = active / 1e9
        out[f"{key}_engine_active_time_percent"] = active / span
        out[f"{key}_engine_instruction_count"] = sum(1 for r in ins if r["subgroup"] == engine)
    both = _union([(a, b) for a, b, _ in work] + moves)
    out["total_active_time"] = both / 1e9
    out["total_active_time_percent"] = both / span  # engines and DMA together, as real files
    dma_active = _union(moves)
    out["dma_active_time"] = dma_active / 1e9
    out["dma_active_time_percent"] = dma_active / span
    static = sum(r["transfer_size"] for r in dma if r["aggregated"] == "no" and r["packet_aggregation_id"] != DGE_GROUP)
    dynamic = sum(
        r["transfer_size"] for r in dma if r["aggregated"] == "no" and r["packet_aggregation_id"] == DGE_GROUP
    )
    seconds = span / 1e9
    out.update(
        {
            "static_dma_size": static,
            "software_dynamic_dma_size": dynamic,
            "hbm_read_bytes": ib + s.weights_bytes + sum(s.fetch_packets),
            "hbm_write_bytes": ob,
            "sbuf_read_bytes": ob,
            "sbuf_write_bytes": ib + s.weights_bytes,
            "psum_read_bytes": ob,
            "psum_write_bytes": ob,
            "hardware_flops": flops,
            "model_flops": flops,
            "transpose_flops": 0,
            "mfu_estimated_percent": flops / (PEAK_FLOPS_PER_S * seconds),
            "hfu_estimated_percent": flops / (PEAK_FLOPS_PER_S * seconds),
            "mfu_max_achievable_estimated_percent": s.mfu_max_achievable,
            "mbu_estimated_percent": (ib + ob + s.weights_bytes + sum(s.fetch_packets)) / seconds / HBM_BYTES_PER_S,
            "arithmetic_intensity": flops / (ib + ob + s.weights_bytes),
            "throttle_avg_util_limit_nc0_percent": 1.0967,
            # AWS's deprecated transfer fields, which cover the aggregated transfer only
            # (assumed to read so on the real files: "we count that one, 32 KiB in every file").
            "dma_transfer_count": 1,
            "dma_transfer_total_bytes": s.weights_bytes,
            "dma_transfer_average_bytes": float(s.weights_bytes),
        }
    )
    return out


def write_matmul_json(path: str | Path, spec: MatmulSpec | None = None) -> dict[str, Any]:
    """Write the export of one matmul (``matmul_document``) and return the document."""
    doc = matmul_document(spec)
    Path(path).write_text(json.dumps(doc))
    return doc
