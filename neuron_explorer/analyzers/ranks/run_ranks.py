"""The cross-rank tables of a converted run, each rank's part computed by its own task.

``run_tables(OUT_DIR, executor)`` reads a run written by ``convert RUN_DIR`` (one Parquet file
per rank) without ever holding all ranks in one process:

1. one task per rank reads its file (the analysis columns only) and returns its collective
   arrivals (``ranks.rank_arrivals``) and its per-step attribution (``ranks.rank_steps``): a
   few rows per collective and per step;
2. the client matches the collectives across ranks (``ranks.with_waits``, ``ranks.collectives``),
   ranks the ranks by the wait they cause (``culprit.wait_by_rank``) and picks the culprit's
   windows (``culprit.culprit_windows``);
3. one task per rank computes the work in its own windows (``culprit.window_evidence``), and the
   client compares them (``culprit.summarize_late``).

The results equal those of ``analyze`` on the whole run in one process (a test checks it). The
executor is any of ``neuron_explorer.parallel``: in this process, a process pool, or Dask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from neuron_explorer.analyzers import ranks
from neuron_explorer.analyzers.ranks import culprit
from neuron_explorer.parallel import Executor
from neuron_explorer.trace.errors import TraceFormatError, TraceNotFoundError
from neuron_explorer.trace.model import PARQUET_SUFFIXES


@dataclass
class RunTables:
    """The cross-rank tables of a run (columns as in ``Analysis``, docs/rules.md "Ranks")."""

    rank_steps: pd.DataFrame
    collective_ranks: pd.DataFrame
    collectives: pd.DataFrame
    wait_by_rank: pd.DataFrame
    collective_sizes: pd.DataFrame = field(default_factory=pd.DataFrame)
    #: ``culprit.late_work`` of the rank causing the most wait; None without matched collectives
    late: dict[str, Any] | None = None
    culprit: int | None = None
    files: list[str] = field(default_factory=list)


def _frames(path: str) -> Any:
    from neuron_explorer.analyzers.core.context import ANALYSIS_COLUMNS, TraceFrames
    from neuron_explorer.trace.model import Trace

    return TraceFrames(Trace.read(path, columns=ANALYSIS_COLUMNS))


def rank_part(path: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Task 1: one rank file's collective arrivals and per-step attribution."""
    from neuron_explorer.analyzers.attribution import step_attribution

    frames = _frames(path)
    return ranks.rank_arrivals(frames), ranks.rank_steps(step_attribution(frames))


def window_part(task: tuple[str, pd.DataFrame]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Task 2: the work in this rank file's windows (``culprit.window_evidence``)."""
    path, w = task
    work, k = culprit.window_evidence(_frames(path), w.reset_index(drop=True))
    return work.set_index(w.index), k


def rank_files(path: str | Path) -> list[str]:
    root = Path(path)
    if not root.exists():
        raise TraceNotFoundError("no such run directory", root)
    files = sorted(str(p) for p in root.rglob("*") if p.suffix in PARQUET_SUFFIXES and p.is_file())
    if not files:
        raise TraceFormatError("directory holds no .parquet trace files (convert the run first)", root)
    return files


def run_tables(path: str | Path, executor: Executor) -> RunTables:
    """The cross-rank tables of the converted run at ``path`` (see the module docstring)."""
    files = rank_files(path)
    parts = executor.map(rank_part, files)
    arrivals = ranks.with_waits(pd.concat([a for a, _ in parts], ignore_index=True))
    steps = pd.concat([s for _, s in parts], ignore_index=True).sort_values(["rank", "step"], kind="stable")
    out = RunTables(
        rank_steps=steps.reset_index(drop=True),
        collective_ranks=arrivals,
        collectives=ranks.collectives(arrivals),
        wait_by_rank=culprit.wait_by_rank(arrivals),
        files=files,
    )
    out.collective_sizes = ranks.bandwidth_by_size(out.collectives)
    if not len(out.wait_by_rank):
        return out
    out.culprit = int(out.wait_by_rank["rank"].iloc[0])
    w = culprit.culprit_windows(arrivals, out.culprit)
    # each file holds one rank: send it its own windows only
    file_rank = {int(a["rank"].iloc[0]): f for (a, _), f in zip(parts, files) if len(a)}
    tasks = [(file_rank[int(r)], g) for r, g in w.groupby("rank", sort=True) if int(r) in file_rank]
    results = executor.map(window_part, tasks)
    work = pd.concat([wk for wk, _ in results]).reindex(w.index)
    k = pd.concat([kk for _, kk in results], ignore_index=True)
    if len(k):
        k = k.sort_values(["instance", "rank", "mine", "file", "line", "func", "op"], kind="stable")
    out.late = culprit.summarize_late(w, work, k.reset_index(drop=True))
    return out
