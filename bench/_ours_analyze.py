"""Our side of bench/analyze.py, run in a fresh child process so its wall time and peak RSS are
its own. Prints one JSON line.

    .venv/bin/python bench/_ours_analyze.py breakdowns TRACE.parquet   # file -> three breakdowns
    .venv/bin/python bench/_ours_analyze.py all TRACE.parquet          # file -> every metric and rule
    .venv/bin/python bench/_ours_analyze.py breakdowns-us TRACE.parquet  # timestamps truncated to whole
                                                                       # microseconds first, as HTA stores them
"""

from __future__ import annotations

import json
import sys
import time


def truncate_to_us(trace):  # type: ignore[no-untyped-def]
    """The trace with timestamps moved to whole microseconds the way HTA 0.5.0 does for
    ns-resolution traces (``round_down_time_stamps``: start rounded up, end rounded down, so
    sub-microsecond events get a zero or negative duration, clamped to 0 here)."""
    import numpy as np
    import pyarrow as pa

    from neuron_explorer.trace import Trace

    ev = trace.events
    base = int(trace.metadata.get("base_time_ns") or 0)  # the JSON's ts are microseconds after it
    s = ev["start_ns"].to_numpy() - base
    e = s + ev["dur_ns"].to_numpy()
    start = -((-s) // 1000) * 1000  # ceil
    end = (e // 1000) * 1000  # floor
    dur = np.maximum(end - start, 0)
    ev = ev.set_column(ev.schema.get_field_index("start_ns"), "start_ns", pa.array(start + base, pa.int64()))
    ev = ev.set_column(ev.schema.get_field_index("dur_ns"), "dur_ns", pa.array(dur, pa.int64()))
    return Trace(ev, trace.metadata, trace.path)


def main(mode: str, path: str) -> None:
    t_import = time.perf_counter()
    from neuron_explorer.analyzers.analysis import analyze
    from neuron_explorer.analyzers.core.context import ANALYSIS_COLUMNS, TraceFrames
    from neuron_explorer.analyzers.metrics import breakdown, idle, kernels
    from neuron_explorer.trace import Trace

    import_s = time.perf_counter() - t_import
    t0 = time.perf_counter()  # like HTA's side: from here on, file -> answer, imports excluded
    c0 = time.process_time()
    trace = Trace.read(path, columns=ANALYSIS_COLUMNS)
    if mode == "breakdowns-us":
        trace = truncate_to_us(trace)
        mode = "breakdowns"
    read_s = time.perf_counter() - t0
    out: dict = {"events": trace.num_events, "read_s": read_s, "import_s": import_s}
    t1 = time.perf_counter()
    if mode == "breakdowns":
        frames = TraceFrames(trace)
        hta_events = breakdown.hta_device_events(frames)
        temporal = breakdown.temporal_breakdown(frames, hta_events)
        idle_df = idle.idle_breakdown(frames, hta_events)
        kernel_types = kernels.kernel_type_breakdown(hta_events)
        kernel_df = kernels.kernel_breakdown(frames)
        out.update(
            temporal=temporal.to_dict(orient="records"),
            idle=idle_df.to_dict(orient="records"),
            kernel_types=kernel_types.to_dict(orient="records"),
            kernels=len(kernel_df),
        )
    else:
        a = analyze(trace)
        out.update(findings=[f.rule_id for f in a.findings], timings_s=a.timings_s)
    out["analyze_s"] = time.perf_counter() - t1
    out["total_s"] = time.perf_counter() - t0
    out["cpu_s"] = time.process_time() - c0
    print(json.dumps(out, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
