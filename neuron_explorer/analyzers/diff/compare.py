"""Matching two sides item by item: per-step differences, confidence, new and gone items.

Every value is *per step*: an item's total over a side's kept steps divided by that side's
number of steps, so traces with different step counts compare. Ranking is by the absolute
per-step difference; the bootstrap confidence (``stats``) is computed for the ``TOP_K`` largest
changes of each table (the rest are too small to matter and keep NaN).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.diff.lines import ReadLines, line_keys
from neuron_explorer.analyzers.diff.sides import FAMILY_KEYS, Side
from neuron_explorer.analyzers.diff.stats import bootstrap_delta

TOP_K = 500
STAT_COLUMNS = [
    "base_count",
    "new_count",
    "base_ns",
    "new_ns",
    "delta_ns",
    "delta_pct",
    "status",
    "confidence",
    "ci_low_ns",
    "ci_high_ns",
]


def _dense(long: pd.DataFrame, rows: np.ndarray, n: int, m: int, value: str = "time_ns") -> np.ndarray:
    """(m, n) matrix of ``value`` per selected item (``rows``: item -> row or -1) and sample."""
    if not n:
        return np.zeros((m, 0))
    r = rows[long["item"].to_numpy()]
    ok = r >= 0
    flat = r[ok] * n + long["sample"].to_numpy()[ok]
    return np.bincount(flat, weights=long[value].to_numpy()[ok].astype(np.float64), minlength=m * n).reshape(m, n)


def compare_items(base: pd.DataFrame, new: pd.DataFrame, keys: list[str], nb: int, nn: int) -> pd.DataFrame:
    """Per item (``keys``) of either side: counts and times per step, their difference, status
    (new, gone, changed, same), and the bootstrap confidence of the largest changes."""
    allk = pd.concat([base[keys], new[keys]], ignore_index=True).drop_duplicates(ignore_index=True)
    m = len(allk)
    allk["item"] = np.arange(m)
    b = base.merge(allk, on=keys, how="left")
    n = new.merge(allk, on=keys, how="left")

    def total(df: pd.DataFrame, col: str) -> np.ndarray:
        return np.bincount(df["item"].to_numpy(), weights=df[col].to_numpy().astype(np.float64), minlength=m)

    bc, nc, bt, nt = total(b, "count"), total(n, "count"), total(b, "time_ns"), total(n, "time_ns")
    out = allk.drop(columns="item")
    out["base_count"] = bc / max(nb, 1)
    out["new_count"] = nc / max(nn, 1)
    out["base_ns"] = bt / max(nb, 1)
    out["new_ns"] = nt / max(nn, 1)
    out["delta_ns"] = out["new_ns"] - out["base_ns"]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["delta_pct"] = np.where(out["base_ns"] > 0, 100.0 * out["delta_ns"] / out["base_ns"], np.nan)
    same = (out["delta_ns"] == 0) & (out["base_count"] == out["new_count"])
    out["status"] = np.select([bc == 0, nc == 0, same], ["new", "gone", "same"], "changed")
    out["confidence"] = np.nan
    out["ci_low_ns"] = np.nan
    out["ci_high_ns"] = np.nan
    if m:
        sel = np.argsort(-np.abs(out["delta_ns"].to_numpy()), kind="stable")[:TOP_K]
        rows = np.full(m, -1)
        rows[sel] = np.arange(len(sel))
        conf, low, high = bootstrap_delta(_dense(b, rows, nb, len(sel)), _dense(n, rows, nn, len(sel)))
        out.loc[sel, "confidence"] = conf
        out.loc[sel, "ci_low_ns"] = low
        out.loc[sel, "ci_high_ns"] = high
    order = np.argsort(-np.abs(out["delta_ns"].to_numpy()), kind="stable")
    return out.iloc[order].reset_index(drop=True)


def compare_metrics(base: Side, new: Side) -> pd.DataFrame:
    """Step time and each attribution category, per step: base, new, difference, the difference
    as a % of the base *step time* (so categories add up and a near-empty one cannot swing by
    1000%), and its confidence."""
    names = ["step_ns", *[c for c in base.metrics.columns if c != "step_ns"]]
    names += [c for c in new.metrics.columns if c not in names]
    xb = base.metrics.reindex(columns=names, fill_value=0.0).to_numpy().T
    xn = new.metrics.reindex(columns=names, fill_value=0.0).to_numpy().T
    conf, low, high = bootstrap_delta(xb, xn)
    b_mean = xb.mean(axis=1) if xb.shape[1] else np.zeros(len(names))
    n_mean = xn.mean(axis=1) if xn.shape[1] else np.zeros(len(names))
    step = b_mean[0] or np.nan
    out = pd.DataFrame(
        {
            "metric": [c[: -len("_ns")] for c in names],
            "base_ns": b_mean,
            "new_ns": n_mean,
            "delta_ns": n_mean - b_mean,
        }
    )
    out["delta_pct"] = 100.0 * out["delta_ns"] / step
    out["own_pct"] = np.where(out["base_ns"] > 0, 100.0 * out["delta_ns"] / out["base_ns"].replace(0, np.nan), np.nan)
    out["confidence"] = conf
    out["ci_low_ns"] = low
    out["ci_high_ns"] = high
    return out


def _keyed_lines(base: pd.DataFrame, new: pd.DataFrame, read_lines: ReadLines | None) -> tuple[pd.DataFrame, ...]:
    """Both sides' line tables with their ``line_key`` (and file key, text) merged in."""
    kb, kn = line_keys(base, new, read_lines)
    on = ["src_file", "src_line"]
    b = base.merge(kb.drop(columns="src_func"), on=on, how="left")
    n = new.merge(kn.drop(columns="src_func"), on=on, how="left")
    return b, n, kb, kn


