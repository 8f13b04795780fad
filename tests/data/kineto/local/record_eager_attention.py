"""How tests/data/kineto/local/eager_attention_cpu.json.gz was recorded (torch 2.13.0, CPU,
OMP_NUM_THREADS=1, then gzip -9): attention written out by hand (matmul, softmax, matmul),
profiled with record_shapes and with_stack, the eager-attention pattern the perf rules look for."""
import torch
import torch.nn.functional as F

torch.manual_seed(0)
B, H, N, D = 2, 8, 256, 64


class EagerAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(H * D, 3 * H * D)
        self.out = torch.nn.Linear(H * D, H * D)

    def forward(self, x):
        q, k, v = self.qkv(x).view(B, N, 3, H, D).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) / D**0.5
        probs = F.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v)
        return self.out(ctx.transpose(1, 2).reshape(B, N, H * D))


model = EagerAttention().eval()
x = torch.randn(B, N, H * D)
with torch.no_grad():
    model(x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
        for _ in range(3):
            model(x)
prof.export_chrome_trace("eager_attention_cpu.json")
