"""Benchmark: convert and analyze synthetic multi-rank runs (bench/synth_ranks.py).

For each run size: generate N rank traces (a planted slow rank), convert the run directory to
``rank=N/trace.parquet`` on the chosen executor, then load and analyze it with the cross-rank
rules; print ranks per minute of the convert, the analysis time, the peak RSS of the worker
processes (each task reports its process's high-water mark) and of this client process, and
whether the planted rank was named.

    .venv/bin/python bench/ranks.py                      # 8 and 64 ranks, a process pool
    .venv/bin/python bench/ranks.py --ranks 8 64 256 --layers 20 --workers 2   # local Dask cluster
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import synth_ranks

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.collectors.run_dir import convert_run
from neuron_explorer.parallel import make_executor

MB = 1 << 20


def one(n: int, layers: int, workers: int | None, dask: str | None, root: Path) -> dict[str, float]:
    src, out = root / f"json_{n}", root / f"pq_{n}"
    slow = n // 2
    t0 = time.perf_counter()
    synth_ranks.write_run(src, n, slow_rank=slow, layers=layers, seed=n)
    t_gen = time.perf_counter() - t0
    with make_executor(workers=workers, dask=dask) as ex:
        t0 = time.perf_counter()
        results = convert_run(src, out, ex)
        t_conv = time.perf_counter() - t0
        how = ex.describe()
    t0 = time.perf_counter()
    a = analyze(ne.load(out), rules=["culprit_rank", "rank_imbalance", "slow_collective"])
    t_an = time.perf_counter() - t0
    named = [f.rank for f in a.findings if f.rule_id == "culprit_rank"]
    return {
        "ranks": n,
        "events_per_rank": sum(r["num_events"] for r in results) / n,
        "generate_s": t_gen,
        "convert_s": t_conv,
        "ranks_per_min": 60 * n / t_conv,
        "analyze_s": t_an,
        "worker_peak_rss_mb": max(r["peak_rss_bytes"] for r in results) / MB,
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
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ne_ranks_") as tmp:
        for n in a.ranks:
            r = one(n, a.layers, a.workers, a.dask, Path(tmp))
            print(
                f"{r['ranks']:5d} ranks x {r['events_per_rank']:,.0f} events: convert {r['convert_s']:.1f} s "
                f"({r['ranks_per_min']:,.0f} ranks/min on {r['executor']}), analyze {r['analyze_s']:.1f} s, "
                f"peak RSS worker {r['worker_peak_rss_mb']:.0f} MB / client {r['client_peak_rss_mb']:.0f} MB, "
                f"culprit named: {r['culprit_ok']} (generate {r['generate_s']:.1f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
