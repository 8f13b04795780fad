"""A program whose first step does heavy one-time Python without torch work beneath it.

Like a large library's lazy imports: a freshly generated package of many modules is imported
(import machinery, module bodies calling small helpers), then a loop makes a few hundred
thousand calls of C builtins (``str.startswith``, ``isinstance``, ``dict.get``, ``len``); then
a few real training steps. Used by bench/record_overhead.py and tests/integration/test_prune.py.

    python bench/one_time_python.py [--modules N] [--calls N] [--steps N]
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

import torch

MODULE_BODY = """
TABLE = {{f"k{{i}}": i for i in range(40)}}


def helper(x):
    return x.startswith("k1") or isinstance(x, bytes)


NAMES = [k for k in TABLE if helper(k)]
VALUE = {index}
"""


def one_time_python(modules: int, calls: int) -> int:
    """Import a generated package of ``modules`` modules, then make ``calls`` builtin calls."""
    # under a "site-packages" folder: an installed library, not user code
    root = Path(tempfile.mkdtemp(prefix="one_time_python_")) / "site-packages"
    root.mkdir()
    pkg = root / "lazy_library"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(modules):
        (pkg / f"mod{i}.py").write_text(MODULE_BODY.format(index=i))
    sys.path.insert(0, str(root))
    total = 0
    for i in range(modules):
        total += importlib.import_module(f"lazy_library.mod{i}").VALUE
    names = [f"name_{i % 97}" for i in range(1000)]
    table = {n: i for i, n in enumerate(names)}
    hits = 0
    for i in range(calls // 4):
        n = names[i % 1000]
        if n.startswith("name_1"):
            hits += 1
        if isinstance(n, str):
            hits += table.get(n, 0) & 1
        hits += len(n) & 1
    return total + hits


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modules", type=int, default=300)
    ap.add_argument("--calls", type=int, default=400_000)
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randn(32, 8)
    for step in range(a.steps):
        if step == 0:
            one_time_python(a.modules, a.calls)
        loss = torch.nn.functional.mse_loss(model(x), y)  # TRAIN_LINE
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    main()
