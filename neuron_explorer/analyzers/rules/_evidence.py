"""Helpers rules share to build evidence: user source lines, totals and time ranges."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.metrics.source_lines import user_mask
from neuron_explorer.analyzers.result import Analysis
from neuron_explorer.trace.frames import is_library_path, parse_python_frame


def library_symbol(path: str, func: str) -> str:
    """The dotted name a library function is known by: ``site-packages/scipy/ndimage/
    _interpolation.py`` and ``zoom`` -> ``scipy.ndimage.zoom`` (private modules, which packages
    re-export from their public one, left out; ``__init__`` is the package itself)."""
    p = path.replace("\\", "/")
    for marker in ("site-packages/", "dist-packages/"):
        if marker in p:
            p = p.rsplit(marker, 1)[1]
            break
    else:
        m = re.search(r"/lib(?:64)?/python3[^/]*/", p)
        if m:
            p = p[m.end() :]
    parts = [x for x in p.removesuffix(".py").split("/") if x and x != "__init__"]
    if not parts:
        return func
    keep = [parts[0], *(x for x in parts[1:] if not (x.startswith("_") and not x.startswith("__")))]
    return ".".join([*keep, func])


def _unit_of(column: str) -> str:
    return "ns" if column.endswith("_ns") else "bytes" if column.endswith("bytes") else "events"


def lines_from(
    df: pd.DataFrame, value: str | np.ndarray, n: int = 3, user_only: bool = True, unit: str | None = None
) -> list[dict[str, Any]]:
    """The top ``n`` source lines of ``df`` (with src_* columns) by the sum of ``value``.

    Each line carries ``value`` and its ``unit`` (``ns`` for a duration, ``bytes``, or a count:
    ``events`` for a column of ones); ``ns`` as well when the value is a duration. Without
    ``unit``, a column name says it (``dur_ns``: ns, ``bytes``: bytes, else a count) and an
    array is a duration."""
    unit = unit or (_unit_of(value) if isinstance(value, str) else "ns")
    if not len(df):
        return []
    vals = df[value].to_numpy() if isinstance(value, str) else value
    m = (df["src_file"].notna() & (df["src_line"] >= 0)).to_numpy()
    if user_only:
        m = m & user_mask(df["src_file"])
    if not m.any():
        return []
    g = (
        pd.DataFrame(
            {
                "file": df["src_file"].astype(object).to_numpy()[m],
                "line": df["src_line"].to_numpy()[m],
                "fn": df["src_func"].astype(object).to_numpy()[m],
                "ns": vals[m],
            }
        )
        .groupby(["file", "line"], sort=False)
        .agg(fn=("fn", "first"), ns=("ns", "sum"), count=("ns", "size"))
    )
    g = g.sort_values("ns", ascending=False)
    if unit == "ns" and "src_module" in df and len(g) and float(g["ns"].iloc[0]) > HARNESS_SHARE * float(g["ns"].sum()):
        inner = _inside_harness_line(df, vals, m, g.index[0], n)
        if inner:
            return inner
    g = g.head(n).reset_index()
    return [
        {
            "file": str(r.file),
            "line": int(r.line),
            "func": None if pd.isna(r.fn) else str(r.fn),
            "value": int(r.ns),
            "unit": unit,
            **({"ns": int(r.ns)} if unit == "ns" else {}),
            "count": int(r.count),
        }
        for r in g.itertuples()
    ]


#: One line holding more than this share of the time says nothing (a benchmark harness's
#: ``model(x)``, a training loop's ``loss.backward()``): the module path and op say where it goes.
HARNESS_SHARE = 0.9


def _inside_harness_line(
    df: pd.DataFrame, vals: np.ndarray, m: np.ndarray, key: tuple[Any, Any], n: int
) -> list[dict[str, Any]]:
    """The time of one dominant line split by nn.Module path and op (the event's ``name``), when
    the events under it carry two or more module paths; else nothing (the line is the answer)."""
    file, line = key
    on = m & (df["src_file"].astype(object).to_numpy() == file) & (df["src_line"].to_numpy() == line)
    mods = df["src_module"].astype(object).to_numpy()[on]
    has = pd.notna(mods)
    if pd.unique(mods[has]).size < 2:
        return []
    names = df["name"].astype(object).to_numpy()[on] if "name" in df else np.full(int(on.sum()), None)
    fn = df["src_func"].astype(object).to_numpy()[on]
    g = (
        pd.DataFrame({"module": mods[has], "op": names[has], "ns": vals[on][has]})
        .groupby(["module", "op"], sort=False)["ns"]
        .agg(["sum", "size"])
        .sort_values("sum", ascending=False)
        .head(n)
        .reset_index()
    )
    func = None if not len(fn) or pd.isna(fn[0]) else str(fn[0])
    return [
        {
            "file": str(file),
            "line": int(line),
            "func": func,
            "module": str(r.module),
            "op": None if pd.isna(r.op) else str(r.op),
            "value": int(r.sum),
            "unit": "ns",
            "ns": int(r.sum),
            "count": int(r.size),
        }
        for r in g.itertuples()
    ]


def top_source_lines(a: Analysis, column: str, n: int = 3, min_value: float = 0) -> list[dict[str, Any]]:
    """Top user lines of the line-level profile by ``column`` (host_ns, device_ns, alloc_bytes)."""
    sl = a.source_lines
    if not len(sl):
        return []
    sl = sl[user_mask(sl["src_file"]) & (sl[column] > min_value)].sort_values(column, ascending=False).head(n)
    return [
        {
            "file": str(r.src_file),
            "line": int(r.src_line),
            "func": None if pd.isna(r.src_func) else str(r.src_func),
            "ns": int(r.host_ns + r.device_ns),
            column: int(getattr(r, column)),
            "value": int(getattr(r, column)),
            "unit": _unit_of(column),
        }
        for r in sl.itertuples()
    ]


def wall_ns(a: Analysis) -> int:
    """Total wall time analysed: the sum of step windows over ranks (one device per rank)."""
    w = a.steps
    return int(w["dur_ns"].sum()) if len(w) else 0


def steady_wall_ns(a: Analysis) -> int:
    w = a.steps
    return int(w.loc[~w["is_warmup"], "dur_ns"].sum()) if len(w) else 0


def per_step(has_steps: bool) -> str:
    """``"per step"``, or ``"in the trace"`` for a trace without steps (one whole-trace window)."""
    return "per step" if has_steps else "in the trace"


def of_wall(has_steps: bool) -> str:
    """``"of step time"``, or ``"of the traced time"`` for a trace without steps."""
    return "of step time" if has_steps else "of the traced time"


def step_unit(unit: str, has_steps: bool) -> str:
    """``"copies"`` -> ``"copies/step"`` on a trace with steps, ``"copies"`` without."""
    return f"{unit}/step" if has_steps else unit


def num_steps(a: Analysis) -> int:
    return max(1, len(a.steps))


def biggest(df: pd.DataFrame, by: str, n: int = 5) -> pd.DataFrame:
    return df.nlargest(n, by) if len(df) > n else df.sort_values(by, ascending=False)


def ranges(df: pd.DataFrame, n: int = 5, by: str = "dur_ns") -> tuple[list[list[int]], list[int]]:
    """Time ranges and event ids of the ``n`` largest rows of an events frame."""
    top = biggest(df, by, n)
    s = top["start_ns"].to_numpy()
    e = s + top["dur_ns"].to_numpy()
    return [[int(x), int(y)] for x, y in zip(s, e)], [int(i) for i in top["event_id"].to_numpy()]


def ms(ns: float) -> str:
    """A duration as every output shows one (``trace.units``: "166 µs", "7.54 ms", "43.3 s"),
    never "0.2 ms" for 166 µs or "43288.3 ms"."""
    from neuron_explorer.trace.units import format_duration

    return format_duration(ns)


def category_ns(a: Analysis, category: str) -> int:
    """Total ns of one step-time attribution category (analyzers/attribution/__init__.py)."""
    at = a.attribution
    return int(at[f"{category}_ns"].sum()) if len(at) else 0


def steady_attribution(a: Analysis) -> pd.DataFrame:
    """The attribution rows of the steady steps (warm-up steps left out; all rows without steps).
    Their ``one_time_ns`` (compilation, graph capture, setup calls inside them) is still theirs:
    subtract it from ``wall_ns`` for the steady time."""
    at, st = a.attribution, a.steps
    if not len(at) or not len(st) or "is_warmup" not in st or not st["is_warmup"].any():
        return at
    warm = st.loc[st["is_warmup"], ["rank", "step"]]
    key = pd.MultiIndex.from_frame(at[["rank", "step"]])
    return at[~key.isin(pd.MultiIndex.from_frame(warm))]


def attributed_wall_ns(a: Analysis, device_only: bool = False, steady: bool = True) -> int:
    """Wall time the attribution splits: the step windows, once per device of their rank. With
    ``steady`` (the default) the one-time work is left out: the steady-state rules judge their
    share of the steady state, never of a compile or an initialization."""
    at = a.attribution
    if device_only:
        at = at[at["device"] >= 0]
    if not len(at):
        return 0
    return int(at["wall_ns"].sum() - (at["one_time_ns"].sum() if steady and "one_time_ns" in at else 0))


def threshold_of(ctx: Any, rule_id: str, name: str) -> float:
    """Another rule's threshold as this run sets it (override, else its default)."""
    from neuron_explorer.analyzers.rules.registry import RULES

    key = f"{rule_id}.{name}"
    return float(ctx.overrides.get(key, RULES[rule_id].thresholds[name][0]))


def calls_in_steps(ctx: Any, calls: pd.DataFrame) -> np.ndarray:
    """Per row of ``calls``: True when it starts inside a step window of its rank."""
    from neuron_explorer.analyzers.core.intervals import clip_to_windows

    w = ctx.frames.step_windows
    s = calls["start_ns"].to_numpy()
    rows, _, _, _ = clip_to_windows(
        calls["rank"].to_numpy(), s, s + 1, w["rank"].to_numpy(), w["start_ns"].to_numpy(), w["end_ns"].to_numpy()
    )
    inside = np.zeros(len(calls), bool)
    inside[rows] = True
    return inside


def issuing_ops(ctx: Any, calls: pd.DataFrame) -> pd.DataFrame:
    """The framework op that issued each call (its ``op_id``), with the op's name and source
    line (a call without a line of its own inherits its op's): name, src_file, src_line, src_func."""
    host = ctx.frames.host
    ops = host[host["kind"] == "cpu_op"].drop_duplicates(["rank", "event_id"]).set_index(["rank", "event_id"])
    key = pd.MultiIndex.from_arrays([calls["rank"].to_numpy(), calls["op_id"].to_numpy()])
    op = ops.reindex(key)
    own = calls["src_file"].astype(object).to_numpy()
    return pd.DataFrame(
        {
            "name": op["name"].astype(object).to_numpy(),
            "src_file": np.where(pd.isna(op["src_file"].astype(object).to_numpy()), own, op["src_file"].astype(object)),
            "src_line": np.where(
                op["src_line"].isna().to_numpy(), calls["src_line"].to_numpy(), op["src_line"].fillna(-1)
            ),
            "src_func": np.where(
                pd.isna(op["src_func"].astype(object).to_numpy()),
                calls["src_func"].astype(object),
                op["src_func"].astype(object),
            ),
        }
    )


# -- Where a finding's Python time is (issue 40 item 4) ----------------------------------------
#
# ``attribution.python_time`` gives each Python frame the ``host_python`` time its own code ran.
# Here those frames are named as a user reads them, by the code they are (``library_symbol``:
# ``torch.optim.adam._multi_tensor_adam``; a built-in by its name, ``run_backward``; the user's
# own frames by file and line), and put in families whose fix differs:
#
# - ``autograd``: the autograd engine between backward ops (``run_backward``, ``torch.autograd``):
#   C++ that records no events; fewer, larger backward ops shorten it;
# - ``optimizer``: the optimizer's per-parameter Python (``torch/optim``);
# - ``profiler``: the profiler's own bookkeeping (``record_function``, ``torch/autograd/profiler.py``,
#   ``torch/profiler``): absent from the unprofiled run;
# - ``preprocessing``: NumPy, PIL, OpenCV, PyAV, decord, torchvision transforms, SciPy, librosa,
#   tokenizers, Hugging Face image and video processors: input work, whose fix is DataLoader
#   workers, never ``torch.compile``;
# - ``user``: the user's own code;
# - ``library``: any other library.


PYTHON_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("profiler", re.compile(r"_record_function|torch/autograd/profiler|torch/profiler/|record_function", re.I)),
    (
        "autograd",
        re.compile(r"run_backward|torch/autograd/(?!profiler)|_engine_run_backward|torch/_tensor\.py\(\d+\): backward"),
    ),
    ("optimizer", re.compile(r"torch/optim/|_foreach_|_fused_adam|_group_tensors_by_device")),
    (
        "preprocessing",
        re.compile(
            r"(?:^|/)(?:numpy|PIL|cv2|av|decord|torchvision/(?:transforms|io)|scipy|librosa|soundfile|tokenizers"
            r"|albumentations|skimage|imageio)/|transformers/(?:image_|video_|feature_extraction|processing_|"
            r"models/[^/]+/(?:image|video)_processing)|<built-in method (?:astype|decode|tolist)\b",
        ),
    ),
)

