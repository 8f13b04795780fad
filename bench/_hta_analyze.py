"""HTA side of bench/analyze.py; runs in bench/.venv-hta (HolisticTraceAnalysis 0.5.0, pandas 2).

Loads one Kineto trace with HTA and computes the three breakdowns we compare against:
temporal, idle time (every stream of every rank) and GPU kernel breakdown. Prints one JSON line.

    bench/.venv-hta/bin/python bench/_hta_analyze.py TRACE.json.gz
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time

logging.disable(logging.WARNING)


def main(path: str) -> None:
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as d:
        os.symlink(os.path.abspath(path), os.path.join(d, os.path.basename(path)))
        t0 = time.perf_counter()
        analyzer = TraceAnalysis(trace_dir=d)
        load_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        temporal = analyzer.get_temporal_breakdown(visualize=False)
        idle = []
        for rank in analyzer.t.traces:
            df = analyzer.get_idle_time_breakdown(ranks=[rank], visualize=False)[0]
            df["rank"] = rank
            idle.append(df)
        kernel_types, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False, num_kernels=100000)
        analyze_s = time.perf_counter() - t1
    import pandas as pd

    idle_df = pd.concat(idle) if idle else pd.DataFrame()
    print(
        json.dumps(
            {
                "load_s": load_s,
                "analyze_s": analyze_s,
                "temporal": temporal.to_dict(orient="records"),
                "idle": idle_df.to_dict(orient="records"),
                "kernel_types": kernel_types.to_dict(orient="records"),
                "kernels_total_us": float(kernels["sum (us)"].sum()) if "sum (us)" in kernels else None,
            },
            default=str,
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
