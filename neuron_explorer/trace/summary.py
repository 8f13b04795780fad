"""What is inside a trace: counts by kind and device, streams, steps, ranks, time span, how
much of it carries source lines, and how complete its links are (and why the rest are not).

This describes the data, it does not judge it (that is the analyzers' job); ``info`` prints it
and the agent interface serves it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.line_coverage import line_coverage
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import DEVICE_KINDS, HOST_SPAN_KINDS, Kind

_COLUMNS = [
    "rank", "kind", "device_type", "device", "stream", "start_ns", "dur_ns", "step", "src_line",
    "src_precision", "launch_id", "op_id", "fwd_id", "correlation_id", "graph_id", "name",
]  # fmt: skip


def _compile_spans(df: Any) -> dict[str, int]:
    """The ``compile: ...`` spans a capture made of torch.compile's compiles (one-time work)."""
    spans = df[(df["kind"] == Kind.ANNOTATION) & df["name"].astype(str).str.startswith("compile: ")]
    return {"spans": len(spans), "dur_ns": int(spans["dur_ns"].sum())} if len(spans) else {}


def _union_per_device(dev: Any, by: tuple[str, ...] = ("rank", "device")) -> dict[tuple[Any, ...], int]:
    """Time during which at least one event ran on each (rank, device), or each key of ``by``:
    the union (overlapping events count once: streams of a device, or the 16 DMA engines behind
    one Neuron queue), by a sort and a running maximum of end times."""
    if not len(dev):
        return {}
    d = dev[[*by, "start_ns", "dur_ns"]].sort_values([*by, "start_ns"], kind="stable")
    end = (d["start_ns"] + d["dur_ns"].clip(lower=0)).to_numpy()
    keys = [d[c].to_numpy() for c in by]
    import pandas as pd

    run_max = pd.Series(end).groupby(keys).cummax().to_numpy()
    prev = pd.Series(run_max).groupby(keys).shift(1).to_numpy(dtype="float64")
    start = d["start_ns"].to_numpy()
    contrib = np.where(np.isnan(prev), end - start, end - np.maximum(start, np.nan_to_num(prev, nan=0)))
    contrib = np.maximum(contrib, 0)
    sums = pd.Series(contrib).groupby(keys).sum()
    return {tuple(k): int(v) for k, v in sums.items()}


def describe(trace: Trace) -> dict[str, Any]:
    """A JSON-able description of the trace (see ``neuron-explorer info``)."""
    df = trace.to_pandas(columns=[c for c in _COLUMNS if c in trace.events.column_names])
    df["kind"] = df["kind"].astype(str)
    timed = df[~df["kind"].isin([Kind.METADATA, Kind.FLOW])]
    start = int(timed["start_ns"].min()) if len(timed) else 0
    end = int((timed["start_ns"] + timed["dur_ns"]).max()) if len(timed) else 0
    by_kind = df.groupby("kind", observed=True).size().sort_values(ascending=False)
    dev = df[df["kind"].isin(DEVICE_KINDS)]
    devices = (
        dev.groupby(["rank", "device_type", "device"], observed=True)
        .agg(events=("kind", "size"), streams=("stream", "nunique"), stream_busy_sum_ns=("dur_ns", "sum"))
        .reset_index()
    )
    busy = _union_per_device(dev)
    devices["busy_ns"] = [int(busy.get((r, d), 0)) for r, d in zip(devices["rank"], devices["device"])]
    streams = (
        dev.groupby(["rank", "device_type", "device", "stream"], observed=True)
        .agg(events=("kind", "size"), busy_sum_ns=("dur_ns", "sum"))
        .reset_index()
    )
    # Busy on a stream is its union: a Neuron DMA queue's packets overlap across its DMA engines
    # (measured on trn2: 16 engines behind one queue), so their summed durations exceed the wall.
    per_stream = _union_per_device(dev, ("rank", "device", "stream"))
    streams["busy_ns"] = [
        int(per_stream.get((r, d, st), 0)) for r, d, st in zip(streams["rank"], streams["device"], streams["stream"])
    ]
    steps = df[df["kind"] == Kind.STEP][["rank", "step", "start_ns", "dur_ns"]].sort_values(["rank", "step"])
    attributable = df[df["kind"].isin([*HOST_SPAN_KINDS, *DEVICE_KINDS]) & (df["kind"] != Kind.PYTHON)]
    ops = df[df["kind"] == Kind.CPU_OP]
    source = {
        "events": len(attributable),
        "with_source": int(attributable["src_line"].notna().sum()),
        "ops": len(ops),
        "ops_with_source": int(ops["src_line"].notna().sum()),
        "ops_exact_line": int((ops["src_precision"].astype(str) == "line").sum()),
        "device_events_with_source": int(dev["src_line"].notna().sum()),
        "by_precision": {
            str(k): int(v)
            for k, v in attributable["src_precision"].astype(str).value_counts().items()
            if k not in ("None", "nan")
        },
        # op time and device time by precision (trace.line_coverage)
        "time": line_coverage(trace),
    }
    return {
        "path": str(trace.path) if trace.path else trace.metadata.get("source_file"),
        "source_file": trace.metadata.get("source_file"),
        "schema_version": trace.metadata.get("schema_version"),
        "collector": trace.metadata.get("collector"),
        "events": len(df),
        "ranks": sorted(int(r) for r in df["rank"].dropna().unique()),
        "world_size": trace.metadata.get("world_size"),
        "rank_known": trace.metadata.get("rank_known", True),
        "start_ns": start,
        "end_ns": end,
        "span_ns": end - start,
        "by_kind": {str(k): int(v) for k, v in by_kind.items()},
        "device_types": sorted(str(x) for x in df["device_type"].dropna().astype(str).unique()),
        "devices": devices.to_dict(orient="records"),
        "streams": streams.to_dict(orient="records"),
        "steps": steps.to_dict(orient="records"),
        "dropped_steps": list(trace.metadata.get("dropped_steps") or []),
        "pruned": dict(trace.metadata.get("pruned") or {}),
        "graph_replay": dict(trace.metadata.get("graph_replay") or {}),
        "compiled_lines": dict(trace.metadata.get("compiled_lines") or {}),
        "steps_from": dict(trace.metadata.get("steps_from") or {}),
        "compile_spans": _compile_spans(df),
        "operator_lines": dict(trace.metadata.get("operator_lines") or {}),
        "source": source,
        "links": link_coverage(trace),
        "device_properties": [
            {k: p.get(k) for k in ("id", "name", "totalGlobalMem", "computeMajor", "computeMinor") if k in p}
            for p in trace.metadata.get("device_properties") or []
            if isinstance(p, dict)
        ],
        "distributed_info": _short_dist(trace.metadata.get("distributed_info")),
        "dropped_events": int(trace.metadata.get("dropped_events") or 0),
        "repairs": [r for r in trace.metadata.get("repairs") or [] if isinstance(r, dict)],
    }


