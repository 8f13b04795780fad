"""Figures of a GPU session (tests/gpu/gpu_session.sh), from the traces it wrote.

    python tests/gpu/summarize.py WORK_DIR

For each recorded trace: events, kernels, the share of kernel time at each source precision,
and how many kernels sit on each marked line of tests/gpu/gpt_block.py; for work replayed from
a CUDA graph, the share of its time carrying the line of its capture (``graph_capture``); for
the interleaved matmul trace, the what-if prediction against the measured saving; for the
torch.compile run, its compile spans, the share of the kernel time launched in compiled graph
runs that carries Inductor's lines (``compiled``), and record/plain wall time. Prints one JSON
document, ending with ``checks`` (PASS/FAIL lines).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import neuron_explorer as ne
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.graph import Edits, replay_summary

HERE = Path(__file__).resolve().parent


def marks() -> dict[int, str]:
    out = {}
    for i, line in enumerate((HERE / "gpt_block.py").read_text().splitlines(), 1):
        if "# LINE:" in line:
            out[i] = line.split("# LINE:")[1].split()[0]
    return out


def trace_figures(path: Path) -> dict:
    t = ne.load(path)
    df = t.to_pandas()
    k = df[df["kind"] == "kernel"]
    fig: dict = {"events": len(df), "kernels": len(k), "kernel_ns": int(k["dur_ns"].sum())}
    if len(k):
        prec = k.groupby(k["src_precision"].astype(str))["dur_ns"].sum() / max(1, k["dur_ns"].sum())
        fig["kernel_time_by_precision"] = {p: round(float(v), 4) for p, v in prec.items()}
        in_block = k[k["src_file"].astype(str).str.endswith("gpt_block.py")]
        fig["kernel_time_in_gpt_block"] = round(float(in_block["dur_ns"].sum() / k["dur_ns"].sum()), 4)
        m = marks()
        on = in_block[in_block["src_line"].isin(list(m))]
        fig["kernels_on_marked_lines"] = {m[int(line)]: int(n) for line, n in on.groupby("src_line").size().items()}
        graph = k[k["graph_id"].fillna(-1) >= 0] if "graph_id" in k else k.iloc[:0]
        fig["graph_kernels"] = len(graph)
        fig["graph_kernels_with_line"] = int(graph["src_line"].notna().sum())
        fig.update(graph_replay_figures(df, m))
        names = k.groupby(k["name"].astype(str))["dur_ns"].sum().sort_values(ascending=False).head(5)
        fig["top_kernels"] = {n[:80]: int(v) for n, v in names.items()}
    ops = df[df["kind"] == "cpu_op"]
    if len(ops):
        prec = ops.groupby(ops["src_precision"].astype(str))["dur_ns"].sum() / max(1, ops["dur_ns"].sum())
        fig["op_time_by_precision"] = {p: round(float(v), 4) for p, v in prec.items()}
    fig["steps"] = int((df["kind"] == "step").sum())
    fig["metadata_pruned"] = t.metadata.get("pruned") if hasattr(t, "metadata") else None
    fig["metadata_graph_replay"] = t.metadata.get("graph_replay")
    fig["capture_fallback"] = t.metadata.get("capture_fallback")
    fig.update(compiled_figures(df, t.metadata))
    return fig


_RUN_NAMES = ("CompiledFunction", "CompiledFunctionBackward")


def compiled_figures(df, meta: dict) -> dict:
    """A torch.compile run: its compile spans, and how much of the kernel time launched inside
    compiled graph runs (under ``CompiledFunction``/``CompiledFunctionBackward``/``## Call
    CompiledFxGraph``) carries the lines Inductor's provenance names (``compiled``)."""
    import numpy as np

    names = df["name"].astype(str)
    spans = df[names.str.startswith("compile: ")]
    runs = names.isin(_RUN_NAMES) | names.str.startswith("## Call CompiledFxGraph")
    if not runs.any() and not len(spans):
        return {}
    parent = df["parent_id"].fillna(-1).astype(np.int64).to_numpy()
    inside = runs.to_numpy().copy()
    up = parent.copy()
    for _ in range(200):  # walk every row's ancestors, one level a pass
        ok = up >= 0
        if not ok.any():
            break
        inside[ok] |= runs.to_numpy()[up[ok]]
        up[ok] = parent[up[ok]]
    op = df["op_id"].fillna(-1).astype(np.int64).to_numpy()
    kern = (df["kind"] == "kernel").to_numpy()
    in_run = kern & (op >= 0) & inside[np.maximum(op, 0)]
    if not in_run.any():  # a CPU run: Inductor's C++ kernels are host ops
        in_run = (df["kind"] == "cpu_op").to_numpy() & names.str.contains(r"^graph_\d+_cpp_").to_numpy() & inside
    k = df[in_run]
    compiled = k[k["src_precision"].astype(str) == "compiled"]
    return {
        "compile_spans": {n: round(float(d) / 1e6, 1) for n, d in zip(spans["name"].astype(str), spans["dur_ns"])},
        "compiled_region_kernels": len(k),
        "compiled_region_kernel_ns": int(k["dur_ns"].sum()),
        "compiled_region_kernel_time_with_compiled_lines": round(
            float(compiled["dur_ns"].sum() / max(1, k["dur_ns"].sum())), 4
        ),
        "compiled_lines_named": sorted({int(x["line"]) for v in compiled["src_lines"] for x in v}),
        "metadata_compiled_lines": meta.get("compiled_lines"),
        "metadata_steps_from": meta.get("steps_from"),
    }


