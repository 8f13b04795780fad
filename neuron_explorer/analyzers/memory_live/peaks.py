"""The live set at the peaks: which blocks are alive at the trace's peak and at each step's
peak, by source line, op, nn.Module path and phase; and the per-step memory table.

The peak of a device is the event after which its allocated total (the trace's ``Total
Allocated``) is highest. A block is alive after event ``k`` when it was allocated at or before
``k`` and freed after it. All peaks are answered at once: the peaks sorted by (device, event),
two ``searchsorted`` per block give the run of peaks it is alive at, and ``np.repeat`` lays the
(block, peak) pairs out for one groupby.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.memory_live.phases import PHASES

AT_PEAK_COLUMNS = [
    "scope",
    "rank",
    "device_type",
    "device",
    "step",
    "peak_ns",
    "peak_event_id",
    "peak_allocated_bytes",
    "phase",
    "src_file",
    "src_line",
    "src_func",
    "src_module",
    "op",
    "live_bytes",
    "blocks",
    "pct_of_peak",
]
STEP_COLUMNS = [
    "rank",
    "device_type",
    "device",
    "step",
    "start_ns",
    "end_ns",
    "start_allocated_bytes",
    "end_allocated_bytes",
    "peak_allocated_bytes",
    "peak_ns",
    "peak_reserved_bytes",
    "alloc_bytes",
    "alloc_count",
    "survived_bytes",
    "retained_bytes",
]


def peak_points(mem: pd.DataFrame) -> pd.DataFrame:
    """One row per peak: the trace's peak of every device (scope ``trace``, step -1) and each
    step's peak (scope ``step``). Columns: scope, dev_key, rank, device_type, device, step, row
    (position in ``mem``), peak_ns, peak_event_id, peak_allocated_bytes."""
    if not len(mem):
        return pd.DataFrame(columns=["scope", "dev_key", "rank", "device_type", "device", "step", "row"])
    alloc = mem["allocated_bytes"].to_numpy(np.int64)
    frame = pd.DataFrame({"dev_key": mem["dev_key"].to_numpy(), "step": mem["step"].to_numpy(), "a": alloc})
    frame["row"] = np.arange(len(mem))
    # idxmax keeps the first row of the maximum: the moment the peak was first reached
    trace_rows = frame.groupby("dev_key")["a"].idxmax().to_numpy()
    stepped = frame[frame["step"] >= 0]
    step_rows = stepped.groupby(["dev_key", "step"])["a"].idxmax().to_numpy() if len(stepped) else np.array([], int)
    rows = np.r_[trace_rows, step_rows].astype(np.int64)
    out = pd.DataFrame(
        {
            "scope": np.r_[np.full(len(trace_rows), "trace"), np.full(len(step_rows), "step")],
            "dev_key": mem["dev_key"].to_numpy()[rows],
            "rank": mem["rank"].to_numpy()[rows],
            "device_type": mem["device_type"].astype(str).to_numpy()[rows],
            "device": mem["device"].to_numpy()[rows],
            "step": np.r_[np.full(len(trace_rows), -1), mem["step"].to_numpy()[step_rows]],
            "row": rows,
            "peak_ns": mem["start_ns"].to_numpy()[rows],
            "peak_event_id": mem["event_id"].to_numpy()[rows],
            "peak_allocated_bytes": alloc[rows],
        }
    )
    return out


def op_names(blocks: pd.DataFrame, frames: TraceFrames) -> pd.Series:
    """The name of the framework op that made each block (categorical; null when none)."""
    host = frames.host
    pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
        ukey(blocks["rank"].to_numpy(), blocks["op_id"].to_numpy()),
    )
    names = host["name"].astype("category")
    codes = np.where(pos >= 0, names.cat.codes.to_numpy()[np.maximum(pos, 0)], -1)
    return pd.Series(pd.Categorical.from_codes(codes, categories=names.cat.categories))


def live_at_peaks(mem: pd.DataFrame, blocks: pd.DataFrame, points: pd.DataFrame, ops: pd.Series) -> pd.DataFrame:
    """The ``memory_at_peak`` table: per peak, the bytes alive by (phase, line, module, op).

    The trace's total at a peak that no block in the trace explains (allocated before the trace
    began and never freed in it) is one ``before_trace`` row without a line; a negative
    remainder (the totals and the replay disagree there) is an ``unexplained`` row."""
    if not len(points) or not len(blocks):
        return pd.DataFrame({c: pd.Series(dtype="object") for c in AT_PEAK_COLUMNS})
    n = len(mem)
    base = n + 2
    pts = points.sort_values(["dev_key", "row"], kind="stable").reset_index(drop=True)
    pkey = pts["dev_key"].to_numpy(np.int64) * base + pts["row"].to_numpy(np.int64) + 1
    dev = blocks["dev_key"].to_numpy(np.int64)
    a_row = blocks["alloc_row"].to_numpy(np.int64) + 1  # before the trace: 0
    f_row = blocks["free_row"].to_numpy(np.int64)
    f_row = np.where(f_row < 0, n + 1, f_row + 1)  # never freed: past the last event
    # alive at peak p: a_row <= p_row < f_row
    lo = np.searchsorted(pkey, dev * base + a_row, "left")
    hi = np.searchsorted(pkey, dev * base + f_row, "left")
    lo = np.minimum(lo, hi)
    size = blocks["size_bytes"].to_numpy(np.int64)
    # one group per (phase, line, module, op): a block adds its size to its group over the run
    # of peaks [lo, hi) it is alive at; a difference array per group and a cumulative sum give
    # every group's live bytes at every peak without listing (block, peak) pairs (a leak of
    # many blocks over many steps would make those pairs blocks x steps)
    key_cols = {
        "phase": blocks["phase"].to_numpy(np.int8),
        "file": blocks["src_file"].cat.codes.to_numpy(),
        "line": blocks["src_line"].to_numpy(),
        "func": blocks["src_func"].cat.codes.to_numpy(),
        "module": blocks["src_module"].cat.codes.to_numpy(),
        "op": ops.cat.codes.to_numpy(),
    }
    keys = pd.DataFrame(key_cols)
    gid = keys.groupby(list(key_cols), sort=False).ngroup().to_numpy(np.int64)
    n_groups, n_peaks = int(gid.max()) + 1, len(pts)
    firsts = pd.Series(np.arange(len(gid))).groupby(gid).first().to_numpy()
    parts = []
    chunk = max(1, 20_000_000 // (n_peaks + 1))  # groups per pass: bounded memory
    for g0 in range(0, n_groups, chunk):  # one pass unless there are very many groups
        m = (gid >= g0) & (gid < g0 + chunk)
        local = gid[m] - g0
        width = n_peaks + 1
        span = min(chunk, n_groups - g0) * width
        live = np.bincount(local * width + lo[m], weights=size[m], minlength=span)
        live -= np.bincount(local * width + hi[m], weights=size[m], minlength=span)
        cnt = np.bincount(local * width + lo[m], minlength=span) - np.bincount(local * width + hi[m], minlength=span)
        live = np.cumsum(live.reshape(-1, width), axis=1)[:, :n_peaks]
        cnt = np.cumsum(cnt.reshape(-1, width), axis=1)[:, :n_peaks]
        gi, pi = np.nonzero(cnt > 0)
        first = firsts[gi + g0]
        parts.append(
            pd.DataFrame(
                {
                    "p": pi,
                    **{k: v[first] for k, v in key_cols.items()},
                    "live_bytes": np.rint(live[gi, pi]).astype(np.int64),
                    "blocks": cnt[gi, pi].astype(np.int64),
                }
            )
        )
    g = pd.concat(parts, ignore_index=True)
    explained = np.bincount(g["p"].to_numpy(), weights=g["live_bytes"].to_numpy(np.float64), minlength=len(pts))
    residual = pts["peak_allocated_bytes"].to_numpy(np.int64) - explained.astype(np.int64)
    rest = np.flatnonzero(residual != 0)
    extra = pd.DataFrame(
        {
            "p": rest,
            "phase": np.where(residual[rest] > 0, PHASES.index("before_trace"), -1),
            "file": -1,
            "line": -1,
            "func": -1,
            "module": -1,
            "op": -1,
            "live_bytes": residual[rest],
            "blocks": 0,
        }
    )
    g = pd.concat([g, extra], ignore_index=True)

    def decode(codes: np.ndarray, cats: pd.Index) -> np.ndarray:
        values = np.asarray(cats.astype(str), dtype=object)
        return np.where(codes >= 0, values[np.maximum(codes, 0)] if len(values) else None, None)

    p = g["p"].to_numpy()
    names = np.array([*PHASES, "unexplained"], dtype=object)
    out = pd.DataFrame(
        {
            "scope": pts["scope"].to_numpy()[p],
            "rank": pts["rank"].to_numpy()[p],
            "device_type": pts["device_type"].to_numpy()[p],
            "device": pts["device"].to_numpy()[p],
            "step": pts["step"].to_numpy()[p],
            "peak_ns": pts["peak_ns"].to_numpy()[p],
            "peak_event_id": pts["peak_event_id"].to_numpy()[p],
            "peak_allocated_bytes": pts["peak_allocated_bytes"].to_numpy()[p],
            "phase": names[g["phase"].to_numpy()],
            "src_file": decode(g["file"].to_numpy(), blocks["src_file"].cat.categories),
            "src_line": g["line"].to_numpy(np.int64),
            "src_func": decode(g["func"].to_numpy(), blocks["src_func"].cat.categories),
            "src_module": decode(g["module"].to_numpy(), blocks["src_module"].cat.categories),
            "op": decode(g["op"].to_numpy(), ops.cat.categories),
            "live_bytes": g["live_bytes"].to_numpy(np.int64),
            "blocks": g["blocks"].to_numpy(np.int64),
        }
    )
    peak = out["peak_allocated_bytes"].to_numpy(np.float64)
    out["pct_of_peak"] = np.where(peak > 0, 100.0 * out["live_bytes"].to_numpy() / np.where(peak > 0, peak, 1), 0.0)
    out["_scope"] = (out["scope"] != "trace").astype(int)
    out = out.sort_values(["_scope", "rank", "device_type", "device", "step", "live_bytes"],
                          ascending=[True, True, True, True, True, False], kind="stable")  # fmt: skip
    return out.drop(columns="_scope").reset_index(drop=True)[AT_PEAK_COLUMNS]


def step_memory(mem: pd.DataFrame, blocks: pd.DataFrame, windows: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """The ``memory_live`` table: per device and step, the allocated total at the step's start,
    end and peak, the step's allocations, what of them outlived the step (``survived_bytes``)
    and what was never freed in the trace (``retained_bytes``)."""
    steps = windows[windows["step"] >= 0] if len(windows) else windows
    if not len(mem) or not len(steps):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in STEP_COLUMNS})
    devs = mem.groupby("dev_key").head(1)[["dev_key", "rank", "device_type", "device", "offset_bytes"]]
    parts = []
    t = mem["start_ns"].to_numpy(np.int64)
    alloc = mem["allocated_bytes"].to_numpy(np.int64)
    dk = mem["dev_key"].to_numpy()
    for d in devs.itertuples(index=False):  # one pass per device: a handful
        rows = np.flatnonzero(dk == d.dev_key)
        w = steps[steps["rank"] == d.rank]
        if not len(w):
            continue
        s, e = w["start_ns"].to_numpy(np.int64), w["end_ns"].to_numpy(np.int64)
        td = t[rows]
        i0 = np.searchsorted(td, s, "left") - 1
        i1 = np.searchsorted(td, e, "right") - 1
        before = int(d.offset_bytes)
        start_alloc = np.where(i0 >= 0, alloc[rows][np.maximum(i0, 0)], before)
        end_alloc = np.where(i1 >= 0, alloc[rows][np.maximum(i1, 0)], before)
        parts.append(
            pd.DataFrame(
                {
                    "dev_key": d.dev_key,
                    "rank": d.rank,
                    "device_type": str(d.device_type),
                    "device": d.device,
                    "step": w["step"].to_numpy(),
                    "start_ns": s,
                    "end_ns": e,
                    "start_allocated_bytes": start_alloc,
                    "end_allocated_bytes": end_alloc,
                }
            )
        )
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in STEP_COLUMNS})
    out = pd.concat(parts, ignore_index=True)
    res_frame = pd.DataFrame(
        {"dev_key": dk, "step": mem["step"].to_numpy(), "r": mem["mem_total_reserved_bytes"].to_numpy(np.int64)}
    )
    rp = res_frame[res_frame["step"] >= 0].groupby(["dev_key", "step"])["r"].max()
    pk = points[points["scope"] == "step"].set_index(["dev_key", "step"])
    key = pd.MultiIndex.from_arrays([out["dev_key"], out["step"]])
    out["peak_reserved_bytes"] = rp.reindex(key).fillna(-1).to_numpy(np.int64)
    out["peak_allocated_bytes"] = pk["peak_allocated_bytes"].reindex(key).fillna(-1).to_numpy(np.int64)
    out["peak_ns"] = pk["peak_ns"].reindex(key).fillna(-1).to_numpy(np.int64)
    made = blocks[(blocks["alloc_row"] >= 0) & (blocks["step"] >= 0)]
    ends = steps.set_index(["rank", "step"])["end_ns"]
    end_of = ends.reindex(pd.MultiIndex.from_arrays([made["rank"], made["step"]])).to_numpy()
    survived = made["free_ns"].to_numpy() > np.nan_to_num(end_of, nan=np.inf)
    retained = made["free_row"].to_numpy() < 0
    size = made["size_bytes"].to_numpy(np.int64)
    agg = (
        pd.DataFrame(
            {
                "dev_key": made["dev_key"].to_numpy(),
                "step": made["step"].to_numpy(),
                "alloc_bytes": size,
                "alloc_count": 1,
                "survived_bytes": np.where(survived, size, 0),
                "retained_bytes": np.where(retained, size, 0),
            }
        )
        .groupby(["dev_key", "step"])
        .sum()
    )
    for c in ("alloc_bytes", "alloc_count", "survived_bytes", "retained_bytes"):
        out[c] = agg[c].reindex(key).fillna(0).to_numpy(np.int64)
    return out.sort_values(["rank", "device_type", "device", "step"]).reset_index(drop=True)[["dev_key", *STEP_COLUMNS]]
