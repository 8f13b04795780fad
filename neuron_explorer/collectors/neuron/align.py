"""Putting device time on the host clock.

The device profile counts device time (ns since the profile's first hardware timestamp); the
system profile and torch.profiler count host time (Unix ns). The Neuron runtime records every
execution on a NeuronCore as an ``nc_exec_running`` system event (host clock), and the device
profile's ``ExecutionInfo`` gives each execution's start in device time. Pairing them in order
gives one offset per execution; each device event takes the offset of the execution it lies
in. The correlation is approximate (the runtime stamps the execution when it is submitted and
reaped, not at the first instruction), which docs/neuron.md states.

Fallbacks, in order: the Metadata ``first_ts`` wall clock (second precision at worst), then
no alignment (device-relative times; said in the metadata).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.collectors.neuron.model import DeviceProfile

EXEC_EVENT = "nc_exec_running"


@dataclass
class Alignment:
    method: str  # "nc_exec_running" | "first_ts" | "framework_first_launch" | "none"
    dev_starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pairs: int = 0
    note: str = ""

    def apply(self, rel_ns: np.ndarray) -> np.ndarray:
        """Host-clock ns of device-relative times."""
        rel = np.asarray(rel_ns, np.int64)
        if self.offsets.size == 0:
            return rel.copy()
        idx = np.clip(np.searchsorted(self.dev_starts, rel, side="right") - 1, 0, self.offsets.size - 1)
        return rel + self.offsets[idx]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "executions_paired": int(self.pairs),
            "offset_ns": int(self.offsets[0]) if self.offsets.size else None,
            "note": self.note,
        }


def exec_events(profile: DeviceProfile) -> pd.DataFrame:
    sp = profile.system
    if not len(sp):
        return sp
    rows = sp[sp["name"].astype(str) == EXEC_EVENT]
    if "nc_idx" in rows and rows["nc_idx"].notna().any():
        same = rows[pd.to_numeric(rows["nc_idx"], errors="coerce") == profile.device]
        rows = same if len(same) else rows
    return rows.sort_values("start_ns")


def align(profile: DeviceProfile) -> Alignment:
    """The best alignment the profile itself allows (see the module docstring)."""
    host = exec_events(profile)
    if len(host):
        ex = profile.executions.sort_values("start_ns") if len(profile.executions) else None
        dev = ex["start_ns"].to_numpy(np.int64) if ex is not None else np.zeros(1, np.int64)
        n = min(len(dev), len(host))
        note = ""
        if ex is None:
            note = "no ExecutionInfo: device time 0 taken as the first nc_exec_running start"
        elif len(dev) != len(host):
            note = f"{len(dev)} device executions but {len(host)} nc_exec_running events; paired the first {n} in order"
            profile.warn(note)
        offsets = host["start_ns"].to_numpy(np.int64)[:n] - dev[:n]
        return Alignment("nc_exec_running", dev[:n], offsets, n, note)
    if profile.wall_origin_ns is not None:
        return Alignment(
            "first_ts",
            np.zeros(1, np.int64),
            np.array([profile.wall_origin_ns], np.int64),
            0,
            "Metadata first_ts wall clock (approximate)",
        )
    return Alignment("none", note="no nc_exec_running events and no wall clock: device-relative times")
