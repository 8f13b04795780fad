"""Benchmark: neuron_explorer.profile() vs torch.profiler.profile with the same options.

Prints three ratios (one run, same process, same model):

1. step time: median step under ne.profile / under torch.profiler.profile (target <= 1.10);
2. blocking post-processing: the time ne.profile holds the training loop at the end of a
   schedule cycle / the time torch's export_chrome_trace takes for the same profile
   (target <= 1.5); plus the time to the trace on disk, at the context's exit;
3. conversion rate: events per second of the whole conversion (in-memory results -> Parquet)
   on a ~100k-event profile (target >= 100k/s).

Usage: python bench/capture.py [--steps 300] [--events 100000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

import neuron_explorer as ne
from neuron_explorer.collectors._conversion import conversion_settings
from neuron_explorer.collectors.capture_convert import convert_results
from neuron_explorer.collectors.torch_profiler import default_user_code

OPTIONS = {"record_shapes": True, "with_stack": True, "activities": [torch.profiler.ProfilerActivity.CPU]}


def make() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 10))
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> None:
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def timed_loop(prof_factory, steps: int, tmp: Path) -> tuple[list[float], float, float]:
    """Per-step times of the recorded steps, the time step() blocked at the cycle end, and
    the time the context's exit took."""
    model, opt = make()
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    sched = torch.profiler.schedule(wait=1, warmup=1, active=steps, repeat=1)
    times: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        prof = prof_factory(sched, tmp)
        with prof:
            for i in range(steps + 3):
                t0 = time.perf_counter()
                train_step(model, opt, x, y)
                t1 = time.perf_counter()
                prof.step()
                t2 = time.perf_counter()
                if 2 <= i < steps + 1:
                    times.append(t1 - t0)
                if i == steps + 1:
                    blocked = t2 - t1  # the step() that ended the active phase
            t_exit = time.perf_counter()
        exit_s = time.perf_counter() - t_exit
    return times, blocked, exit_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--events", type=int, default=100_000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ne-bench-"))

    exported: dict[str, float] = {}

    def torch_factory(sched, tmp):
        def handler(p):
            t = time.perf_counter()
            p.export_chrome_trace(str(tmp / "torch.json"))
            exported["s"] = time.perf_counter() - t

        return torch.profiler.profile(schedule=sched, on_trace_ready=handler, **OPTIONS)

    def ne_factory(sched, tmp):
        return ne.profile(schedule=sched, output=tmp / "ne.parquet", **OPTIONS)

    # interleaved runs, so machine load drifts hit both sides alike
    torch_times, ne_times, torch_blocks, ne_blocks, exports, ne_exit = [], [], [], [], [], 0.0
    for _ in range(3):
        t, b, _ = timed_loop(torch_factory, args.steps, tmp)
        torch_times += t
        torch_blocks.append(b)
        exports.append(exported["s"])
        t, b, ne_exit = timed_loop(ne_factory, args.steps, tmp)
        ne_times += t
        ne_blocks.append(b)
    torch_block, ne_block = statistics.median(torch_blocks), statistics.median(ne_blocks)
    exported["s"] = statistics.median(exports)
    # torch's own step() at a cycle end = stop + finalize + handler; ours = stop + finalize + ours
    finalize = torch_block - exported["s"]
    step_ratio = statistics.median(ne_times) / statistics.median(torch_times)
    print(
        f"step time (median): torch {statistics.median(torch_times) * 1e3:.3f} ms, "
        f"neuron_explorer {statistics.median(ne_times) * 1e3:.3f} ms -> ratio {step_ratio:.3f} (target <= 1.10)"
    )
    ours = max(ne_block - finalize, 0.0)
    print(
        f"blocking at the cycle end: torch step() {torch_block:.3f} s = finalize {finalize:.3f} + export_chrome_trace "
        f"{exported['s']:.3f}; neuron_explorer step() {ne_block:.3f} s -> ours ~{ours:.3f} s, ratio to export "
        f"{ours / exported['s']:.3f} (target <= 1.5); conversion then runs at the context's exit: {ne_exit:.3f} s"
    )

    # Conversion rate on a ~N-event profile (converted synchronously, timed alone).
    model, opt = make()
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    per_step = None
    steps = 20
    while True:
        with torch.profiler.profile(**OPTIONS) as p:
            for _ in range(steps):
                train_step(model, opt, x, y)
        n = len(p.profiler.kineto_results.trace_activities())
        if n >= args.events or per_step is not None:
            break
        per_step = n / steps
        steps = int(args.events / per_step) + 1
    t0 = time.perf_counter()
    # The same settings profile() converts under (GC paused, system allocator).
    with conversion_settings():
        trace = convert_results(p.profiler.kineto_results, {"collector": "bench"}, default_user_code())
        t1 = time.perf_counter()
        trace.write(tmp / "rate.parquet")
    t2 = time.perf_counter()
    t3 = time.perf_counter()
    p.export_chrome_trace(str(tmp / "rate.json"))
    export_s = time.perf_counter() - t3
    rate = trace.num_events / (t2 - t0)
    print(
        f"conversion: {trace.num_events} events in {t2 - t0:.3f} s (convert {t1 - t0:.3f} + write {t2 - t1:.3f}) "
        f"-> {rate:,.0f} events/s (target >= 100,000); torch export_chrome_trace of the same: {export_s:.3f} s "
        f"-> ratio {(t2 - t0) / export_s:.2f}"
    )


if __name__ == "__main__":
    main()
