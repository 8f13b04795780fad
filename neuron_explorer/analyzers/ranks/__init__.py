"""Cross-rank tables: per-rank step attribution, collectives matched across ranks, bus bandwidth.

``rank_steps``: one row per (rank, step): the step's wall time and its attribution categories
(``analyzers/attribution/__init__.py``; a rank with several devices gets the mean over its devices, so the
categories still sum to the wall time), and ``busy_ns`` = compute + copy, the work a rank does
between collectives.

``collective_ranks``: one row per collective kernel. An instance is keyed by (process group, step, order within the step): the process
group is Kineto's ``Process Group Name`` argument when the trace records it, else the kernel's
stream (``stream N``; one NCCL communicator per stream); the order is the kernel's rank among that
rank's collectives of the group in the step, by start time. ``arrival_ns`` is the kernel's start:
an NCCL kernel starts when its rank reaches the collective and then spins until the last peer
arrives, so the last arrival is the one every other rank waits for; ``wait_ns`` = last arrival
minus this rank's arrival. ``window_start_ns`` is the rank's previous arrival in the group (or
its step's start): the work a rank did in ``[window_start_ns, arrival_ns)`` is what made it late.

``collectives``: one row per instance: ``num_ranks`` (1 for a collective no other rank of the
trace holds: a single-rank trace, or a rank whose peers were not profiled), first and last arrival, ``skew_ns``, ``last_rank``,
``wait_ns`` (the wait the last rank causes: the sum of the others' waits), message ``bytes``
(``max(In, Out msg nelems) x dtype size`` from the kernel's arguments, else the ``bytes``
column; null when neither is recorded), ``xfer_ns`` (the last rank's kernel duration: a transfer
with no waiting), ``algbw_gbps`` = bytes / xfer_ns and ``busbw_gbps`` = algbw x the algorithm
factor (NCCL's convention: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
broadcast, reduce, send/recv 1); ``algorithm`` and ``protocol``: what NCCL chose, from the kernel
name (``RING`` and ``LL`` in ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``; null when it names none).

``bandwidth_by_size``: the instances' bus bandwidth per (collective, algorithm, protocol,
power-of-two message size), what to hold against the link's peak.

Imports ``attribution/`` and ``core/``; ``culprit``, ``links`` and ``run_ranks`` build on this
module. The graph (collectives across ranks), the rules and the reports read it.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neuron_explorer.analyzers.attribution import CATEGORY_COLUMNS
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.trace.errors import TraceFormatError
from neuron_explorer.trace.schema import Kind
from neuron_explorer.trace.validate import conform

#: bytes per element of the ``dtype`` names ``record_param_comms`` writes (c10 ScalarType names)
DTYPE_BYTES: dict[str, int] = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "int": 4, "int32": 4, "long": 8, "int64": 8, "short": 2, "int16": 2, "char": 1, "int8": 1,
    "byte": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "complexfloat": 8,
}  # fmt: skip

_ARRIVAL_COLUMNS = ("rank", "pg", "step", "seq", "event_id", "name", "collective_name", "algorithm", "protocol", "arrival_ns", "dur_ns",
                    "wait_ns", "window_start_ns", "bytes", "group_size")  # fmt: skip
_INSTANCE_COLUMNS = ("pg", "step", "seq", "collective_name", "algorithm", "protocol", "num_ranks", "first_arrival_ns", "last_arrival_ns",
                     "skew_ns", "last_rank", "wait_ns", "bytes", "group_size", "xfer_ns", "algbw_gbps", "busbw_gbps")  # fmt: skip


def rank_steps(attribution: pd.DataFrame) -> pd.DataFrame:
    """Per (rank, step): wall time, attribution categories (mean over the rank's devices), busy."""
    cols = ["wall_ns", *CATEGORY_COLUMNS]
    if not len(attribution):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in ["rank", "step", "start_ns", *cols, "busy_ns"]})
    g = attribution.groupby(["rank", "step"], sort=True)
    out = g[cols].mean().round().astype("int64")
    out.insert(0, "start_ns", g["start_ns"].min())
    out = out.reset_index()
    out["busy_ns"] = out["compute_ns"] + out["copy_ns"]
    return out


