"""Copy rules: exposed device-to-device copies, and the compiled region that issued them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution.one_time import in_one_time
from neuron_explorer.analyzers.core.columns import lookup, name_mask, ukey
from neuron_explorer.analyzers.core.intervals import clip_to_windows, union_length
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.rules._evidence import (
    attributed_wall_ns,
    calls_in_steps,
    lines_from,
    ms,
    of_wall,
    ranges,
)
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule

#: Host spans of compiled code: TorchDynamo's region and the compiled autograd function.
COMPILED_REGION = r"^Torch-Compiled Region|CompiledFunction$"


@rule(
    "exposed_dtod",
    family="memory",
    title="Exposed device-to-device copies",
    thresholds={"min_pct": (2.0, "% of step time")},
)
def exposed_dtod(ctx: RuleContext) -> list[Finding]:
    """Device-to-device copies (``Memcpy DtoD``) run with no kernel alongside for at least
    ``min_pct`` of step time: the device moves bytes within its own memory instead of computing
    (``.clone()``, ``.contiguous()``, ``torch.cat``, ``copy_`` into a buffer). Cost: that time
    (the ``copy`` category). Copies whose launch call lies inside a compiled region
    (``Torch-Compiled Region``, ``CompiledFunction``) are counted apart and the region named:
    they are part of the compiled graph."""
    dev = ctx.frames.device
    if not len(dev):
        raise RuleSkipped("skipped: needs device events (kernels, memcpys)")
    kind = dev["memcpy_kind"].astype(str).to_numpy()
    dtod = np.char.startswith(kind.astype("U"), "DtoD") & (dev["kind"] == "memcpy").to_numpy()
    if not dtod.any():
        raise RuleSkipped("skipped: needs device-to-device memcpy events")
    kernel = (dev["kind"] == "kernel").to_numpy()
    # one-time work's copies (a compile's autotuning, a warm-up step, a graph capture) are not
    # the steady state's: left out of the time, as the wall it is a share of leaves them out
    dtod = dtod & ~in_one_time(ctx.frames, dev)
    if not dtod.any():
        return []
    # time only the copies cover: union(copies + kernels) - union(kernels), per device, in steps
    w = ctx.frames.step_windows
    s = dev["start_ns"].to_numpy()
    e = s + dev["dur_ns"].to_numpy()
    rows, _, ps, pe = clip_to_windows(
        dev["rank"].to_numpy(), s, e, w["rank"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
    )
    keys = ukey(dev["rank"].to_numpy()[rows], dev["device"].fillna(-1).to_numpy(np.int64)[rows])
    codes, uniq = pd.factorize(keys)
    both = dtod[rows] | kernel[rows]
    k = kernel[rows]
    exposed = int(
        union_length(codes[both], ps[both], pe[both], len(uniq)).sum()
        - union_length(codes[k], ps[k], pe[k], len(uniq)).sum()
    )
    wall = attributed_wall_ns(ctx.analysis, device_only=True) or 1
    pct = 100.0 * exposed / wall
    if pct < ctx.threshold("min_pct"):
        return []
    copies = dev[dtod]
    if ctx.frames.has_steps:  # the count is of the copies in steps, where the exposed time is measured
        copies = copies[calls_in_steps(ctx, copies)]
    regions = _compiled_region_of(ctx, copies)
    in_region = regions.notna().to_numpy()
    named = regions[in_region].value_counts()
    compiled_ns = int(copies.loc[in_region, "dur_ns"].sum())
    where = ""
    if len(named):
        top = ", ".join(f"{r} ({n})" for r, n in named.head(3).items())
        where = (
            f" {int(in_region.sum())} of them ({ms(compiled_ns)}) were launched inside compiled code: {top}; "
            "they are part of the compiled graph."
        )
    ddp = _ddp_copies(ctx, copies)
    bucket, buffers = ddp == "bucket", ddp == "buffers"
    if bucket.any() or buffers.any():
        where += " DistributedDataParallel's own copies: " + "; ".join(
            f"{int(m.sum())} ({ms(int(copies.loc[m, 'dur_ns'].sum()))}) {what}"
            for m, what in (
                (bucket, "copy gradients from the reducer's buckets into .grad (copy_bucket_to_grad)"),
                (buffers, "copy the module buffers broadcast from rank 0 back into place in every forward"),
            )
            if m.any()
        )
        where += "."
    tr, ids = ranges(copies)
    return [
        ctx.finding(
            title=f"Device-to-device copies run alone for {pct:.1f}% {of_wall(ctx.frames.has_steps)}"
            + (f", from {named.index[0]}" if len(named) else "")
            + (", most of them DistributedDataParallel's" if (bucket | buffers).mean() > 0.5 else ""),
            message=(
                f"{len(copies)} DtoD copies ({ms(int(copies['dur_ns'].sum()))} in all) left the device without a "
                f"kernel for {ms(exposed)} {'inside steps' if ctx.frames.has_steps else 'in the trace'}.{where}"
            ),
            metrics={
                "exposed_dtod_ns": metric(exposed, "ns"),
                "exposed_dtod_pct": metric(pct, "%"),
                "dtod_copies": metric(len(copies), "copies"),
                "compiled_copies": metric(int(in_region.sum()), "copies"),
                "compiled_copy_ns": metric(compiled_ns, "ns"),
                "ddp_bucket_copies": metric(int(bucket.sum()), "copies"),
                "ddp_buffer_copies": metric(int(buffers.sum()), "copies"),
            },
            cost_ns=exposed,
            category="copy",
            time_ranges=tr,
            event_ids=ids,
            source_lines=lines_from(copies, "dur_ns"),
            recommendation=(
                (
                    "Copies in compiled code: read the generated code (TORCH_LOGS=output_code) for the copy_/clone "
                    "kernels and remove what forces them (inputs or outputs in a layout the graph changes, in-place "
                    "updates of graph inputs, mutations of views). "
                    if len(named)
                    else ""
                )
                + (
                    "Let the gradients live in DDP's buckets: DistributedDataParallel(model, gradient_as_bucket_view=True) "
                    "removes the bucket-to-.grad copies. "
                    if bucket.any()
                    else ""
                )
                + (
                    "DistributedDataParallel(model, broadcast_buffers=False) stops re-broadcasting and copying the buffers "
                    "(BatchNorm running statistics) in every forward, where the ranks' buffers need not be identical "
                    "every step. "
                    if buffers.any()
                    else ""
                )
                + (
                    "Avoid copies in the step: no .clone()/.contiguous() of tensors that are already usable, "
                    "write into preallocated outputs (out=) instead of torch.cat or copy_ into buffers."
                    if not (bucket | buffers).all()
                    else ""
                )
            ).strip(),
        )
    ]


def _compiled_region_of(ctx: RuleContext, copies: pd.DataFrame) -> pd.Series:
    """Per copy, the name of the compiled region its launch call started in (else NA)."""
    host = ctx.frames.host
    region = host[name_mask(host["name"], COMPILED_REGION)]
    out = pd.Series(pd.NA, index=copies.index, dtype="object")
    if not len(region) or not len(copies):
        return out
    launch = host.drop_duplicates(["rank", "event_id"]).set_index(["rank", "event_id"])["start_ns"]
    key = pd.MultiIndex.from_arrays([copies["rank"].to_numpy(), copies["launch_id"].fillna(-1).to_numpy(np.int64)])
    at = launch.reindex(key).to_numpy()
    ok = ~pd.isna(at)
    if not ok.any():
        return out
    # the outermost regions as windows (a CompiledFunction nests in its Torch-Compiled Region)
    region = region.sort_values(["rank", "start_ns", "dur_ns"], ascending=[True, True, False])
    end = region["start_ns"] + region["dur_ns"]
    prev_end = end.groupby(region["rank"]).cummax().groupby(region["rank"]).shift(1)
    outer = region[~(region["start_ns"] < prev_end.fillna(np.iinfo(np.int64).min))]
    t = at[ok].astype(np.int64)
    rows, win, _, _ = clip_to_windows(
        copies["rank"].to_numpy()[ok],
        t,
        t + 1,
        outer["rank"].to_numpy(),
        outer["start_ns"].to_numpy(),
        (outer["start_ns"] + outer["dur_ns"]).to_numpy(),
    )
    idx = np.nonzero(ok)[0][rows]
    out.iloc[idx] = outer["name"].astype(str).to_numpy()[win]
    return out


#: DistributedDataParallel's reducer copies a bucket's averaged gradients into ``.grad``.
_DDP_BUCKET = r"ddp\.reducer::copy_bucket_to_grad"
_DDP_FORWARD = "DistributedDataParallel.forward"


def _ddp_copies(ctx: RuleContext, copies: pd.DataFrame) -> np.ndarray:
    """Per copy: ``"bucket"`` when an op above the one that issued it is DDP's reducer copying a
    bucket into ``.grad``; ``"buffers"`` when it was issued straight inside a
    ``DistributedDataParallel.forward`` span after a ``c10d::broadcast_`` in it (the module
    buffers rank 0 broadcast, copied back into place: ``broadcast_buffers=True``); else ``""``."""
    out = np.full(len(copies), "", dtype=object)
    host = ctx.frames.host
    if not len(copies) or not name_mask(host["name"], f"{_DDP_BUCKET}|^{_DDP_FORWARD}$").any():
        return out
    hk = ukey(host["rank"].to_numpy(), host["event_id"].to_numpy())
    parent = lookup(hk, ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy()))
    issued = lookup(hk, ukey(copies["rank"].to_numpy(), copies["op_id"].fillna(-1).to_numpy(np.int64)))
    bucket_op = name_mask(host["name"], _DDP_BUCKET)
    forward = (host["name"].astype(str) == _DDP_FORWARD).to_numpy()
    # the first broadcast inside each DDP forward span (its start; none: the span's end)
    bcast = (host["name"].astype(str) == "c10d::broadcast_").to_numpy()
    first_bcast = np.full(len(host), np.iinfo(np.int64).max, np.int64)
    bp = parent[bcast]
    ok = bp >= 0
    np.minimum.at(first_bcast, bp[ok], host["start_ns"].to_numpy()[bcast][ok])
    start = host["start_ns"].to_numpy()
    cur = issued.copy()
    direct = np.where(issued >= 0, parent[np.maximum(issued, 0)], -1)
    is_buffer = (direct >= 0) & forward[np.maximum(direct, 0)] & (issued >= 0)
    is_buffer &= start[np.maximum(issued, 0)] >= first_bcast[np.maximum(direct, 0)]
    is_bucket = np.zeros(len(copies), bool)
    for _ in range(8):  # the reducer's span is a few levels above the copy
        is_bucket |= (cur >= 0) & bucket_op[np.maximum(cur, 0)]
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
        if not (cur >= 0).any():
            break
    out[is_buffer] = "buffers"
    out[is_bucket] = "bucket"
    return out
