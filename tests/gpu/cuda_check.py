"""Prepared CUDA check for neuron_explorer.profile() (run on a machine with an NVIDIA GPU).

    python tests/gpu/cuda_check.py [OUT_DIR]

Captures a small CUDA training loop and checks that kernels are present, linked to their
launching runtime call and op, and attributed to the user's forward lines; prints overhead
figures. Exits non-zero on the first failed check.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import neuron_explorer as ne


def train(model, opt, x, y, steps, prof=None):
    for _ in range(steps):
        logits = model(x)  # FORWARD LINE
        loss = F.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if prof is not None:
            prof.step()
    torch.cuda.synchronize()


def main() -> int:
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 0
    out = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())
    forward_line = next(
        i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if "# FORWARD LINE" in line
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 10)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(256, 1024, device="cuda"), torch.randint(0, 10, (256,), device="cuda")
    train(model, opt, x, y, 5)
    t0 = time.perf_counter()
    train(model, opt, x, y, 20)
    plain = (time.perf_counter() - t0) / 20
    sched = torch.profiler.schedule(wait=1, warmup=1, active=10, repeat=1)
    with torch.profiler.profile(schedule=sched, record_shapes=True, with_stack=True) as tp:
        t0 = time.perf_counter()
        train(model, opt, x, y, 12, tp)
        torch_step = (time.perf_counter() - t0) / 12
    t0 = time.perf_counter()
    tp.export_chrome_trace(str(out / "torch.json"))
    export_s = time.perf_counter() - t0
    with ne.profile(schedule=sched, output=out / "cuda.parquet") as prof:
        t0 = time.perf_counter()
        train(model, opt, x, y, 12, prof)
        ne_step = (time.perf_counter() - t0) / 12
        t_exit = time.perf_counter()
    exit_s = time.perf_counter() - t_exit
    if prof.path is None:
        print(f"FAIL capture: {prof.errors}")
        return 1
    trace = ne.load(prof.path)
    if trace.metadata.get("capture_fallback"):
        print(f"NOTE capture went through torch's JSON export: {trace.metadata['capture_fallback']}")
    df = trace.to_pandas()
    kernels = df[df["kind"] == "kernel"]
    checks = {
        "kernels present": len(kernels) > 0,
        "device_type cuda": set(kernels["device_type"].astype(str)) == {"cuda"},
        "kernels linked to launches": kernels["launch_id"].notna().mean() >= 0.95,
        "kernels linked to ops": kernels["op_id"].notna().mean() >= 0.95,
        "kernels attributed to a line": kernels["src_line"].notna().mean() >= 0.95,
        "forward kernels on the forward line": (kernels["src_line"] == forward_line).any(),
        "backward kernels inherit the forward line": (
            (kernels["src_line"] == forward_line) & kernels["op_id"].isin(df[df["fwd_id"].notna()]["event_id"])
        ).any(),
    }
    print(f"events {trace.num_events}, kernels {len(kernels)}, file {prof.path}")
    print(
        f"step: plain {plain * 1e3:.2f} ms, torch.profiler {torch_step * 1e3:.2f} ms, "
        f"neuron_explorer {ne_step * 1e3:.2f} ms (ratio to torch {ne_step / torch_step:.3f})"
    )
    print(
        f"torch export_chrome_trace {export_s:.3f} s; neuron_explorer conversion at exit {exit_s:.3f} s; "
        f"timings {prof.timings}"
    )
    failed = [name for name, ok in checks.items() if not ok]
    for name, ok in checks.items():
        print(("PASS " if ok else "FAIL ") + name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
