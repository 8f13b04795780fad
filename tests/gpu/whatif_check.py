"""GPU check of `whatif --nonblocking-copies` and of the replay-priced copy finding (issue 31).

    python tests/gpu/whatif_check.py OUT_DIR

Records (plain torch.profiler) steps that alternate: (A) four 4096^3 matmuls launched, a small
device-to-host copy into *pageable* memory (``x.cpu()``: the host blocks until the matmuls and
the copy are done), then ~5 ms of host work (CPU matmuls), then a synchronize; (B) the same
with the copy into *pinned* memory with ``non_blocking=True`` (the host does not wait). The
copy is 4 KiB, so pinned against pageable transfer speed does not matter; what (B) saves is the
host's wait. Prints PASS/FAIL lines and figures:

- the baseline replay reproduces the steps within 2%;
- ``whatif --nonblocking-copies`` on the (A) steps predicts the measured saving, median (A)
  minus median (B) read from the trace's step spans, within 15%;
- ``analyze``: ``sync_memcpy`` is priced by replay (``cost_method`` replay) and its cost per (A)
  step is within 15% of the same measured saving.
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

STEPS = 30


def record(path: Path) -> None:
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    small = torch.randn(1024, device="cuda")
    pinned = torch.empty(1024, pin_memory=True)
    h = torch.randn(384, 384)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], schedule=schedule(wait=1, warmup=2, active=STEPS)
    ) as prof:
        for i in range(STEPS + 3):
            for _ in range(4):
                torch.mm(a, b)
            y = small * 2.0
            if i % 2 == 0:
                y.cpu()  # pageable: the host waits for the queue and the copy
            else:
                pinned.copy_(y, non_blocking=True)  # pinned, asynchronous: no wait
            for _ in range(12):  # ~5 ms of host work the blocking copy delays
                torch.mm(h, h)
            torch.cuda.synchronize()
            prof.step()
    raw = path.with_suffix("")
    prof.export_chrome_trace(str(raw))
    with open(raw, "rb") as src, gzip.open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    raw.unlink()


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    trace = out / "whatif_copies.json.gz"
    record(trace)
    with gzip.open(trace) as fh:
        events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    pageable = [
        e["ts"]
        for e in events
        if e.get("cat") == "gpu_memcpy" and "Pageable" in str(e.get("args", {}).get("kind", e["name"]))
    ]
    pageable_step = {int(s["name"].split("#")[1]) for s in steps for t in pageable if s["ts"] <= t < s["ts"] + s["dur"]}
    dur = {int(s["name"].split("#")[1]): s["dur"] * 1000.0 for s in steps}
    blocking = [dur[k] for k in dur if k in pageable_step]
    free = [dur[k] for k in dur if k not in pageable_step]
    measured = statistics.median(blocking) - statistics.median(free)
    print(
        f"steps: {len(blocking)} blocking (median {statistics.median(blocking) / 1e6:.3f} ms), "
        f"{len(free)} non-blocking (median {statistics.median(free) / 1e6:.3f} ms); measured saving {measured / 1e6:.3f} ms"
    )
    ne = [sys.executable, "-m", "neuron_explorer"]
    r = json.loads(
        subprocess.run(
            [*ne, "whatif", str(trace), "--nonblocking-copies", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    ok_base = r["max_step_baseline_error_pct"] <= 2.0
    print(f"{'PASS' if ok_base else 'FAIL'} baseline replay: max step error {r['max_step_baseline_error_pct']:.3f}%")
    predicted = statistics.median(s["saving_ns"] for s in r["steps"] if s["step"] in pageable_step)
    err = 100.0 * (predicted - measured) / measured if measured else float("inf")
    ok_pred = abs(err) <= 15.0
    print(
        f"{'PASS' if ok_pred else 'FAIL'} whatif --nonblocking-copies: predicted {predicted / 1e6:.3f} ms per blocking "
        f"step against {measured / 1e6:.3f} ms measured ({err:+.1f}%)"
    )
    a = json.loads(
        subprocess.run(
            [*ne, "analyze", str(trace), "--format", "json"], capture_output=True, text=True, check=True
        ).stdout
    )
    f = next((f for f in a["findings"] if f["rule_id"] == "sync_memcpy"), None)
    ok_find = False
    if f is not None and f.get("cost_method") == "replay" and pageable_step:
        per_step = f["cost_ns"] / len(pageable_step & {s["step"] for s in r["steps"]})
        ferr = 100.0 * (per_step - measured) / measured if measured else float("inf")
        ok_find = abs(ferr) <= 15.0
        print(
            f"{'PASS' if ok_find else 'FAIL'} sync_memcpy priced by replay: {per_step / 1e6:.3f} ms per blocking step "
            f"({ferr:+.1f}% against measured); all fixes together {a['fixes'].get('all_fixes_ns', 0) / 1e6:.3f} ms"
        )
    else:
        print(f"FAIL sync_memcpy priced by replay: {'no finding' if f is None else f.get('cost_method')}")
    return 0 if ok_base and ok_pred and ok_find else 1


if __name__ == "__main__":
    sys.exit(main())