def _short_dist(dist: Any) -> Any:
    if not isinstance(dist, dict):
        return dist
    return {k: v for k, v in dist.items() if k != "pg_config"}


def link_coverage(trace: Trace) -> dict[str, Any]:
    """How many device events are linked to their launch and op, and why the others are not.

    Reasons, checked in this order for an unlinked device event:
    ``cuda_graph`` (replayed from a CUDA graph: one launch, many kernels), ``no_runtime_events``
    (the trace has no runtime calls at all), ``before_trace_window`` (it starts before the first
    runtime call, so its launch happened before profiling began), ``launch_not_recorded``
    (anything else: the runtime record is missing).
    """
    e = trace.events
    kind = pc.cast(e["kind"], pa.string())
    dev_mask = pc.is_in(kind, value_set=pa.array(list(DEVICE_KINDS)))
    dev = (
        e.filter(dev_mask).select(["rank", "start_ns", "launch_id", "op_id", "graph_id", "correlation_id"]).to_pandas()
    )
    rt = e.filter(pc.equal(kind, Kind.RUNTIME)).select(["rank", "start_ns"]).to_pandas()
    bwd = e.filter(pc.equal(kind, Kind.CPU_OP)).select(["name", "fwd_id"]).to_pandas()
    n = len(dev)
    out: dict[str, Any] = {"device_events": n}
    if n == 0:
        out.update(launch_linked=0, op_linked=0, launch_linked_pct=None, op_linked_pct=None, unlinked_reasons={})
    else:
        launched = dev["launch_id"].notna().to_numpy()
        first_rt = rt.groupby("rank")["start_ns"].min() if len(rt) else None
        reasons = np.full(n, "", dtype=object)
        unl = ~launched
        graph = dev["graph_id"].notna().to_numpy() & (dev["graph_id"].fillna(-1).to_numpy() >= 0)
        reasons[unl & graph] = "cuda_graph"
        rest = unl & ~graph
        if first_rt is None:
            reasons[rest] = "no_runtime_events"
        else:
            first = dev["rank"].map(first_rt).to_numpy(dtype=float)
            before = dev["start_ns"].to_numpy() < np.nan_to_num(first, nan=np.inf)
            reasons[rest & before] = "before_trace_window"
            reasons[rest & ~before] = "launch_not_recorded"
        counts = {str(k): int(v) for k, v in zip(*np.unique(reasons[unl], return_counts=True))}
        out.update(
            launch_linked=int(launched.sum()),
            op_linked=int(dev["op_id"].notna().sum()),
            launch_linked_pct=round(100.0 * launched.mean(), 2),
            op_linked_pct=round(100.0 * dev["op_id"].notna().mean(), 2),
            unlinked_reasons=counts,
        )
    is_bwd = bwd["name"].astype(str).str.contains("Backward", regex=False)
    out["backward_ops"] = int(is_bwd.sum())
    out["backward_ops_linked_to_forward"] = int(bwd.loc[is_bwd, "fwd_id"].notna().sum())
    return out
