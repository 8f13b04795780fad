"""Runs tests/gpu/cuda_check.py where an NVIDIA GPU is present; skipped (with the reason) elsewhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU checks skipped: no CUDA device"),
]


def test_cuda_kernels_are_captured_linked_and_attributed(tmp_path):
    script = Path(__file__).with_name("cuda_check.py")
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=600)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
