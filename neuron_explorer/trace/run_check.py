"""A run directory must hold one job: its ranks recorded together, with one world size.

Two unrelated jobs in one directory (an 8-rank A100 job and a 2-rank V100 job, or two
recordings days apart) would otherwise read as one run spanning days, with a rank imbalance
that is only the difference between the jobs. ``check_one_job`` refuses that in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.trace.errors import TraceFormatError

#: Ranks of one job record at the same time; a gap longer than this (or than ten times the
#: longest rank's span) between one group of ranks and the next means another job.
MAX_GAP_NS = 3600 * 10**9


def check_one_job(table: pa.Table, rank_metadata: Mapping[int, Mapping[str, Any]], path: str | Path) -> None:
    """Raise ``TraceFormatError`` naming ``path`` when its ranks are not one job."""
    worlds = {r: m.get("world_size") for r, m in rank_metadata.items() if isinstance(m.get("world_size"), int)}
    if len(set(worlds.values())) > 1:
        shown = ", ".join(f"rank {r}: {w}" for r, w in sorted(worlds.items())[:6])
        raise TraceFormatError(
            f"the ranks are from different jobs (world sizes {shown}); analyse each job's directory apart", path
        )
    if len(rank_metadata) < 2 or not {"rank", "start_ns", "dur_ns"} <= set(table.column_names):
        return
    end = pc.add(table["start_ns"], pc.max_element_wise(table["dur_ns"], 0))
    spans = (
        pa.table({"rank": table["rank"], "start": table["start_ns"], "end": end})
        .group_by("rank")
        .aggregate([("start", "min"), ("end", "max")])
    )
    rows = sorted(
        zip(spans["rank"].to_pylist(), spans["start_min"].to_pylist(), spans["end_max"].to_pylist()), key=lambda x: x[1]
    )
    if len(rows) < 2 or any(x is None for row in rows for x in row):
        return
    longest = max(e - s for _, s, e in rows)
    gap_limit = max(MAX_GAP_NS, 10 * longest)
    reach = rows[0][2]
    for rank, start, stop in rows[1:]:
        if start - reach > gap_limit:
            days = (start - reach) / 86400e9
            apart = f"{days:.1f} days" if days >= 1 else f"{(start - reach) / 3600e9:.1f} hours"
            raise TraceFormatError(
                f"the ranks are from different jobs: rank {rank} starts {apart} after the ranks before it end; "
                "analyse each job's directory apart",
                path,
            )
        reach = max(reach, stop)