def bus_factor(collective: pd.Series, n: pd.Series) -> pd.Series:
    """NCCL's bus-bandwidth factor of each collective for a group of ``n`` ranks (NaN if unknown n)."""
    name = collective.astype(str).str.lower().str.replace("_", "", regex=False)
    n = n.astype("float64").where(n > 0)
    ring = (n - 1) / n
    factor = pd.Series(1.0, index=collective.index)
    factor = factor.mask(name.str.contains("allreduce"), 2 * ring)
    factor = factor.mask(name.str.contains("allgather|reducescatter|alltoall"), ring)
    return factor.where(n.notna())


def _collective_args(frames: TraceFrames, dev: pd.DataFrame) -> pd.DataFrame:
    """Process group, message bytes and group size of the collective rows of ``dev``: from the
    collective columns (schema 1.2: ``process_group``, ``in_msg_nelems``, ``out_msg_nelems``,
    ``msg_dtype``, ``group_size``), and for the ranks of files written before them from the raw
    args (read once more for those ranks' collectives, ``_collective_arg_rows``)."""
    pg = "stream " + dev["stream"].astype(str)
    nbytes = dev["bytes"].astype("float64").where(dev["bytes"] >= 0)
    group = _column(dev, "group_size", np.nan).astype("float64")
    group = group.where(group > 0)
    name = _column(dev, "process_group", None).astype(object)
    nel = np.maximum(_column(dev, "in_msg_nelems", -1), _column(dev, "out_msg_nelems", -1)).astype("float64")
    dtype = _column(dev, "msg_dtype", None).astype(object)
    old = dev["rank"].isin(_ranks_before_columns(frames)).to_numpy()
    if old.any():
        t = _collective_arg_rows(frames)
        if t is not None and t.num_rows:
            keys = pd.MultiIndex.from_arrays([t["rank"].to_numpy(zero_copy_only=False), t["event_id"].to_numpy()])
            parsed = [json.loads(a) if a else {} for a in t["args"].to_pylist()]
            pos = keys.get_indexer(pd.MultiIndex.from_arrays([dev["rank"].to_numpy(), dev["event_id"].to_numpy()]))
            args = [parsed[p] if p >= 0 and o else {} for p, o in zip(pos, old, strict=True)]
            name = name.where(~old, pd.Series([a.get("Process Group Name") for a in args], index=dev.index))
            arg_nel = [max(a.get("In msg nelems") or 0, a.get("Out msg nelems") or 0) for a in args]
            nel = nel.where(~old, pd.Series(arg_nel, index=dev.index, dtype="float64"))
            dtype = dtype.where(~old, pd.Series([a.get("dtype") for a in args], index=dev.index))
            arg_group = pd.Series([a.get("Group size") for a in args], index=dev.index, dtype="float64")
            group = group.where(~old | arg_group.isna(), arg_group)
    pg = name.map(lambda v: f"pg {v}", na_action="ignore").fillna(pg)
    size = dtype.map(lambda d: DTYPE_BYTES.get(str(d).lower(), np.nan), na_action="ignore").astype("float64")
    nbytes = (nel * size).where(nel > 0).fillna(nbytes)
    return pd.DataFrame({"pg": pg, "bytes": nbytes, "group_size": group}, index=dev.index)


def _column(dev: pd.DataFrame, name: str, missing: object) -> pd.Series:
    """Column ``name`` of ``dev`` with nulls (-1 for integers) as NaN/None; ``missing`` where absent."""
    if name not in dev:
        return pd.Series(missing, index=dev.index)
    col = dev[name]
    if pd.api.types.is_integer_dtype(col.dtype):
        return col.astype("float64").where(col >= 0)
    return col.astype(object).where(col.notna(), None)


def _ranks_before_columns(frames: TraceFrames) -> list[int]:
    """Ranks whose file was written before the collective columns (schema 1.2)."""
    from neuron_explorer.trace.schema import ADDED_IN, parse_version

    added = ADDED_IN["process_group"]
    out = []
    for rank, meta in frames.trace.rank_metadata.items():
        try:
            version = parse_version(str(meta.get("schema_version", "1.0.0")))[:2]
        except ValueError:
            version = (1, 0)
        if version < added:
            out.append(rank)
    return out


