"""HTA side of bench/diff.py; runs in bench/.venv-hta (HolisticTraceAnalysis 0.5.0).

Loads two Kineto traces with HTA and compares them with ``TraceDiff.compare_traces`` (ops and
kernels by name, every iteration of rank 0's trace). Prints one JSON line.

    bench/.venv-hta/bin/python bench/_hta_diff.py BASE.json.gz NEW.json.gz
"""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time

logging.disable(logging.WARNING)


def main(base: str, new: str) -> None:
    from hta.common.trace import Trace
    from hta.trace_diff import LabeledTrace, TraceDiff

    with tempfile.TemporaryDirectory() as d:
        dirs = []
        for label, path in (("base", base), ("new", new)):
            sub = os.path.join(d, label)
            os.mkdir(sub)
            os.symlink(os.path.abspath(path), os.path.join(sub, os.path.basename(path)))
            dirs.append(sub)
        t0 = time.perf_counter()
        traces = []
        for label, sub in zip(("base", "new"), dirs):
            t = Trace(trace_dir=sub)
            t.parse_traces()
            traces.append(LabeledTrace(label=label, t=t))
        load_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        base_t, new_t = traces
        iterations = base_t.iterations()
        df = TraceDiff.compare_traces(base_t, new_t, control_iteration=iterations, test_iteration=new_t.iterations())
        diff_s = time.perf_counter() - t1
    print(json.dumps({"load_s": load_s, "diff_s": diff_s, "rows": len(df)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
