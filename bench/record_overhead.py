"""Record overhead on a program whose first step is heavy one-time Python (issue 30).

Runs bench/one_time_python.py three ways, alternating, ``--repeat`` times each: plain
``python script.py``; ``neuron-explorer record`` (pruning on, the default); and ``record`` with
``NEURON_EXPLORER_NO_PRUNE=1`` (every Python event converted, as before pruning). Reports the
median wall clock of each, the record/plain ratios and the events each trace holds.

    python bench/record_overhead.py [--repeat 3] [--modules 300] [--calls 400000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "one_time_python.py"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modules", type=int, default=300)
    ap.add_argument("--calls", type=int, default=400_000)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import neuron_explorer as ne

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("NEURON_EXPLORER_NO_PRUNE", None)
    no_prune = {**env, "NEURON_EXPLORER_NO_PRUNE": "1"}
    script = [str(SCRIPT), "--modules", str(a.modules), "--calls", str(a.calls)]
    walls: dict[str, list[float]] = {"plain": [], "record": [], "record, no pruning": []}
    with tempfile.TemporaryDirectory() as tmp:
        out = {"record": Path(tmp, "pruned.parquet"), "record, no pruning": Path(tmp, "full.parquet")}
        for _ in range(a.repeat):
            walls["plain"].append(timed([sys.executable, *script], env))
            for label, e in (("record", env), ("record, no pruning", no_prune)):
                cmd = [sys.executable, "-m", "neuron_explorer", "record", "-o", str(out[label]), *script]
                walls[label].append(timed(cmd, e))
        events = {k: ne.load(p).num_events for k, p in out.items()}
        pruned = ne.load(out["record"]).metadata.get("pruned")
    plain = statistics.median(walls["plain"])
    print(f"modules {a.modules}, builtin calls {a.calls}, {a.repeat} runs each (median wall)")
    print(f"{'':20} {'wall s':>8} {'x plain':>8} {'events':>10}")
    for label, w in walls.items():
        m = statistics.median(w)
        print(f"{label:20} {m:8.2f} {m / plain:8.2f} {events.get(label, 0):>10,}")
    print("pruned:", pruned)


if __name__ == "__main__":
    main()
