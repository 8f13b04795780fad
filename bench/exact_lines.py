"""Exact lines for operator syntax (issue 30): what they cost.

1. The opt-in exact-lines mode (``profile(exact_lines=True)``, ``record --exact-lines``) against
   plain capture: the step time of a small GPT-style block (tests/gpu/gpt_block.py, training on
   the CPU) with no profiler, under ``neuron_explorer.profile`` and under it with the mode;
   runs alternate, ``--repeat`` times each, and the medians are compared.
2. Placing operator syntax from bytecode (``collectors.lines.operator_lines``) at conversion: the
   event-tree walk of one capture of the same block with and without it (best of 5 each).

    python bench/exact_lines.py [--steps 10] [--repeat 5] [--dims 4,64,128,4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10, help="timed steps per run")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each mode")
    ap.add_argument("--dims", default="4,64,128,4", help="B,T,C,H of the block")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    import neuron_explorer as ne
    from neuron_explorer.collectors.build.source_map import UserCode
    from neuron_explorer.collectors.capture.capture_tree import FileResolver, walk_tree
    from tests.gpu import gpt_block

    gpt_block.B, gpt_block.T, gpt_block.C, gpt_block.H = (int(x) for x in a.dims.split(","))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    block = gpt_block.Block()
    x = torch.randn(gpt_block.B, gpt_block.T, gpt_block.C)
    opt = torch.optim.AdamW(block.parameters(), lr=1e-4)

    def step() -> None:
        y = block(x)
        torch.nn.functional.mse_loss(y, x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def per_step(mode: str) -> float:
        """Seconds per step of ``--steps`` steps (the profiler's start and stop not counted)."""
        if mode == "none":
            t0 = time.perf_counter()
            for _ in range(a.steps):
                step()
            return (time.perf_counter() - t0) / a.steps
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with ne.profile(exact_lines=mode == "exact", on_error="raise"):
                step()  # (the first step under the mode warms its caches)
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    step()
                took = time.perf_counter() - t0
        return took / a.steps

    for _ in range(2):
        step()
    runs: dict[str, list[float]] = {"none": [], "plain": [], "exact": []}
    for _ in range(a.repeat):
        for mode in runs:
            runs[mode].append(per_step(mode))
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"GPT block B,T,C,H={a.dims} on the CPU (1 thread), {a.steps} steps x {a.repeat} runs, median per step")
    print(f"{'':34} {'ms/step':>9} {'x plain':>8} {'x none':>8}")
    for label, key in (("no profiler", "none"), ("profile()", "plain"), ("profile(exact_lines=True)", "exact")):
        print(f"{label:34} {1e3 * med[key]:9.2f} {med[key] / med['plain']:8.2f} {med[key] / med['none']:8.2f}")
    print(f"exact-lines mode / plain capture: {med['exact'] / med['plain']:.2f}x step time")

    # 2. the conversion's cost of placing operator syntax, on one capture
    with torch.profiler.profile(with_stack=True) as prof:
        for _ in range(a.steps):
            step()
    roots = prof.profiler.kineto_results.experimental_event_tree()
    best: dict[bool, float] = {}
    stats: dict[str, int] = {}
    for _ in range(5):
        for syntax in (False, True):
            t0 = time.perf_counter()
            tree = walk_tree(roots, FileResolver(UserCode.default()), syntax=syntax)
            best[syntax] = min(best.get(syntax, float("inf")), time.perf_counter() - t0)
            if syntax:
                stats = tree.operator_lines
    nodes = len(tree.op_corr) + len(tree.py_name) + len(tree.alloc_start)
    print(
        f"walk of {nodes:,} events: {1e3 * best[False]:.1f} ms without operator lines, {1e3 * best[True]:.1f} ms with "
        f"(+{1e3 * (best[True] - best[False]):.1f} ms, {best[True] / best[False]:.2f}x); "
        f"{stats.get('exact', 0)} of {stats.get('ops', 0)} operator ops placed, {stats.get('code_objects', 0)} code objects"
    )


if __name__ == "__main__":
    main()
