"""``diff_traces(base, new)``: what got slower between two traces, where in the code, how sure.

Compared per step (docs/diff.md): the step time and every step-time attribution category;
kernels by name and by name + input shapes; ops (framework ops and runtime calls) by name and
by name + input shapes; source lines (matched across code versions); collectives by name and
message size. Each change has a per-step difference, its confidence over steps and, for
kernels, ops and collectives, the source line it came from. ``gate`` is the CI check.

The top of ``analyzers/`` with ``sweep``: it compares whole analyses, so it imports
``analysis`` (``analyze``), ``result`` and everything below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.analysis import analyze
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.diff.comparable import Comparability, check, job_of
from neuron_explorer.analyzers.diff.compare import attach_lines, compare_items, compare_lines, compare_metrics
from neuron_explorer.analyzers.diff.lines import ReadLines
from neuron_explorer.analyzers.diff.neuron import kernel_metric_row, neuron_diff, sentence
from neuron_explorer.analyzers.diff.sides import FAMILY_KEYS, Side, build_side, warmup_steps
from neuron_explorer.analyzers.diff.stats import MIN_STEPS
from neuron_explorer.analyzers.result import _jsonable, records
from neuron_explorer.trace.errors import AnalysisError
from neuron_explorer.trace.model import Trace

#: Version of the JSON document ``TraceDiff.to_dict`` produces (docs/diff.md).
DIFF_SCHEMA_VERSION = "1.1.0"
#: A change is "confident" when this share of bootstrap replicates agree on its sign.
CONFIDENCE = 0.95
#: Tables of items, in report order.
TABLES = ("ops", "kernels", "source_lines", "collectives", "op_shapes", "kernel_shapes")
#: Families whose changes make up the answer (each named with its source line).
ANSWER_FAMILIES = ("ops", "kernels", "collectives")
#: The answer leaves out changes smaller than this share of the base step time (in %): a
#: confident +2 us on a 10 ms step is real but not what anyone is looking for.
MIN_ANSWER_PCT = 0.5
#: Longest item name in an answer sentence (C++ kernel names run to thousands of characters).
MAX_LABEL = 80


class DiffError(AnalysisError):
    """Two traces cannot be compared, or a diff option is invalid."""


@dataclass
class TraceDiff:
    """The comparison of two traces. Times are per step (``*_ns``), counts per step."""

    base: dict[str, Any]
    new: dict[str, Any]
    metrics: pd.DataFrame
    tables: dict[str, pd.DataFrame]
    answer: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    confidence_level: float = CONFIDENCE
    #: Two Neuron device profiles: kernel window, per-engine time, DMA bytes, Operator Table
    #: (``diff.neuron``); None otherwise.
    neuron: dict[str, pd.DataFrame] | None = None
    comparability: Comparability = field(default_factory=Comparability)

    @property
    def comparable(self) -> bool:
        """False when the runs are of different hardware or jobs (``comparability.blocking``)."""
        return self.comparability.comparable

    @property
    def enough_steps(self) -> bool:
        return min(self.base["num_steps"], self.new["num_steps"]) >= MIN_STEPS

    @property
    def categories(self) -> list[str]:
        return [m for m in self.metrics["metric"] if m != "step"]

    def regressions(self, table: str) -> pd.DataFrame:
        """Rows of ``table`` that got slower, confidently (or on the point estimate when there
        are not enough steps to tell), most per-step time first."""
        t = self.tables[table]
        ok = t["confidence"].isna() if not self.enough_steps else t["confidence"] >= self.confidence_level
        return t[(t["delta_ns"] > 0) & ok].sort_values("delta_ns", ascending=False, kind="stable")

    def improvements(self, table: str) -> pd.DataFrame:
        t = self.tables[table]
        ok = t["confidence"].isna() if not self.enough_steps else t["confidence"] >= self.confidence_level
        return t[(t["delta_ns"] < 0) & ok].sort_values("delta_ns", kind="stable")

    def to_dict(self, max_rows: int = 50) -> dict[str, Any]:
        """The JSON document of ``diff --format json`` (schema in docs/diff.md)."""
        return {
            "schema_version": DIFF_SCHEMA_VERSION,
            "base": _jsonable(self.base),
            "new": _jsonable(self.new),
            "comparable": self.comparable,
            "not_comparable_because": list(self.comparability.blocking),
            "warnings": list(self.comparability.warnings),
            "enough_steps": self.enough_steps,
            "confidence_level": self.confidence_level,
            "metrics": records(self.metrics),
            "answer": [_jsonable(a) for a in self.answer],
            "notes": list(self.notes),
            "tables": {name: records(t, max_rows) for name, t in self.tables.items()},
            **({"neuron": {k: records(t, max_rows) for k, t in self.neuron.items()}} if self.neuron else {}),
        }


@dataclass(frozen=True)
class GateCheck:
    """One gated metric: its regression as a % of the base step time, and whether it fails."""

    metric: str
    delta_pct: float
    confidence: float
    failed: bool
    excused: bool = False  # it would fail, but the runs are not comparable (and not forced)

    def describe(self) -> str:
        conf = "not enough steps" if math.isnan(self.confidence) else f"confidence {100 * self.confidence:.0f}%"
        of = "of the base kernel window" if self.metric == "kernel" else "of step time"
        return f"{self.metric}: {self.delta_pct:+.1f}% {of} ({conf})"


def diff_traces(
    base: Trace,
    new: Trace,
    *,
    read_lines: ReadLines | None = None,
    include_warmup: bool = False,
    confidence: float = CONFIDENCE,
    base_analysis: Any = None,
    new_analysis: Any = None,
) -> TraceDiff:
    """Compare ``new`` against ``base``. ``read_lines(path)`` (the lines of a source file, or
    None) lets lines match across code versions; analyses already computed can be passed in."""
    frames = [TraceFrames(base), TraceFrames(new)]  # shared with the analyses: each column converted once
    analyses = [
        a if a is not None else analyze(t, rules=[], frames=f)
        for t, a, f in zip((base, new), (base_analysis, new_analysis), frames)
    ]
    skip = 0 if include_warmup else max(warmup_steps(a) for a in analyses)
    b, n = (build_side(t, a, f, skip) for t, a, f in zip((base, new), analyses, frames))
    tables: dict[str, pd.DataFrame] = {}
    for name in TABLES:
        if name == "source_lines":
            tables[name] = compare_lines(b, n, read_lines)
            continue
        keys = list(FAMILY_KEYS[name])
        t = compare_items(b.items[name], n.items[name], keys, b.num_samples, n.num_samples)
        tables[name] = attach_lines(t, name, b, n, read_lines) if name in ANSWER_FAMILIES else t.assign(line="")
        tables[name].insert(0, "label", _labels(tables[name], keys))
    jobs = [job_of(f, a) for f, a in zip(frames, analyses)]
    d = TraceDiff(
        base={**_side_summary(b), "job": jobs[0].to_dict()},
        new={**_side_summary(n), "job": jobs[1].to_dict()},
        comparability=check(*jobs),
        metrics=compare_metrics(b, n),
        tables=tables,
        answer=[],
        confidence_level=confidence,
    )
    d.answer = _answer(d, b.collective_kernels | n.collective_kernels)
    d.notes = _notes(d, b, n)
    d.neuron = neuron_diff(base.metadata, new.metadata)
    if d.neuron is not None:
        _add_kernel(d)
    return d


def _add_kernel(d: TraceDiff) -> None:
    """Device profiles: the kernel window joins the metrics (so the gate sees it) and leads the answer."""
    assert d.neuron is not None
    row = kernel_metric_row(d.neuron["summary"])
    if row is not None:
        d.metrics = pd.concat([d.metrics, pd.DataFrame([row])], ignore_index=True)
    text = sentence(d.neuron["summary"])
    if text and row is not None and row["delta_ns"] <= 0:
        # A kernel that got faster (or held) is never an answer to "what got slower".
        d.notes.insert(0, f"The kernel did not get slower: {text}")
    elif text and row is not None:
        d.answer.insert(
            0,
            {
                "family": "neuron",
                "label": "kernel window",
                "delta_ns": row["delta_ns"],
                "base_count": 1.0,
                "new_count": 1.0,
                "status": "changed",
                "confidence": None,
                "line": "",
                "text": text,
            },
        )
    d.notes.append(
        "Neuron device profiles: the span holds a preamble (and, on inf2/trn1 exports, a fixed semaphore wait) "
        "before the kernel; the `kernel` metric compares the kernel windows (its % is of the base kernel) and "
        "the gate includes it"
    )


def _labels(table: pd.DataFrame, keys: list[str]) -> list[str]:
    if keys == ["name"]:
        return table["name"].astype(str).tolist()
    if keys == ["name", "bytes"]:
        return [f"{n} ({_size(int(s))})" if s >= 0 else str(n) for n, s in zip(table["name"], table["bytes"])]
    return [f"{n} {s}" if s else str(n) for n, s in zip(table["name"], table["shapes"])]


def _size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _side_summary(side: Side) -> dict[str, Any]:
    m = side.metrics
    return {
        "source": side.source,
        "num_steps": side.num_samples,
        "has_steps": side.has_steps,
        "warmup_dropped": side.warmup_dropped,
        "ranks": sorted(int(r) for r in side.samples["rank"].unique()),
        "step_mean_ns": float(m["step_ns"].mean()) if len(m) else 0.0,
        "categories": side.categories,
    }


def _answer(d: TraceDiff, collective_kernels: frozenset[str] = frozenset(), limit: int = 5) -> list[dict[str, Any]]:
    """The biggest confident regressions of ops, kernels and collectives, each with the source
    line it came from: "+30.8 ms per step: `cudaMemcpyAsync` 38 -> 802 calls, from model.py:88".
    A collective's kernel is answered once, as the collective (by name and size)."""
    rows = []
    floor = MIN_ANSWER_PCT / 100 * d.base["step_mean_ns"]
    for family in ANSWER_FAMILIES:
        r = d.regressions(family)
        if family == "kernels" and collective_kernels:
            r = r[~r["name"].astype(str).isin(collective_kernels)]
        r = r[r["delta_ns"] >= floor].head(limit)
        rows += [dict(row, family=family) for row in r.to_dict(orient="records")]
    rows.sort(key=lambda r: -r["delta_ns"])
    out = []
    for r in rows[:limit]:
        out.append(
            {
                "family": r["family"],
                "label": r["label"],
                "delta_ns": float(r["delta_ns"]),
                "base_count": float(r["base_count"]),
                "new_count": float(r["new_count"]),
                "status": r["status"],
                "confidence": None if np.isnan(r["confidence"]) else float(r["confidence"]),
                "line": r["line"],
                "text": _sentence(r),
            }
        )
    return out


