"""Drill-downs over the trace: one op's or kernel's calls, source lines and related work.

Each function takes the ``TraceSource`` and returns an immutable ``Detail``; all work is whole
column (filters, joins, group-bys), so a 5M-event trace answers in well under a second.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.schema import DEVICE_KINDS, Kind
from neuron_explorer.tui.data import TraceSource
from neuron_explorer.tui.snapshots import Column, Detail, TableSnapshot

#: Most calls a drill-down lists (the longest first); the note says how many there were.
MAX_CALLS = 200

CALL_COLUMNS = (
    Column("rank", "Rank", drop=3),
    Column("step", "Step", drop=2),
    Column("where", "Thread/queue"),
    Column("start", "Start", "ns"),
    Column("dur_ns", "Duration", "ns"),
    Column("source", "Source", "loc", width=24),
)
LINE_COLUMNS = (
    Column("source", "Source line", "loc", width=30),
    Column("count", "Calls", "count"),
    Column("total_ns", "Total", "ns"),
)
KERNEL_COLUMNS = (
    Column("name", "Kernel", "kernel", width=30),
    Column("count", "Count", "count"),
    Column("total_ns", "Total", "ns"),
)
LAUNCHER_COLUMNS = (
    Column("name", "Launched by op", width=30),
    Column("count", "Count", "count"),
    Column("total_ns", "Kernel time", "ns"),
)


def _events_named(source: TraceSource, kinds: tuple[str, ...], name: str, columns: list[str]) -> pd.DataFrame:
    table = source.trace.select(kinds, columns)
    names = pc.cast(table["name"], pa.string())
    return source_frame(table.filter(pc.equal(names, name)))


def source_frame(table: pa.Table) -> pd.DataFrame:
    data = {}
    for col_name in table.column_names:
        col = table[col_name]
        if pa.types.is_integer(col.type):
            data[col_name] = pc.fill_null(col, -1).to_numpy().astype(np.int64, copy=False)
        else:
            data[col_name] = col.to_pandas().astype(object).where(col.to_pandas().notna(), None)
    return pd.DataFrame(data)


def _locations(df: pd.DataFrame) -> list[tuple | None]:
    """(file, line, func, precision) per row, for a "loc" column; None where there is no source."""
    files = df["src_file"].astype(object).tolist()
    lines = df["src_line"].tolist()
    funcs = df["src_func"].astype(object).tolist() if "src_func" in df else [None] * len(df)
    precision = df["src_precision"].astype(object).tolist() if "src_precision" in df else [None] * len(df)
    return [
        (f, n, fn, p) if f is not None and f == f and n >= 0 else None
        for f, n, fn, p in zip(files, lines, funcs, precision)
    ]


def _root(source: TraceSource) -> str | None:
    from neuron_explorer.tui.tables import location_root

    return location_root(source.analysis_ready)


def _calls_table(calls: pd.DataFrame, where: pd.Series, origin_ns: int, root: str | None) -> TableSnapshot:
    top = calls.assign(where=where).nlargest(MAX_CALLS, "dur_ns")
    src = _locations(top)
    rows = tuple(
        zip(
            top["rank"].tolist(),
            [s if s >= 0 else None for s in top["step"].tolist()],
            top["where"].tolist(),
            (top["start_ns"] - origin_ns).tolist(),
            top["dur_ns"].tolist(),
            src,
            # not shown: what g (go to its time) and the timeline need
            top["event_id"].tolist(),
            top["start_ns"].tolist(),
        )
    )
    note = f"the {len(rows)} longest of {len(calls):,} calls" if len(calls) > len(rows) else f"{len(calls):,} calls"
    return TableSnapshot(CALL_COLUMNS, rows, title="Calls", note=note, root=root)


def _lines_table(calls: pd.DataFrame, root: str | None) -> TableSnapshot:
    with_src = calls[calls["src_file"].notna() & (calls["src_line"] >= 0)]
    if with_src.empty:
        return TableSnapshot.empty(LINE_COLUMNS, note="no source attribution for these events")
    g = (
        with_src.groupby(["src_file", "src_line"], dropna=False)
        .agg(
            src_func=("src_func", "first"),
            src_precision=("src_precision", "first"),
            count=("dur_ns", "size"),
            total_ns=("dur_ns", "sum"),
        )
        .reset_index()
        .sort_values("total_ns", ascending=False)
    )
    rows = tuple(zip(_locations(g), g["count"].tolist(), g["total_ns"].tolist()))
    return TableSnapshot(LINE_COLUMNS, rows, title="Source lines", root=root)


def _group_by_name(df: pd.DataFrame, columns: tuple, title: str, empty_note: str) -> TableSnapshot:
    if df.empty:
        return TableSnapshot.empty(columns, note=empty_note)
    g = df.groupby("name").agg(count=("dur_ns", "size"), total_ns=("dur_ns", "sum")).reset_index()
    g = g.sort_values("total_ns", ascending=False)
    return TableSnapshot(
        columns, tuple(zip(g["name"].tolist(), g["count"].tolist(), g["total_ns"].tolist())), title=title
    )


def _origin(source: TraceSource) -> int:
    return int(pc.min(source.trace.events["start_ns"]).as_py() or 0)


def op_detail(source: TraceSource, name: str) -> Detail:
    """Calls of one host op, their source lines, and the device work launched inside them.

    A kernel belongs to a call when its launching runtime call ran on the call's thread within
    the call's time span, so ``aten::linear`` shows the GEMM its ``aten::addmm`` child launched.
    """
    cols = [
        "event_id",
        "rank",
        "tid",
        "step",
        "start_ns",
        "dur_ns",
        "src_file",
        "src_line",
        "src_func",
        "src_precision",
    ]
    calls = _events_named(source, (Kind.CPU_OP,), name, [*cols, "name"])
    origin = _origin(source)
    root = _root(source)
    where = "thread " + calls["tid"].astype(str)
    kernels = _kernels_inside(source, calls)
    return Detail(
        name=name,
        calls=_calls_table(calls, where, origin, root),
        source_lines=_lines_table(calls, root),
        related=_group_by_name(kernels, KERNEL_COLUMNS, "Kernels", "launched no device work"),
    )


def _kernels_inside(source: TraceSource, calls: pd.DataFrame) -> pd.DataFrame:
    if calls.empty:
        return pd.DataFrame(columns=["name", "dur_ns"])
    dev = source_frame(source.trace.select(DEVICE_KINDS, ["rank", "launch_id", "name", "dur_ns"]))
    dev = dev[dev["launch_id"] >= 0]
    if dev.empty:
        return pd.DataFrame(columns=["name", "dur_ns"])
    launches = source_frame(source.trace.select([Kind.RUNTIME], ["event_id", "rank", "tid", "start_ns"]))
    dev = dev.merge(launches, left_on=["rank", "launch_id"], right_on=["rank", "event_id"], how="inner")
    inside = np.zeros(len(dev), dtype=bool)
    # One pass per (rank, thread) that issued calls; a few threads, not one iteration per event.
    for (rank, tid), group in calls.groupby(["rank", "tid"]):
        order = np.argsort(group["start_ns"].to_numpy(), kind="stable")
        starts = group["start_ns"].to_numpy()[order]
        ends = np.maximum.accumulate(starts + group["dur_ns"].to_numpy()[order])
        mask = (dev["rank"].to_numpy() == rank) & (dev["tid"].to_numpy() == tid)
        t = dev["start_ns"].to_numpy()[mask]
        i = np.searchsorted(starts, t, side="right") - 1
        hit = (i >= 0) & (t <= ends[np.clip(i, 0, None)])
        inside[np.flatnonzero(mask)[hit]] = True
    return dev.loc[inside, ["name", "dur_ns"]]


def kernel_detail(source: TraceSource, name: str) -> Detail:
    """Launches of one kernel (or copy, collective), their source lines and launching ops."""
    cols = [
        "event_id",
        "rank",
        "device",
        "stream",
        "step",
        "start_ns",
        "dur_ns",
        "src_file",
        "src_line",
        "src_func",
        "src_precision",
        "op_id",
        "name",
    ]
    calls = _events_named(source, DEVICE_KINDS, name, cols)
    origin = _origin(source)
    root = _root(source)
    where = "dev " + calls["device"].astype(str) + " q " + calls["stream"].astype(str)
    ops = source_frame(source.trace.select([Kind.CPU_OP], ["event_id", "rank", "name"]))
    launched = calls[["rank", "op_id", "dur_ns"]].merge(
        ops, left_on=["rank", "op_id"], right_on=["rank", "event_id"], how="inner"
    )
    return Detail(
        name=name,
        calls=_calls_table(calls, where, origin, root),
        source_lines=_lines_table(calls, root),
        related=_group_by_name(
            launched[["name", "dur_ns"]], LAUNCHER_COLUMNS, "Launching ops", "no launching op recorded"
        ),
    )
