"""Links between events by key: maps from a key to the event holding it, flow endpoints bound
to the event they sit on.

``build_trace`` resolves ``launch_id`` (correlation id, else the ac2g flow), ``op_id`` (External
id) and ``fwd_id`` (fwdbwd flow) with these whole-column joins; the category and name tests say
which flows and spans take part (the out-of-core build marks the same rows with them).
"""

from __future__ import annotations

import numpy as np


def is_ac2g_category(category: str) -> bool:
    """A launch flow (runtime call -> device work) by its category."""
    return category.lower() in ("ac2g", "async_gpu", "async_cpu_to_gpu")


def is_fwdbwd_category(category: str) -> bool:
    """A forward -> backward flow by its category."""
    return category.lower() == "fwdbwd"


def is_autograd_wrapper(name: str) -> bool:
    """The autograd engine's span around a backward node (the same backward work)."""
    return name.startswith("autograd::engine::evaluate_function")


def _map_keys(keys: np.ndarray, targets_keys: np.ndarray, targets_rows: np.ndarray) -> np.ndarray:
    """For each key, the row of the (last) target with the same key, else -1 (keys < 0 never match)."""
    out = np.full(len(keys), -1, np.int64)
    valid_t = targets_keys >= 0
    tk, tr = targets_keys[valid_t], targets_rows[valid_t]
    if tk.size == 0:
        return out
    order = np.argsort(tk, kind="stable")
    tk, tr = tk[order], tr[order]
    # keep the last target of each key: innermost for External id, since rows are start-ordered
    last = np.ones(tk.size, bool)
    last[:-1] = tk[1:] != tk[:-1]
    tk, tr = tk[last], tr[last]
    q = keys >= 0
    pos = np.searchsorted(tk, keys[q])
    pos_c = np.minimum(pos, tk.size - 1)
    hit = tk[pos_c] == keys[q]
    res = np.where(hit, tr[pos_c], -1)
    out[q] = res
    return out


def _bind_flow_endpoints(
    flow_rows: np.ndarray, cand_rows: np.ndarray, pid: np.ndarray, tid: np.ndarray, start: np.ndarray
) -> np.ndarray:
    """The candidate event at the same (pid, tid, start) as each flow endpoint (the first, i.e.
    outermost, when several), else -1."""
    out = np.full(flow_rows.size, -1, np.int64)
    if flow_rows.size == 0 or cand_rows.size == 0:
        return out
    # One int64 key per (thread, start): thread index in the high bits, start offset below.
    rows = np.concatenate([cand_rows, flow_rows])
    thread = _pair_codes(pid[rows], tid[rows])
    offset = start[rows] - start[rows].min()
    if offset.max() >= (1 << 43) or thread.max() >= (1 << 19):  # > 2.4 h or > 500k pid x tid
        return _bind_flow_endpoints_slow(flow_rows, cand_rows, pid, tid, start)
    key = (thread.astype(np.int64).ravel() << 43) | offset
    cand_key, flow_key = key[: cand_rows.size], key[cand_rows.size :]
    return _map_keys_first(flow_key, cand_key, cand_rows)


def _pair_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A dense code per distinct (a, b) pair (two 1-D factorizations: np.unique(axis=0) sorts
    row views and is ~20x slower)."""
    _, ai = np.unique(a, return_inverse=True)
    bu, bi = np.unique(b, return_inverse=True)
    return ai.astype(np.int64).ravel() * max(len(bu), 1) + bi.ravel()


def _map_keys_first(keys: np.ndarray, target_keys: np.ndarray, target_rows: np.ndarray) -> np.ndarray:
    """Like ``_map_keys`` but the first target of each key wins (rows are start-ordered, the
    outermost event first): the value of the first table entry with each key, else -1. The one
    key look-up of the collectors (the capture's tree columns and compiled lines use it too)."""
    out = np.full(keys.size, -1, np.int64)
    if target_keys.size == 0 or keys.size == 0:
        return out
    order = np.argsort(target_keys, kind="stable")
    tk, tr = target_keys[order], target_rows[order]
    first = np.ones(tk.size, bool)
    first[1:] = tk[1:] != tk[:-1]
    tk, tr = tk[first], tr[first]
    pos = np.minimum(np.searchsorted(tk, keys), tk.size - 1)
    hit = tk[pos] == keys
    out[hit] = tr[pos[hit]]
    return out


def _bind_flow_endpoints_slow(
    flow_rows: np.ndarray, cand_rows: np.ndarray, pid: np.ndarray, tid: np.ndarray, start: np.ndarray
) -> np.ndarray:
    first: dict[tuple[int, int, int], int] = {}
    for r, k in zip(
        cand_rows.tolist(), zip(pid[cand_rows].tolist(), tid[cand_rows].tolist(), start[cand_rows].tolist())
    ):
        first.setdefault(k, r)
    keys = zip(pid[flow_rows].tolist(), tid[flow_rows].tolist(), start[flow_rows].tolist())
    return np.array([first.get(k, -1) for k in keys], np.int64)
