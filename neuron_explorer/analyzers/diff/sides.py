"""One side of a diff: its step samples and the per-sample totals of everything compared.

A *sample* is one (rank, step) window of the step-time attribution (the whole trace of a rank
when it has no ProfilerStep spans). Leading warm-up steps are left out unless asked for: they
measure start-up, not the change. Both sides drop the same number of leading steps (the larger
of their warm-up counts, ``warmup_steps``), so the same part of the program is compared even
when warm-up detection, a ratio to the median, flags one step on one side and two on the other. Every compared item (a kernel, an op, a
source line, a collective) is summed per sample, so a change is a per-step difference and its
confidence comes from the spread over steps (``stats.bootstrap_delta``).

Events belong to the sample of their ``step`` column (host events: the step they start in;
device work: its launch's step); events outside every kept step are not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from neuron_explorer.analyzers.core.columns import lookup, ukey
from neuron_explorer.analyzers.core.context import WHOLE_TRACE_STEP, TraceFrames
from neuron_explorer.trace.model import Trace
from neuron_explorer.trace.schema import Kind

#: Columns of the attribution table that are not categories.
NON_CATEGORY = frozenset({"wall_ns", "start_ns", "end_ns", "dur_ns"})
#: Host kinds compared as "ops": framework ops and the runtime/sync calls they make.
OP_KINDS = (Kind.CPU_OP, Kind.RUNTIME, Kind.SYNC)
#: Item families: name -> the columns that identify an item.
FAMILY_KEYS: dict[str, tuple[str, ...]] = {
    "kernels": ("name",),
    "kernel_shapes": ("name", "shapes"),
    "ops": ("name",),
    "op_shapes": ("name", "shapes"),
    "collectives": ("name", "bytes"),
}


def _attribution_table(analysis: Any) -> pd.DataFrame:
    """The step-time attribution: ``analysis.attribution`` where the analysis has one, else the
    per-step breakdown; both are per (rank, step, device) with ``wall_ns`` and one ``*_ns``
    column per category."""
    table = getattr(analysis, "attribution", None)
    return table if isinstance(table, pd.DataFrame) else analysis.breakdown


def category_columns(table: pd.DataFrame) -> list[str]:
    """Every ``*_ns`` column of an attribution table except the wall and time-stamp columns."""
    return [c for c in table.columns if c.endswith("_ns") and c not in NON_CATEGORY]


@dataclass
class Side:
    """What one trace contributes to a diff (all tables long: one row per item and sample)."""

    source: str
    samples: pd.DataFrame  # rank, step, sample
    metrics: pd.DataFrame  # one row per sample: step_ns, then one column per category (<name>_ns)
    items: dict[str, pd.DataFrame]  # family -> key columns, sample, count, time_ns
    item_lines: dict[str, pd.DataFrame]  # family -> key columns, src_file, src_line, src_func, time_ns
    lines: pd.DataFrame  # src_file, src_line, src_func, sample, count, time_ns
    has_steps: bool
    warmup_dropped: int
    categories: list[str] = field(default_factory=list)
    collective_kernels: frozenset[str] = frozenset()  # kernel names that are collectives too

    @property
    def num_samples(self) -> int:
        return len(self.samples)


def _step_key(rank: np.ndarray, step: np.ndarray) -> np.ndarray:
    return (np.asarray(rank, np.int64) << 32) | (np.asarray(step, np.int64) & 0xFFFFFFFF)


def warmup_steps(analysis: Any) -> int:
    """The most warm-up steps any rank of the trace has (``steps.step_table``)."""
    steps = analysis.steps
    if not len(steps):
        return 0
    return int(steps["is_warmup"].astype(bool).groupby(steps["rank"]).sum().max())


def build_side(trace: Trace, analysis: Any, frames: TraceFrames, skip_leading: int = 0) -> Side:
    """Samples, attribution metrics and item totals of one analysed trace, without the first
    ``skip_leading`` steps of each rank (all of them kept when that would leave none)."""
    steps = analysis.steps
    position = steps.groupby("rank").cumcount() if len(steps) else pd.Series(dtype="int64")
    real = steps["step"] != WHOLE_TRACE_STEP if len(steps) else pd.Series(dtype=bool)
    kept = steps[~real | (position >= skip_leading)] if skip_leading else steps
    if not len(kept):
        kept = steps
    samples = kept[["rank", "step"]].reset_index(drop=True).astype("int64")
    samples["sample"] = np.arange(len(samples))
    index = pd.Index(_step_key(samples["rank"].to_numpy(), samples["step"].to_numpy()))

    def sample_of(df: pd.DataFrame) -> np.ndarray:
        if not len(df):
            return np.zeros(0, np.int64)
        return index.get_indexer(_step_key(df["rank"].to_numpy(), df["step"].to_numpy()))

    table = _attribution_table(analysis)
    cats = category_columns(table)
    metrics = _metrics(table, cats, samples, sample_of)

    host = frames.host
    host_sample = sample_of(host)
    self_ns = frames.host_self_ns.to_numpy()
    dev = frames.device
    dev_sample = sample_of(dev)
    shapes = _op_shapes(trace, host)

    items: dict[str, pd.DataFrame] = {}
    item_lines: dict[str, pd.DataFrame] = {}
    op_mask = host["kind"].isin(OP_KINDS).to_numpy() & (host_sample >= 0)
    ops = pd.DataFrame(
        {
            "name": host["name"][op_mask],
            "shapes": shapes[op_mask],
            "sample": host_sample[op_mask],
            "time_ns": self_ns[op_mask],
            "src_file": host["src_file"][op_mask],
            "src_line": host["src_line"].to_numpy()[op_mask],
            "src_func": host["src_func"][op_mask],
        }
    )
    dev_mask = dev_sample >= 0
    dev_shapes = _device_shapes(host, shapes, dev)
    kernels = pd.DataFrame(
        {
            "name": dev["name"][dev_mask],
            "shapes": dev_shapes[dev_mask],
            "sample": dev_sample[dev_mask],
            "time_ns": dev["dur_ns"].to_numpy()[dev_mask],
            "src_file": dev["src_file"][dev_mask],
            "src_line": dev["src_line"].to_numpy()[dev_mask],
            "src_func": dev["src_func"][dev_mask],
            "kind": dev["kind"].astype(str).to_numpy()[dev_mask],
            "collective": dev["collective_name"][dev_mask] if "collective_name" in dev else None,
            "bytes": dev["bytes"].to_numpy()[dev_mask] if "bytes" in dev else -1,
        }
    )
    coll = kernels[kernels["kind"] == Kind.COLLECTIVE]
    coll = coll.assign(
        name=coll["collective"].astype(object).where(coll["collective"].notna(), coll["name"].astype(str))
    )
    for family, source in (
        ("ops", ops),
        ("op_shapes", ops),
        ("kernels", kernels),
        ("kernel_shapes", kernels),
        ("collectives", coll),
    ):
        keys = list(FAMILY_KEYS[family])
        items[family] = _per_sample(source, keys)
        if family in ("ops", "kernels", "collectives"):
            item_lines[family] = _per_line(source, keys)

    lines = _line_events(frames, host_sample, self_ns, dev, dev_sample)
    return Side(
        source=str(trace.path or frames.metadata.get("source_file") or ""),
        samples=samples,
        metrics=metrics,
        items=items,
        item_lines=item_lines,
        lines=lines,
        has_steps=bool((samples["step"] != WHOLE_TRACE_STEP).any()),
        warmup_dropped=skip_leading if len(kept) < len(steps) else 0,
        categories=[c[: -len("_ns")] for c in cats],
        collective_kernels=frozenset(
            str(x) for x in pd.unique(kernels.loc[kernels["kind"] == Kind.COLLECTIVE, "name"])
        ),
    )


def _metrics(table: pd.DataFrame, cats: list[str], samples: pd.DataFrame, sample_of: Any) -> pd.DataFrame:
    """Per sample: the step's wall time and each category, averaged over the rank's devices (a
    device's parts sum to the wall time, so the average does too)."""
    cols = ["step_ns", *cats]
    out = pd.DataFrame(0.0, index=np.arange(len(samples)), columns=cols)
    if not len(table) or not len(samples):
        return out
    s = sample_of(table)
    m = s >= 0
    data = table.loc[m, ["wall_ns", *cats]].astype("float64")
    g = data.groupby(s[m]).mean()
    out.loc[g.index, "step_ns"] = g["wall_ns"].to_numpy()
    out.loc[g.index, cats] = g[cats].to_numpy()
    return out


def _op_shapes(trace: Trace, host: pd.DataFrame) -> pd.Categorical:
    """The input shapes (JSON text, "" when not recorded) of every row of ``host``, as a
    categorical (grouping on its codes is fast; each distinct shape is one string)."""
    empty = pd.Categorical.from_codes(np.zeros(len(host), np.int64), categories=[""])
    events = trace.events
    if "input_shapes" not in events.column_names or not len(host):
        return empty
    kind = pc.cast(events["kind"], pa.string())
    table = events.select(["rank", "event_id", "input_shapes"]).filter(
        pc.and_(pc.equal(kind, Kind.CPU_OP), pc.is_valid(events["input_shapes"]))
    )
    if not table.num_rows:
        return empty
    pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
        ukey(
            pc.fill_null(table["rank"], 0).to_numpy().astype(np.int64),
            pc.fill_null(table["event_id"], -1).to_numpy().astype(np.int64),
        ),
    )
    encoded = pc.dictionary_encode(pc.cast(table["input_shapes"], pa.string())).combine_chunks()
    shapes = ["", *encoded.dictionary.to_pylist()]
    codes = np.zeros(len(host), np.int64)
    ok = pos >= 0
    codes[pos[ok]] = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)[ok] + 1
    if shapes.count("") > 1:  # a recorded "" shape is the same as none
        blank = shapes.index("", 1)
        codes[codes == blank] = 0
        shapes[blank] = "\x00unused"
    return pd.Categorical.from_codes(codes, categories=shapes)


