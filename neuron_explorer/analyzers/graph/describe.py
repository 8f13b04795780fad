"""What the nodes of the graph are, in words: op, kernel, source file and line, decoded on demand.

The graph keeps integer columns only (``build.py``); a critical path, a timeline or a report
decodes the names of the few nodes it shows, each distinct text once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.graph.build import Graph
from neuron_explorer.trace.schema import Kind


def node_codes(graph: Graph, idx: np.ndarray) -> dict[str, np.ndarray]:
    """Codes of the op, kernel and source file (into ``text_values``) and the source line of
    nodes ``idx`` (-1: none): integers per node, text decoded only for what is shown."""
    nodes, host, device = graph.nodes, graph.host, graph.device
    idx = np.asarray(idx, np.int64)
    hr = nodes["host_row"].to_numpy()[idx]
    dr = nodes["device_row"].to_numpy()[idx]
    k = len(idx)
    op = np.full(k, -1, np.int64)
    kernel = np.full(k, -1, np.int64)
    file = np.full(k, -1, np.int64)
    line = np.full(k, -1, np.int64)
    n_host_files = len(_categories_of(host, "src_file"))
    h = np.flatnonzero(hr >= 0)
    if len(h):
        rows = hr[h]
        own = _codes(host, "kind")[rows] == _category_code(host, "kind", Kind.CPU_OP)
        op_row = np.where(own, rows, graph.host_op_row[rows])
        op[h] = np.where(op_row >= 0, _codes(host, "name")[np.maximum(op_row, 0)], -1)
        file[h] = _codes(host, "src_file")[rows]
        line[h] = _ints(host, "src_line")[rows]
    d = np.flatnonzero(dr >= 0)
    if len(d):
        rows = dr[d]
        kernel[d] = _codes(device, "name")[rows]
        op_row = graph.device_op_row[rows]
        op[d] = np.where(op_row >= 0, _codes(host, "name")[np.maximum(op_row, 0)] if len(host) else -1, -1)
        f = _codes(device, "src_file")[rows]
        file[d] = np.where(f >= 0, f + n_host_files, -1)
        line[d] = _ints(device, "src_line")[rows]
    return {"op": op, "kernel": kernel, "src_file": file, "src_line": line}


def text_values(graph: Graph) -> dict[str, np.ndarray]:
    """The text of each code ``node_codes`` gives, per column (code -1 reads the last entry: '')."""
    files = [*_categories_of(graph.host, "src_file"), *_categories_of(graph.device, "src_file")]
    return {
        "op": np.array([*_categories_of(graph.host, "name"), ""], dtype=object),
        "kernel": np.array([*_categories_of(graph.device, "name"), ""], dtype=object),
        "src_file": np.array([*files, ""], dtype=object),
    }


def describe(graph: Graph, idx: np.ndarray) -> pd.DataFrame:
    """Op, kernel, source file and line of nodes ``idx``, as text."""
    codes = node_codes(graph, idx)
    text = text_values(graph)
    out = {c: text[c][codes[c]] for c in ("op", "kernel", "src_file")}
    return pd.DataFrame({**out, "src_line": codes["src_line"]})


def _categories_of(df: pd.DataFrame, col: str) -> list[str]:
    if col not in df or not len(df):
        return []
    c = df[col]
    c = c if isinstance(c.dtype, pd.CategoricalDtype) else c.astype("category")
    return [str(v) for v in c.cat.categories]


def _codes(df: pd.DataFrame, col: str) -> np.ndarray:
    """Category codes of a column (-1: null or no such column)."""
    if col not in df:
        return np.full(len(df), -1, np.int64)
    c = df[col]
    c = c if isinstance(c.dtype, pd.CategoricalDtype) else c.astype("category")
    return c.cat.codes.to_numpy().astype(np.int64)


def _category_code(df: pd.DataFrame, col: str, value: str) -> int:
    values = _categories_of(df, col)
    return values.index(value) if value in values else -2


def _ints(df: pd.DataFrame, col: str) -> np.ndarray:
    if col not in df:
        return np.full(len(df), -1, np.int64)
    return df[col].fillna(-1).to_numpy().astype(np.int64)
