"""How tests/data/kineto/local/compile_warmup_cpu.json.gz was recorded (torch 2.13.0, CPU,
OMP_NUM_THREADS=1, a fresh TORCHINDUCTOR_CACHE_DIR, then gzip -9): a training loop whose first
profiled step compiles the model with torch.compile (Dynamo, AOTAutograd, Inductor's C++ codegen
and its compiler runs) and whose five later steps run the compiled code."""

import sys

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
opt = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
compiled = torch.compile(model)
x = torch.randn(64, 256)
schedule = torch.profiler.schedule(wait=0, warmup=0, active=6, repeat=1)
with torch.profiler.profile(
    activities=[torch.profiler.ProfilerActivity.CPU],
    schedule=schedule,
    record_shapes=True,
    on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1]),
) as prof:
    for _ in range(6):
        loss = compiled(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        prof.step()
