"""The fix a finding proposes, as a what-if edit of the run's graph (``analyzers/graph/edits.py``).

A rule attaches one of these to its finding (``edits=...``); the ledger replays it to price the
finding (``analyzers/ledger.py``). Each helper names the events the finding already holds as
evidence, so the edit changes exactly what the fix would change:

- ``unblock``: synchronizing calls (or blocking copies) wait for nothing, their own call time
  stays: "keep values on the device", "non_blocking copies from pinned memory";
- ``scaled``: device work at a factor (kernels fused, tensor cores, autocast), or host events
  with what is nested in them and their kernels;
- ``reaching``: the work at the factor that makes its time drop by what the rule claims it
  could save (an op group at the efficiency the rule says it could reach);
- ``op_group``: the work units of one ``op_perf`` row (its kernels; on a host-only trace its
  ops) at the factor the rule's claim implies;
- ``self_time``: host events' own time only (the Python frames of a line, not the ops inside).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.graph.edits import Edits, EventEdit


def unblock(calls: pd.DataFrame, label: str) -> Edits:
    return Edits(events=(EventEdit.of(calls["rank"], calls["event_id"], unblock=True, label=label),))


def scaled(events: pd.DataFrame, factor: float, label: str, nested: bool = True, kernels: bool = True) -> Edits:
    return Edits(
        events=(
            EventEdit.of(
                events["rank"], events["event_id"], factor=factor, nested=nested, kernels=kernels, label=label
            ),
        )
    )


def reaching(events: pd.DataFrame, claimed_ns: float, label: str, nested: bool = True) -> Edits | None:
    """``events`` (device work, or host ops on a host-only trace) at the factor that takes
    ``claimed_ns`` off their summed duration."""
    total = float(events["dur_ns"].sum())
    if total <= 0 or not len(events):
        return None
    factor = float(np.clip(1.0 - claimed_ns / total, 0.0, 1.0))
    return scaled(events, factor, f"{label} (x{factor:.2f})", nested=nested)


def self_time(events: pd.DataFrame, factor: float, label: str) -> Edits:
    return scaled(events, factor, label, nested=False, kernels=False)


def op_group(frames: object, group: int, claimed_ns: float, label: str) -> Edits | None:
    """The work units of ``op_perf`` row ``group`` at the factor that takes ``claimed_ns`` off
    their time: its kernels; on a host-only trace its ops (the calls a unit's time rolls up to),
    with what is nested in them. None when the grouping was not kept."""
    kept = frames.memo("op_perf_units", lambda: None)  # type: ignore[attr-defined]
    if kept is None:
        return None
    unit_group, owner, unit_ns, host_only = kept
    units = np.flatnonzero(unit_group == group)
    total = float(unit_ns[units].sum())
    if not len(units) or total <= 0:
        return None
    factor = float(np.clip(1.0 - claimed_ns / total, 0.0, 1.0))
    if host_only:
        calls = np.unique(owner[units][owner[units] >= 0])
        events = frames.host.iloc[calls]  # type: ignore[attr-defined]
    else:
        events = frames.device.iloc[units]  # type: ignore[attr-defined]
    return scaled(events, factor, f"{label} (x{factor:.2f})")