def _sentence(r: dict[str, Any]) -> str:
    what = "calls" if r["family"] == "ops" else "launches"
    count = f"{_count(r['base_count'])} -> {_count(r['new_count'])} {what}"
    label = r["label"] if len(r["label"]) <= MAX_LABEL else r["label"][: MAX_LABEL - 3] + "..."
    text = f"+{_ms(r['delta_ns'])} per step: `{label}` {count}"
    if r["status"] == "new":
        text += " (new)"
    return text + (f", from `{r['line']}`" if r["line"] else "")


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms" if abs(ns) >= 1e6 else f"{ns / 1e3:.1f} us"


def _count(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 or x >= 100 else f"{x:.1f}"


def _notes(d: TraceDiff, b: Side, n: Side) -> list[str]:
    notes = []
    for label, s in (("base", b), ("new", n)):
        if not s.has_steps:
            notes.append(f"{label} has no ProfilerStep spans: the whole trace is one window (one step)")
        if s.warmup_dropped:
            notes.append(
                f"{label}: the first {s.warmup_dropped} step(s) left out as warm-up, as many on both sides "
                "(--include-warmup keeps them)"
            )
    if not d.enough_steps:
        notes.append(
            f"not enough steps for a confidence (fewer than {MIN_STEPS} per side): "
            "changes are point estimates and the gate uses them as they are"
        )
    if b.categories != n.categories:
        notes.append("the two traces have different attribution categories; a missing one counts as 0")
    return notes


def gate_metrics(d: TraceDiff, wanted: list[str] | None) -> list[str]:
    """The metric names ``--metric`` selects: "step", category names, "categories", "all"."""
    known = ["step", *d.categories]
    if not wanted:
        return known
    out: list[str] = []
    for w in wanted:
        w = w.strip().removesuffix("_ns")
        if w == "all":
            out += known
        elif w == "categories":
            out += d.categories
        elif w in known:
            out.append(w)
        else:
            raise DiffError(f"--metric {w!r}: unknown metric (known: {', '.join(known)}, categories, all)")
    return list(dict.fromkeys(out))


def gate(d: TraceDiff, pct: float, metrics: list[str] | None = None, force: bool = False) -> list[GateCheck]:
    """Each selected metric: failed when it regressed by more than ``pct`` % of the base step
    time and the regression is confident (with too few steps: on the point estimate alone).
    Runs that are not comparable (different devices or world size) fail nothing unless
    ``force``: their difference is the hardware's or the job's, not the code's."""
    rows = d.metrics.set_index("metric")
    checks = []
    for name in gate_metrics(d, metrics):
        r = rows.loc[name]
        conf = float(r["confidence"])
        delta = float(r["delta_pct"]) if not math.isnan(r["delta_pct"]) else 0.0
        sure = math.isnan(conf) or conf >= d.confidence_level
        over = bool(delta > pct and sure)
        counts = force or d.comparable
        checks.append(GateCheck(name, delta, conf, over and counts, over and not counts))
    return checks
