"""The culprit of a collective: the last rank to arrive, and the work that made it late.

``wait_by_rank``: per rank, how often it arrived last at a collective instance matched across two
or more ranks (``analyzers/ranks/__init__.py``) and the wait it caused there (the sum, over the other
ranks, of last arrival - their arrival).

``late_work``: for one rank and the instances where it arrived last, what it did in its window
before each arrival (``[window_start_ns, arrival_ns)``: since its previous collective of the
group, or its step's start) against the median of the other ranks in the same instance's windows:
device ``compute`` (kernels), ``copy`` (memcpy/memset) and ``other`` (the rest of the window: the
device idle while the host works or waits). ``late_lines``: the source lines (and ops) whose
device time in the culprit's windows exceeds the other ranks' median the most: the cause to fix.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.intervals import clip_to_windows
from neuron_explorer.trace.schema import Kind

LATE_CATEGORIES = ("compute", "copy", "other")


def matched(arrivals: pd.DataFrame) -> pd.DataFrame:
    """The arrivals of instances seen on two or more ranks, with ``instance`` (an id) and ``last``."""
    key = ["pg", "step", "seq"]
    a = arrivals.copy()
    a["instance"] = a.groupby(key, sort=False).ngroup()
    a = a[a.groupby("instance")["rank"].transform("nunique") >= 2]
    a["last"] = a["wait_ns"] == 0
    # ties at the last arrival: the lowest rank is named, so each instance has one last rank
    first_last = a[a["last"]].sort_values(["instance", "rank"]).drop_duplicates("instance")
    a["last"] = a.index.isin(first_last.index)
    return a


def wait_by_rank(arrivals: pd.DataFrame) -> pd.DataFrame:
    """Per rank: instances it took part in, times it arrived last, wait it caused (ns)."""
    a = matched(arrivals)
    if not len(a):
        return pd.DataFrame(
            {c: pd.Series(dtype="int64") for c in ("rank", "instances", "times_last", "caused_wait_ns")}
        )
    caused = a.groupby("instance")["wait_ns"].sum()
    last = a[a["last"]]
    out = pd.DataFrame({"instances": a.groupby("rank")["instance"].nunique()})
    out["times_last"] = last.groupby("rank").size().reindex(out.index, fill_value=0)
    out["caused_wait_ns"] = (
        pd.Series(caused.reindex(last["instance"]).to_numpy(), index=last["rank"].to_numpy())
        .groupby(level=0)
        .sum()
        .reindex(out.index, fill_value=0)
    )
    return out.reset_index().sort_values(["caused_wait_ns", "rank"], ascending=[False, True]).reset_index(drop=True)


def rank_summary(rank_steps: pd.DataFrame, waits: pd.DataFrame) -> pd.DataFrame:
    """Per rank: steps, mean step wall time, compute + copies and exposed communication per
    step, how far its compute + copies is from the median rank's (%), and from ``waits``
    (``wait_by_rank``) the collectives it joined, the times it arrived last and the wait that
    caused; the busiest rank first. Empty for fewer than two ranks."""
    if not len(rank_steps) or rank_steps["rank"].nunique() < 2:
        return pd.DataFrame()
    out = rank_steps.groupby("rank").agg(
        steps=("step", "nunique"),
        wall_ns=("wall_ns", "mean"),
        busy_ns=("busy_ns", "mean"),
        communication_ns=("communication_ns", "mean"),
    )
    med = float(out["busy_ns"].median())
    out["busy_vs_median_pct"] = 100.0 * (out["busy_ns"] - med) / med if med else np.nan
    out = out.join(waits.set_index("rank")[["instances", "times_last", "caused_wait_ns"]], how="left")
    out[["instances", "times_last", "caused_wait_ns"]] = (
        out[["instances", "times_last", "caused_wait_ns"]].fillna(0).astype("int64")
    )
    return out.reset_index().sort_values(["busy_ns", "rank"], ascending=[False, True], kind="stable")


def _window_work(frames: TraceFrames, windows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Device work inside each window: per window compute/copy ns, and the clipped kernels
    (window row, device row, ns). Windows of one (rank, pg) never overlap; pgs are clipped apart."""
    dev = frames.device
    dev = dev[(dev["kind"] != Kind.COLLECTIVE).to_numpy()]
    rank, start = dev["rank"].to_numpy(), dev["start_ns"].to_numpy()
    end = start + dev["dur_ns"].to_numpy()
    is_copy = dev["kind"].isin([Kind.MEMCPY, Kind.MEMSET]).to_numpy()
    pieces = []
    for _, w in windows.groupby("pg", sort=False):
        rows, wins, ps, pe = clip_to_windows(
            rank, start, end, w["rank"].to_numpy(), w["window_start_ns"].to_numpy(), w["arrival_ns"].to_numpy()
        )
        pieces.append(pd.DataFrame({"window": w.index.to_numpy()[wins], "row": rows, "ns": pe - ps}))
    clipped = pd.concat(pieces, ignore_index=True) if pieces else pd.DataFrame(columns=["window", "row", "ns"])
    clipped["copy"] = is_copy[clipped["row"].to_numpy().astype(np.int64)]
    # kernels on several streams overlap: a window's compute is at most the window itself
    sums = clipped.groupby(["window", "copy"])["ns"].sum().unstack(fill_value=0)
    span = (windows["arrival_ns"] - windows["window_start_ns"]).astype("int64")
    work = pd.DataFrame(index=windows.index)
    work["compute"] = sums.get(False, pd.Series(dtype="int64")).reindex(windows.index, fill_value=0).clip(upper=span)
    work["copy"] = sums.get(True, pd.Series(dtype="int64")).reindex(windows.index, fill_value=0)
    work["copy"] = work["copy"].clip(upper=span - work["compute"])
    work["other"] = span - work["compute"] - work["copy"]
    clipped["device_row"] = dev.index.to_numpy()[clipped["row"].to_numpy().astype(np.int64)]
    return work.astype("int64"), clipped


