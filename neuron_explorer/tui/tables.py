"""The analysis tables the TUI lists (ops, kernels, source files and lines) as snapshots.

The numbers are the analyzers' own (``Analysis.ops``, ``.kernels``, ``.source_lines``), so the
TUI shows what ``analyze``, the report and the MCP server show; this module only picks and
labels columns, and reads a source file's text when it is on this machine.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_explorer.tui.snapshots import Column, SourceFile, TableSnapshot

if TYPE_CHECKING:
    import pandas as pd

    from neuron_explorer.analyzers import Analysis

OPS_COLUMNS = (
    Column("name", "Op", width=40),
    Column("count", "Calls", "count", short="n"),
    Column("host_total_ns", "Host total", "ns", short="host", drop=1),
    Column("host_self_ns", "Host self", "ns", short="self"),
    Column("device_ns", "Device", "ns", short="dev"),
    Column("kernel_count", "Kernels", "count", short="kern"),
)
KERNELS_COLUMNS = (
    Column("name", "Kernel", "kernel", width=48),
    Column("category", "Category", short="cat", drop=3),
    Column("device_type", "Device", drop=5),
    Column("count", "Count", "count", short="n"),
    Column("total_ns", "Total", "ns"),
    Column("mean_ns", "Mean", "ns", drop=2),
    Column("max_ns", "Max", "ns", drop=4),
    Column("pct", "% device", "%", short="%"),
)
FILES_COLUMNS = (
    Column("src_file", "File", "path", width=60),
    Column("lines", "Lines", "count"),
    Column("host_ns", "Host", "ns"),
    Column("device_ns", "Device", "ns"),
    Column("kernel_count", "Kernels", "count"),
)
LINES_COLUMNS = (
    Column("src_line", "Line", "count"),
    Column("src_func", "Function", width=30),
    Column("host_ns", "Host", "ns"),
    Column("device_ns", "Device", "ns"),
    Column("kernel_count", "Kernels", "count"),
    Column("event_count", "Events", "count", drop=1),
)

#: Largest source file the file view reads (bigger ones show the line table only).
MAX_SOURCE_BYTES = 4 << 20


def table_from_frame(df: pd.DataFrame, columns: tuple[Column, ...], title: str = "") -> TableSnapshot:
    """Rows of the given columns (those the frame has), values as plain Python objects."""
    cols = tuple(c for c in columns if c.key in df.columns)
    values = [_plain(df[c.key]) for c in cols]
    return TableSnapshot(cols, tuple(zip(*values)) if values else (), title=title)


def _plain(series: pd.Series) -> list[Any]:
    out = series.astype(object).where(series.notna(), None).tolist()
    return [v.item() if hasattr(v, "item") else v for v in out]


def ops_table(analysis: Analysis) -> TableSnapshot:
    return table_from_frame(analysis.ops, OPS_COLUMNS, "Ops")


def kernels_table(analysis: Analysis) -> TableSnapshot:
    return table_from_frame(analysis.kernels, KERNELS_COLUMNS, "Kernels")


def files_table(analysis: Analysis) -> TableSnapshot:
    """Source files ranked by their lines' host + device time."""
    lines = analysis.source_lines
    if lines is None or len(lines) == 0:
        return TableSnapshot.empty(FILES_COLUMNS, note="no events carry source lines")
    df = lines.assign(src_file=lines["src_file"].astype(str))
    g = (
        df.groupby("src_file", observed=True)
        .agg(
            lines=("src_line", "size"),
            host_ns=("host_ns", "sum"),
            device_ns=("device_ns", "sum"),
            kernel_count=("kernel_count", "sum"),
        )
        .reset_index()
    )
    g = g.assign(_key=g["host_ns"] + g["device_ns"]).sort_values("_key", ascending=False)
    snap = table_from_frame(g, FILES_COLUMNS, "Source files")
    return replace(snap, root=location_root(analysis))


def location_root(analysis: Analysis | None) -> str | None:
    """The directory source paths are shown relative to, the same as every output's."""
    if analysis is None:
        return None
    from neuron_explorer.reports.location import Locations

    return Locations.for_analysis(analysis).root


def source_file(analysis: Analysis, path: str, search_dirs: tuple[Path, ...] = ()) -> SourceFile:
    """One file's line table and, when the file is readable here, its text."""
    lines = analysis.source_lines
    mine = lines[lines["src_file"].astype(str) == path].sort_values("src_line")
    resolved = resolve_source(path, search_dirs)
    text: tuple[str, ...] = ()
    if resolved is not None:
        try:
            text = tuple(resolved.read_text(encoding="utf-8", errors="replace").splitlines())
        except OSError:
            resolved = None
    return SourceFile(path, str(resolved) if resolved else None, text, table_from_frame(mine, LINES_COLUMNS, path))


def resolve_source(path: str, search_dirs: tuple[Path, ...] = ()) -> Path | None:
    """The file on this machine: the path itself, else relative to the trace's or current directory."""
    candidates = [Path(path)]
    if not Path(path).is_absolute():
        candidates += [d / path for d in search_dirs]
    for c in candidates:
        try:
            if c.is_file() and c.stat().st_size <= MAX_SOURCE_BYTES:
                return c
        except OSError:
            continue
    return None
