"""Whether two traces are runs of the same job on the same hardware, checked before ``diff``
compares them (docs/diff.md, "Comparable runs").

A different device (by name, else by type) or world size means a different machine or job: the
step-time change says nothing about the code, so the diff is "not comparable" and the gate does
not fail on it unless forced. A different rank, compute dtype, input shapes of the heaviest ops
or torch version is a similar run: compared, with a warning line per difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.perf.devices import device_names

#: How many of the heaviest op shapes describe a run's batch shapes.
TOP_SHAPES = 5


@dataclass(frozen=True)
class Job:
    """What identifies a run for comparison."""

    devices: tuple[str, ...]  # device names (else types) the trace ran on
    world_size: int | None
    ranks: tuple[int, ...]
    dtype: str | None  # the compute dtype with the most op time
    shapes: tuple[str, ...]  # name + input shapes of the heaviest op groups
    torch_version: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "devices": list(self.devices),
            "world_size": self.world_size,
            "ranks": list(self.ranks),
            "dtype": self.dtype,
            "shapes": list(self.shapes),
            "torch_version": self.torch_version,
        }


@dataclass
class Comparability:
    """``blocking``: why the runs are not comparable (empty when they are); ``warnings``: how
    two comparable runs differ."""

    blocking: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def comparable(self) -> bool:
        return not self.blocking


def job_of(frames: TraceFrames, analysis: Any) -> Job:
    meta = frames.metadata
    used = _used_devices(frames)
    props = meta.get("device_properties") or []
    by_id = {int(p["id"]): str(p["name"]) for p in props if isinstance(p, dict) and "id" in p and p.get("name")}
    names = sorted({by_id[i] for _, i in used if i in by_id}) or sorted(set(device_names(meta)))
    devices = tuple(names) if names else tuple(sorted({t for t, _ in used} or {"cpu"}))
    world = meta.get("world_size")
    summary = getattr(analysis, "summary", None) or {}
    return Job(
        devices=devices,
        world_size=int(world) if isinstance(world, (int, float)) and world else None,
        ranks=tuple(int(r) for r in frames.ranks),
        dtype=_dtype(analysis.op_perf),
        shapes=_shapes(analysis.op_perf),
        torch_version=summary.get("torch_version"),
    )


def _used_devices(frames: TraceFrames) -> set[tuple[str, int]]:
    d = frames.device
    if not len(d):
        return set()
    pairs = d[["device_type", "device"]].drop_duplicates()
    return {(str(t), int(i)) for t, i in zip(pairs["device_type"].astype(str), pairs["device"]) if i == i}


def _dtype(op_perf: pd.DataFrame) -> str | None:
    if not len(op_perf) or "compute_dtype" not in op_perf:
        return None
    t = op_perf.dropna(subset=["compute_dtype"])
    if not len(t):
        return None
    return str(t.groupby("compute_dtype")["kernel_time_us"].sum().idxmax())


def _shapes(op_perf: pd.DataFrame) -> tuple[str, ...]:
    if not len(op_perf):
        return ()
    t = op_perf[op_perf["shapes"].astype(str) != ""].nlargest(TOP_SHAPES, "kernel_time_us")
    return tuple(f"{n} {s}" for n, s in zip(t["name"], t["shapes"]))


def check(base: Job, new: Job) -> Comparability:
    """How ``new`` differs from ``base``, worst first."""
    c = Comparability()
    if base.devices != new.devices:
        c.blocking.append(f"different devices: {', '.join(base.devices)} vs {', '.join(new.devices)}")
    if base.world_size and new.world_size and base.world_size != new.world_size:
        c.blocking.append(f"different world size: {base.world_size} vs {new.world_size} ranks")
    if base.ranks != new.ranks:
        c.warnings.append(f"different ranks: {_ranks(base.ranks)} vs {_ranks(new.ranks)}")
    if base.dtype and new.dtype and base.dtype != new.dtype:
        c.warnings.append(f"different compute dtype: {base.dtype} vs {new.dtype}")
    if base.shapes and new.shapes and not set(base.shapes) & set(new.shapes):
        c.warnings.append(f"different input shapes of the heaviest ops: {_first(base.shapes)} vs {_first(new.shapes)}")
    if base.torch_version and new.torch_version and base.torch_version != new.torch_version:
        c.warnings.append(f"different torch version: {base.torch_version} vs {new.torch_version}")
    return c


def _ranks(ranks: tuple[int, ...]) -> str:
    return "rank " + ", ".join(map(str, ranks)) if ranks else "no rank"


def _first(shapes: tuple[str, ...], width: int = 60) -> str:
    s = shapes[0]
    return s if len(s) <= width else s[: width - 1] + "…"
