"""Diff benchmark: ``neuron-explorer diff`` of two 216k-event traces, beside HTA's TraceDiff.

Measures, each in a fresh process:

1. ours, in process from Parquet: read both traces + ``diff_traces`` (target: < 2 s);
2. ours, the whole ``neuron-explorer diff A.parquet B.parquet --format json`` command, wall;
3. HTA 0.5.0 (when bench/.venv-hta or --hta-python exists): load both Kineto JSON traces and
   ``TraceDiff.compare_traces`` (by name, all iterations), in process.

The pair is the 216k-event ``df_index_resolver`` trace and a copy whose one kernel name runs
30% longer (so the diff has a real change to find; the cost does not depend on what changed).

    .venv/bin/python bench/diff.py [--skip-hta] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import Row, fmt_bytes, fmt_s, print_table, run_measured  # noqa: E402
from analyze import PY, hta_python, parquet_of  # noqa: E402

TARGET_S = 2.0
SHARED = Path(os.environ.get("NEURON_EXPLORER_SHARED", ROOT.parent / "shared"))
BIG = SHARED / "fixtures" / "kineto" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"


def slowed_copy(src: Path) -> Path:
    """A copy of the Parquet trace whose most costly kernel runs 30% longer."""
    out = src.with_name(src.stem + ".slowed.parquet")
    if out.exists():
        return out
    import pyarrow as pa
    import pyarrow.compute as pc

    from neuron_explorer.trace import Trace

    t = Trace.read(src)
    ev = t.events
    kernels = ev.filter(pc.equal(pc.cast(ev["kind"], pa.string()), "kernel"))
    top = kernels.group_by("name").aggregate([("dur_ns", "sum")]).sort_by([("dur_ns_sum", "descending")])
    name = top["name"][0].as_py()
    hit = pc.equal(pc.cast(ev["name"], pa.string()), name)
    dur = pc.if_else(hit, pc.cast(pc.multiply(ev["dur_ns"], 1.3), pa.int64()), ev["dur_ns"])
    ev = ev.set_column(ev.schema.get_field_index("dur_ns"), "dur_ns", dur)
    Trace(ev, t.metadata, out).write(out)
    return out


def probe(base: str, new: str) -> None:
    """In a fresh process: read both Parquet traces and diff them; print one JSON line."""
    from neuron_explorer.analyzers.diff import diff_traces
    from neuron_explorer.cli.diff import load_for_diff

    t0, c0 = time.perf_counter(), time.process_time()
    b, n = load_for_diff(base), load_for_diff(new)
    t1 = time.perf_counter()
    d = diff_traces(b, n)
    t2 = time.perf_counter()
    print(
        json.dumps(
            {
                "read_s": t1 - t0,
                "diff_s": t2 - t1,
                "total_s": t2 - t0,
                "cpu_s": time.process_time() - c0,
                "events": b.num_events + n.num_events,
                "top": d.answer[0]["text"] if d.answer else None,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument("--hta-python", help="python of a venv with HolisticTraceAnalysis 0.5.0")
    parser.add_argument("--repeat", type=int, default=3, help="runs of ours; the best is reported")
    parser.add_argument("--probe", nargs=2, metavar=("BASE", "NEW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe(*args.probe)
        return
    base = parquet_of(BIG)
    new = slowed_copy(base)
    runs = [run_measured([PY, str(HERE / "diff.py"), "--probe", str(base), str(new)], cwd=ROOT) for _ in range(args.repeat)]  # fmt: skip
    best = min(runs, key=lambda m: m.json()["total_s"])
    ours = best.json()
    cli = min(
        (
            run_measured([PY, "-m", "neuron_explorer", "diff", str(base), str(new), "--format", "json"], cwd=ROOT)
            for _ in range(args.repeat)
        ),
        key=lambda m: m.wall_s,
    )
    rows = [
        Row(
            "diff of two 216k-event traces from Parquet, in process (read + diff)",
            fmt_s(ours["total_s"]),
            target=f"< {TARGET_S:.0f} s",
            passed=ours["total_s"] < TARGET_S,
            note=f"read {fmt_s(ours['read_s'])}, diff {fmt_s(ours['diff_s'])}, CPU {fmt_s(ours['cpu_s'])}; "
            f"best of {len(runs)}; found: {ours['top']}",
            values=ours,
        ),
        Row(
            "`neuron-explorer diff A.parquet B.parquet --format json`, whole process",
            fmt_s(cli.wall_s),
            note=f"peak RSS {fmt_bytes(cli.peak_rss_bytes)}, imports included",
            values={"wall_s": cli.wall_s, "peak_rss_bytes": cli.peak_rss_bytes},
        ),
    ]
    hta = None if args.skip_hta else hta_python(args.hta_python)
    if hta is None and not args.skip_hta:
        print("HTA not found: run bench/setup_peers.sh or pass --hta-python", file=sys.stderr)
    if hta is not None:
        m = run_measured([str(hta), str(HERE / "_hta_diff.py"), str(BIG), str(BIG)], cwd=ROOT)
        theirs = m.json()
        hta_total = theirs["load_s"] + theirs["diff_s"]
        rows.append(
            Row(
                "HTA TraceDiff, from the two Kineto JSON files, in process (load + compare)",
                fmt_s(ours["total_s"]),
                fmt_s(hta_total),
                ratio=hta_total / ours["total_s"],
                note=f"HTA load {fmt_s(theirs['load_s'])}, compare {fmt_s(theirs['diff_s'])} "
                f"(by name only, no steps, lines or confidence); peak RSS {fmt_bytes(m.peak_rss_bytes)}",
                values=theirs,
            )
        )
    text = print_table(rows, "diff: two 216k-event traces")
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "diff.json").write_text(json.dumps([r.__dict__ for r in rows], indent=2, default=str))
    (results / "diff.txt").write_text(text + "\n")


if __name__ == "__main__":
    main()
