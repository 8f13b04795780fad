"""Where a capture writes its traces, and what it records about the run (rank, devices, host).

Paths (documented in docs/capture.md):

- ``output="x.parquet"``: cycle 0 -> ``x.parquet``, cycle k -> ``x.cycle{k}.parquet``.
- ``output="run"`` (no ``.parquet`` suffix, or an existing directory): a run directory,
  cycle 0 -> ``run/rank=N/trace.parquet``, cycle k -> ``run.cycle{k}/rank=N/trace.parquet`` (a run
  directory holds one file per rank, so each cycle is a run directory of its own).
- Distributed (world size > 1): always a run directory, one file per rank; ``x.parquet`` names
  the run directory ``x``.

Each cycle's files are complete traces on their own: ``neuron-explorer info x.cycle1.parquet``.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from pathlib import Path
from typing import Any

PARQUET = ".parquet"


def distributed_info() -> dict[str, Any] | None:
    """Rank, world size and backend from torch.distributed, else from RANK/WORLD_SIZE."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return {
                "backend": str(dist.get_backend()),
                "rank": int(dist.get_rank()),
                "world_size": int(dist.get_world_size()),
                "local_rank": _env_int("LOCAL_RANK"),
                "source": "torch.distributed",
            }
    except (ImportError, RuntimeError, ValueError):
        pass
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is not None and world is not None:
        return {
            "backend": None,
            "rank": rank,
            "world_size": world,
            "local_rank": _env_int("LOCAL_RANK"),
            "source": "environment",
        }
    return None


def _env_int(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def trace_path(output: str | os.PathLike[str], rank: int, world_size: int, cycle: int) -> Path:
    """The file one cycle of one rank is written to (see the module docstring)."""
    out = Path(output)
    is_file = out.suffix == PARQUET and not out.is_dir()
    if is_file and world_size <= 1:
        return out if cycle == 0 else out.with_name(f"{out.stem}.cycle{cycle}{PARQUET}")
    root = out.with_suffix("") if is_file else out
    if cycle:
        root = root.with_name(f"{root.name}.cycle{cycle}")
    return root / f"rank={rank}" / f"trace{PARQUET}"


def run_metadata() -> dict[str, Any]:
    """Facts about the process and torch build, recorded in every captured trace."""
    import torch

    meta: dict[str, Any] = {
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "host_name": socket.gethostname(),
        "pid": os.getpid(),
        "command": list(sys.argv),
        "cwd": os.getcwd(),
    }
    accel = accelerator_type()
    meta["accelerator"] = accel
    if accel:
        meta["device_type"] = accel  # device events and device memory take this name
    meta["privateuse1_backend"] = torch._C._get_privateuse1_backend_name()
    meta["device_properties"] = device_properties(accel)
    return meta


def accelerator_type() -> str | None:
    """``cuda``, ``hip``, ``xpu``, ``mtia``, ``hpu``, ``neuron`` (a renamed PrivateUse1), or None."""
    import torch

    acc = getattr(torch, "accelerator", None)
    try:
        dev = acc.current_accelerator() if acc is not None and acc.is_available() else None
    except (RuntimeError, AttributeError):
        dev = None
    if dev is None:
        return None
    if dev.type == "cuda" and getattr(torch.version, "hip", None):
        return "hip"
    return str(dev.type)


def device_properties(accel: str | None) -> list[dict[str, Any]]:
    """One dict per visible device, with Kineto's key names where the property exists."""
    import torch

    if accel not in ("cuda", "hip"):
        count = _device_count()
        return [{"id": i, "name": f"{accel}:{i}"} for i in range(count)] if accel else []
    props = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        props.append(
            {
                "id": i,
                "name": p.name,
                "totalGlobalMem": int(p.total_memory),
                "computeMajor": int(p.major),
                "computeMinor": int(p.minor),
                "numSms": int(p.multi_processor_count),
                "maxThreadsPerMultiprocessor": int(getattr(p, "max_threads_per_multi_processor", 0)),
                "regsPerMultiprocessor": int(getattr(p, "regs_per_multiprocessor", 0)),
                "sharedMemPerBlock": int(getattr(p, "shared_memory_per_block", 0)),
                "sharedMemPerMultiprocessor": int(getattr(p, "shared_memory_per_multiprocessor", 0)),
                "sharedMemPerBlockOptin": int(getattr(p, "shared_memory_per_block_optin", 0)),
                "warpSize": int(getattr(p, "warp_size", 32)),
                "l2CacheSize": int(getattr(p, "L2_cache_size", 0)),
            }
        )
    return props


def _device_count() -> int:
    import torch

    try:
        return int(torch.accelerator.device_count())
    except (RuntimeError, AttributeError):
        return 0
