"""Op arguments as the profiler recorded them: shapes, dtypes, strides and concrete values.

Kineto writes ``Input Dims``, ``Input type``, ``Input Strides`` and ``Concrete Inputs`` per op
(``record_shapes=True``); the trace keeps the first two as the ``input_shapes`` /
``input_types`` columns and all four in ``args``. Everything here runs once per distinct op
group (name, shapes, dtypes), never per event.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: Kineto's ``Input type`` strings -> (canonical dtype, bytes per element).
_DTYPES: dict[str, tuple[str, float]] = {
    "double": ("fp64", 8),
    "float": ("fp32", 4),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "c10::Float8_e8m0fnu": ("fp8", 1),
    "c10::Float4_e2m1fn_x2": ("fp4", 1),  # two fp4 values per element: the shape counts pairs
    "long int": ("int64", 8),
    "long": ("int64", 8),  # measured on HTA's sampled_rank traces (5,612 arguments): older Kineto's spelling
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::Half>": ("complex32", 4),
}
#: ``torch.dtype`` spellings (captured traces, concrete ``dtype=`` arguments) to the same names.
_TORCH_NAMES = {
    "torch.float64": "double",
    "torch.float32": "float",
    "torch.float16": "c10::Half",
    "torch.bfloat16": "c10::BFloat16",
    "torch.float8_e4m3fn": "c10::Float8_e4m3fn",
    "torch.float8_e5m2": "c10::Float8_e5m2",
    "torch.int64": "long int",
    "torch.int32": "int",
    "torch.int8": "signed char",
    "torch.uint8": "unsigned char",
    "torch.bool": "bool",
}
#: ScalarType enum values as ``Concrete Inputs`` show a ``dtype=`` argument (c10/core/ScalarType.h).
SCALAR_TYPE_CODES = {
    "0": "unsigned char",
    "1": "signed char",
    "2": "short int",
    "3": "int",
    "4": "long int",
    "5": "c10::Half",
    "6": "float",
    "7": "double",
    "11": "bool",
    "15": "c10::BFloat16",
    "23": "c10::Float8_e5m2",
    "24": "c10::Float8_e4m3fn",
}
#: The dtypes whose math a device can run on matrix units (the rest is vector math).
FLOAT_DTYPES = ("fp64", "fp32", "fp16", "bf16", "fp8", "fp4")


def canonical_dtype(kineto_type: str | None) -> str | None:
    """``c10::BFloat16`` -> ``bf16``; None for non-tensors (``Scalar``, ``TensorList``, ``''``)."""
    if not kineto_type:
        return None
    t = _TORCH_NAMES.get(kineto_type, kineto_type)
    entry = _DTYPES.get(t)
    return entry[0] if entry else None


def bytes_per_element(kineto_type: str | None) -> float | None:
    if not kineto_type:
        return None
    entry = _DTYPES.get(_TORCH_NAMES.get(kineto_type, kineto_type))
    return entry[1] if entry else None


def numel(shape: Sequence[int]) -> int:
    return math.prod(int(d) for d in shape)


def broadcast(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """NumPy broadcasting of two shapes (the larger extent wins where they differ)."""
    n = max(len(a), len(b))
    pa_ = [1] * (n - len(a)) + list(a)
    pb = [1] * (n - len(b)) + list(b)
    return [max(x, y) if min(x, y) != 0 else 0 for x, y in zip(pa_, pb)]


@dataclass
class OpArgs:
    """One op call's recorded arguments, position by position."""

    shapes: list[Any]
    types: list[str]
    strides: list[Any] = field(default_factory=list)
    concrete: list[str] = field(default_factory=list)

    def is_tensor(self, i: int) -> bool:
        return i < len(self.types) and canonical_dtype(self.types[i]) is not None and isinstance(self.shapes[i], list)

    def shape(self, i: int) -> list[int] | None:
        """The shape of argument ``i`` when it is a tensor (a 0-dim tensor is ``[]``)."""
        if not self.is_tensor(i):
            return None
        s = self.shapes[i]
        return [int(x) for x in s] if all(isinstance(x, int) for x in s) else None

    def tensors(self) -> list[int]:
        """Positions of the tensor arguments."""
        return [i for i in range(len(self.types)) if self.shape(i) is not None]

    def dtype(self, i: int) -> str | None:
        return canonical_dtype(self.types[i]) if i < len(self.types) else None

    def bpe(self, i: int) -> float | None:
        return bytes_per_element(self.types[i]) if i < len(self.types) else None

    def nbytes(self, i: int) -> float:
        """Bytes of tensor argument ``i`` (0 when it is not a tensor)."""
        s, b = self.shape(i), self.bpe(i)
        return float(numel(s) * b) if s is not None and b is not None else 0.0

    def stride(self, i: int) -> list[int] | None:
        if i < len(self.strides) and isinstance(self.strides[i], list):
            s = self.strides[i]
            return [int(x) for x in s] if all(isinstance(x, int) for x in s) else None
        return None

    def value(self, i: int) -> str | None:
        """The concrete value of argument ``i`` as recorded (``'True'``, ``'[1, 1]'``), or None."""
        if i < len(self.concrete) and self.concrete[i] not in ("", None):
            return str(self.concrete[i])
        return None

    def flag(self, i: int, default: bool = False) -> bool:
        v = self.value(i)
        if v is None:
            return default
        return v.strip().lower() in ("true", "1")

    def ints(self, i: int) -> list[int] | None:
        """A concrete int list (``'[1, 1]'``) or a single int broadcast later by the caller."""
        v = self.value(i)
        if v is None:
            return None
        try:
            parsed = json.loads(v)
        except ValueError:
            return None
        if isinstance(parsed, int):
            return [parsed]
        if isinstance(parsed, list) and all(isinstance(x, int) for x in parsed):
            return parsed
        return None

    def number(self, i: int) -> float | None:
        v = self.value(i)
        try:
            return float(v) if v is not None else None
        except ValueError:
            return None


