"""Record real CUDA traces with plain torch.profiler (no neuron_explorer code), for tests/data.

    python tests/gpu/capture_fixtures.py OUT_DIR

Writes, each a Kineto JSON (gzip) as ``export_chrome_trace`` writes it:
- ``cuda_graph.json.gz``: the block of tests/gpu/gpt_block.py captured into a CUDA graph and
  replayed 3 times, capture and replays inside the profiled window (with_stack, record_shapes);
- ``compiled_train.json.gz``: 3 training steps of the block under torch.compile, compiled
  before the window, with Inductor's provenance tracking on; beside it
  ``compiled_provenance.json`` (the kernel -> FX node and kernel -> stack trace maps Inductor
  keeps in process) and ``compiled_code/`` (the generated modules the trace's kernels name);
- ``whatif_mm.json.gz``: a step of 4 large ``torch.mm`` calls, the next of 2, alternating,
  each step ending in a read back (the what-if check of issue 31 on a real GPU).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("INDUCTOR_PROVENANCE", "1")

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpt_block

ACTS = [ProfilerActivity.CPU, ProfilerActivity.CUDA]


def _export(prof, path: Path) -> None:
    raw = path.with_suffix("")  # x.json
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()
    print(f"wrote {path} ({path.stat().st_size} bytes)", flush=True)


def cuda_graph(out: Path) -> None:
    torch.manual_seed(0)
    block = gpt_block.Block().cuda().eval()
    x = torch.randn(gpt_block.B, gpt_block.T, gpt_block.C, device="cuda")
    static_x = x.clone()
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                block(static_x)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        with profile(activities=ACTS, record_shapes=True, with_stack=True) as prof:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_y = block(static_x)
            for _ in range(3):
                static_x.copy_(x)
                graph.replay()
                float(static_y[0, 0, 0])
            block(static_x)  # one eager forward beside the replays: the same kernels, launched one by one
            torch.cuda.synchronize()
    _export(prof, out / "cuda_graph.json.gz")


def compiled(out: Path) -> None:
    import torch._inductor.config as inductor_config

    inductor_config.trace.provenance_tracking_level = 1
    torch.manual_seed(0)
    block = gpt_block.Block().cuda()
    model = torch.compile(block)
    opt = torch.optim.AdamW(block.parameters(), lr=1e-4)
    x = torch.randn(gpt_block.B, gpt_block.T, gpt_block.C, device="cuda")
    target = torch.randn_like(x)

    def step() -> None:
        y = model(x)
        loss = F.mse_loss(y, target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    t0 = time.perf_counter()
    for _ in range(2):
        step()
    torch.cuda.synchronize()
    print(f"compile + 2 steps {time.perf_counter() - t0:.1f} s", flush=True)
    import torch._inductor.debug as idebug

    prov = {
        "torch": torch.__version__,
        "kernel_stack_traces": dict(getattr(idebug, "_inductor_kernel_stack_trace", {})),
    }
    try:
        prov["node_mappings"] = idebug.dump_inductor_provenance_info()
    except Exception as exc:  # record what failed; the trace is still worth having
        prov["node_mappings_error"] = repr(exc)
    (out / "compiled_provenance.json").write_text(json.dumps(prov, indent=1, default=str))
    with profile(
        activities=ACTS, record_shapes=True, with_stack=True, schedule=schedule(wait=0, warmup=1, active=3, repeat=1)
    ) as prof:
        for _ in range(4):
            step()
            prof.step()
        torch.cuda.synchronize()
    _export(prof, out / "compiled_train.json.gz")
    # the generated modules the trace names (kernel_file args), for provenance from the code itself
    with gzip.open(out / "compiled_train.json.gz", "rt") as f:
        events = json.load(f).get("traceEvents", [])
    files = sorted({e["args"]["kernel_file"] for e in events if e.get("args", {}).get("kernel_file")})
    code = out / "compiled_code"
    code.mkdir(exist_ok=True)
    for f in files:
        if os.path.isfile(f):
            shutil.copy(f, code / Path(f).name)
    print(f"kernel files named in the trace: {len(files)}", flush=True)


def whatif_mm(out: Path) -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", generator=g)
    b = torch.randn(4096, 4096, device="cuda", generator=g)
    c = torch.randn(1024, 1024, device="cuda", generator=g)
    steps = 40
    with profile(
        activities=ACTS, schedule=schedule(wait=1, warmup=1, active=steps, repeat=1), record_shapes=True
    ) as prof:
        for i in range(steps + 2):
            every = 1 if i % 2 == 0 else 2
            for k in range(4):
                if k % every == 0:
                    torch.mm(a, b)
                z = torch.relu(torch.addmm(c, c, c))
            float(z.sum())
            prof.step()
    _export(prof, out / "whatif_mm.json.gz")


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    which = sys.argv[2:] or ["cuda_graph", "whatif_mm", "compiled"]
    for name in which:
        t0 = time.perf_counter()
        try:
            globals()[name](target)
        except Exception as exc:
            import traceback

            traceback.print_exc()
            print(f"FAILED {name}: {exc!r}", flush=True)
        print(f"{name}: {time.perf_counter() - t0:.1f} s", flush=True)
