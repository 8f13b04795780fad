"""What every diff renderer shows, built once from a ``TraceDiff``: a headline, the answer
sentences and sections of (title, columns, rows) with display strings. Text, markdown and HTML
only lay these out, so they show the same numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from neuron_explorer.analyzers.diff import GateCheck, TraceDiff
from neuron_explorer.reports._format import fmt_ns
from neuron_explorer.reports.fit import distinct
from neuron_explorer.reports.names import display_kernel_name, short_kernel_name

TABLE_TITLES = {
    "ops": "Ops and runtime calls (host self time)",
    "kernels": "Kernels (device time)",
    "source_lines": "Source lines (host self + device time)",
    "collectives": "Collectives (by name and size)",
    "op_shapes": "Ops by input shapes",
    "kernel_shapes": "Kernels by input shapes",
}
ITEM_COLUMNS = ["item", "base", "new", "delta / step", "delta %", "calls / step", "confidence", "from"]
METRIC_COLUMNS = ["metric", "base / step", "new / step", "delta", "% of base step", "95% interval", "confidence"]


@dataclass
class Section:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class DiffView:
    title: str
    headline: str
    answer: list[str]
    sections: list[Section] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    gate: list[str] = field(default_factory=list)
    gate_failed: bool = False
    warnings: list[str] = field(default_factory=list)  # how two comparable runs differ
    comparable: bool = True


def signed_ns(ns: float) -> str:
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    return ("+" if ns > 0 else "-" if ns < 0 else "") + fmt_ns(abs(ns))


def pct(x: float | None, signed: bool = True) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:+.1f}%" if signed else f"{x:.1f}%"


def confidence(c: float | None) -> str:
    if c is None or (isinstance(c, float) and math.isnan(c)):
        return "n/a"
    return f"{100 * c:.0f}%"


def _count(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 or x >= 100 else f"{x:.1f}"


#: Families whose names are device kernels (shown demangled).
KERNEL_FAMILIES = ("kernels", "kernel_shapes", "collectives")


def _item_rows(t: pd.DataFrame, width: int, kernels: bool = False) -> list[list[str]]:
    rows = []
    names = [display_kernel_name(str(x)) if kernels else str(x) for x in t["label"]]
    labels = distinct(names, width, short_kernel_name if kernels else None)
    lines = distinct([str(x or "") for x in (t["line"] if "line" in t else [""] * len(t))], width)
    for r, label, line in zip(t.itertuples(index=False), labels, lines):
        calls = f"{_count(r.base_count)} -> {_count(r.new_count)}"
        status = {"new": "new", "gone": "gone"}.get(r.status, pct(r.delta_pct))
        rows.append(
            [
                label,
                fmt_ns(r.base_ns),
                fmt_ns(r.new_ns),
                signed_ns(r.delta_ns),
                status,
                calls,
                confidence(r.confidence) if r.delta_ns else "-",
                line,
            ]
        )
    return rows


def build(d: TraceDiff, top: int = 10, checks: list[GateCheck] | None = None, threshold: float | None = None, width: int = 120) -> DiffView:  # fmt: skip
    m = d.metrics.set_index("metric")
    step = m.loc["step"]
    b, n = d.base, d.new
    title = f"Diff: {Path(b['source']).name or 'base'} ({b['num_steps']} steps) -> {Path(n['source']).name or 'new'} ({n['num_steps']} steps)"  # fmt: skip
    ci = "" if math.isnan(step["ci_low_ns"]) else f", 95% interval [{signed_ns(step['ci_low_ns'])}, {signed_ns(step['ci_high_ns'])}]"  # fmt: skip
    headline = (
        f"Step time {fmt_ns(step['base_ns'])} -> {fmt_ns(step['new_ns'])} per step: {signed_ns(step['delta_ns'])} "
        f"({pct(step['delta_pct'])}){ci}, confidence {confidence(step['confidence']) if step['delta_ns'] else '-'}"
    )
    if not d.comparable:
        headline = (
            f"Not comparable: {'; '.join(d.comparability.blocking)}. The change below is the hardware's or the "
            f"job's, not the code's ({headline[0].lower()}{headline[1:]}); the gate does not fail on it without --force."
        )
    view = DiffView(
        title=title,
        headline=headline,
        answer=[a["text"] for a in d.answer],
        notes=list(d.notes),
        warnings=list(d.comparability.warnings),
        comparable=d.comparable,
    )
    rows = []
    for name, r in m.iterrows():
        interval = "-" if math.isnan(r["ci_low_ns"]) else f"[{signed_ns(r['ci_low_ns'])}, {signed_ns(r['ci_high_ns'])}]"
        rows.append(
            [
                str(name),
                fmt_ns(r["base_ns"]),
                fmt_ns(r["new_ns"]),
                signed_ns(r["delta_ns"]),
                pct(r["delta_pct"]),
                interval,
                confidence(r["confidence"]) if r["delta_ns"] else "-",
            ]
        )
    view.sections.append(Section("Step time and its attribution (per step)", METRIC_COLUMNS, rows))
    if d.neuron is not None:
        _neuron_sections(view, d.neuron, top, width)
    for name in ("ops", "kernels", "source_lines", "collectives", "op_shapes", "kernel_shapes"):
        t = d.tables[name]
        if not len(t) or (name.endswith("_shapes") and not (t["shapes"].astype(str) != "").any()):
            continue  # by-shape tables only where shapes were recorded
        reg, imp = d.regressions(name).head(top), d.improvements(name).head(top)
        new_items, gone = int((t["status"] == "new").sum()), int((t["status"] == "gone").sum())
        note = f"{len(t)} items: {new_items} new, {gone} gone"
        with_line = name in ("ops", "kernels", "collectives")  # the tables whose items carry a source line
        cols = ITEM_COLUMNS if with_line else [c for c in ITEM_COLUMNS if c != "from"]
        for label, part in (("slower", reg), ("faster", imp)):
            if not len(part):
                continue
            body = _item_rows(part, width, name in KERNEL_FAMILIES)
            if not with_line:
                body = [r[:-1] for r in body]
            view.sections.append(Section(f"{TABLE_TITLES[name]}: {label}", cols, body, note))
    if checks is not None:
        for c in checks:
            verdict = "FAIL" if c.failed else "not comparable" if c.excused else "ok"
            view.gate.append(f"{verdict}  {c.describe()} (limit {threshold:+.1f}%)")
        view.gate_failed = any(c.failed for c in checks)
    return view


NEURON_COLUMNS = ["metric", "base", "new", "change", "change %"]


def _neuron_value(v: float | None, unit: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "%":
        return f"{v:.3g}%"
    return f"{v:,.0f}"


def _neuron_sections(view: DiffView, neuron: dict[str, pd.DataFrame], top: int, width: int) -> None:
    """Two device profiles: kernel window, per-engine time, DMA bytes, Operator Table."""
    for key, title in (
        ("summary", "NeuronCore: kernel window, DMA and utilization"),
        ("engines", "NeuronCore: time per engine and DMA queue"),
        ("operators", "NeuronCore: Operator Table (device time by layer / HLO op)"),
    ):
        t = neuron.get(key)
        if t is None or not len(t):
            continue
        rows = []
        records = t.head(top if key == "operators" else len(t)).to_dict(orient="records")
        labels = distinct([str(r["metric"]) for r in records], width)
        for label, r in zip(labels, records):
            delta = r["delta"]
            change = (
                "-"
                if delta is None or delta != delta
                else ("+" if delta > 0 else "") + _neuron_value(delta, r["unit"]).lstrip("+")
            )
            rows.append(
                [
                    label,
                    _neuron_value(r["base"], r["unit"]),
                    _neuron_value(r["new"], r["unit"]),
                    change,
                    pct(r["change_pct"]),
                ]
            )
        view.sections.append(Section(title, NEURON_COLUMNS, rows))
    k = neuron["summary"].set_index("metric").loc["kernel window"]
    if k["base"] is not None and k["new"] is not None:
        view.headline = (
            f"Kernel window {fmt_ns(k['base'])} -> {fmt_ns(k['new'])}: {signed_ns(k['new'] - k['base'])} "
            f"({pct(k['change_pct'])}). " + view.headline
        )


def doc(view: DiffView) -> dict[str, Any]:
    """The view as plain data (what the HTML page is handed)."""
    return {
        "title": view.title,
        "headline": view.headline,
        "answer": view.answer,
        "sections": [s.__dict__ for s in view.sections],
        "notes": view.notes,
        "gate": view.gate,
        "gate_failed": view.gate_failed,
        "warnings": view.warnings,
        "comparable": view.comparable,
    }
