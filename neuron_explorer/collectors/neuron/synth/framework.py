"""Write the torch.profiler (Kineto) trace of the host side that launched the planted run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neuron_explorer.collectors.neuron.synth.timeline import USER_FILE, SynthSpec, host_exec_starts, timeline


def write_framework_trace(path: str | Path, spec: SynthSpec | None = None, launches: bool = True) -> dict[str, Any]:
    """The torch.profiler (Kineto) JSON of the host side: one ProfilerStep per execution, a
    user function, a framework op and (when ``launches``) its ``privateuse1_runtime`` call."""
    spec = spec or SynthSpec()
    tl = timeline(spec)
    host = host_exec_starts(spec, tl)
    events: list[dict[str, Any]] = []
    pid, tid = 4242, 4243

    def span(name: str, cat: str, start_ns: int, dur_ns: int, args: dict[str, Any] | None = None) -> None:
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": f"{start_ns // 1000}.{start_ns % 1000:03d}",
                "dur": dur_ns / 1000,
                "args": args or {},
            }
        )

    for i, t in enumerate(host.tolist()):
        s0 = t - 200_000
        span(f"ProfilerStep#{i}", "user_annotation", s0, spec.exec_ns + 400_000)
        span(f"{USER_FILE}(88): train_step", "python_function", s0 + 1_000, spec.exec_ns + 300_000)
        span("neuron::graph_execute", "cpu_op", s0 + 2_000, spec.exec_ns + 250_000, {"External id": 10 + i})
        if launches:
            span(
                "nrt_execute",
                "privateuse1_runtime",
                t - 30_000,
                25_000,
                {"External id": 10 + i, "correlation": 500 + i},
            )
    # Kineto writes ts as decimal microseconds with ns digits; write them as exact text.
    parts = [json.dumps({k: v for k, v in e.items() if k != "ts"})[:-1] + f', "ts": {e["ts"]}}}' for e in events]
    Path(path).write_text('{"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": [' + ",\n".join(parts) + "]}")
    return {"host_exec_starts": host, "launch_starts": host - 30_000, "timeline": tl}
