"""Child of bench/memory.py: load a Parquet trace with the columns ``analyze`` reads, run every
metric and rule, print one JSON line (seconds; the memory replay's own share when present).

    python bench/_memory_probe.py TRACE.parquet
"""

from __future__ import annotations

import json
import sys
import time


def main(path: str) -> None:
    from neuron_explorer.analyzers import analyze
    from neuron_explorer.analyzers.core.context import ANALYSIS_COLUMNS
    from neuron_explorer.trace.model import Trace

    t0 = time.perf_counter()
    c0 = time.process_time()
    trace = Trace.read(path, columns=list(ANALYSIS_COLUMNS))
    t1 = time.perf_counter()
    a = analyze(trace)
    t2 = time.perf_counter()
    c2 = time.process_time()
    memory_rules = [f.rule_id for f in a.findings if f.rule_id.startswith("memory")]
    print(
        json.dumps(
            {
                "read_s": t1 - t0,
                "analyze_s": t2 - t1,
                "total_s": t2 - t0,
                "cpu_s": c2 - c0,
                "memory_live_s": a.timings_s.get("memory_live"),
                "events": trace.num_events,
                "memory_events": len(a.memory),
                "memory_findings": memory_rules,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
