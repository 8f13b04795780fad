"""Profile a planted workload with torch.profiler and return the trace file it wrote.

Each planted module defines ``setup()`` (build the state) and ``step(state)`` (one training
iteration). The harness runs them under ``torch.profiler.profile`` the way a user would:
``with_stack=True``, ``profile_memory=True``, ``record_shapes=True`` and a schedule (one warm-up
step, then ``steps`` active ones, so the trace has ``ProfilerStep#N`` spans), and exports the
Chrome trace.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def capture(module_name: str, out: Path, steps: int = 4) -> Path:
    mod: Any = importlib.import_module(f"tests.planted.{module_name}")
    torch.set_num_threads(1)  # the test machine is shared: intra-op threads only add noise
    torch.manual_seed(0)
    state = mod.setup()
    mod.step(state)  # one unprofiled iteration, so lazy initialisation is not in the trace
    steps = getattr(mod, "STEPS", steps)
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(out)),
        with_stack=True,
        profile_memory=True,
        record_shapes=True,
    ) as prof:
        for _ in range(steps + 1):
            mod.step(state)
            prof.step()
    return out


def capture_native(module_name: str, out: Path, steps: int = 4) -> Path:
    """The same workload captured in process by ``neuron_explorer.profile`` (exact call lines),
    written straight to a Parquet trace."""
    import neuron_explorer as ne

    mod: Any = importlib.import_module(f"tests.planted.{module_name}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    state = mod.setup()
    mod.step(state)
    steps = getattr(mod, "STEPS", steps)
    with ne.profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=steps, repeat=1),
        profile_memory=True,
        output=out,
        on_error="raise",
    ) as prof:
        for _ in range(steps + 1):
            mod.step(state)
            prof.step()
    return out


if __name__ == "__main__":  # python -m tests.planted._harness NAME OUT.json|OUT.parquet [STEPS]
    import sys

    target = Path(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    (capture_native if target.suffix == ".parquet" else capture)(sys.argv[1], target, count)
