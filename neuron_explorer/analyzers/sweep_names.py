"""What a sweep's file names say: matrix sizes, sequence length, batch, dtype.

A sweep is usually a folder of files named after what changed. The conventions read here
(assumed: common in public benchmark scripts, none of them required; a name that says none
of them gives no columns):

- matrix sizes ``M128_K256_N512``, ``m128-k256-n512``, ``m=128``, ``m128k128n512`` and
  ``128x256x512`` (M x K x N, the order ``nki.isa.nc_matmul`` tutorials and BLAS benchmarks
  use);
- the sequence length ``s512``, ``seq1024``, ``seqlen2048``, ``seq_len=4096``;
- the batch ``b8``, ``bs8``, ``batch8``;
- the dtype ``bf16``, ``fp16``, ``fp32``, ``fp8``, ``int8``, ``tf32`` (also ``bfloat16``,
  ``float32``, ...).

Numbers in other words of a name are left alone (``exec_2``, ``v3``), and a name is read only
at word boundaries (``_ - . =`` and the ends), so ``s512`` inside ``fused_bf16_s512`` is a
sequence length and ``version512`` is not.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_SEP = r"(?:^|(?<=[_\-./=]))"
_END = r"(?=$|[_\-./=x])"
_MKN_JOINED = re.compile(_SEP + r"m(\d+)k(\d+)n(\d+)" + _END, re.I)
_MKN_X = re.compile(_SEP + r"(\d+)x(\d+)x(\d+)" + r"(?=$|[_\-./=])", re.I)
_ONE = re.compile(_SEP + r"([MKN])[_=\-]?(\d+)" + _END, re.I)
_SEQ = re.compile(_SEP + r"(?:seq_?len|seq|s)[_=\-]?(\d+)" + _END, re.I)
_BATCH = re.compile(_SEP + r"(?:batch|bs|b)[_=\-]?(\d+)" + _END, re.I)
_DTYPE = re.compile(
    _SEP + r"(bf16|bfloat16|fp16|float16|f16|fp32|float32|f32|tf32|fp8(?:_?e4m3|_?e5m2)?|float8\w*|int8)" + _END, re.I
)
_DTYPE_NAMES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "f16": "fp16",
    "float32": "fp32",
    "f32": "fp32",
}


def _stem(name: str) -> str:
    base = Path(name).name
    for suffix in (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".parquet", ".ntff"):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)]
    return base


def sizes_from_name(name: str) -> dict[str, Any]:
    """``m``, ``k``, ``n``, ``seq``, ``batch`` (ints) and ``dtype`` where the file name says them."""
    stem = _stem(name)
    out: dict[str, Any] = {}
    joined = _MKN_JOINED.search(stem) or _MKN_X.search(stem)
    if joined:
        out.update(zip("mkn", map(int, joined.groups())))
    else:
        for m in _ONE.finditer(stem):
            out.setdefault(m.group(1).lower(), int(m.group(2)))
    if m := _SEQ.search(stem):
        out["seq"] = int(m.group(1))
    if m := _BATCH.search(stem):
        out["batch"] = int(m.group(1))
    if m := _DTYPE.search(stem):
        token = m.group(1).lower()
        out["dtype"] = _DTYPE_NAMES.get(token, "fp8" if token.startswith(("fp8", "float8")) else token)
    return out


def natural_key(name: str) -> list[Any]:
    """Sort key that orders the numbers in a name by value (``N136`` before ``N1000``)."""
    return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", str(name))]


def size_axis(columns: list[str]) -> str | None:
    """The parsed size to chart and sort a sweep by: ``m*k*n`` with all three, else the first
    of ``seq``, ``batch``, ``n``, ``m``, ``k`` present."""
    if all(c in columns for c in ("m", "k", "n")):
        return "m*k*n"
    return next((c for c in ("seq", "batch", "n", "m", "k") if c in columns), None)
