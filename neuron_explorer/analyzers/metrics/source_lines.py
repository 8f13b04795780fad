"""The line-level profile: per user source line, host time, device time, kernels and memory.

Host time is the *self* time of the host spans attributed to the line (so nested ops are not
counted twice); device time is that of the device events attributed to it (inherited from the
launching op, or from the forward op for backward kernels); memory is what the line allocated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.environment import exclude_patterns
from neuron_explorer.trace.frames import parse_python_frame, path_origin
from neuron_explorer.trace.schema import Kind

COLUMNS = [
    "src_file",
    "src_line",
    "src_func",
    "src_precision",
    "host_ns",
    "python_ns",
    "device_ns",
    "kernel_count",
    "alloc_bytes",
    "alloc_count",
    "event_count",
]
_PRECISION_ORDER = {"line": 0, "launch": 1, "forward": 2, "function": 3}


def _part(df: pd.DataFrame, **values: np.ndarray | int) -> pd.DataFrame:
    """Per (src_file, src_line) sums of one event family, grouped on the categorical codes (so
    millions of events never become Python strings); only the aggregated rows are converted."""
    if not len(df):
        return pd.DataFrame()
    m = (df["src_file"].notna() & (df["src_line"] >= 0)).to_numpy()
    if not m.any():
        return pd.DataFrame()
    data = {
        "src_file": df["src_file"][m],
        "src_line": df["src_line"].to_numpy()[m],
        "src_func": df["src_func"][m],
        "src_precision": df["src_precision"][m],
    }
    sums = {}
    for name in ("host_ns", "python_ns", "device_ns", "kernel_count", "alloc_bytes", "alloc_count", "event_count"):
        v = values.get(name, 0)
        data[name] = v[m] if isinstance(v, np.ndarray) else np.full(int(m.sum()), v, np.int64)
        sums[name] = (name, "sum")
    frame = pd.DataFrame(data)
    g = (
        frame.groupby(["src_file", "src_line"], observed=True, sort=False)
        .agg(src_func=("src_func", "first"), src_precision=("src_precision", "first"), **sums)
        .reset_index()
    )
    for col in ("src_file", "src_func", "src_precision"):
        g[col] = g[col].astype(object)
    return g


def source_line_table(frames: TraceFrames) -> pd.DataFrame:
    """Per (src_file, src_line), the most costly (host + device time) first."""
    host = frames.host
    # the loop driver's frames (enclosing whole steps) carry no line-level cost of their own
    not_step = (host["kind"] != Kind.STEP).to_numpy() & ~frames.encloses_step
    h = host[not_step]
    self_ns = frames.host_self_ns.to_numpy()[not_step]
    dev = frames.device
    mem = frames.memory
    alloc = mem["bytes"].to_numpy() if len(mem) else np.zeros(0, np.int64)
    # The user's own Python: self time of python frames whose own file is user code (library
    # frames such as nn.Module.__call__ are framework overhead, not the line's Python work).
    own_py = (h["kind"] == Kind.PYTHON).to_numpy() & _user_frame_mask(h["name"], host["src_file"].dropna().unique())
    parts = [
        _part(h, host_ns=self_ns, python_ns=np.where(own_py, self_ns, 0), event_count=1),
        _part(dev, device_ns=dev["dur_ns"].to_numpy(), kernel_count=1),
        _part(mem, alloc_bytes=np.where(alloc > 0, alloc, 0), alloc_count=(alloc > 0).astype(np.int64)),
    ]
    df = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(len(p) for p in parts) else None
    if df is None:
        return pd.DataFrame(
            {c: pd.Series(dtype="object" if c.startswith("src_") and c != "src_line" else "int64") for c in COLUMNS}
        )
    df["_prec"] = df["src_precision"].map(_PRECISION_ORDER).fillna(9)
    df = df.sort_values("_prec", kind="stable")
    g = (
        df.groupby(["src_file", "src_line"], sort=False)
        .agg(
            src_func=("src_func", "first"),
            src_precision=("src_precision", "first"),
            host_ns=("host_ns", "sum"),
            python_ns=("python_ns", "sum"),
            device_ns=("device_ns", "sum"),
            kernel_count=("kernel_count", "sum"),
            alloc_bytes=("alloc_bytes", "sum"),
            alloc_count=("alloc_count", "sum"),
            event_count=("event_count", "sum"),
        )
        .reset_index()
    )
    g["_cost"] = g["host_ns"] + g["device_ns"]
    g = g.sort_values(["_cost", "alloc_bytes"], ascending=False, kind="stable").drop(columns="_cost")
    return g.reset_index(drop=True)[COLUMNS]


def _user_frame_mask(names: pd.Series, attributed: Iterable[Any] = ()) -> np.ndarray:
    """True where a python event's own frame ("file.py(12): func") is in user code; evaluated
    once per distinct name (see ``is_user_frame_file``)."""
    cat = names.astype("category")
    frames = [parse_python_frame(str(n)) for n in cat.cat.categories]
    known = attributed_files(attributed)
    user = np.array([f is not None and is_user_frame_file(f[0], known) for f in frames] + [False])
    codes = cat.cat.codes.to_numpy()
    return user[np.where(codes < 0, len(frames), codes)]


def attributed_files(files: Iterable[Any]) -> tuple[str, ...]:
    """The distinct source files events are attributed to (the collectors attribute to user
    files only), slashes normalised."""
    return tuple({str(f).replace("\\", "/") for f in files if isinstance(f, str) and f})


def is_user_frame_file(path: str, attributed: tuple[str, ...]) -> bool:
    """Is a Python frame's own file (as the profiler names it) the user's?

    torch writes a frame's file relative to the ``sys.path`` entry it was imported from
    (``fakezoom/__init__.py`` for a package installed off the usual folders), which the
    collector resolved (and judged) but the frame's name keeps. So a relative path inside a
    package is the user's only where the trace attributes events to that file, or to another
    file of the same package; a top-level script (``train.py``) keeps the path rules."""
    if not is_user_file(path):
        return False
    p = path.replace("\\", "/")
    if p.startswith("/") or re.match(r"^[A-Za-z]:/", p) or "/" not in p or not attributed:
        return True
    package = "/" + p.split("/", 1)[0] + "/"
    return any(a == p or a.endswith("/" + p) or package in "/" + a for a in attributed)


def is_user_file(path: str | None) -> bool:
    """The user's own code: not torch, the standard library, installed packages, this tool,
    generated code (see ``trace.frames.path_origin``) or ``NEURON_EXPLORER_EXCLUDE`` patterns."""
    return bool(path) and path_origin(str(path), exclude_patterns()) == "user"


def user_mask(files: pd.Series) -> np.ndarray:
    """Vectorized ``is_user_file`` over a (categorical) column: one check per distinct path."""
    cat = files.astype("category")
    lookup = np.array([is_user_file(str(c)) for c in cat.cat.categories] + [False], dtype=bool)
    codes = cat.cat.codes.to_numpy()
    return lookup[np.where(codes < 0, len(lookup) - 1, codes)]
