"""Write an ``Analysis`` as agent-facing Parquet tables: one file per metric family plus
``fields.parquet`` (every field's table, type, unit and description) and ``summary.json``.

The directory is written atomically: into a temporary sibling, then renamed into place, so a
reader never sees a half-written export.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from neuron_explorer.analyzers import ANALYSIS_SCHEMA_VERSION, Analysis
from neuron_explorer.analyzers.fields import describe
from neuron_explorer.trace.atomic import atomic_dir

TABLES = (
    "steps",
    "attribution",
    "breakdown",
    "temporal",
    "idle",
    "kernels",
    "kernel_types",
    "ops",
    "source_lines",
    "launches",
    "overlap",
    "neuron_operators",
    "neuron_summary",
    "neuron_engines",
    "op_perf",
    "op_categories",
    "rank_steps",
    "collectives",
    "collective_sizes",
    "memory_at_peak",
    "memory_live",
    "memory_replay",
    "memory_fragmentation",
    "findings",
)


def findings_frame(a: Analysis) -> pd.DataFrame:
    rows = [
        {
            "rule_id": f.rule_id,
            "severity": f.severity,
            "title": f.title,
            "message": f.message,
            "cost_ns": int(f.cost_ns),
            "category": f.category,
            "metrics": json.dumps(f.metrics),
            "threshold": json.dumps(f.threshold),
            "time_ranges": json.dumps(f.time_ranges),
            "event_ids": json.dumps(f.event_ids),
            "source_lines": json.dumps(f.source_lines),
            "recommendation": f.recommendation,
            "finding_rank": f.rank,
        }
        for f in a.findings
    ]
    cols = [
        "rule_id",
        "severity",
        "title",
        "message",
        "cost_ns",
        "category",
        "metrics",
        "threshold",
        "time_ranges",
        "event_ids",
        "source_lines",
        "recommendation",
        "finding_rank",
    ]
    df = pd.DataFrame(rows, columns=cols)
    df["cost_ns"] = df["cost_ns"].astype("int64")
    df["finding_rank"] = df["finding_rank"].astype("Int32")
    return df


def tables(a: Analysis) -> dict[str, pa.Table]:
    out = {}
    for name in TABLES:
        df = findings_frame(a) if name == "findings" else getattr(a, name)
        df = df.copy()
        for col in df.columns:  # categoricals / objects of strings -> plain strings
            if isinstance(df[col].dtype, pd.CategoricalDtype) or df[col].dtype == object:
                df[col] = df[col].astype("string")
        out[name] = pa.Table.from_pandas(df, preserve_index=False)
    return out


def fields_table(tabs: dict[str, pa.Table]) -> pa.Table:
    rows = []
    for tname, t in tabs.items():
        for f in t.schema:
            unit, desc = describe(tname, f.name)
            rows.append({"table": tname, "field": f.name, "type": str(f.type), "unit": unit, "description": desc})
    return pa.Table.from_pylist(rows)


def write_metrics(a: Analysis, out_dir: str | Path) -> Path:
    """Write every table to ``out_dir`` (replaced atomically if it exists). Returns the path."""
    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        tabs = tables(a)
        for name, t in tabs.items():
            pq.write_table(t, tmp / f"{name}.parquet", compression="zstd")
        pq.write_table(fields_table(tabs), tmp / "fields.parquet", compression="zstd")
        meta = {
            "schema_version": ANALYSIS_SCHEMA_VERSION,
            "summary": a.to_dict(max_rows=0)["summary"],
            "step_stats": a.to_dict(max_rows=0)["step_stats"],
            "memory_summary": a.to_dict(max_rows=0)["memory_summary"],
            "launch_summary": a.to_dict(max_rows=0)["launch_summary"],
            "perf_summary": a.to_dict(max_rows=0)["perf_summary"],
            "skipped": [{"rule_id": r, "reason": w} for r, w in a.skipped],
            "tables": [*TABLES, "fields"],
        }
        (tmp / "summary.json").write_text(json.dumps(meta, indent=2))
    return out
