"""How sure a change is: a bootstrap over steps of the difference of per-step means.

Each side's steps are resampled with replacement (``REPLICATES`` times, one fixed seed, so a
diff is reproducible), the same resamples for every item, as one matrix product: items x steps
times steps x replicates. The *confidence* of a change is the share of replicates whose
difference has the observed sign (ties count half); the interval is the 2.5th-97.5th
percentile of the replicated differences. With fewer than ``MIN_STEPS`` steps on a side
there is no spread to resample: confidence and interval are NaN ("not enough steps").
"""

from __future__ import annotations

import numpy as np

MIN_STEPS = 3
REPLICATES = 2000
SEED = 0


def resample_weights(n: int, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """(n, replicates) weights: each column is one bootstrap resample of n steps, as the count of
    times each step was drawn divided by n (so ``x @ w`` is the resampled mean)."""
    return rng.multinomial(n, np.full(n, 1.0 / n), size=replicates).T / n


def bootstrap_delta(
    base: np.ndarray, new: np.ndarray, replicates: int = REPLICATES, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row (item), from per-step values ``base`` (items x nb) and ``new`` (items x nn):
    the confidence that the difference of means has its observed sign, and the 95% interval
    (low, high) of that difference. All NaN when a side has fewer than ``MIN_STEPS`` steps."""
    items = base.shape[0]
    nan = np.full(items, np.nan)
    if base.shape[1] < MIN_STEPS or new.shape[1] < MIN_STEPS or not items:
        return nan, nan.copy(), nan.copy()
    rng = np.random.default_rng(seed)
    wb = resample_weights(base.shape[1], replicates, rng)
    wn = resample_weights(new.shape[1], replicates, rng)
    d = new.astype(np.float64) @ wn - base.astype(np.float64) @ wb
    observed = new.mean(axis=1) - base.mean(axis=1)
    # Relative tolerance: resampled means of identical values differ by float rounding only.
    tol = 1e-9 * np.maximum(np.abs(new).max(axis=1, initial=0.0), np.abs(base).max(axis=1, initial=0.0))
    up = (d > tol[:, None]).mean(axis=1) + 0.5 * (np.abs(d) <= tol[:, None]).mean(axis=1)
    confidence = np.where(observed > tol, up, np.where(observed < -tol, 1.0 - up, 0.0))
    low, high = np.percentile(d, [2.5, 97.5], axis=1)
    return confidence, low, high
