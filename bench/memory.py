"""Memory-analysis benchmark: ``analyze`` with the live-set replay (analyzers/memory_live)
against ``analyze`` without it, on a 1M-event trace with memory events.

The trace is ``bench/synth.py -n 1000000`` (a DDP transformer loop with ``[memory]`` instants
whose frees name their block's address), converted to Parquet once. Each side runs in a fresh
process, reading the Parquet file with the columns ``analyze`` reads and running every metric
and rule; the reference is the code at ``--reference`` (default: the main checkout, i.e. today's
``analyze``). Target: ours within 1.3x of the reference.

    .venv/bin/python bench/memory.py
    .venv/bin/python bench/memory.py --reference ../main --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import Row, fmt_s, print_table, run_measured  # noqa: E402

DATA = HERE / "data"
RESULTS = HERE / "results"


def ensure_trace(events: int) -> Path:
    """The synthetic trace as Parquet (generated and converted once)."""
    DATA.mkdir(exist_ok=True)
    src = DATA / f"synth_mem_{events // 1000}k.json.gz"
    out = src.with_suffix("").with_suffix(".parquet")
    if not out.exists():
        if not src.exists():
            run_measured([sys.executable, str(HERE / "synth.py"), "-n", str(events), "-o", str(src), "-q"])
        run_measured(
            [sys.executable, "-m", "neuron_explorer", "convert", str(src), "-o", str(out), "-q"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    return out


def probe(code: Path, trace: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    return run_measured([sys.executable, str(HERE / "_memory_probe.py"), str(trace)], cwd=code, env=env).json()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--reference", type=Path, default=ROOT.parent.parent / "main", help="today's code")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    trace = ensure_trace(args.events)
    ours, ref = [], []
    for _ in range(args.repeat):  # interleaved, so load on the shared machine hits both alike
        ours.append(probe(ROOT, trace))
        ref.append(probe(args.reference.resolve(), trace))
    med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
    o_an, r_an = med(ours, "analyze_s"), med(ref, "analyze_s")
    o_tot, r_tot = med(ours, "total_s"), med(ref, "total_s")
    o_cpu, r_cpu = med(ours, "cpu_s"), med(ref, "cpu_s")
    live = med(ours, "memory_live_s")
    rows = [
        Row("trace", f"{ours[0]['events']:,} events, {ours[0]['memory_events']:,} memory events"),
        Row("analyze (wall)", f"{fmt_s(o_an)} ({o_an / r_an:.2f}x)", fmt_s(r_an), None, "<= 1.3x", o_an <= 1.3 * r_an),
        Row(
            "read + analyze (wall)",
            f"{fmt_s(o_tot)} ({o_tot / r_tot:.2f}x)",
            fmt_s(r_tot),
            None,
            "<= 1.3x",
            o_tot <= 1.3 * r_tot,
        ),
        Row(
            "read + analyze (CPU)",
            f"{fmt_s(o_cpu)} ({o_cpu / r_cpu:.2f}x)",
            fmt_s(r_cpu),
            None,
            "<= 1.3x",
            o_cpu <= 1.3 * r_cpu,
        ),
        Row("memory_live replay alone", fmt_s(live)),
        Row("memory findings", ", ".join(ours[0]["memory_findings"]) or "none"),
    ]
    print_table(rows, "Memory analysis: ours (with the live-set replay) vs the reference (today's analyze)")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "memory.json").write_text(
        json.dumps({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "ours": ours, "reference": ref}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
