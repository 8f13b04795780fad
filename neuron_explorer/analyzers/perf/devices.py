"""Device peak table: dense FLOP/s per dtype (vector and matrix units) and memory bandwidth.

Every figure is the vendor's datasheet peak for *dense* math (no 2:4 sparsity) at boost clock,
per device as PyTorch sees it (one MI250X GCD is one device). The source of each entry is named
in ``source`` and listed in docs/devices.md. A trace names its device in the Kineto
``deviceProperties`` (``NVIDIA H100 80GB HBM3``) or, for Neuron, the instance type
(``trn1.32xlarge``); ``detect`` maps that name to an entry, ``load_spec`` reads an override
(a table name or a TOML file, ``--device-spec``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_explorer.trace.errors import AnalysisError

try:  # Python >= 3.11
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    _toml = None  # type: ignore[assignment]

#: Compute dtypes the table knows (canonical names, see ``perf.shapes.canonical_dtype``).
DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4")

T = 1e12  # TFLOP/s -> FLOP/s


@dataclass(frozen=True)
class DeviceSpec:
    """Peaks of one device. ``matrix`` / ``vector`` map a dtype to FLOP/s (matrix: tensor cores,
    MFMA, the Tensor engine; vector: CUDA cores / SIMD); ``mem_bw`` is bytes/s."""

    name: str
    mem_bw: float
    matrix: Mapping[str, float]
    vector: Mapping[str, float]
    source: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)
    #: streaming multiprocessors (NVIDIA) / compute units (AMD) and memory size, GiB (nominal):
    #: what tells the variants of one name apart in a trace's deviceProperties
    sms: int | None = None
    mem_gib: float | None = None
    #: the last-level on-chip cache, MiB (L2; AMD CDNA3: the Infinity Cache): an op whose bytes fit
    #: in it can be fed faster than the memory roof, so above that roof it is not judged against it
    cache_mib: float | None = None

    def peak_flops(self, dtype: str | None, matrix: bool) -> float | None:
        """Peak FLOP/s for a dtype on the matrix or the vector units; None when unsupported.

        Matrix math in fp32 runs on the matrix units only where they take fp32 (CDNA) or as
        TF32 where PyTorch allows it; we take the fp32 matrix rate when there is one, else the
        vector rate (TF32 is opt-in in PyTorch, so it is not assumed)."""
        if dtype is None:
            return None
        table = self.matrix if matrix else self.vector
        if dtype in table:
            return table[dtype]
        if matrix and dtype in self.vector:
            return self.vector[dtype]
        if not matrix and dtype in ("fp16", "bf16", "fp8", "int8", "fp4") and "fp32" in self.vector:
            # elementwise math in low precision runs at (at least) the fp32 vector rate
            return self.vector["fp32"]
        return None

    def supports(self, dtype: str) -> bool:
        """True when the matrix units take this dtype (no bf16 on V100, no fp8 before Hopper)."""
        return dtype in self.matrix

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mem_bw_tb_per_s": self.mem_bw / T,
            "matrix_tflops": {k: v / T for k, v in self.matrix.items()},
            "vector_tflops": {k: v / T for k, v in self.vector.items()},
            "source": self.source,
        }


def _spec(
    name: str, bw_tb: float, matrix: dict[str, float], vector: dict[str, float], source: str, *aliases: str
) -> DeviceSpec:
    return DeviceSpec(
        name,
        bw_tb * T,
        {k: v * T for k, v in matrix.items()},
        {k: v * T for k, v in vector.items()},
        source,
        aliases,
        *_SHAPE.get(name, (None, None)),
        _CACHE_MIB.get(name),
    )


#: (SMs or CUs, memory GiB) per entry, from the same datasheets (AMD: CUs per GCD for MI250/X).
_SHAPE: dict[str, tuple[int, float]] = {
    "V100": (80, 32),
    "A100-40GB": (108, 40),
    "A100": (108, 80),
    "H100-SXM": (132, 80),
    "H100-PCIe": (114, 80),
    "H100-NVL": (132, 94),
    "H200": (132, 141),
    "B200": (148, 180),
    "L4": (58, 24),
    "L40S": (142, 48),
    "MI210": (104, 64),
    "MI250": (104, 64),
    "MI250X": (110, 64),
    "MI300X": (304, 192),
    "MI325X": (304, 256),
}


#: Last-level cache per device, MiB, from the same vendors' datasheets and architecture
#: whitepapers (NVIDIA L2; AMD CDNA2 L2 per GCD, CDNA3 Infinity Cache); docs/perf.md.
_CACHE_MIB: dict[str, float] = {
    "V100": 6,
    "A100-40GB": 40,
    "A100": 40,
    "H100-SXM": 50,
    "H100-PCIe": 50,
    "H100-NVL": 50,
    "H200": 50,
    "L4": 48,
    "L40S": 96,
    "MI210": 8,
    "MI250": 8,
    "MI250X": 8,
    "MI300X": 256,
    "MI325X": 256,
}


#: The table (TFLOP/s, TB/s). Sources: docs/perf.md.
DEVICES: dict[str, DeviceSpec] = {
    s.name: s
    for s in (
        _spec(
            "V100",
            0.9,
            {"fp16": 125},
            {"fp64": 7.8, "fp32": 15.7},
            "vendor datasheet NVIDIA Tesla V100 (SXM2)",
            "V100-SXM2",
            "V100",
        ),
        _spec(
            "A100-40GB",
            1.555,
            {"fp64": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "int8": 624},
            {"fp64": 9.7, "fp32": 19.5},
            "vendor datasheet NVIDIA A100 Tensor Core GPU (SXM 40GB)",
            "A100-SXM4-40GB",
            "A100-PCIE-40GB",
        ),
        _spec(
            "A100",
            2.039,
            {"fp64": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "int8": 624},
            {"fp64": 9.7, "fp32": 19.5},
            "vendor datasheet NVIDIA A100 Tensor Core GPU (SXM 80GB)",
            "A100-SXM4-80GB",
            "A100 80GB",
            "A100",
        ),
        _spec(
            "H100-SXM",
            3.35,
            {"fp64": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9, "int8": 1978.9},
            {"fp64": 34, "fp32": 67},
            "vendor datasheet NVIDIA H100 Tensor Core GPU (H100 SXM)",
            "H100 80GB HBM3",
            "H100-SXM5",
            "H100",
        ),
        _spec(
            "H100-PCIe",
            2.0,
            {"fp64": 51, "tf32": 378, "fp16": 756, "bf16": 756, "fp8": 1513, "int8": 1513},
            {"fp64": 26, "fp32": 51},
            "vendor datasheet NVIDIA H100 Tensor Core GPU (H100 PCIe)",
            "H100 PCIe",
        ),
        _spec(
            "H100-NVL",
            3.9,
            {"fp64": 60, "tf32": 417.5, "fp16": 835.5, "bf16": 835.5, "fp8": 1670.5, "int8": 1670.5},
            {"fp64": 30, "fp32": 60},
            "vendor datasheet NVIDIA H100 Tensor Core GPU (H100 NVL, per GPU; dense: the sparse figures / 2)",
            "H100 NVL",
        ),
        _spec(
            "H200",
            4.8,
            {"fp64": 67, "tf32": 494.7, "fp16": 989.4, "bf16": 989.4, "fp8": 1978.9, "int8": 1978.9},
            {"fp64": 34, "fp32": 67},
            "vendor datasheet NVIDIA H200 Tensor Core GPU (H200 SXM)",
            "H200",
        ),
        _spec(
            "B200",
            8.0,
            {"fp64": 40, "tf32": 1100, "fp16": 2250, "bf16": 2250, "fp8": 4500, "int8": 4500, "fp4": 9000},
            {"fp64": 40, "fp32": 80},
            "vendor datasheet NVIDIA HGX B200 (per GPU: the 8-GPU figures / 8, dense)",
            "B200",
        ),
        _spec(
            "L4",
            0.3,
            {"tf32": 60, "fp16": 121, "bf16": 121, "fp8": 242.5, "int8": 242.5},
            {"fp32": 30.3},
            "vendor datasheet NVIDIA L4 Tensor Core GPU",
            "NVIDIA L4",
        ),
        _spec(
            "L40S",
            0.864,
            {"tf32": 183, "fp16": 362.05, "bf16": 362.05, "fp8": 733, "int8": 733},
            {"fp32": 91.6},
            "vendor datasheet NVIDIA L40S GPU",
            "NVIDIA L40S",
        ),
        _spec(
            "MI210",
            1.6384,
            {"fp64": 45.3, "fp32": 45.3, "fp16": 181, "bf16": 181, "int8": 181},
            {"fp64": 22.6, "fp32": 22.6},
            "vendor datasheet AMD Instinct MI210",
            "MI210",
        ),
        _spec(
            "MI250",
            1.6384,
            {"fp64": 45.25, "fp32": 45.25, "fp16": 181.05, "bf16": 181.05, "int8": 181.05},
            {"fp64": 22.65, "fp32": 22.65},
            "vendor datasheet AMD Instinct MI250 (per GCD: the package figures / 2; PyTorch sees each GCD as a device)",
            "MI250",
        ),
        _spec(
            "MI250X",
            1.6384,
            {"fp64": 47.85, "fp32": 47.85, "fp16": 191.5, "bf16": 191.5, "int8": 191.5},
            {"fp64": 23.95, "fp32": 23.95},
            "vendor datasheet AMD Instinct MI250X (per GCD: the package figures / 2; PyTorch sees each GCD as a device)",
            "MI250X",
        ),
        _spec(
            "MI300X",
            5.3,
            {
                "fp64": 163.4,
                "fp32": 163.4,
                "tf32": 653.7,
                "fp16": 1307.4,
                "bf16": 1307.4,
                "fp8": 2614.9,
                "int8": 2614.9,
            },
            {"fp64": 81.7, "fp32": 163.4},
            "vendor datasheet AMD Instinct MI300X",
            "MI300X",
        ),
        _spec(
            "MI325X",
            6.0,
            {
                "fp64": 163.4,
                "fp32": 163.4,
                "tf32": 653.7,
                "fp16": 1307.4,
                "bf16": 1307.4,
                "fp8": 2614.9,
                "int8": 2614.9,
            },
            {"fp64": 81.7, "fp32": 163.4},
            "vendor datasheet AMD Instinct MI325X",
            "MI325X",
        ),
        _spec(
            "Trainium1",
            0.82,
            {"fp32": 47.5, "tf32": 190, "fp16": 190, "bf16": 190, "fp8": 190},
            {"fp32": 47.5},
            "vendor datasheet AWS Trainium (Trn1 instances; per chip: the trn1.32xlarge figures / 16)",
            "trn1",
        ),
        _spec(
            "Trainium2",
            2.9,
            {"fp32": 181, "tf32": 667, "fp16": 667, "bf16": 667, "fp8": 1299},
            {"fp32": 181},
            "vendor datasheet AWS Trainium2 (Trn2 instances; per chip: the trn2.48xlarge figures / 16)",
            "trn2",
        ),
        _spec(
            "Inferentia2",
            0.82,
            {"fp32": 47.5, "tf32": 190, "fp16": 190, "bf16": 190, "fp8": 190},
            {"fp32": 47.5},
            "vendor datasheet AWS Inferentia2 (Inf2 instances; per chip)",
            "inf2",
        ),
    )
}

_KEY = re.compile(r"[^a-z0-9]+")


def _norm(text: str) -> str:
    return _KEY.sub("", text.lower())


def lookup(name: str) -> DeviceSpec | None:
    """The table entry whose name or alias matches ``name`` (case and punctuation ignored)."""
    key = _norm(name)
    for spec in DEVICES.values():
        if key in (_norm(spec.name), *(_norm(a) for a in spec.aliases)):
            return spec
    return None


def detect(device_names: Sequence[str]) -> DeviceSpec | None:
    """The spec of the first device name we recognize (Kineto deviceProperties name or a Neuron
    instance type); longest alias first, so ``H100 PCIe`` is not taken for ``H100``."""
    candidates = sorted(
        ((_norm(a), s) for s in DEVICES.values() for a in (s.name, *s.aliases)), key=lambda kv: -len(kv[0])
    )
    for raw in device_names:
        text = _norm(str(raw))
        if not text:
            continue
        for alias, spec in candidates:
            # short names ("L4") only match exactly: as substrings they would match anything
            if alias == text or (len(alias) >= 4 and alias in text):
                return spec
    return None


#: Entries one trace name can mean: the variant is told by the deviceProperties' memory size and
#: SM/CU count (an "A100-PG509-200" with 40 GiB is the 40 GB part, with its lower bandwidth).
FAMILIES: tuple[tuple[str, ...], ...] = (
    ("A100-40GB", "A100"),
    ("H100-SXM", "H100-PCIe", "H100-NVL"),
    ("MI250", "MI250X", "MI210"),
    ("MI300X", "MI325X"),
)
#: How near a property must be to an entry's (relative): memory sizes are nominal.
_TOLERANCE = 0.12
GIB = 1024.0**3


def _fits(spec: DeviceSpec, sms: int | None, mem_gib: float | None) -> bool:
    ok = spec.sms is not None or spec.mem_gib is not None
    if sms is not None and spec.sms is not None:
        ok &= sms == spec.sms
    if mem_gib is not None and spec.mem_gib is not None:
        ok &= abs(mem_gib - spec.mem_gib) <= _TOLERANCE * spec.mem_gib
    return ok


def _same_peaks(a: DeviceSpec, b: DeviceSpec, rel: float = 0.01) -> bool:
    """Within 1% on the bandwidth and on every matrix peak both have (MI210 and an MI250 GCD)."""
    close = lambda x, y: abs(x - y) <= rel * max(x, y)  # noqa: E731
    keys = set(a.matrix) & set(b.matrix)
    return close(a.mem_bw, b.mem_bw) and bool(keys) and all(close(a.matrix[k], b.matrix[k]) for k in keys)


def detect_variant(
    properties: Sequence[Mapping[str, Any]], by_name: DeviceSpec | None
) -> tuple[DeviceSpec | None, str]:
    """The entry the trace's deviceProperties (SM/CU count ``numSms``, ``totalGlobalMem``) point
    to, and why: within the name's family when the name matched (``by_name``), else among every
    entry with those properties (a ROCm device named "AMD Radeon Graphics", an empty name).
    Returns ``(by_name, "")`` when the properties add nothing."""
    first = next((p for p in properties if isinstance(p, Mapping)), None)
    if first is None:
        return by_name, ""
    sms = first.get("numSms")
    mem = first.get("totalGlobalMem")
    sms = int(sms) if isinstance(sms, (int, float)) and sms > 0 else None
    mem_gib = float(mem) / GIB if isinstance(mem, (int, float)) and mem > 0 else None
    if sms is None and mem_gib is None:
        return by_name, ""
    what = ", ".join(x for x in (f"{sms} SMs/CUs" if sms else "", f"{mem_gib:.0f} GiB" if mem_gib else "") if x)
    if by_name is not None:
        family = next((f for f in FAMILIES if by_name.name in f), (by_name.name,))
        if _fits(by_name, sms, mem_gib):
            return by_name, ""
        other = [DEVICES[n] for n in family if n != by_name.name and _fits(DEVICES[n], sms, mem_gib)]
        if other:
            return other[0], f"variant from deviceProperties ({what})"
        return by_name, ""
    cc = first.get("computeMajor")
    fits = [s for s in DEVICES.values() if s.sms is not None and s.mem_gib is not None and _fits(s, sms, mem_gib)]
    if not fits or sms is None or mem_gib is None or cc is None:
        return None, ""
    same = all(_same_peaks(s, fits[0]) for s in fits)
    if len(fits) > 1 and not same:
        return None, ""
    names = " or ".join(s.name for s in fits)
    return fits[0], f"deviceProperties ({what}): {names}" + (" (the same peaks)" if len(fits) > 1 else "")


def device_names(metadata: Mapping[str, Any]) -> list[str]:
    """Device names the trace metadata carries (deviceProperties, Neuron instance type)."""
    names = [str(d.get("name")) for d in (metadata.get("device_properties") or []) if d.get("name")]
    neuron = metadata.get("neuron") or {}
    for key in ("instance_type",):
        if neuron.get(key):
            names.append(str(neuron[key]))
    return names


def load_spec(value: str | Path) -> DeviceSpec:
    """A table name (``H100-SXM``) or a TOML file with ``name``, ``mem_bw_tb_per_s`` and
    ``[matrix_tflops]`` / ``[vector_tflops]`` tables (docs/devices.md)."""
    text = str(value)
    spec = lookup(text)
    if spec is not None:
        return spec
    path = Path(text)
    if path.suffix.lower() != ".toml":
        raise AnalysisError(f"unknown device {text!r} (known: {', '.join(DEVICES)}; or give a .toml file)")
    if not path.exists():
        raise AnalysisError("device spec file not found", path)
    if not path.is_file():  # (a FIFO would block the read; a directory cannot be read)
        raise AnalysisError("not a regular file: give a TOML device spec", path)
    if _toml is None:  # pragma: no cover
        raise AnalysisError("reading a TOML device spec needs Python 3.11 or later", path)
    try:
        data = _toml.loads(path.read_text())
    except (OSError, UnicodeDecodeError, _toml.TOMLDecodeError) as exc:
        raise AnalysisError(f"not a readable TOML device spec ({exc})", path) from None
    return spec_from_dict(data, path)


def spec_from_dict(data: Mapping[str, Any], path: str | Path | None = None) -> DeviceSpec:
    try:
        bw = float(data["mem_bw_tb_per_s"])
        matrix = {str(k): float(v) for k, v in dict(data.get("matrix_tflops") or {}).items()}
        vector = {str(k): float(v) for k, v in dict(data.get("vector_tflops") or {}).items()}
    except (KeyError, TypeError, ValueError) as exc:
        raise AnalysisError(
            f"device spec needs mem_bw_tb_per_s and numeric [matrix_tflops]/[vector_tflops] ({exc!r})", path
        ) from None
    unknown = sorted((set(matrix) | set(vector)) - set(DTYPES))
    if unknown:
        raise AnalysisError(f"device spec: unknown dtypes {', '.join(unknown)} (known: {', '.join(DTYPES)})", path)
    if bw <= 0 or not (matrix or vector):
        raise AnalysisError("device spec: needs a positive bandwidth and at least one FLOP/s figure", path)
    name = str(data.get("name") or (Path(path).stem if path else "custom"))
    return _spec(name, bw, matrix, vector, str(data.get("source") or f"user file {path}"))
