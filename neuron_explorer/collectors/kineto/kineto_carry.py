"""Import side of ``trace.carry``: columns a Chrome export carried in ``args``, taken back.

Only runs on a file that holds the carry marker (``trace.carry.PREFIX``, found with one search
of the args text the importer joins anyway); a plain Kineto trace pays nothing. Carried values
of the wrong type for their column are set to null and counted.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from neuron_explorer.collectors.build.raw_events import CARRIED
from neuron_explorer.trace import carry
from neuron_explorer.trace.arrow import bool_array
from neuron_explorer.trace.repairs import NULLED
from neuron_explorer.trace.schema import COLUMN_BY_NAME


def _plain(typ: pa.DataType) -> pa.DataType:
    return typ.value_type if pa.types.is_dictionary(typ) else typ


def take_carried(
    raws: list[msgspec.Raw], no_args: msgspec.Raw, issues: dict[tuple[str, str], int]
) -> tuple[list[msgspec.Raw], dict[str, pa.Array]]:
    """(args with the carried member taken out, carried columns plus a ``CARRIED:<column>`` mask each)."""
    n = len(raws)
    values: dict[str, list[Any]] = {}
    present: dict[str, np.ndarray] = {}  # per column: the rows that carried it (cells, not rows)
    mask = np.zeros(n, bool)
    out = list(raws)
    prefix = carry.PREFIX
    for i, r in enumerate(raws):
        if bytes(memoryview(r)[: len(prefix)]) != prefix:
            continue
        parts = carry.split(bytes(r))
        if parts is None:
            continue
        carried, original = parts
        out[i] = no_args if original is None else msgspec.Raw(original)
        mask[i] = True
        for key, value in carried.items():
            if key in COLUMN_BY_NAME and key not in carry.NATIVE:
                values.setdefault(key, [None] * n)[i] = value
                present.setdefault(key, np.zeros(n, bool))[i] = True
    if not mask.any():
        return raws, {}
    columns: dict[str, Any] = {key: _array(key, vals, issues) for key, vals in values.items()}
    # a row carries only the columns the importer would not derive back, so each column is
    # restored where that row carried it and derived elsewhere
    columns.update({f"{CARRIED}:{key}": bool_array(m) for key, m in present.items()})
    return out, columns


def _array(key: str, values: list[Any], issues: dict[tuple[str, str], int]) -> pa.Array:
    typ = _plain(COLUMN_BY_NAME[key].type)
    try:
        return pa.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        pass
    kept: list[Any] = []
    for v in values:
        try:
            pa.array([v], typ)
            ok = not isinstance(v, bool) or pa.types.is_boolean(typ)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            ok = False
        kept.append(v if ok else None)
        if not ok:
            what = (f"carried {key} of the wrong type", NULLED)
            issues[what] = issues.get(what, 0) + 1
    return pa.array(kept, typ)