def parse_args(shapes_json: str | None, types_json: str | None, args_json: str | None = None) -> OpArgs | None:
    """An ``OpArgs`` from the trace's JSON columns; None when the op has no recorded shapes."""
    if not shapes_json or not types_json:
        return None
    try:
        shapes = json.loads(shapes_json)
        types = json.loads(types_json)
    except ValueError:
        return None
    if not isinstance(shapes, list) or not isinstance(types, list):
        return None
    strides: list[Any] = []
    concrete: list[str] = []
    if args_json:
        try:
            raw = json.loads(args_json)
        except ValueError:
            raw = {}
        if isinstance(raw, dict):
            strides = raw.get("Input Strides") or []
            concrete = raw.get("Concrete Inputs") or []
    return OpArgs(shapes, [str(t) for t in types], strides, concrete)


def is_transposed(stride: Sequence[int] | None, shape: Sequence[int] | None) -> bool:
    """True when a matrix operand's last dimension is not the contiguous one (column-major)."""
    if not stride or not shape or len(stride) < 2:
        return False
    return stride[-1] != 1 and shape[-1] > 1


def non_contiguous(a: OpArgs, matrix: bool) -> list[int]:
    """Tensor arguments whose strides are not the contiguous (row-major) ones, ignoring
    size-1 dimensions. For matrix operands a plain transpose of the last two dimensions is
    free (BLAS takes either order), so only operands with neither of them unit-stride count."""
    out = []
    for i in a.tensors():
        shape, stride = a.shape(i), a.stride(i)
        if not shape or not stride or len(shape) != len(stride):
            continue
        if matrix:
            if len(shape) >= 2 and stride[-1] != 1 and stride[-2] != 1 and shape[-1] > 1 and shape[-2] > 1:
                out.append(i)
            continue
        expected = 1
        for size, st in zip(reversed(shape), reversed(stride)):
            if size != 1 and st != expected:
                out.append(i)
                break
            expected *= size
    return out


def short_shapes(shapes_json: Any) -> str:
    """``[[8944,1024],[1024,2816],[],[]]`` -> ``[8944,1024] x [1024,2816]`` (tensor args only)."""
    try:
        shapes = json.loads(shapes_json) if isinstance(shapes_json, str) else []
    except ValueError:
        return str(shapes_json)
    dims = [s for s in shapes if isinstance(s, list) and s and all(isinstance(x, int) for x in s)]
    return " x ".join(json.dumps(d, separators=(",", ":")) for d in dims) or "[]"


def short_dtypes(types_json: Any) -> str:
    """``["c10::BFloat16","c10::BFloat16","Scalar"]`` -> ``BFloat16`` (tensor dtypes, once each)."""
    try:
        types = json.loads(types_json) if isinstance(types_json, str) else []
    except ValueError:
        return ""
    tensor = [t for t in types if canonical_dtype(str(t))]
    return ", ".join(dict.fromkeys(str(t).replace("c10::", "") for t in tensor))
