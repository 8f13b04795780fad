"""Benchmark: convert and analyze synthetic multi-rank runs (bench/synth_ranks.py).

For each run size: generate N rank traces (a planted slow rank), convert the run directory to
``rank=N/trace.parquet`` on the chosen executor, then load and analyze it with the cross-rank
tables (rank by rank on the executor: ``run_tables``; ``--in-process``: ``analyze`` with every
rank in this process); print ranks per minute of the convert, the analysis time, the peak RSS of the worker
processes (each task reports its process's high-water mark) and of this client process, and
whether the planted rank was named.

    .venv/bin/python bench/ranks.py                      # 8 and 64 ranks, a process pool
    .venv/bin/python bench/ranks.py --ranks 8 64 256 --layers 20 --workers 2   # local Dask cluster
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import synth_ranks

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.ranks.run_ranks import run_tables
from neuron_explorer.collectors.kineto.run_dir import convert_run
from neuron_explorer.parallel import make_executor

MB = 1 << 20


def one(n: int, layers: int, workers: int | None, dask: str | None, root: Path, in_process: bool) -> dict[str, Any]:
    src, out = root / f"json_{n}", root / f"pq_{n}"
    slow = n // 2
    t0 = time.perf_counter()
    # in a child process: the generator holds every rank's events, which is not the client's memory
    subprocess.run(
        [sys.executable, str(Path(__file__).with_name("synth_ranks.py")), "-n", str(n), "-o", str(src),
         "--slow-rank", str(slow), "--layers", str(layers), "--seed", str(n)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    t_gen = time.perf_counter() - t0
    with make_executor(workers=workers, dask=dask) as ex:
        t0 = time.perf_counter()
        results = convert_run(src, out, ex)
        t_conv = time.perf_counter() - t0
        how = ex.describe()
        t0 = time.perf_counter()
        if in_process:  # every rank in this process: the full analysis and its rules
            a = analyze(ne.load(out), rules=["culprit_rank", "rank_imbalance", "slow_collective"])
            named = [f.rank for f in a.findings if f.rule_id == "culprit_rank"]
        else:  # rank by rank on the executor: only small tables come back
            t = run_tables(out, ex)
            lines = (t.late or {}).get("lines") or [{}]
            named = [t.culprit] if lines[0].get("line") == synth_ranks.PLANTED_LINE else []
        t_an = time.perf_counter() - t0
    return {
        "ranks": n,
        "events_per_rank": sum(r["num_events"] for r in results) / n,
        "generate_s": t_gen,
        "convert_s": t_conv,
        "ranks_per_min": 60 * n / t_conv,
        "analyze_s": t_an,
        "worker_peak_rss_mb": max(r["peak_rss_bytes"] for r in results) / MB,
        "analysis": "in process" if in_process else "rank by rank",
        "client_peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MB,
        "culprit_ok": named == [slow],
        "executor": how,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--layers", type=int, default=10, help="kernels per pass x this (events per rank)")
    ap.add_argument("--workers", type=int, default=None, help="a local Dask cluster of N workers")
    ap.add_argument("--dask", default=None, help="an existing Dask scheduler address")
    ap.add_argument(
        "--in-process", action="store_true", help="analyze with every rank in this process (default: rank by rank)"
    )
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ne_ranks_") as tmp:
        for n in a.ranks:
            r = one(n, a.layers, a.workers, a.dask, Path(tmp), a.in_process)
            print(
                f"{r['ranks']:5d} ranks x {r['events_per_rank']:,.0f} events: convert {r['convert_s']:.1f} s "
                f"({r['ranks_per_min']:,.0f} ranks/min on {r['executor']}), analyze ({r['analysis']}) {r['analyze_s']:.1f} s, "
                f"peak RSS worker {r['worker_peak_rss_mb']:.0f} MB / client {r['client_peak_rss_mb']:.0f} MB, "
                f"culprit named: {r['culprit_ok']} (generate {r['generate_s']:.1f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
