"""Step statistics: per (rank, step) duration, warm-up and outlier flags, and their summary.

Outlier: a step more than 3 robust standard deviations (1.4826 x MAD) *and* more than 25% from
its rank's median step time (the 25% floor keeps near-constant runs from flagging noise).
Warm-up: the leading steps of a rank (at most two) that are over 1.5x the median of the later
steps, i.e. the first iterations paying for allocator growth, cuDNN autotuning or compilation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import WHOLE_TRACE_STEP, TraceFrames
from neuron_explorer.trace.warmup import WARMUP_FACTOR, WARMUP_MAX_STEPS

__all__ = ["WARMUP_FACTOR", "WARMUP_MAX_STEPS", "step_summary", "step_table"]

OUTLIER_MADS = 3.0
OUTLIER_MIN_REL = 0.25


def step_table(frames: TraceFrames) -> pd.DataFrame:
    """Per (rank, step): start_ns, end_ns, dur_ns, device_busy_ns, is_warmup, is_outlier,
    dev_from_median_pct (memoized per trace: the analysis and the one-time windows read it)."""
    memo = getattr(frames, "memo", None)  # (a plain namespace holding step_windows works too)
    return memo("step_table", lambda: _step_table(frames)) if memo else _step_table(frames)


def _step_table(frames: TraceFrames) -> pd.DataFrame:
    w = frames.step_windows
    cols = [
        "rank",
        "step",
        "start_ns",
        "end_ns",
        "dur_ns",
        "is_warmup",
        "is_outlier",
        "dev_from_median_pct",
        "event_id",
    ]
    if not len(w):
        types = {"is_warmup": "bool", "is_outlier": "bool", "dev_from_median_pct": "float64"}
        return pd.DataFrame({c: pd.Series(dtype=types.get(c, "int64")) for c in cols})
    df = w[["rank", "step", "start_ns", "end_ns", "dur_ns", "event_id"]].copy().reset_index(drop=True)
    df["position"] = df.groupby("rank").cumcount()
    real = df["step"] != WHOLE_TRACE_STEP
    # warm-up: leading steps well above the median of the steps after the warm-up window
    later = df[df["position"] >= WARMUP_MAX_STEPS].groupby("rank")["dur_ns"].median()
    later_med = df["rank"].map(later)
    cand = real & (df["position"] < WARMUP_MAX_STEPS) & later_med.notna() & (df["dur_ns"] > WARMUP_FACTOR * later_med)
    # only a prefix run of candidates is warm-up (step 1 cannot be warm-up if step 0 was not)
    df["is_warmup"] = cand.astype(int).groupby(df["rank"]).cummin().astype(bool)
    steady = df[~df["is_warmup"] & real]
    med = steady.groupby("rank")["dur_ns"].median()
    mad = steady.assign(_m=steady["rank"].map(med)).eval("abs(dur_ns - _m)").groupby(steady["rank"]).median()
    m = df["rank"].map(med)
    s = df["rank"].map(mad) * 1.4826
    diff = (df["dur_ns"] - m).abs()
    n_steady = df["rank"].map(steady.groupby("rank").size()).fillna(0)
    df["is_outlier"] = (
        (real & ~df["is_warmup"] & (n_steady >= 3) & (diff > OUTLIER_MADS * s) & (diff > OUTLIER_MIN_REL * m))
        .fillna(False)
        .astype(bool)
    )
    df["dev_from_median_pct"] = (100.0 * (df["dur_ns"] - m) / m).fillna(0.0)
    return df[cols]


def step_summary(steps: pd.DataFrame) -> dict[str, Any]:
    """Mean, p50, p95, min, max, std and coefficient of variation of the steady (non-warm-up) steps."""
    real = steps[steps["step"] != WHOLE_TRACE_STEP]
    steady = real[~real["is_warmup"]]
    d = steady["dur_ns"].to_numpy(np.float64)
    if not len(d):
        return {"num_steps": 0}
    return {
        "num_steps": int(real["step"].nunique()),
        "num_warmup": int(real["is_warmup"].sum()),
        "num_outliers": int(real["is_outlier"].sum()),
        "mean_ns": float(d.mean()),
        "p50_ns": float(np.percentile(d, 50)),
        "p95_ns": float(np.percentile(d, 95)),
        "min_ns": float(d.min()),
        "max_ns": float(d.max()),
        "std_ns": float(d.std()),
        "cv_pct": float(100.0 * d.std() / d.mean()) if d.mean() else 0.0,
        "warmup_ns": float(real.loc[real["is_warmup"], "dur_ns"].sum()),
    }