def culprit_windows(arrivals: pd.DataFrame, culprit: int) -> pd.DataFrame:
    """Every rank's arrival at the instances ``culprit`` arrived last at, with ``mine`` (the
    culprit's row) and ``instance``: the windows whose work is compared."""
    a = matched(arrivals)
    inst = a.loc[a["last"] & (a["rank"] == culprit), "instance"].unique()
    w = a[a["instance"].isin(inst)].reset_index(drop=True)
    w["mine"] = (w["rank"] == culprit).to_numpy()
    return w


def window_evidence(frames: TraceFrames, w: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For windows ``w`` of this trace's ranks: (per window compute/copy/other ns, aligned to
    ``w``; the device time per window instance, rank, side, source line and op). Both small:
    a run's ranks can compute them apart and send them to one place (``run_ranks``)."""
    work, clipped = _window_work(frames, w)
    key = ["instance", "rank", "mine", "file", "line", "func", "op"]
    if not len(clipped):
        return work, pd.DataFrame({c: pd.Series(dtype="object") for c in [*key, "ns"]})
    k = _kernel_pieces(frames, w, clipped, w["mine"].to_numpy())
    k["file"] = k["file"].fillna("")
    k = k.groupby(key, sort=True)["ns"].sum().reset_index()
    return work, k


def summarize_late(w: pd.DataFrame, work: pd.DataFrame, k: pd.DataFrame, n: int = 3) -> dict[str, Any]:
    """``late_work``'s result from the windows, their work and their kernel pieces."""
    if not len(w):
        return {"extra_ns": dict.fromkeys(LATE_CATEGORIES, 0), "instances": 0, "windows": [], "lines": []}
    mine = w["mine"].to_numpy()
    per = pd.concat([w[["instance"]], work.reset_index(drop=True)], axis=1)
    med = per[~mine].groupby("instance")[list(LATE_CATEGORIES)].median()
    own = per[mine].set_index("instance")[list(LATE_CATEGORIES)]
    extra = (own - med.reindex(own.index)).sum()
    return {
        "extra_ns": {c: int(extra[c]) for c in LATE_CATEGORIES},
        "instances": int(mine.sum()),
        "windows": w.loc[mine, ["window_start_ns", "arrival_ns"]].to_numpy().tolist(),
        "lines": late_lines(k, w, n),
    }


def late_work(frames: TraceFrames, arrivals: pd.DataFrame, culprit: int) -> dict[str, Any]:
    """What ``culprit`` did before the collectives it arrived last at, against the median rank.

    Returns ``extra_ns`` (per category of ``LATE_CATEGORIES``: the culprit's time minus the other
    ranks' median, summed over those instances), ``instances``, ``windows`` (the culprit's) and
    ``lines`` (``late_lines``).
    """
    w = culprit_windows(arrivals, culprit)
    if not len(w):
        return summarize_late(w, w, w)
    work, k = window_evidence(frames, w)
    return summarize_late(w, work, k)


