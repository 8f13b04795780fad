"""Ingest benchmark: Neuron Explorer's Kineto JSON import side by side with HTA 0.5.0.

One command measures, each in fresh child processes (median of ``--repeat`` runs):

1. a real 216k-event trace (HTA's ``df_index_resolver.json.gz``):
   - our whole ``neuron-explorer convert TRACE -o out.parquet`` process vs a whole process
     running HTA's ``TraceAnalysis(trace_dir=...)``: wall clock (target >= 10x faster) and
     peak RSS (target <= 1/3 of HTA's);
   - in-process: opening our Parquet and counting events by kind vs HTA's ``TraceAnalysis``
     constructor (target >= 100x);
   - the Parquet file's size vs the .json.gz (target: no larger);
2. a synthetic 5M-event trace (``bench/synth.py``, generated once into bench/data/):
   convert rate (target >= 300k events/s) and peak RSS (target < 3 GB);
3. gunzip alone on both files (ISA-L, the decompressor the importer uses, and zlib), so the
   convert can be read as a multiple of the decompression limit.

    .venv/bin/python bench/ingest.py                 # everything (~2-3 min on 2 cores)
    .venv/bin/python bench/ingest.py --skip-synthetic --repeat 5

HTA runs from bench/.venv-hta (created by bench/setup_peers.sh, which this script runs when the
venv is missing). Results are printed as a table and saved under bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import Measured, Row, decompress_seconds, fmt_bytes, fmt_s, median_of, print_table, repeat, run_measured  # noqa: E402

DEFAULT_TRACE = (
    ROOT.parent / "shared" / "fixtures" / "kineto" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"
)
DEFAULT_SYNTH = HERE / "data" / "synth_5m.json.gz"
HTA_VENV = HERE / ".venv-hta"
RESULTS = HERE / "results"

# In-process probes: each runs in a fresh interpreter and prints one JSON line.
OURS_OPEN_PROBE = """
import json, sys, time
import pyarrow.compute as pc
from neuron_explorer.trace import Trace
columns = sys.argv[2].split(",") if len(sys.argv) > 2 else None
t0 = time.perf_counter()
trace = Trace.read(sys.argv[1], columns=columns)
counts = pc.value_counts(trace.events["kind"].combine_chunks()).to_pylist()
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "events": trace.events.num_rows,
                  "by_kind": {str(c["values"]): c["counts"] for c in counts}}))