def walls(work: Path) -> dict[str, int]:
    """``NAME: rc=N wall_ms=M`` lines of gpu_session.sh -> NAME: M (runs that exited 0)."""
    out = {}
    path = work / "walls.txt"
    for line in path.read_text().splitlines() if path.exists() else []:
        name, _, rest = line.partition(": ")
        fields = dict(p.split("=", 1) for p in rest.split() if "=" in p)
        if fields.get("rc") == "0" and "wall_ms" in fields:
            out[name] = int(fields["wall_ms"])
    return out


def graph_replay_figures(df, marked: dict[int, str]) -> dict:
    """Device work replayed by a graph launch (its launch call is ``*GraphLaunch``): how much of
    its time carries the line of its capture (``graph_capture``), and on which marked lines."""
    names = df["name"].astype(str)
    launches = set(df.loc[(df["kind"] == "runtime") & names.str.contains("GraphLaunch"), "event_id"].tolist())
    work = df[df["kind"].isin(["kernel", "memcpy", "memset"]) & df["launch_id"].isin(launches)]
    if not len(work):
        return {}
    captured = work[work["src_precision"].astype(str) == "graph_capture"]
    in_block = captured[captured["src_file"].astype(str).str.endswith("gpt_block.py")]
    return {
        "graph_replayed_events": len(work),
        "graph_replayed_ns": int(work["dur_ns"].sum()),
        "graph_replayed_time_with_capture_line": round(
            float(captured["dur_ns"].sum() / max(1, work["dur_ns"].sum())), 4
        ),
        "graph_replayed_time_in_gpt_block": round(float(in_block["dur_ns"].sum() / max(1, work["dur_ns"].sum())), 4),
        "graph_replayed_on_marked_lines": {
            marked[int(line)]: int(n) for line, n in in_block.groupby("src_line").size().items() if int(line) in marked
        },
        "graph_replayed_by_line": {
            f"{f}:{int(line)}": int(n)
            for (f, line), n in captured.groupby(["src_file", "src_line"], observed=True).size().items()
        },
    }


def checks(out: dict) -> dict:
    """PASS/FAIL lines for the lead: issue 30's graph-replay lines and exact lines on torch 2.11."""
    res = {}
    graph = out.get("graph.parquet") or {}
    share = graph.get("graph_replayed_time_with_capture_line")
    res["graph.parquet: replayed kernel time carrying its capture line >= 95%"] = (
        "NO DATA" if share is None else f"{'PASS' if share >= 0.95 else 'FAIL'} ({100 * share:.1f}%)"
    )
    for name in ("eager.parquet", "graph.parquet"):
        prec = (out.get(name) or {}).get("op_time_by_precision") or {}
        function = prec.get("function", 0.0)
        exact = sum(v for k, v in prec.items() if k in ("line", "forward", "launch", "graph_capture"))
        res[f"{name}: op time at function level < 10% (exact lines without trace_activities)"] = (
            "NO DATA"
            if not prec
            else f"{'PASS' if function < 0.10 else 'FAIL'} (function {100 * function:.1f}%, exact {100 * exact:.1f}%)"
        )
    comp = out.get("compile.parquet") or {}
    share = comp.get("compiled_region_kernel_time_with_compiled_lines")
    res["compile.parquet: compiled-region kernel time carrying Inductor's lines (compiled) >= 90%"] = (
        "NO DATA" if share is None else f"{'PASS' if share >= 0.90 else 'FAIL'} ({100 * share:.1f}%)"
    )
    w = out.get("walls") or {}
    ratio = w["record_compile"] / w["plain_compile"] if w.get("record_compile") and w.get("plain_compile") else None
    events = comp.get("events")
    res["compile.parquet: under 300,000 events and record/plain < 3x"] = (
        "NO DATA"
        if ratio is None or events is None
        else f"{'PASS' if events < 300_000 and ratio < 3 else 'FAIL'} ({events:,} events, {ratio:.2f}x)"
    )
    return res


def whatif_mm(path: Path) -> dict:
    t = ne.load(path)
    ops = t.ops(["name", "step"])
    mm = ops[ops["name"].astype(str) == "aten::mm"]
    calls = mm.groupby("step").size()
    full = {int(s) for s, n in calls.items() if n == 4}
    half = {int(s) for s, n in calls.items() if n == 2}
    frames = TraceFrames(t)
    base = replay_summary(frames)["steps"]
    edited = replay_summary(frames, Edits(scale=(("^aten::mm$", 0.5),)))["steps"]
    predicted = statistics.median(s["saving_ns"] for s in edited if s["step"] in full)
    mf = statistics.median(s["measured_ns"] for s in base if s["step"] in full)
    mh = statistics.median(s["measured_ns"] for s in base if s["step"] in half)
    return {
        "full_steps": len(full),
        "half_steps": len(half),
        "measured_full_ms": mf / 1e6,
        "measured_saving_ms": (mf - mh) / 1e6,
        "predicted_saving_ms": predicted / 1e6,
        "prediction_error_pct": 100 * (predicted - (mf - mh)) / (mf - mh) if mf != mh else None,
        "max_baseline_error_pct": max(abs(s["baseline_error_pct"]) for s in base),
        "median_unexplained_pct": statistics.median(s["unexplained_pct"] for s in base),
    }


def main() -> None:
    work = Path(sys.argv[1])
    out: dict = {}
    for p in sorted(work.glob("*.parquet")):
        try:
            out[p.name] = trace_figures(p)
        except Exception as exc:
            out[p.name] = {"error": repr(exc)}
    mm = work / "fixtures" / "whatif_mm.json.gz"
    if mm.exists():
        try:
            out["whatif_mm"] = whatif_mm(mm)
        except Exception as exc:
            out["whatif_mm"] = {"error": repr(exc)}
    out["walls"] = walls(work)
    out["checks"] = checks(out)
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
