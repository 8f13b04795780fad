"""Which op owns each piece of measured work: device kernels, or host op time on a CPU trace.

On a device trace the work units are the device events (kernels, collectives, copies, memsets),
each owned by the framework op that issued it (``op_id``) or by a composite op above it
(``models.ROLLUP_PRIORITY``: the dispatched SDPA op owns the flash kernel of its inner op).
On a host-only trace (CPU) there are no kernels: the work units are the framework ops, each
with its own (self) host time, and the same rollup applies. A wrapper op whose work is done by a
nested op of the same kind (``aten::linear`` around ``aten::addmm``, ``aten::softmax`` around
``aten::_softmax``) keeps its own small self time but no model, so FLOPs are counted once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.core.kernel_names import uses_tensor_cores
from neuron_explorer.analyzers.perf import models
from neuron_explorer.trace.schema import Kind

_MAX_DEPTH = 8  # op nesting levels searched for a composite owner
CAT_INDEX = {c: i for i, c in enumerate(models.CATEGORIES)}


@dataclass(frozen=True)
class Work:
    """Measured work, one entry per unit: its owning op (row of ``frames.host``, -1: none),
    duration, category from its own name (index into ``models.CATEGORIES``) and bytes (a
    collective's message size; 0 otherwise). ``host_only``: the units are host ops."""

    owner: np.ndarray
    dur_ns: np.ndarray
    category: np.ndarray
    bytes: np.ndarray
    host_only: bool
    #: Per row of ``frames.host`` (host-only traces): the op is a wrapper (see the module doc).
    wrapper: np.ndarray | None = None
    #: Per unit (device traces): the kernel's name says it runs on the matrix units (tensor cores,
    #: MFMA; ``core.kernel_names.uses_tensor_cores``): what tells TF32 from fp32 math.
    tensor_core: np.ndarray | None = None


def work_units(frames: TraceFrames) -> Work:
    dev = frames.device
    if len(dev):
        return _device_work(frames)
    return _host_work(frames)


def _device_work(frames: TraceFrames) -> Work:
    dev, host = frames.device, frames.host
    codes, uniq = pd.factorize(frames.device_category.to_numpy())
    lut = np.array([CAT_INDEX[models.KERNEL_CATEGORY.get(str(u), "other")] for u in uniq] + [CAT_INDEX["other"]])
    category = lut[np.where(codes < 0, len(uniq), codes)]
    category[(dev["kind"] == Kind.COLLECTIVE).to_numpy()] = CAT_INDEX["communication"]
    pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
        ukey(dev["rank"].to_numpy(), dev["op_id"].to_numpy()),
    )
    raw = dev["bytes"].to_numpy(np.float64) if "bytes" in dev.columns else np.zeros(len(dev))
    return Work(
        rollup(frames, pos),
        dev["dur_ns"].to_numpy(np.float64),
        category,
        np.where(raw > 0, raw, 0.0),
        False,
        tensor_core=uses_tensor_cores(dev["name"]).to_numpy(bool),
    )


def _host_work(frames: TraceFrames) -> Work:
    host = frames.host
    if not len(host):
        empty = np.zeros(0)
        return Work(np.zeros(0, np.int64), empty, np.zeros(0, np.int64), empty, True)
    is_op = (host["kind"] == Kind.CPU_OP).to_numpy()
    hkey = ukey(host["rank"].to_numpy(), host["event_id"].to_numpy())
    parent = lookup(hkey, ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy()))
    # the kind of each op by name (-1: none), once per distinct name
    names = host["name"].astype("category")
    kinds = {c: i for i, c in enumerate(models.CATEGORIES)}
    lut = np.array([kinds.get(models.category_of(str(c)) or "", -1) for c in names.cat.categories] + [-1])
    codes = names.cat.codes.to_numpy()
    family = np.where(is_op, lut[np.where(codes < 0, len(lut) - 1, codes)], -1)
    child = is_op & (parent >= 0) & (family >= 0)
    same = child & (family == family[np.maximum(parent, 0)])
    wrapper = np.bincount(parent[same], minlength=len(host)) > 0
    self_ns = frames.host_self_ns.to_numpy(np.float64)
    units = np.flatnonzero(is_op & (self_ns > 0))
    empty = np.zeros(len(units))
    return Work(
        rollup(frames, units.astype(np.int64)),
        self_ns[units],
        np.full(len(units), CAT_INDEX["other"]),
        empty,
        True,
        wrapper,
    )


def rollup(frames: TraceFrames, pos: np.ndarray) -> np.ndarray:
    """Each op row in ``pos`` replaced by the highest-priority composite op on its parent
    chain (itself when none); -1 stays -1."""
    if not (pos >= 0).any():
        return pos
    host = frames.host
    names = host["name"].astype("category")
    cats = names.cat.categories
    prio_lut = np.array([models.ROLLUP_PRIORITY.get(str(c), 0) for c in cats] + [0], dtype=np.int64)
    if not prio_lut.any():
        return pos
    codes = names.cat.codes.to_numpy()
    prio = prio_lut[np.where(codes < 0, len(cats), codes)]
    hkey = ukey(host["rank"].to_numpy(), host["event_id"].to_numpy())
    parent = lookup(hkey, ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy()))
    # walk the distinct issuing ops up their parent chain, keeping the highest-priority op
    uniq, inverse = np.unique(pos, return_inverse=True)
    best = uniq.copy()
    best_p = np.where(uniq >= 0, prio[np.maximum(uniq, 0)], 0)
    cur = uniq.copy()
    for _ in range(_MAX_DEPTH):
        cur = np.where(cur >= 0, parent[np.maximum(cur, 0)], -1)
        if not (cur >= 0).any():
            break
        p = np.where(cur >= 0, prio[np.maximum(cur, 0)], 0)
        better = p > best_p
        best = np.where(better, cur, best)
        best_p = np.where(better, p, best_p)
    return best[inverse]
