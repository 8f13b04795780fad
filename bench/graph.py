"""Time the dependency graph, replay and critical path on the 216k-event trace, and print the
baseline replay error of every bundled Kineto trace (issue 31: under 2 s; within 2%).

    PYTHONPATH=. .venv/bin/python bench/graph.py [TRACE]

TRACE defaults to tests/data/kineto/hta/df_index_resolver.json.gz (216,000 events, V100), else a
216k-event trace from bench/synth.py. The error table covers tests/data/kineto and
../shared/fixtures (or $NEURON_EXPLORER_SHARED/fixtures). The frames (the pandas
views every analyzer shares) are built first and not timed: analyze builds them once for all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import neuron_explorer as ne  # noqa: E402
from neuron_explorer.analyzers.core.context import TraceFrames  # noqa: E402
from neuron_explorer.analyzers.graph import Edits, build_graph, critical_path_table, replay  # noqa: E402
from neuron_explorer.analyzers.graph.critical import replay_summary  # noqa: E402
from neuron_explorer.trace.errors import NeuronExplorerError  # noqa: E402

BIG = ROOT / "tests" / "data" / "kineto" / "hta" / "df_index_resolver.json.gz"


def big_trace() -> Path:
    if len(sys.argv) > 1:
        return Path(sys.argv[1])
    if BIG.exists():
        return BIG
    out = Path(tempfile.mkdtemp()) / "synth_216k.json.gz"
    subprocess.run([sys.executable, str(ROOT / "bench" / "synth.py"), "-n", "216000", "-o", str(out)], check=True)
    return out


def timing(path: Path) -> None:
    trace = ne.load(path)
    frames = TraceFrames(trace)
    _shared = (frames.host, frames.device, frames.step_windows, frames.launch_events)  # built once, for all
    t0 = time.perf_counter()
    graph = build_graph(frames)
    t1 = time.perf_counter()
    rep = replay(graph)
    t2 = time.perf_counter()
    critical_path_table(frames)
    t3 = time.perf_counter()
    edited = replay(graph, Edits(scale=((".", 0.5),)))
    t4 = time.perf_counter()
    s = replay_summary(frames)
    print(f"{path.name}: {trace.num_events:,} events, {graph.num_nodes:,} nodes, {len(graph.edges):,} cross edges")
    print(
        f"  graph {t1 - t0:.3f} s, baseline replay {t2 - t1:.3f} s ({rep.rounds} rounds), "
        f"critical path (replay + walk) {t3 - t2:.3f} s, edited replay {t4 - t3:.3f} s ({edited.rounds} rounds)"
    )
    print(
        f"  graph + replay + critical path: {t3 - t0:.3f} s (target < 2 s); baseline error {s['baseline_error_pct']:+.4f}%"
    )


SHARED = Path(os.environ.get("NEURON_EXPLORER_SHARED", ROOT.parent / "shared")) / "fixtures"


def traces() -> list[tuple[str, Path]]:
    """Every trace in tests/data/kineto (Kineto JSON, our Parquet) and in ../shared/fixtures."""
    out = []
    for root, tag in ((ROOT / "tests" / "data" / "kineto", ""), (SHARED, "shared/")):
        if not root.exists():
            continue
        for path in sorted(root.rglob("*")):
            if path.name.endswith((".json", ".json.gz", ".parquet")) and "provenance" not in path.name:
                out.append((tag + str(path.relative_to(root)), path))
    return out


def error_table() -> None:
    print(
        f"\n{'trace':58s} {'events':>8} {'steps':>5} {'error %':>8} {'max step %':>10} {'unexpl. %':>9} {'untraced %':>10}"
    )
    for name, path in traces():
        try:
            frames = TraceFrames(ne.load(path))
            s = replay_summary(frames)
        except NeuronExplorerError as exc:  # not a trace the graph can be built from
            print(f"{name:58s} {'':>8} {'':>5} skipped: {exc}")
            continue
        print(
            f"{name:58s} {frames.trace.num_events:>8,} {len(s['steps']):>5} {s['baseline_error_pct']:>+8.3f} "
            f"{s['max_step_baseline_error_pct']:>10.3f} {s['unexplained_pct']:>9.1f} {s['untraced_pct']:>10.1f}"
        )


if __name__ == "__main__":
    timing(big_trace())
    error_table()