def _kernel_pieces(frames: TraceFrames, w: pd.DataFrame, clipped: pd.DataFrame, mine: np.ndarray) -> pd.DataFrame:
    """The clipped kernels with their instance, side (culprit or not), rank, line and op name."""
    dev = frames.device
    rows = clipped["device_row"].to_numpy().astype(np.int64)
    win = clipped["window"].to_numpy().astype(np.int64)
    host = frames.host
    dev_rank = dev["rank"].to_numpy()[rows]
    pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()), ukey(dev_rank, dev["op_id"].to_numpy()[rows])
    )
    kernel = dev["name"].astype(object).to_numpy()[rows]
    op = np.where(pos >= 0, host["name"].astype(object).to_numpy()[np.clip(pos, 0, None)], kernel)
    return pd.DataFrame(
        {
            "instance": w["instance"].to_numpy()[win],
            "mine": mine[win],
            "rank": dev_rank,
            "file": dev["src_file"].astype(object).to_numpy()[rows],
            "line": dev["src_line"].to_numpy()[rows],
            "func": dev["src_func"].astype(object).fillna("").to_numpy()[rows],
            "op": op,
            "ns": clipped["ns"].to_numpy(),
        }
    )


def _extra_by(k: pd.DataFrame, w: pd.DataFrame, mine: np.ndarray, key: list[str]) -> pd.Series:
    """Per ``key`` group: the culprit's time minus, summed over instances, the median other
    rank's time (ranks without the group count as 0); largest first, positive only."""
    own = k[k["mine"]].groupby(key)["ns"].sum()
    if not len(own):
        return own
    o = k[~k["mine"]].groupby([*key, "instance", "rank"])["ns"].sum().reset_index()
    n_others = w[~mine].groupby("instance")["rank"].nunique()
    if len(o):
        # pad each (group, instance) with zeros for the other ranks that lack it, then take the median
        o["n"] = o["instance"].map(n_others).astype(np.int64)
        o["order"] = o.groupby([*key, "instance"])["ns"].rank(method="first", ascending=False)
        o["count"] = o.groupby([*key, "instance"])["ns"].transform("size")
        # the median of n values, count of them nonzero, sorted descending: middle positions
        lo = (o["n"] - 1) // 2 + 1
        hi = o["n"] // 2 + 1
        o["med"] = o["ns"] * ((o["order"] == lo).astype(float) + (o["order"] == hi).astype(float)) / 2.0
        other = o.groupby(key)["med"].sum().reindex(own.index, fill_value=0.0)
    else:
        other = pd.Series(0.0, index=own.index)
    extra = (own - other).sort_values(ascending=False, kind="stable")
    return extra[extra > 0]


def late_lines(k: pd.DataFrame, w: pd.DataFrame, n: int = 3) -> list[dict[str, Any]]:
    """Source lines (with their top op), else ops, whose device time in the culprit's windows
    exceeds the median other rank's in the same instances, most first; lines under a tenth of
    the first one's extra time are left out (jitter, not cause)."""
    if not len(k):
        return []
    mine = w["mine"].to_numpy()
    with_line = k[(k["file"] != "") & (k["line"] >= 0)]
    extra = _extra_by(with_line, w, mine, ["file", "line", "func"]) if len(with_line) else pd.Series(dtype=float)
    if len(extra):
        extra = extra[extra >= 0.1 * extra.iloc[0]].head(n)
        top_op = with_line[with_line["mine"]].groupby(["file", "line", "func", "op"])["ns"].sum()
        top_op = top_op.sort_values(ascending=False, kind="stable").reset_index()
        top_op = top_op.drop_duplicates(["file", "line", "func"]).set_index(["file", "line", "func"])["op"]
        return [
            {"file": str(f), "line": int(ln), "func": fn or None, "ns": int(ns), "op": str(top_op.get((f, ln, fn), ""))}
            for (f, ln, fn), ns in extra.items()
        ]
    by_op = _extra_by(k, w, mine, ["op"])
    by_op = by_op[by_op >= 0.1 * by_op.iloc[0]].head(n) if len(by_op) else by_op
    return [{"file": None, "line": None, "func": None, "ns": int(ns), "op": str(op)} for op, ns in by_op.items()]
