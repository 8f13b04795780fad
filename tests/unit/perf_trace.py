"""A tiny factory of traces for the performance-model tests: ops with recorded shapes, each
launching one kernel of a given duration, on a named device."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from neuron_explorer.trace.model import Trace, conform
from neuron_explorer.trace.schema import EVENTS_SCHEMA

BASE_NS = 1_700_000_000_000_000_000


@dataclass
class Op:
    name: str
    shapes: list[Any]
    types: list[str]
    kernel_ns: int = 10_000
    strides: list[Any] = field(default_factory=list)
    concrete: list[str] = field(default_factory=list)
    calls: int = 1
    line: int = 10
    parent: Op | None = None  # nest this op (and its kernel) inside another one
    kernel: str = "kernel"


def trace_of(ops: list[Op], device: str = "NVIDIA H100 80GB HBM3") -> Trace:
    rows: list[dict[str, Any]] = []
    t = BASE_NS
    host = {"device_type": "cpu", "pid": 1, "tid": 1, "rank": 0, "ph": "X"}
    for _ in range(max(op.calls for op in ops)):
        ids: dict[int, int] = {}
        for op in ops:
            parent = ids.get(id(op.parent)) if op.parent is not None else None
            eid = len(rows)
            ids[id(op)] = eid
            args = {"Input Dims": op.shapes, "Input type": op.types}
            if op.strides:
                args["Input Strides"] = op.strides
            if op.concrete:
                args["Concrete Inputs"] = op.concrete
            rows.append(
                {
                    "event_id": eid,
                    "kind": "cpu_op",
                    "category": "cpu_op",
                    "name": op.name,
                    "start_ns": t,
                    "dur_ns": 5_000,
                    "parent_id": parent,
                    "input_shapes": json.dumps(op.shapes),
                    "input_types": json.dumps(op.types),
                    "args": json.dumps(args),
                    "src_file": "model.py",
                    "src_line": op.line,
                    "src_precision": "line",
                    **host,
                }
            )
            if op.kernel_ns:
                rows.append(
                    {
                        "event_id": len(rows),
                        "kind": "kernel",
                        "category": "kernel",
                        "name": op.kernel,
                        "device_type": "cuda",
                        "device": 0,
                        "stream": 7,
                        "pid": 0,
                        "tid": 7,
                        "rank": 0,
                        "ph": "X",
                        "start_ns": t + 1_000,
                        "dur_ns": op.kernel_ns,
                        "op_id": eid,
                    }
                )
            t += op.kernel_ns + 10_000
    table = conform(pa.Table.from_pylist(rows, schema=EVENTS_SCHEMA))
    return Trace(table, {"rank": 0, "device_properties": [{"id": 0, "name": device}]})
