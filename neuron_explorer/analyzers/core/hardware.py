"""What hardware a trace ran on, as far as the trace says, and what that hardware supports.

The device model and capability come from the trace alone: Kineto ``deviceProperties`` (name,
``computeMajor``/``computeMinor``, ``numSms``, ``totalGlobalMem``), the device types of its events, ``distributedInfo`` and, for
Trainium/Inferentia, the Neuron instance type. Rules ask this one place before they suggest a
fix, so no rule suggests bf16 on a V100 or says "CUDA" to an MTIA, ROCm, Neuron or CPU user.

ROCm builds of PyTorch run AMD GPUs through the ``torch.cuda`` APIs (``device='cuda'``,
``torch.cuda.synchronize()``), so advice names those APIs for ROCm too, but says ROCm/HIP where it
names the platform.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Device types whose PyTorch API module and device string differ from the device type.
_TORCH_DEVICE = {"cuda": "cuda", "hip": "cuda", "mtia": "mtia", "xpu": "xpu", "neuron": "neuron", "cpu": "cpu"}
_PLATFORM = {"cuda": "CUDA", "hip": "ROCm", "mtia": "MTIA", "xpu": "XPU", "neuron": "Neuron", "cpu": "CPU"}
#: Devices with a fused (single-kernel) torch.optim implementation, per
#: ``torch.utils._foreach_utils._get_fused_kernels_supported_devices`` (CPU since torch 2.4).
_FUSED_OPTIM_DEVICES = frozenset({"cuda", "xpu", "mps", "hpu", "cpu"})
#: torch.optim classes with a ``fused=`` constructor argument, and with ``foreach=``.
FUSED_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD", "Adagrad"})
FOREACH_OPTIMIZERS = frozenset(
    {"Adam", "AdamW", "SGD", "Adagrad", "Adadelta", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop"}
)


@dataclass(frozen=True)
class Hardware:
    """The accelerator of a trace (the first device type other than the CPU, else the CPU)."""

    device_type: str  # as in the events: cuda, hip, mtia, neuron, xpu, cpu, ...
    name: str | None = None  # deviceProperties name / Neuron instance type
    compute_major: int | None = None
    compute_minor: int | None = None
    world_size: int | None = None
    #: streaming multiprocessors (NVIDIA) / compute units (AMD): deviceProperties ``numSms``
    sms: int | None = None
    #: device memory: deviceProperties ``totalGlobalMem``
    memory_bytes: int | None = None

    @property
    def torch_device(self) -> str:
        """The device string PyTorch code uses (``"cuda"`` on ROCm too)."""
        return _TORCH_DEVICE.get(self.device_type, self.device_type)

    @property
    def platform(self) -> str:
        """The platform as its users call it: CUDA, ROCm, MTIA, Neuron, CPU, ..."""
        return _PLATFORM.get(self.device_type, self.device_type.upper())

    @property
    def label(self) -> str:
        """``"NVIDIA A100-PG509-200 (CUDA, compute capability 8.0)"``, ``"CPU"``."""
        if self.device_type == "cpu":
            return "CPU"
        cc = (
            f", compute capability {self.compute_major}.{self.compute_minor or 0}"
            if self.compute_major is not None and self.device_type == "cuda"
            else ""
        )
        return f"{self.name or self.device_type} ({self.platform}{cc})"

    @property
    def is_nvidia(self) -> bool:
        return self.device_type == "cuda"

    @property
    def tensor_cores(self) -> bool | None:
        """NVIDIA tensor cores: compute capability 7.0 (Volta) and newer; None when unknown."""
        if not self.is_nvidia:
            return None
        return None if self.compute_major is None else self.compute_major >= 7

    @property
    def bf16(self) -> bool | None:
        """Native bfloat16 matmuls: NVIDIA compute capability 8.0 (Ampere) and newer; AMD MI100 and
        newer (CDNA, gfx908+: the trace's computeMajor 9 does not tell MI50 apart, so AMD is
        assumed able); Trainium, MTIA and XPU yes; CPU: only as a slower emulation, so no."""
        if self.is_nvidia:
            return None if self.compute_major is None else self.compute_major >= 8
        return self.device_type in ("hip", "neuron", "mtia", "xpu")

    @property
    def tf32(self) -> bool | None:
        """TF32 tensor-core matmuls: NVIDIA compute capability 8.0 and newer."""
        return self.bf16 if self.is_nvidia else False

    @property
    def fused_optimizer(self) -> bool:
        """``torch.optim.<X>(..., fused=True)`` runs on this device."""
        return self.torch_device in _FUSED_OPTIM_DEVICES

    def autocast(self, dtype: str | None = None) -> str:
        """The autocast call for this device, spelled as it is called:
        ``torch.autocast(device_type="cuda", dtype=torch.bfloat16)``."""
        dtype = dtype or ("bfloat16" if self.bf16 else "float16")
        return f'torch.autocast(device_type="{self.torch_device}", dtype=torch.{dtype})'


def hardware_of(metadata: dict[str, Any], device_types: list[str]) -> Hardware:
    """The ``Hardware`` of a trace from its metadata and the device types of its events."""
    accel = [d for d in device_types if d and d != "cpu"]
    dtype = accel[0] if accel else "cpu"
    props = [p for p in metadata.get("device_properties") or [] if isinstance(p, dict)]
    first = props[0] if props else {}
    name = first.get("name")
    neuron = metadata.get("neuron")
    if dtype == "neuron" and isinstance(neuron, dict):
        name = neuron.get("instance_type") or name
    dist = metadata.get("distributed_info")
    world = metadata.get("world_size") or (dist.get("world_size") if isinstance(dist, dict) else None)
    return Hardware(
        device_type=dtype,
        name=str(name) if name else None,
        compute_major=_int(first.get("computeMajor")),
        compute_minor=_int(first.get("computeMinor")),
        world_size=_int(world),
        sms=_int(first.get("numSms")) or None,
        memory_bytes=_int(first.get("totalGlobalMem")) or None,
    )


def _int(v: Any) -> int | None:
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError):
        return None
