"""Column helpers every analyzer shares: keys of (rank, id) pairs, codes of column tuples,
look-ups by key and name masks evaluated once per distinct value.

Whole-column numpy and pandas work, no Python per row; ``core.context`` and everything above
it (the metrics, the graph, the reports' timeline) use them. Imports nothing of the package.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd


def ukey(rank: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """One int64 key per (rank, event id) pair, for fast joins on ids (null id -> -1)."""
    ids = np.asarray(ids, dtype=np.int64)
    key = (np.asarray(rank, dtype=np.int64) << 40) | (ids & ((1 << 40) - 1))
    return np.where(ids < 0, -1, key)


def group_codes(*columns: np.ndarray) -> np.ndarray:
    """One dense int64 code per distinct tuple of the (integer) ``columns``, in order of first
    appearance: what ``pd.factorize(pd.MultiIndex.from_arrays(columns))[0]`` gives, without the
    Python tuples a MultiIndex builds (40 ms on 200k rows, against a few ms here)."""
    code: np.ndarray | None = None
    for col in columns:
        c = pd.factorize(np.asarray(col), use_na_sentinel=False)[0].astype(np.int64)
        code = c if code is None else code * (int(c.max()) + 1 if len(c) else 1) + c
        code = pd.factorize(code)[0].astype(np.int64)  # (dense again: the next product stays small)
    return np.zeros(0, np.int64) if code is None else code


def lookup(keys: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Row position in ``keys`` of each target key (-1 when absent or null, i.e. negative).
    With duplicate keys, the first row holding the key."""
    index = pd.Index(keys)
    if not index.is_unique:
        uniq, first = np.unique(np.asarray(keys), return_index=True)  # first row of each key
        index, pos_of_unique = pd.Index(uniq), first
        found = index.get_indexer(targets)
        return np.where((found >= 0) & (targets >= 0), pos_of_unique[np.maximum(found, 0)], -1)
    found = index.get_indexer(targets)
    return np.where(targets < 0, -1, found)


def name_mask(
    names: pd.Series, pattern: str | re.Pattern[str] | None = None, predicate: Callable[[str], bool] | None = None
) -> np.ndarray:
    """Regex search (or predicate) over a categorical column, evaluated once per distinct value."""
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    values = [str(c) for c in cat.cat.categories]
    if predicate is None:
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        assert rx is not None
        predicate = lambda v: rx.search(v) is not None  # noqa: E731
    lut = np.array([predicate(v) for v in values] + [False], dtype=bool)
    codes = cat.cat.codes.to_numpy()
    return lut[np.where(codes < 0, len(values), codes)]