def _device_shapes(host: pd.DataFrame, shapes: pd.Categorical, dev: pd.DataFrame) -> pd.Categorical:
    """A device event's shape: the input shapes of the op that issued it ("" when none)."""
    pos = lookup(
        ukey(host["rank"].to_numpy(), host["event_id"].to_numpy()),
        ukey(dev["rank"].to_numpy(), dev["op_id"].to_numpy()),
    )
    codes = np.asarray(shapes.codes, np.int64)
    dev_codes = np.where(pos >= 0, codes[np.maximum(pos, 0)] if len(codes) else 0, 0)
    return pd.Categorical.from_codes(dev_codes, categories=shapes.categories)


def _plain(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Key columns as plain values (strings, int64), so the two sides merge on equal values."""
    for k in keys:
        if k == "bytes":
            df[k] = df[k].astype("int64")
        else:
            df[k] = df[k].astype(str)
    return df


def _per_sample(source: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    cols = [*keys, "sample", "count", "time_ns"]
    if not len(source):
        return pd.DataFrame({c: pd.Series(dtype="object" if c in ("name", "shapes") else "int64") for c in cols})
    g = (
        source.groupby([*keys, "sample"], observed=True, sort=False)
        .agg(count=("time_ns", "size"), time_ns=("time_ns", "sum"))
        .reset_index()
    )
    return _plain(g, keys)[cols]


def _per_line(source: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Total time of each item per source line (for "from file:line" in the answer)."""
    src = source[source["src_file"].notna().to_numpy() & (source["src_line"].to_numpy() >= 0)]
    cols = [*keys, "src_file", "src_line", "src_func", "time_ns"]
    if not len(src):
        return pd.DataFrame({c: pd.Series(dtype="int64" if c in ("src_line", "time_ns") else "object") for c in cols})
    g = (
        src.groupby([*keys, "src_file", "src_line"], observed=True, sort=False)
        .agg(src_func=("src_func", "first"), time_ns=("time_ns", "sum"))
        .reset_index()
    )
    g = _plain(g, keys)
    g["src_file"] = g["src_file"].astype(str)
    g["src_func"] = g["src_func"].astype(str)
    return g[cols]


def _line_events(
    frames: TraceFrames, host_sample: np.ndarray, self_ns: np.ndarray, dev: pd.DataFrame, dev_sample: np.ndarray
) -> pd.DataFrame:
    """Per (source line, sample): host self time plus device time attributed to the line, the
    way ``source_lines.source_line_table`` counts it (driver frames enclosing whole steps left out)."""
    host = frames.host
    keep_host = (
        (host["kind"] != Kind.STEP).to_numpy()
        & ~frames.encloses_step
        & (host_sample >= 0)
        & host["src_file"].notna().to_numpy()
        & (host["src_line"].to_numpy() >= 0)
    )
    keep_dev = (dev_sample >= 0) & dev["src_file"].notna().to_numpy() & (dev["src_line"].to_numpy() >= 0)

    def categories(column: str) -> pd.Index:
        # the union of both frames' distinct values (their category dtypes may differ, e.g. an
        # empty device frame on a CPU trace)
        values = [np.asarray(df[column].astype("category").cat.categories, dtype=object) for df in (host, dev)]
        return pd.Index(pd.unique(np.concatenate(values)))

    files, funcs = categories("src_file"), categories("src_func")

    def part(df: pd.DataFrame, keep: np.ndarray, sample: np.ndarray, time_ns: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "src_file": pd.Categorical(df["src_file"][keep], categories=files),
                "src_line": df["src_line"].to_numpy()[keep],
                "src_func": pd.Categorical(df["src_func"][keep], categories=funcs),
                "sample": sample[keep],
                "time_ns": time_ns[keep],
            }
        )

    parts = [part(host, keep_host, host_sample, self_ns), part(dev, keep_dev, dev_sample, dev["dur_ns"].to_numpy())]
    df = pd.concat(parts, ignore_index=True)
    g = (
        df.groupby(["src_file", "src_line", "sample"], sort=False, observed=True)
        .agg(src_func=("src_func", "first"), count=("time_ns", "size"), time_ns=("time_ns", "sum"))
        .reset_index()
    )
    g["src_file"] = g["src_file"].astype(str)
    g["src_func"] = g["src_func"].astype(str)
    return g
