"""torch.compile rules: graph breaks and recompilations, as far as a trace shows them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution.one_time import COMPILE_EVENTS
from neuron_explorer.analyzers.core.columns import name_mask
from neuron_explorer.analyzers.core.intervals import merge_windows
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.rules._evidence import lines_from, ms, num_steps, ranges
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.schema import Kind

_REGION = "Torch-Compiled Region"


def compile_events(host: pd.DataFrame) -> pd.DataFrame:
    """The outermost compilation spans of ``host`` (nested ones, e.g. Inductor inside Dynamo's
    compile, are one event): one row per compilation."""
    kinds = host["kind"].isin([Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON]).to_numpy()
    c = host[kinds & name_mask(host["name"], COMPILE_EVENTS)]
    if not len(c):
        return c
    wr, ws, _ = merge_windows(c["rank"].to_numpy(), c["start_ns"].to_numpy(), (c["start_ns"] + c["dur_ns"]).to_numpy())
    first = pd.MultiIndex.from_arrays([c["rank"].to_numpy(), c["start_ns"].to_numpy()]).isin(
        pd.MultiIndex.from_arrays([wr, ws])
    )
    c = c[np.asarray(first)].sort_values("dur_ns", ascending=False, kind="stable")
    return c.drop_duplicates(["rank", "start_ns"]).sort_values(["rank", "start_ns"], kind="stable")


@rule(
    "compile_graph_breaks",
    family="compile",
    title="torch.compile graph breaks and recompiles",
    thresholds={"max_regions_per_step": (1.0, "regions/step"), "max_recompiles": (0.0, "compiles")},
)
def compile_graph_breaks(ctx: RuleContext) -> list[Finding]:
    """More than ``max_regions_per_step`` compiled regions per step (each extra one is a graph
    break back to eager Python) or compilation events after the first step (recompiles)."""
    host = ctx.frames.host
    is_region = name_mask(host["name"], f"^{_REGION}")
    regions = host[is_region | name_mask(host["name"], "CompiledFunction$")]
    regions = regions[~regions["parent_id"].isin(regions["event_id"])]
    compiles = compile_events(host)
    if not len(regions) and not len(compiles):
        raise RuleSkipped("skipped: needs torch.compile events (Torch-Compiled Region / CompiledFunction)")
    top_regions = regions[name_mask(regions["name"], f"^{_REGION}")]
    if not len(top_regions):
        top_regions = regions
    per_step = len(top_regions) / num_steps(ctx.analysis)
    first_step = ctx.analysis.steps["step"].min() if len(ctx.analysis.steps) else -1
    late = compiles[compiles["step"] > first_step] if len(compiles) and first_step >= 0 else compiles.iloc[:0]
    findings = []
    if per_step > ctx.threshold("max_regions_per_step") and ctx.frames.has_steps:
        gaps = pd.Series(top_regions["start_ns"].to_numpy()).sort_values()
        tr, ids = ranges(top_regions)
        findings.append(
            ctx.finding(
                title=f"{per_step:.0f} compiled regions per step: graph breaks",
                message=(
                    f"{len(top_regions)} compiled regions ran in {num_steps(ctx.analysis)} steps; between them the "
                    f"model falls back to eager Python ({len(gaps)} region entries)."
                ),
                metrics={"regions_per_step": metric(per_step, "regions/step")},
                cost_ns=int(top_regions["dur_ns"].sum() * 0.1),
                time_ranges=tr,
                event_ids=ids,
                source_lines=lines_from(top_regions, "dur_ns"),
                recommendation=(
                    "Find the breaks with TORCH_LOGS=graph_breaks (or torch._dynamo.explain) and remove them: "
                    "no .item()/print/data-dependent control flow inside the compiled function; fullgraph=True "
                    "makes breaks an error."
                ),
            )
        )
    if len(late) > ctx.threshold("max_recompiles"):
        tr, ids = ranges(late)
        findings.append(
            ctx.finding(
                title=f"{len(late)} compilation events after the first step: recompiles",
                message=f"Compilation ran again in steady state for {ms(late['dur_ns'].sum())}.",
                metrics={
                    "recompile_events": metric(len(late), "events"),
                    "recompile_ns": metric(int(late["dur_ns"].sum()), "ns"),
                },
                cost_ns=int(late["dur_ns"].sum()),
                category="one_time",  # a recompile is one-time work for its new guard
                time_ranges=tr,
                event_ids=ids,
                source_lines=lines_from(late, "dur_ns"),
                recommendation=(
                    "Find the cause with TORCH_LOGS=recompiles: changing shapes (mark_dynamic or dynamic=True), "
                    "changing Python scalars or globals guarded on; raise torch._dynamo.config.cache_size_limit "
                    "only as a last resort."
                ),
            )
        )
    return findings
