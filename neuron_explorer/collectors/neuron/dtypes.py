"""What the NeuronCore's matmuls read: their operand dtypes, and whether HLO names the work.

Neuron advice depends on it: auto-casting to bf16 helps fp32 matmuls only (a 16-bit matmul,
fp16 or bf16, already runs at the Tensor engine's full rate; fp32 at a quarter of it, reference
neuron-formats.md), and compiler flags or HLO-level advice do not apply to a kernel that has no
HLO names (an NKI or hand-written kernel).

Measured on the real trn2 exports (tests/data/neuron/trn2_attention): MATMUL ``operands`` carry
``src=<dtype>@<address>`` (``src=bfloat16@0x36ff8...``, ``src=fp32@...`` with ``fp32_mode=LOW_HIGH``);
their ``hlo_name`` is empty and their ``layer`` is ``Unknown``. A profile whose operands name no
dtype says "unknown" (assumed: no other field of the legacy export states it).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from neuron_explorer.collectors.neuron.model import DeviceProfile

_SRC = r"\bsrc=([A-Za-z][A-Za-z0-9_]*)@"
#: Operand dtype spellings -> the name advice uses.
_DTYPES = {
    "fp32": "fp32",
    "float32": "fp32",
    "f32": "fp32",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "f16": "fp16",
}


def _dtype(token: str) -> str | None:
    t = token.lower()
    if t in _DTYPES:
        return _DTYPES[t]
    if t.startswith(("fp8", "float8", "f8")):
        return "fp8"
    if t.startswith(("int", "uint")):
        return t
    return None


def matmul_dtypes(profile: DeviceProfile) -> dict[str, Any]:
    """``matmul_instructions`` and their summed time ``matmul_ns``, per-dtype counts and time
    (``matmul_<dtype>_instructions``, ``matmul_<dtype>_ns``), the dtype
    most MATMULs read (``matmul_dtype``: a dtype, or ``unknown`` where no operand names one),
    ``matmul_fp32_share_pct`` of those whose dtype is known, and ``hlo_named_instructions``."""
    ins = profile.instructions
    if not len(ins) or "opcode" not in ins:
        return {}
    work = ins[~ins["is_wait"].to_numpy(bool)] if "is_wait" in ins else ins
    out: dict[str, Any] = {}
    if "hlo_name" in work:
        names = work["hlo_name"].astype(object).where(work["hlo_name"].notna(), "").astype(str).str.strip()
        out["hlo_named_instructions"] = int((names != "").sum())
    mm = work[(work["opcode"].astype(str) == "MATMUL").to_numpy()]
    out["matmul_instructions"] = len(mm)
    if not len(mm):
        return out
    ops = mm["operands"] if "operands" in mm else pd.Series("", index=mm.index)
    codes, uniques = pd.factorize(ops.astype(object).where(ops.notna(), "").astype(str))
    tokens = pd.Series(uniques, dtype=object).str.extract(_SRC)[0] if len(uniques) else pd.Series(dtype=object)
    per_unique = [(_dtype(t) if isinstance(t, str) else None) for t in tokens]
    dtypes = pd.Series([per_unique[c] if c >= 0 else None for c in codes], dtype=object, index=mm.index)
    counts = dtypes.value_counts()
    time = pd.to_numeric(mm["dur_ns"], errors="coerce").fillna(0).groupby(dtypes).sum()
    out["matmul_ns"] = int(pd.to_numeric(mm["dur_ns"], errors="coerce").fillna(0).sum())
    for dtype, n in counts.items():
        out[f"matmul_{dtype}_instructions"] = int(n)
        out[f"matmul_{dtype}_ns"] = int(time.get(dtype, 0))
    known = int(counts.sum())
    out["matmul_dtype_known_instructions"] = known
    out["matmul_dtype"] = str(counts.index[0]) if known else "unknown"
    if known:
        out["matmul_fp32_share_pct"] = 100.0 * int(counts.get("fp32", 0)) / known
    return out
