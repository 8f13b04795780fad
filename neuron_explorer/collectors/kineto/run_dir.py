"""A run directory of Kineto JSON rank traces: find them, import each as one task, assemble.

A run is a directory holding one Kineto/Chrome JSON trace per rank (``*.json``/``*.json.gz``,
at any depth); each file's rank is the ``rank`` of its ``distributedInfo``. ``load_run``
imports them into one multi-rank ``Trace`` (the same shape ``Trace.read`` gives for
``run/rank=N/*.parquet``); ``convert_run`` writes them as hive-partitioned Parquet
``OUT/rank=N/trace.parquet``, each rank imported and written by its own task on an
``Executor`` (``neuron_explorer.parallel``), only a small summary travelling back.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from neuron_explorer.collectors.build.input_limits import BOM
from neuron_explorer.parallel import Executor
from neuron_explorer.trace.atomic import atomic_dir
from neuron_explorer.trace.errors import TraceFormatError, TraceNotFoundError
from neuron_explorer.trace.model import PARQUET_SUFFIXES, Trace, conform
from neuron_explorer.trace.run_check import check_one_job

JSON_SUFFIXES = (".json", ".json.gz")


def rank_json_files(path: str | Path) -> list[Path]:
    """The Kineto JSON files of a run directory (sorted; hidden files and folders skipped)."""
    root = Path(path)
    files = [
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.name.lower().endswith(JSON_SUFFIXES)
        and not any(part.startswith(".") for part in p.relative_to(root).parts)
    ]
    return sorted(files)


def is_json_run(path: str | Path) -> bool:
    """A directory with JSON rank traces and no Parquet trace files (a directory of Neuron
    profile exports, JSON too, is not one: ``collectors.neuron`` imports those)."""
    p = Path(path)
    if not p.is_dir():
        return False
    if any(f.suffix in PARQUET_SUFFIXES for f in p.rglob("*")):
        return False
    return any(_looks_like_kineto(f) for f in rank_json_files(p))


def _looks_like_kineto(path: Path, head_bytes: int = 1 << 18) -> bool:
    """A Kineto/Chrome trace names its ``traceEvents`` near the top (after the device
    properties); a neuron-profile export never does. Reads at most ``head_bytes``."""
    import gzip
    import zlib

    try:
        with open(path, "rb") as fh:
            raw = fh.read(2)
        opener = gzip.open if raw == b"\x1f\x8b" else open
        with opener(path, "rb") as fh:  # type: ignore[operator]
            head = fh.read(head_bytes)
    except (OSError, EOFError, zlib.error):
        return True  # unreadable: let the importer name the problem
    head = head.removeprefix(BOM)
    return b'"traceEvents"' in head or not head.lstrip().startswith(b"{")


def _rank_of(trace: Trace, path: Path, n_files: int) -> int:
    meta = trace.metadata
    if n_files > 1 and not meta.get("rank_known", True):
        raise TraceFormatError("no rank in the trace (distributedInfo.rank): cannot place it in the run", path)
    return int(meta.get("rank", 0) or 0)


def _check_unique(ranks: list[int], files: list[Path], root: Path) -> None:
    seen: dict[int, Path] = {}
    for r, f in zip(ranks, files):
        if r in seen:
            raise TraceFormatError(f"{seen[r].name} and {f.name} both claim rank {r}", root)
        seen[r] = f


def load_run(path: str | Path, progress: Any = None) -> Trace:
    """Import every rank trace of a JSON run directory into one multi-rank ``Trace``."""
    from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json

    root = Path(path)
    files = rank_json_files(root)
    if not files:
        raise TraceFormatError("directory holds no .json/.json.gz rank traces", root)
    traces = [import_kineto_json(f) for f in files]
    ranks = [_rank_of(t, f, len(files)) for t, f in zip(traces, files)]
    _check_unique(ranks, files, root)
    order = sorted(range(len(files)), key=lambda i: ranks[i])
    tables = [conform(traces[i].events) for i in order]
    rank_metadata = {ranks[i]: traces[i].metadata for i in order}
    first = traces[order[0]]
    table = pa.concat_tables(tables)
    check_one_job(table, rank_metadata, root)
    return Trace(table, first.metadata, root, rank_metadata)


@dataclass(frozen=True)
class RankTask:
    """One rank's import: the JSON file and the Parquet file the task writes."""

    source: str
    output: str


def convert_rank(task: RankTask) -> dict[str, Any]:
    """Import one rank trace and write it as Parquet; returns a small summary (the task result)."""
    from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json

    t0 = time.perf_counter()
    trace = import_kineto_json(Path(task.source))
    trace.write(task.output)
    meta = trace.metadata
    return {
        "source": task.source,
        "output": task.output,
        "rank": int(meta.get("rank", 0) or 0),
        "rank_known": bool(meta.get("rank_known", True)),
        "num_events": int(trace.num_events),
        "seconds": time.perf_counter() - t0,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "pid": os.getpid(),
    }


def convert_run(src: str | Path, out: str | Path, executor: Executor) -> list[dict[str, Any]]:
    """Convert a JSON run directory to ``out/rank=N/trace.parquet``, one task per rank.

    ``out`` appears complete or not at all: the ranks are written to a temporary directory beside
    it that is renamed into place once every rank succeeded. Returns the per-rank summaries,
    ordered by rank.
    """
    root, out = Path(src), Path(out)
    if not root.is_dir():
        raise TraceNotFoundError("no such run directory", root)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TraceFormatError("the output directory exists and is not empty", out)
    files = rank_json_files(root)
    if not files:
        raise TraceFormatError("directory holds no .json/.json.gz rank traces", root)
    with atomic_dir(out, replace=False) as tmp:
        tasks = [RankTask(str(f.resolve()), str(tmp / f"part-{i:06d}.parquet")) for i, f in enumerate(files)]
        results = executor.map(convert_rank, tasks)
        for res, f in zip(results, files):
            if len(files) > 1 and not res["rank_known"]:
                raise TraceFormatError("no rank in the trace (distributedInfo.rank): cannot place it in the run", f)
        _check_unique([r["rank"] for r in results], files, root)
        for res in results:
            dest = tmp / f"rank={res['rank']}" / "trace.parquet"
            dest.parent.mkdir()
            os.replace(res["output"], dest)
            res["output"] = str(out / dest.relative_to(tmp))
    return sorted(results, key=lambda r: r["rank"])
