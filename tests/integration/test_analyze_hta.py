"""Parity with HolisticTraceAnalysis 0.5.0: on real GPU traces our temporal breakdown, idle-time
breakdown and kernel-type totals agree with HTA's within 0.5 percentage points.

HTA needs pandas < 3, so it runs in its own venv (bench/setup_peers.sh creates bench/.venv-hta;
HTA_PYTHON may point at another). Without it these tests skip; bench/analyze.py runs the same
comparison on the big fixtures.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.metrics import breakdown, idle, kernels

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "kineto" / "hta"


def hta_python() -> Path | None:
    for cand in (
        os.environ.get("HTA_PYTHON"),
        ROOT / "bench" / ".venv-hta" / "bin" / "python",
        "/tmp/hta-venv/bin/python",
    ):
        if cand and Path(cand).exists():
            return Path(cand)
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(hta_python() is None, reason="needs HTA 0.5.0 (bash bench/setup_peers.sh)"),
]


@pytest.mark.parametrize(
    "path",
    [
        DATA / "sampled_rank-0.json.gz",
        DATA / "alexnet_a100.json.gz",
        DATA / "df_index_resolver.json.gz",
    ],
    ids=["sampled_rank-0", "alexnet", "df_index_resolver"],
)
def test_breakdowns_match_hta_within_half_a_point(path):
    if not path.exists():
        pytest.skip(f"fixture not available: {path}")
    # given HTA's numbers for the file
    out = subprocess.run(
        [str(hta_python()), str(ROOT / "bench" / "_hta_analyze.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    hta = json.loads(out.stdout.strip().splitlines()[-1])
    # when we compute ours
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frames = TraceFrames(ne.load(path))
    events = breakdown.hta_device_events(frames)
    temporal = breakdown.temporal_breakdown(frames, events).iloc[0]
    idle_df = idle.idle_breakdown(frames, events)
    # then the temporal shares agree
    h = hta["temporal"][0]
    for name in ("idle", "compute", "non_compute"):
        assert temporal[f"{name}_pct"] == pytest.approx(h[f"{name}_time_pctg"], abs=0.5), name
    # and the idle split of every stream
    h_idle: dict[int, dict[str, float]] = {}
    for r in hta["idle"]:
        h_idle.setdefault(int(r["stream"]), {})[r["idle_category"]] = r["idle_time"]
    for r in idle_df.itertuples():
        total = sum(h_idle.get(int(r.stream), {}).values())
        if not total:
            continue
        for cat in ("host_wait", "kernel_wait", "other"):
            assert getattr(r, f"{cat}_pct") == pytest.approx(100 * h_idle[int(r.stream)].get(cat, 0) / total, abs=0.5)
    # and the kernel-type totals, overlaps counted once (HTA reports microseconds)
    ours = kernels.kernel_type_breakdown(events).set_index("kernel_type")["total_ns"] / 1000
    h_types = {k["kernel_type"]: k["sum"] for k in hta["kernel_types"]}
    h_total, o_total = sum(h_types.values()), ours.sum()
    for k in set(h_types) | set(ours.index):
        assert 100 * ours.get(k, 0) / o_total == pytest.approx(100 * h_types.get(k, 0) / h_total, abs=0.5), k
