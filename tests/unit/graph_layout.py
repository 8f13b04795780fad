"""A tiny factory of traces laid out by hand, in microseconds, for the dependency-graph tests:
host spans nest by time on thread 1, device work names its stream and the call that launched it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from neuron_explorer.trace.model import Trace, conform
from neuron_explorer.trace.schema import EVENTS_SCHEMA

US = 1_000
BASE_NS = 1_700_000_000_000_000_000


@dataclass
class Layout:
    rows: list[dict[str, Any]] = field(default_factory=list)

    def _add(self, **row: Any) -> int:
        eid = len(self.rows)
        self.rows.append({"event_id": eid, "rank": 0, "ph": "X", "step": 0, **row})
        return eid

    def host(
        self, kind: str, name: str, start_us: float, end_us: float, parent: int | None = None, **extra: Any
    ) -> int:
        op = extra.pop("op", None)
        tid = extra.pop("tid", 1)
        if parent is None and kind != "step":  # top-level spans nest in the step, as recorded
            parent = next((r["event_id"] for r in self.rows if r["kind"] == "step"), None)
        return self._add(
            kind=kind,
            category={"cpu_op": "cpu_op", "runtime": "cuda_runtime", "step": "user_annotation"}.get(kind, kind),
            name=name,
            device_type="cpu",
            pid=1,
            tid=tid,
            start_ns=BASE_NS + int(start_us * US),
            dur_ns=int((end_us - start_us) * US),
            parent_id=parent,
            op_id=op,
            src_file="model.py" if kind == "cpu_op" else None,
            src_line=extra.pop("line", None),
            **extra,
        )

    def device(
        self,
        name: str,
        stream: int,
        start_us: float,
        end_us: float,
        launch: int | None,
        kind: str = "kernel",
        op: int | None = None,
        **extra: Any,
    ) -> int:
        row: dict[str, Any] = dict(
            kind=kind,
            category=kind,
            name=name,
            device_type="cuda",
            device=0,
            stream=stream,
            pid=0,
            tid=stream,
            start_ns=BASE_NS + int(start_us * US),
            dur_ns=int((end_us - start_us) * US),
            launch_id=launch,
            op_id=op,
        )
        row.update(extra)  # any column, a default included (device=1, memcpy_kind=...)
        return self._add(**row)

    def stream_wait(self, at_us: float, waited: int, waiting: int, record_corr: int, corr: int) -> int:
        args = {
            "cuda_sync_kind": "Stream Wait Event",
            "wait_on_stream": waited,
            "stream": waiting,
            "wait_on_cuda_event_record_corr_id": record_corr,
            "correlation": corr,
        }
        return self._add(
            kind="sync",
            category="cuda_sync",
            name="Stream Wait Event",
            device_type="cuda",
            device=0,
            pid=0,
            tid=waiting,
            start_ns=BASE_NS + int(at_us * US),
            dur_ns=US,
            correlation_id=corr,
            args=json.dumps(args),
        )

    def trace(self) -> Trace:
        rows = sorted(self.rows, key=lambda r: (r["start_ns"], -r["dur_ns"]))
        return (
            Trace(conform(pa.Table.from_pylist(self.rows, schema=EVENTS_SCHEMA)), {"rank": 0})
            if rows
            else Trace(conform(pa.Table.from_pylist([], schema=EVENTS_SCHEMA)))
        )
