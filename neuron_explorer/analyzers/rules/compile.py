"""torch.compile rules: graph breaks and recompilations, as far as a trace shows them."""

from __future__ import annotations

import pandas as pd

from neuron_explorer.analyzers.context import name_mask
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.rules._evidence import lines_from, ms, num_steps, ranges
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule

_REGION = "Torch-Compiled Region"
_COMPILE = r"TorchDynamo Cache Miss|_compile\.compile_inner|compile_fx\.py|torch/_dynamo/convert_frame\.py|torch/_inductor/compile_fx"


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
    compiles = host[name_mask(host["name"], _COMPILE) & ~is_region]
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