"""

HTA_PROBE = """
import json, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
analysis = TraceAnalysis(trace_dir=sys.argv[1])
t2 = time.perf_counter()
ranks = analysis.t.get_ranks()
rows = sum(len(analysis.t.get_trace(r)) for r in ranks)
print(json.dumps({"import_s": t1 - t0, "constructor_s": t2 - t1, "rows": rows, "ranks": [int(r) for r in ranks]}))
"""

CONVERT_FALLBACK = "import sys, neuron_explorer as ne; ne.load(sys.argv[1]).write(sys.argv[2])"


def convert_command(trace: Path, out: Path) -> list[str]:
    """Our whole convert process: the CLI when it exists, else the same work through the API."""
    try:
        import neuron_explorer.cli.convert  # noqa: F401
    except ImportError:
        return [sys.executable, "-c", CONVERT_FALLBACK, str(trace), str(out)]
    return [sys.executable, "-m", "neuron_explorer", "convert", str(trace), "-o", str(out), "-q"]


def hta_python() -> Path:
    python = HTA_VENV / "bin" / "python"
    if not python.exists():
        print("bench/.venv-hta is missing: running bench/setup_peers.sh", flush=True)
        subprocess.run(["bash", str(HERE / "setup_peers.sh")], check=True)
    return python


def hta_trace_dir(trace: Path, workdir: Path) -> Path:
    """HTA takes a directory (it detects ranks from the files in it): one with just this trace."""
    d = workdir / "hta_trace"
    d.mkdir(exist_ok=True)
    link = d / trace.name
    if not link.exists():
        os.symlink(trace.resolve(), link)
    return d


def bench_real_trace(trace: Path, workdir: Path, runs: int, with_hta: bool) -> tuple[list[Row], dict[str, Any]]:
    out = workdir / "real.parquet"
    ours = repeat(lambda: run_measured(convert_command(trace, out)), runs)
    opened = repeat(lambda: run_measured([sys.executable, "-c", OURS_OPEN_PROBE, str(out)]), max(runs, 3))
    projected = repeat(lambda: run_measured([sys.executable, "-c", OURS_OPEN_PROBE, str(out), "kind"]), max(runs, 3))
    probe = opened[0].json()
    events = probe["events"]
    ours_wall = median_of(ours, lambda m: m.wall_s)
    ours_rss = median_of(ours, lambda m: m.peak_rss_bytes)
    ours_open = median_of(opened, lambda m: m.json()["seconds"])
    ours_open_kind = median_of(projected, lambda m: m.json()["seconds"])
    gz_size, pq_size = trace.stat().st_size, out.stat().st_size
    unzip_isal, raw_size = decompress_seconds(trace, use_isal=True)
    unzip_zlib, _ = decompress_seconds(trace, use_isal=False)
    values: dict[str, Any] = {
        "trace": str(trace),
        "events": events,
        "events_by_kind": probe["by_kind"],
        "ours_convert_wall_s": [m.wall_s for m in ours],
        "ours_convert_peak_rss_bytes": [m.peak_rss_bytes for m in ours],
        "ours_convert_cpu_s": [m.cpu_s for m in ours],
        "ours_open_count_s": [m.json()["seconds"] for m in opened],
        "ours_open_count_kind_column_s": [m.json()["seconds"] for m in projected],
        "json_gz_bytes": gz_size,
        "json_bytes": raw_size,
        "parquet_bytes": pq_size,
        "gunzip_isal_s": unzip_isal,
        "gunzip_zlib_s": unzip_zlib,
    }
    rows: list[Row] = []
    name = trace.name
    if with_hta:
        python = hta_python()
        hta_dir = hta_trace_dir(trace, workdir)
        hta: list[Measured] = repeat(
            lambda: run_measured([str(python), "-c", HTA_PROBE, str(hta_dir)], cwd=workdir), runs
        )
        hta_wall = median_of(hta, lambda m: m.wall_s)
        hta_rss = median_of(hta, lambda m: m.peak_rss_bytes)
        hta_ctor = median_of(hta, lambda m: m.json()["constructor_s"])
        values.update(
            hta_wall_s=[m.wall_s for m in hta],
            hta_peak_rss_bytes=[m.peak_rss_bytes for m in hta],
            hta_cpu_s=[m.cpu_s for m in hta],
            hta_constructor_s=[m.json()["constructor_s"] for m in hta],
            hta_import_s=[m.json()["import_s"] for m in hta],
            hta_rows=hta[0].json()["rows"],
        )
        speed = hta_wall / ours_wall
        ours_cpu, hta_cpu = median_of(ours, lambda m: m.cpu_s), median_of(hta, lambda m: m.cpu_s)
        cpu_note = f"CPU time (user+sys): ours {fmt_s(ours_cpu)}, HTA {fmt_s(hta_cpu)}: {hta_cpu / ours_cpu:.1f}x"
        rows.append(
            Row(
                f"{name}: whole process wall",
                fmt_s(ours_wall),
                f"HTA {fmt_s(hta_wall)}",
                speed,
                ">= 10x faster",
                speed >= 10,
                cpu_note,
            )
        )
        mem = hta_rss / ours_rss
        rows.append(
            Row(
                f"{name}: whole process peak RSS",
                fmt_bytes(ours_rss),
                f"HTA {fmt_bytes(hta_rss)}",
                mem,
                "<= 1/3 (>= 3x)",
                mem >= 3,
            )
        )
        inproc = hta_ctor / ours_open
        rows.append(
            Row(
                f"{name}: open (all columns) + count by kind",
                fmt_s(ours_open),
                f"HTA ctor {fmt_s(hta_ctor)}",
                inproc,
                ">= 100x faster",
                inproc >= 100,
            )
        )
        inproc_kind = hta_ctor / ours_open_kind
        rows.append(
            Row(
                f"{name}: open (kind column) + count by kind",
                fmt_s(ours_open_kind),
                f"HTA ctor {fmt_s(hta_ctor)}",
                inproc_kind,
                ">= 100x faster",
                inproc_kind >= 100,
                'Trace.read(path, columns=["kind"]): reads only the column the question needs',
            )
        )
        rows.append(
            Row(
                f"{name}: load rate",
                f"{events / ours_wall:,.0f} ev/s",
                f"HTA {events / hta_wall:,.0f} ev/s",
                None,
                "",
                None,
                "whole process, file's events / wall clock",
            )
        )
    else:
        rows.append(Row(f"{name}: whole process wall", fmt_s(ours_wall), "(HTA skipped)"))
        rows.append(Row(f"{name}: whole process peak RSS", fmt_bytes(ours_rss)))
        rows.append(Row(f"{name}: open (all columns) + count by kind", fmt_s(ours_open)))
        rows.append(Row(f"{name}: open (kind column) + count by kind", fmt_s(ours_open_kind)))
    size = gz_size / pq_size
    rows.append(
        Row(
            f"{name}: Parquet vs .json.gz size",
            fmt_bytes(pq_size),
            f".json.gz {fmt_bytes(gz_size)}",
            size,
            "no larger (>= 1x)",
            size >= 1,
        )
    )
    rows.append(
        Row(
            f"{name}: convert vs gunzip",
            fmt_s(ours_wall),
            f"gunzip {fmt_s(unzip_isal)}",
            None,
            "",
            None,
            f"convert = {ours_wall / unzip_isal:.1f}x ISA-L gunzip ({fmt_s(unzip_isal)}), {ours_wall / unzip_zlib:.1f}x zlib gunzip ({fmt_s(unzip_zlib)}) of {fmt_bytes(raw_size)} JSON",
        )
    )
    return rows, values


def bench_synthetic(path: Path, events: int, workdir: Path, runs: int) -> tuple[list[Row], dict[str, Any]]:
    if not path.exists():
        from synth import write_trace

        print(f"generating {path} ({events:,} events, once)", flush=True)
        write_trace(path, events, progress=True)
    out = workdir / "synthetic.parquet"
    ours = repeat(lambda: run_measured(convert_command(path, out)), runs)
    n = run_measured(
        [
            sys.executable,
            "-c",
            "import sys, pyarrow.parquet as pq; print(pq.ParquetFile(sys.argv[1]).metadata.num_rows)",
            str(out),
        ]
    )
    n_events = int(n.stdout.strip())
    wall = median_of(ours, lambda m: m.wall_s)
    cpu = median_of(ours, lambda m: m.cpu_s)
    rss = median_of(ours, lambda m: m.peak_rss_bytes)
    unzip_isal, raw_size = decompress_seconds(path, use_isal=True)
    unzip_zlib, _ = decompress_seconds(path, use_isal=False)
    rate = n_events / wall
    values = {
        "trace": str(path),
        "events": n_events,
        "convert_wall_s": [m.wall_s for m in ours],
        "convert_peak_rss_bytes": [m.peak_rss_bytes for m in ours],
        "convert_cpu_s": [m.cpu_s for m in ours],
        "json_gz_bytes": path.stat().st_size,
        "json_bytes": raw_size,
        "parquet_bytes": out.stat().st_size,
        "gunzip_isal_s": unzip_isal,
        "gunzip_zlib_s": unzip_zlib,
    }
    label = f"synthetic {n_events / 1e6:.1f}M"
    rows = [
        Row(
            f"{label}: convert rate",
            f"{rate:,.0f} ev/s",
            f"wall {fmt_s(wall)}",
            None,
            ">= 300,000 ev/s",
            rate >= 300_000,
            f"CPU time {fmt_s(cpu)} ({n_events / cpu:,.0f} ev/s of CPU)",
        ),
        Row(f"{label}: convert peak RSS", fmt_bytes(rss), "", None, "< 3 GB", rss < 3e9),
        Row(
            f"{label}: Parquet vs .json.gz size",
            fmt_bytes(out.stat().st_size),
            f".json.gz {fmt_bytes(path.stat().st_size)}",
            path.stat().st_size / out.stat().st_size,
            "",
            None,
        ),
        Row(
            f"{label}: convert vs gunzip",
            fmt_s(wall),
            f"gunzip {fmt_s(unzip_isal)}",
            None,
            "",
            None,
            f"convert = {wall / unzip_isal:.1f}x ISA-L gunzip ({fmt_s(unzip_isal)}, {n_events / unzip_isal:,.0f} ev/s), "
            f"{wall / unzip_zlib:.1f}x zlib gunzip ({fmt_s(unzip_zlib)}) of {fmt_bytes(raw_size)} JSON",
        ),
    ]
    return rows, values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--trace",
        type=Path,
        default=DEFAULT_TRACE,
        help="the real trace to compare with HTA (default: df_index_resolver.json.gz)",
    )
    parser.add_argument(
        "--synthetic",
        type=Path,
        default=DEFAULT_SYNTH,
        help="the synthetic trace (generated with bench/synth.py when missing)",
    )
    parser.add_argument(
        "--synthetic-events", type=int, default=5_000_000, help="size of the synthetic trace when it is generated"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per measurement on the real trace (median is reported)"
    )
    parser.add_argument("--synthetic-repeat", type=int, default=1, help="convert runs on the synthetic trace")
    parser.add_argument("--skip-hta", action="store_true", help="measure only our side")
    parser.add_argument("--skip-synthetic", action="store_true", help="skip the 5M-event trace")
    parser.add_argument(
        "--save", type=Path, default=None, help="where to save results JSON (default bench/results/ingest-<time>.json)"
    )
    args = parser.parse_args(argv)
    if not args.trace.exists():
        print(f"ingest.py: error: {args.trace}: no such file", file=sys.stderr)
        return 2

    load_before = os.getloadavg()
    started = time.time()
    rows: list[Row] = []
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "load_average_before": load_before,
    }
    with tempfile.TemporaryDirectory(prefix="ne-bench-") as tmp:
        work = Path(tmp)
        real_rows, results["real"] = bench_real_trace(args.trace, work, args.repeat, not args.skip_hta)
        rows += real_rows
        if not args.skip_synthetic:
            synth_rows, results["synthetic"] = bench_synthetic(
                args.synthetic, args.synthetic_events, work, args.synthetic_repeat
            )
            rows += synth_rows
    results["load_average_after"] = os.getloadavg()
    results["seconds"] = time.time() - started
    title = (
        f"Neuron Explorer ingest benchmark, {results['date']} - {results['machine']}; "
        f"load average {load_before[0]:.1f} before, {results['load_average_after'][0]:.1f} after"
    )
    print()
    results["table"] = print_table(rows, title)
    results["rows"] = [{k: v for k, v in r.__dict__.items() if k != "values"} for r in rows]
    save = args.save or RESULTS / f"ingest-{time.strftime('%Y%m%d-%H%M%S')}.json"
    save.parent.mkdir(parents=True, exist_ok=True)
    save.write_text(json.dumps(results, indent=2, default=str))
    print(f"results saved to {save}")
    failed = [r.metric for r in rows if r.passed is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