_BUILTIN = re.compile(r"^<built-in (?:method|function) (\w+)")


def symbol_of(name: str) -> tuple[str, str]:
    """(the name a user reads, family) of one Python frame event name."""
    b = _BUILTIN.match(name)
    family = next((f for f, pat in PYTHON_FAMILIES if pat.search(name)), "")
    if b:
        return f"{b.group(1)} (built-in)", family or "library"
    parsed = parse_python_frame(name)
    if parsed is None:
        return name[:80], family or "library"
    file, line, func = parsed
    if not is_library_path(file):
        return f"{file}:{line} ({func})", family or "user"
    return library_symbol(file, func), family or "library"


def where(names: pd.Series, ns: np.ndarray, total: float, n: int = 3) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The top ``n`` symbols by ``ns`` (name, family, ns, share of ``total``) and each family's
    share of ``total``; one classification per distinct frame name."""
    if not len(names) or total <= 0:
        return [], {}
    df = pd.DataFrame({"name": names.astype(str).to_numpy(), "ns": ns})
    by_name = df.groupby("name", sort=False)["ns"].sum()
    by_name = by_name[by_name > 0]
    sym = pd.DataFrame([symbol_of(x) for x in by_name.index], columns=["symbol", "family"], index=by_name.index)
    sym["ns"] = by_name
    top = sym.groupby(["symbol", "family"], sort=False)["ns"].sum().sort_values(ascending=False).head(n)
    rows = [
        {"symbol": s, "family": f, "ns": int(v), "share_pct": 100.0 * float(v) / total} for (s, f), v in top.items()
    ]
    fam = (sym.groupby("family")["ns"].sum() / total * 100.0).to_dict()
    return rows, {str(k): float(v) for k, v in fam.items()}


def words(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['symbol']} {ms(r['ns'])} ({r['share_pct']:.0f}%)" for r in rows)
