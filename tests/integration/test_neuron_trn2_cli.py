"""The CLI on the real trn2 exports (issue 42): diff and its kernel gate as a user runs them."""

from __future__ import annotations

import gzip
import json

from tests.conftest import TRN2, run_cli

BASE = TRN2 / "baseline_bf16_s1024.json.gz"
FUSED = TRN2 / "fused_bf16_s1024.json.gz"


def _layer_ns(path) -> int:  # type: ignore[no-untyped-def]
    with gzip.open(path, "rt") as f:
        rows = json.load(f)["layer_summary"]
    (row,) = [r for r in rows if r["name"] == "/sg00/Unknown"]
    return int(row["end"]) - int(row["start"])


def _slower(stdout: str) -> str:
    """The 'What got slower' block of diff's text output."""
    if "What got slower:" not in stdout:
        return ""
    return stdout.split("What got slower:", 1)[1].split("\n\n", 1)[0]


def test_a_faster_kernel_is_not_slower_and_passes_the_kernel_gate() -> None:
    base, fused = _layer_ns(BASE), _layer_ns(FUSED)
    assert fused < 0.7 * base  # 87.7 -> 51.3 us in AWS's own layer rows
    r = run_cli("diff", str(BASE), str(FUSED), "--metric", "kernel", "--fail-on-regression", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Kernel window" not in _slower(r.stdout)
    pct = 100 * (fused - base) / base
    assert f"{pct:+.1f}% of the base kernel window" in r.stdout
    assert "The kernel did not get slower" in r.stdout


def test_a_slower_kernel_fails_the_kernel_gate_and_leads_the_answer() -> None:
    base, fused = _layer_ns(FUSED), _layer_ns(BASE)
    r = run_cli("diff", str(FUSED), str(BASE), "--metric", "kernel", "--fail-on-regression", "5")
    assert r.returncode == 1, r.stdout + r.stderr
    pct = 100 * (fused - base) / base
    assert _slower(r.stdout).strip().startswith("Kernel window")
    assert f"kernel: {pct:+.1f}% of the base kernel window" in r.stderr
