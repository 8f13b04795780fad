"""Synthetic multi-rank run: N ranks of a DDP-like training step, one Kineto JSON per rank.

Each step: a forward pass of compute kernels, then a backward pass in gradient buckets; after
each bucket the rank launches the bucket's NCCL all-reduce on its communication stream. An
all-reduce kernel starts when its rank arrives (its bucket's gradients are done and the previous
all-reduce finished) and ends, on every rank, a transfer time after the *last* rank arrived:
the ranks wait for each other exactly as NCCL makes them. The optimizer waits for the last
all-reduce. The next step starts when the slowest rank finished this one.

``slow_rank``: that rank runs extra compute kernels (op ``aten::_planted_extra``, launched
from ``model.py(77): planted_extra_work``) before its first gradient all-reduce, ``slow_ms``
in all per step: the others wait that long for it. Without it every rank does the same work
(small seeded jitter). ``slow_link_bucket``: that bucket's all-reduce runs at ``slow_link_gbps``
bus bandwidth instead of ``link_gbps`` (a planted slow link: every rank waits on the transfer). Every op runs under a ``python_function`` frame, so kernels carry source
lines; each file's ``distributedInfo`` holds its rank.

    .venv/bin/python bench/synth_ranks.py -n 8 -o /tmp/run8 --slow-rank 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path
from typing import Any

PLANTED_FILE, PLANTED_LINE, PLANTED_FUNC = "model.py", 77, "planted_extra_work"
PLANTED_OP = "aten::_planted_extra"
BASE_TIME_NS = 1_733_140_800_000_000_000
COMPUTE_STREAM, NCCL_STREAM = 7, 20
US = 1000


class _Rank:
    """One rank's event list, host and device cursors (ns since the run's base time)."""

    def __init__(self, rank: int, rng: random.Random) -> None:
        self.rank, self.rng = rank, rng
        self.events: list[dict[str, Any]] = []
        self.host = self.compute = self.nccl = 0
        self.ext = self.corr = self.py_id = rank * 10_000_000

    def x(
        self, cat: str, name: str, tid: int, start: int, dur: int, args: dict[str, Any], pid: int | None = None
    ) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": self.rank if pid is None else pid,
                            "tid": tid, "ts": start / US, "dur": dur / US, "args": args})  # fmt: skip

    def python(self, frame: str, start: int, end: int) -> None:
        self.py_id += 1
        self.x("python_function", frame, 1, start, end - start, {"Python id": self.py_id, "Python parent id": None})

    def op(self, name: str, kernel: str, dur_ns: int, stream: int = COMPUTE_STREAM, kargs: dict[str, Any] | None = None,
           oargs: dict[str, Any] | None = None, not_before: int = 0) -> tuple[int, int]:  # fmt: skip
        """A cpu_op at the host cursor launching one kernel; returns the kernel's (start, end)."""
        self.ext += 1
        self.corr += 1
        op_start = self.host
        launch = op_start + 2 * US
        launch_end = launch + 5 * US
        self.host = launch_end + 2 * US
        self.x("cpu_op", name, 1, op_start, self.host - op_start, {"External id": self.ext, **(oargs or {})})
        self.x("cuda_runtime", "cudaLaunchKernel", 1, launch, launch_end - launch,
               {"External id": self.ext, "correlation": self.corr, "cbid": 211})  # fmt: skip
        cursor = self.compute if stream == COMPUTE_STREAM else self.nccl
        start = max(cursor, launch_end + 3 * US, not_before)
        end = start + dur_ns
        if stream == COMPUTE_STREAM:
            self.compute = end
        self.x("kernel", kernel, stream, start, dur_ns, {"External id": self.ext, "correlation": self.corr,
               "device": self.rank % 8, "stream": stream, **(kargs or {})}, pid=self.rank % 8)  # fmt: skip
        return start, end

    def compute_block(self, frame: str, op: str, kernel: str, count: int, dur_ns: int) -> None:
        start = self.host
        for _ in range(count):
            self.op(op, kernel, int(dur_ns * self.rng.uniform(0.98, 1.02)))
        self.python(frame, start, self.host)