def compare_lines(base: Side, new: Side, read_lines: ReadLines | None) -> pd.DataFrame:
    """Per source line (matched across code versions, see ``lines``): host self + device time."""
    cols = ["label", "file", "line", "func", "text"]
    if not len(base.lines) and not len(new.lines):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in [*cols, *STAT_COLUMNS]})
    b, n, kb, kn = _keyed_lines(base.lines, new.lines, read_lines)
    out = compare_items(b, n, ["line_key"], base.num_samples, new.num_samples)
    # describe each line by its place in the new code (the base's for a line that is gone)
    desc = pd.concat([kn, kb], ignore_index=True).drop_duplicates("line_key")
    out = out.merge(desc, on="line_key", how="left")
    out = out.rename(columns={"file_key": "file", "src_line": "line", "src_func": "func"})
    return out[[*cols, *STAT_COLUMNS]]


def attach_lines(table: pd.DataFrame, family: str, base: Side, new: Side, read_lines: ReadLines | None) -> pd.DataFrame:
    """Add ``line``: for each item, the source line where its per-step time changed the most in
    the direction of its change (empty when the trace has no source attribution)."""
    keys = list(FAMILY_KEYS[family])
    lb, ln = base.item_lines.get(family), new.item_lines.get(family)
    table = table.assign(line="")
    if lb is None or ln is None or (not len(lb) and not len(ln)):
        return table
    b, n, _, _ = _keyed_lines(lb, ln, read_lines)
    b = b.assign(per_step=-b["time_ns"] / max(base.num_samples, 1))
    n = n.assign(per_step=n["time_ns"] / max(new.num_samples, 1))
    # new first: a line present on both sides is labelled as in the new code
    both = pd.concat([n, b], ignore_index=True)
    g = both.groupby([*keys, "line_key"], sort=False).agg(delta=("per_step", "sum"), label=("label", "first"))
    g = g.reset_index().merge(table[[*keys, "delta_ns"]], on=keys, how="inner")
    g["score"] = g["delta"] * np.sign(g["delta_ns"])
    best = g.sort_values("score", ascending=False, kind="stable").drop_duplicates(keys)
    best = best[best["score"] > 0]
    merged = table.drop(columns="line").merge(best[[*keys, "label"]], on=keys, how="left")
    merged["line"] = merged["label"].fillna("")
    return merged.drop(columns="label")