def _collective_arg_rows(frames: TraceFrames) -> pa.Table | None:
    """(rank, event_id, args) of the collective events: from the events table when it holds the
    raw args, else read from the trace's Parquet file(s) (an analysis reads without the args
    column, ``ANALYSIS_COLUMNS``; this reads the args column once more, for the collectives)."""
    events = frames.trace.events
    cols = ["rank", "event_id", "args"]
    if "args" in events.column_names:
        kind = pc.cast(events["kind"], pa.string())
        return events.filter(pc.equal(kind, Kind.COLLECTIVE)).select(cols)
    path = frames.trace.path
    if path is None or not path.exists():
        return None
    files = sorted(path.rglob("*.parquet")) if path.is_dir() else [path]
    parts = []
    for f in files:
        try:
            t = pq.read_table(f, columns=[*cols, "kind"], filters=[("kind", "=", Kind.COLLECTIVE)])
            t = conform(t, f)
        except (pa.ArrowException, OSError, ValueError, TraceFormatError):
            return None  # not our Parquet (a JSON import keeps its args in memory): no metadata
        parts.append(t.select(cols))
    return pa.concat_tables(parts, promote_options="permissive") if parts else None


def rank_arrivals(frames: TraceFrames) -> pd.DataFrame:
    """``collective_ranks`` without the waits (``wait_ns`` 0): what one rank knows alone."""
    dev = frames.device
    coll = dev[(dev["kind"] == Kind.COLLECTIVE).to_numpy()]
    if not len(coll):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in _ARRIVAL_COLUMNS})
    extra = _collective_args(frames, coll)
    name = coll["collective_name"].astype(object).where(coll["collective_name"].notna())
    short = coll["name"].astype(str).str.extract(r"^(?:nccl(?:Dev)?Kernel_)?([A-Za-z]+)", expand=False)
    df = pd.DataFrame(
        {
            "rank": coll["rank"].to_numpy(),
            "pg": extra["pg"].to_numpy(),
            "step": coll["step"].to_numpy(),
            "event_id": coll["event_id"].to_numpy(),
            "name": coll["name"].astype(str).to_numpy(),
            "collective_name": name.fillna(short).fillna("collective").astype(str).to_numpy(),
            **algorithm_and_protocol(coll["name"]),
            "arrival_ns": coll["start_ns"].to_numpy(),
            "dur_ns": coll["dur_ns"].to_numpy(),
            "bytes": extra["bytes"].to_numpy(),
            "group_size": extra["group_size"].to_numpy(),
        }
    )
    df = df.sort_values(["rank", "pg", "step", "arrival_ns"], kind="stable").reset_index(drop=True)
    df["seq"] = df.groupby(["rank", "pg", "step"]).cumcount()
    # the window of work before each arrival: from the previous arrival in the group, else the step start
    arrival = df["arrival_ns"].to_numpy()
    prev = np.where(df["seq"].to_numpy() > 0, np.roll(arrival, 1), -1)  # sorted: the previous row
    w = frames.step_windows
    step_start = pd.Series(w["start_ns"].to_numpy(), index=pd.MultiIndex.from_frame(w[["rank", "step"]]))
    pos = step_start.index.get_indexer(pd.MultiIndex.from_frame(df[["rank", "step"]]))
    first_of_rank = df.groupby("rank")["arrival_ns"].transform("min").to_numpy()
    start = np.where(pos >= 0, step_start.to_numpy()[np.clip(pos, 0, None)], first_of_rank)
    df["window_start_ns"] = np.minimum(np.where(prev >= 0, prev, start), arrival).astype(np.int64)
    df["wait_ns"] = 0
    return df[list(_ARRIVAL_COLUMNS)]


def with_waits(arrivals: pd.DataFrame) -> pd.DataFrame:
    """``wait_ns`` of every arrival: its instance's last arrival minus its own. Arrivals of
    several ranks computed apart (``run_ranks``) are concatenated, then given their waits here."""
    df = arrivals.sort_values(["rank", "pg", "step", "seq"], kind="stable").reset_index(drop=True)
    df["wait_ns"] = df.groupby(["pg", "step", "seq"])["arrival_ns"].transform("max") - df["arrival_ns"]
    return df


def collective_ranks(frames: TraceFrames) -> pd.DataFrame:
    """One row per collective kernel, keyed to its instance (see the module docstring)."""
    return with_waits(rank_arrivals(frames))