def generate(n_ranks: int, steps: int = 3, buckets: int = 4, slow_rank: int | None = None, slow_ms: float = 20.0,
             seed: int = 0, bucket_mb: float = 25.0, link_gbps: float = 100.0, layers: int = 1,
             slow_link_bucket: int | None = None, slow_link_gbps: float = 10.0) -> list[dict[str, Any]]:  # fmt: skip
    """The Kineto trace (a JSON-able dict) of every rank, in rank order. ``layers`` multiplies the
    kernels of the forward and backward passes (and divides their duration: same step time)."""
    ranks = [_Rank(r, random.Random(seed * 1_000_003 + r)) for r in range(n_ranks)]
    nelems = int(bucket_mb * (1 << 20) / 4)

    def xfer_ns(gbps: float) -> int:  # NCCL's ring all-reduce moves 2(n-1)/n x the bytes over the bus
        return int(2 * (n_ranks - 1) / n_ranks * nelems * 4 / gbps)  # bytes / (GB/s) = ns

    t = 1_000 * US
    for step in range(steps):
        for rk in ranks:
            rk.host = rk.compute = rk.nccl = t
        for rk in ranks:
            rk.compute_block("model.py(40): forward", "aten::mm", "gemm_fwd_kernel", 12 * layers, 1_500 * US // layers)
        arrivals: list[list[tuple[int, _Rank]]] = []
        for b in range(buckets):
            for rk in ranks:
                rk.compute_block(
                    "model.py(60): backward", "aten::mm", "gemm_bwd_kernel", 6 * layers, 1_200 * US // layers
                )
                if b == 0 and rk.rank == slow_rank:
                    n_extra = 8
                    rk.compute_block(f"{PLANTED_FILE}({PLANTED_LINE}): {PLANTED_FUNC}", PLANTED_OP,
                                     "planted_extra_kernel", n_extra, int(slow_ms * 1e6 / n_extra))  # fmt: skip
            # each rank arrives when its bucket is done and its previous all-reduce finished
            arrivals.append([(max(rk.compute, rk.nccl, rk.host + 10 * US), rk) for rk in ranks])
            gbps = slow_link_gbps if b == slow_link_bucket else link_gbps
            end = max(a for a, _ in arrivals[-1]) + xfer_ns(gbps)
            meta = {"Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems,
                    "Group size": n_ranks, "dtype": "Float", "Process Group Name": "0"}  # fmt: skip
            for arrive, rk in arrivals[-1]:
                start = rk.host
                rk.op("record_param_comms", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                      end - arrive, NCCL_STREAM, kargs=meta, oargs=meta, not_before=arrive)  # fmt: skip
                rk.nccl = end
                rk.python("torch/nn/parallel/distributed.py(1200): _all_reduce_bucket", start, rk.host)
        step_end = 0
        for rk in ranks:
            rk.compute = max(rk.compute, rk.nccl)
            rk.compute_block("train.py(90): optimizer_step", "aten::_fused_adamw_", "adamw_kernel", 1, 2_000 * US)
            sync_start = rk.host
            rk.host = max(rk.host, rk.compute) + 20 * US
            rk.x("cuda_runtime", "cudaDeviceSynchronize", 1, sync_start, rk.host - sync_start, {"cbid": 165})
            step_end = max(step_end, rk.host)
        for rk in ranks:
            rk.x("user_annotation", f"ProfilerStep#{step}", 1, t, step_end - t, {})
        t = step_end + 50 * US
    out = []
    for rk in ranks:
        rk.events.sort(key=lambda e: e["ts"])
        out.append({
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": rk.rank, "world_size": n_ranks},
            "baseTimeNanoseconds": BASE_TIME_NS,
            "traceEvents": rk.events,
        })  # fmt: skip
    return out


def write_run(out_dir: str | Path, n_ranks: int, **kwargs: Any) -> list[Path]:
    """Write ``rank_<r>.json.gz`` per rank into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for r, trace in enumerate(generate(n_ranks, **kwargs)):
        p = out / f"rank_{r}.json.gz"
        with gzip.open(p, "wt", compresslevel=1) as fh:
            json.dump(trace, fh)
        paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--ranks", type=int, default=8)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--slow-rank", type=int, default=None)
    ap.add_argument("--slow-ms", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=1, help="multiply the kernels per pass (events per rank)")
    ap.add_argument("--slow-link-bucket", type=int, default=None, help="this bucket's all-reduce runs on a slow link")
    a = ap.parse_args(argv)
    paths = write_run(
        a.output,
        a.ranks,
        steps=a.steps,
        slow_rank=a.slow_rank,
        slow_ms=a.slow_ms,
        seed=a.seed,
        layers=a.layers,
        slow_link_bucket=a.slow_link_bucket,
    )
    print(f"wrote {len(paths)} ranks to {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
