"""A tiny block under torch.compile, profiled with torch.profiler while TORCH_TRACE keeps
Inductor's provenance (the fixture of docs/capture.md, "Compiled regions"; tests/data/README.md).

    TORCH_TRACE=DIR INDUCTOR_PROVENANCE=1 python tiny_compiled.py OUT.json
"""

import sys

import torch
import torch._inductor.config
import torch.nn.functional as F

torch._inductor.config.cpp.enable_kernel_profile = True  # Inductor's C++ kernels as profiler ops


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 32)
        self.out = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.fc(x))  # LINE:hidden
        y = self.out(h) * 0.5  # LINE:scaled
        return x + y.relu()  # LINE:residual


torch.manual_seed(0)
model = torch.compile(Tiny())
x = torch.randn(8, 16, requires_grad=True)
for _ in range(2):  # compiled (forward, then the backward lazily) before the profile
    model(x).sum().backward()
with torch.profiler.profile(with_stack=True, record_shapes=True) as prof:
    for _ in range(3):
        model(x).sum().backward()
prof.export_chrome_trace(sys.argv[1])