def collectives(arrivals: pd.DataFrame) -> pd.DataFrame:
    """One row per collective instance matched across ranks (see the module docstring)."""
    if not len(arrivals):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in _INSTANCE_COLUMNS})
    key = ["pg", "step", "seq"]
    a = arrivals.sort_values([*key, "arrival_ns", "rank"], kind="stable")
    g = a.groupby(key, sort=False)
    last = a.loc[g["arrival_ns"].idxmax()].set_index(key)
    out = g.agg(
        collective_name=("collective_name", "first"),
        num_ranks=("rank", "nunique"),
        first_arrival_ns=("arrival_ns", "min"),
        last_arrival_ns=("arrival_ns", "max"),
        wait_ns=("wait_ns", "sum"),
        bytes=("bytes", "max"),
        group_size=("group_size", "max"),
    )
    out["skew_ns"] = out["last_arrival_ns"] - out["first_arrival_ns"]
    out["last_rank"] = last["rank"].reindex(out.index)
    out["algorithm"] = last["algorithm"].reindex(out.index)
    out["protocol"] = last["protocol"].reindex(out.index)
    out["xfer_ns"] = last["dur_ns"].reindex(out.index)
    out["algbw_gbps"] = (out["bytes"] / out["xfer_ns"].where(out["xfer_ns"] > 0)).astype("float64")
    n = out["group_size"].fillna(out["num_ranks"])
    out["busbw_gbps"] = out["algbw_gbps"] * bus_factor(out["collective_name"], n)
    out = out.reset_index().sort_values(["first_arrival_ns", "pg"], kind="stable").reset_index(drop=True)
    return out[list(_INSTANCE_COLUMNS)]


#: NCCL's (and RCCL's) kernel names carry the algorithm and protocol NCCL chose:
#: ``ncclKernel_AllReduce_RING_LL_Sum_float`` (NCCL < 2.19), ``ncclDevKernel_AllReduce_Sum_f32_RING_LL``
#: and ``ncclDevKernel_AllGather_RING_LL`` (2.19 and later). ``ncclDevKernel_SendRecv`` and the
#: generic kernels name neither.
_NCCL_ALGORITHM = re.compile(
    r"_(TREE|RING|COLLNET_DIRECT|COLLNET_CHAIN|NVLS_TREE|NVLS|PAT)_(LL128|LL|SIMPLE)(?=_|\(|$)"
)


def algorithm_and_protocol(names: pd.Series) -> dict[str, np.ndarray]:
    """The NCCL algorithm (RING, TREE, NVLS, ...) and protocol (LL, LL128, SIMPLE) each kernel
    name carries, None where it names none (parsed once per distinct name)."""
    cat = pd.Categorical(names.astype(str))
    found = [_NCCL_ALGORITHM.search(n) for n in cat.categories]
    algo = np.array([m.group(1) if m else None for m in found] + [None], dtype=object)
    proto = np.array([m.group(2) if m else None for m in found] + [None], dtype=object)
    return {"algorithm": algo[cat.codes], "protocol": proto[cat.codes]}


_SIZE_COLUMNS = ("collective_name", "algorithm", "protocol", "size_bytes", "count", "bytes_mean",
                 "busbw_median_gbps", "busbw_min_gbps", "busbw_max_gbps", "xfer_ns")  # fmt: skip


def bandwidth_by_size(instances: pd.DataFrame) -> pd.DataFrame:
    """Bus bandwidth per (collective, algorithm, protocol, message size): one row per power-of-two
    size bucket ``[size_bytes, 2 x size_bytes)`` of the instances with a known size and bandwidth,
    smallest first: small messages are latency-bound and never reach the link's peak, so a
    bandwidth is only comparable with the peak, and across runs, at the same size."""
    c = instances
    if len(c):
        c = c[c["bytes"].notna() & (c["bytes"] > 0) & c["busbw_gbps"].notna()]
    if not len(c):
        return pd.DataFrame({col: pd.Series(dtype="int64") for col in _SIZE_COLUMNS})
    c = c.assign(
        size_bytes=np.exp2(np.floor(np.log2(c["bytes"].to_numpy(dtype="float64")))).astype(np.int64),
        algorithm=c["algorithm"].fillna("-"),
        protocol=c["protocol"].fillna("-"),
    )
    out = (
        c.groupby(["collective_name", "algorithm", "protocol", "size_bytes"], sort=True)
        .agg(
            count=("bytes", "size"),
            bytes_mean=("bytes", "mean"),
            busbw_median_gbps=("busbw_gbps", "median"),
            busbw_min_gbps=("busbw_gbps", "min"),
            busbw_max_gbps=("busbw_gbps", "max"),
            xfer_ns=("xfer_ns", "sum"),
        )
        .reset_index()
    )
    out["xfer_ns"] = out["xfer_ns"].astype("int64")
    return out[list(_SIZE_COLUMNS)]
