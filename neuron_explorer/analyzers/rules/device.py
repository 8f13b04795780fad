"""Device rules: idle / low utilization, launch-bound small kernels, tensor cores, fp32 matmuls."""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.attribution import CATEGORY_LABELS, CATEGORY_NAMES
from neuron_explorer.analyzers.attribution.one_time import overlaps_one_time
from neuron_explorer.analyzers.core.hardware import Hardware
from neuron_explorer.analyzers.core.kernel_names import uses_tensor_cores
from neuron_explorer.analyzers.core.run_kind import RunKind
from neuron_explorer.analyzers.finding import Finding, metric
from neuron_explorer.analyzers.rules import _edits
from neuron_explorer.analyzers.rules._advice import compile_advice, compiled_in_trace, fused_optimizer_advice
from neuron_explorer.analyzers.rules._evidence import attributed_wall_ns, category_ns, lines_from, ms, of_wall
from neuron_explorer.analyzers.rules._host_launch import graph_launched, launch_bound_explains
from neuron_explorer.analyzers.rules.registry import RuleContext, RuleSkipped, rule
from neuron_explorer.trace.units import format_duration


def _need_device(ctx: RuleContext) -> pd.DataFrame:
    dev = ctx.frames.device
    if not len(dev):
        raise RuleSkipped("skipped: needs device events (kernels); this trace is host-only")
    return dev


@rule(
    "device_idle",
    family="device",
    title="Device idle / low utilization",
    thresholds={"min_busy_pct": (50.0, "%"), "error_busy_pct": (20.0, "%")},
)
def device_idle(ctx: RuleContext) -> list[Finding]:
    """The device did work for less than ``min_busy_pct`` of the step time (TensorBoard plugin's
    GPU-utilization rule). The message splits the idle time by attribution category; the cost
    is the ``untraced`` part only (the other categories are billed by the rules that explain
    them: host_bound, sync_in_loop, dataloader_stall, ...). Evidence: the largest idle gaps."""
    dev = _need_device(ctx)
    if set(ctx.frames.device_types) <= {"neuron"} and not len(ctx.frames.host):
        # A Neuron device profile alone: its idle time is the fixed wait before the kernel, not
        # untraced host time; neuron_fixed_wait and the other neuron rules judge it.
        raise RuleSkipped(
            "skipped: needs host events beside the device profile (neuron_fixed_wait judges a Neuron profile alone)"
        )
    at = ctx.analysis.attribution
    at = at[at["device"] >= 0]
    wall = float(at["wall_ns"].sum() - at["one_time_ns"].sum())  # the steady state
    if wall <= 0:
        raise RuleSkipped("skipped: needs steady-state time with device work (the trace holds only one-time work)")
    busy = float(at[["compute_ns", "communication_ns", "copy_ns"]].sum().sum())
    busy_pct = 100.0 * busy / wall
    if busy_pct >= ctx.threshold("min_busy_pct"):
        return []
    idle_parts = {
        c: float(at[f"{c}_ns"].sum())
        for c in CATEGORY_NAMES
        if c not in ("compute", "communication", "copy", "one_time")
    }
    split = ", ".join(
        f"{CATEGORY_LABELS[c]} {100.0 * v / wall:.0f}%"
        for c, v in sorted(idle_parts.items(), key=lambda kv: -kv[1])
        if v
    )
    # largest gaps between consecutive device work (over the union of all streams of a device)
    d = dev.sort_values(["rank", "device", "start_ns"], kind="stable")
    end = (d["start_ns"] + d["dur_ns"]).to_numpy()
    run_max = pd.Series(end).groupby([d["rank"].to_numpy(), d["device"].to_numpy()]).cummax().to_numpy()
    prev = np.roll(run_max, 1)
    same = np.ones(len(d), bool)
    same[0] = False
    key = d[["rank", "device"]].to_numpy()
    same[1:] = (key[1:] == key[:-1]).all(axis=1)
    gap = np.where(same, d["start_ns"].to_numpy() - prev, 0)
    # a gap that holds one-time work (a compile, a graph capture, a warm-up step) is that work's
    gap[overlaps_one_time(ctx.frames, d["rank"].to_numpy(), prev, d["start_ns"].to_numpy()) & (gap > 0)] = 0
    top = np.argsort(-gap)[:5]
    top = top[gap[top] > 0]
    after = d.iloc[top]
    untraced = idle_parts["untraced"]
    return [
        ctx.finding(
            severity="error" if busy_pct < ctx.threshold("error_busy_pct") else "warning",
            title=f"Device busy only {busy_pct:.0f}% {of_wall(ctx.frames.has_steps)}",
            message=(
                f"The device ran work {busy_pct:.1f}% {of_wall(ctx.frames.has_steps)}. The rest: {split or 'n/a'}. "
                f"Largest gap: {ms(gap[top[0]]) if len(top) else 'n/a'}."
                + (
                    f" {format_duration(untraced)} of it the host ran nothing the profiler recorded (record with "
                    "with_stack=True to see the Python): that part is this finding's cost; the rest of the idle "
                    "time is billed to the findings that name its cause."
                    if untraced
                    else " Each part of the idle time is billed to the finding that names its cause, none to this one."
                )
            ),
            metrics={
                "busy_pct": metric(busy_pct, "%"),
                **{f"{c}_ns": metric(int(v), "ns") for c, v in idle_parts.items()},
                "largest_gap_ns": metric(int(gap[top[0]]) if len(top) else 0, "ns"),
            },
            cost_ns=int(untraced),
            category="untraced",
            time_ranges=[[int(prev[i]), int(d["start_ns"].to_numpy()[i])] for i in top],
            event_ids=[int(x) for x in after["event_id"]],
            source_lines=lines_from(after, "dur_ns"),
            recommendation=(
                "Keep the device fed: fix the largest idle category first (the findings below name it), "
                "increase the batch size, move input preparation off the loop's thread (DataLoader workers, "
                "pin_memory=True, non_blocking=True copies), remove host syncs from the step."
            ),
        )
    ]


@rule(
    "launch_bound",
    family="device",
    title="Launch-bound: many small kernels",
    thresholds={
        "short_kernel_ns": (10_000, "ns"),
        "min_short_pct": (50.0, "%"),
        "min_idle_pct": (10.0, "%"),
    },
)
def launch_bound(ctx: RuleContext) -> list[Finding]:
    """Most kernels run under ``short_kernel_ns`` and the device is starved while the host
    launches (the ``host_launch`` category) for at least ``min_idle_pct`` of step time: the host
    cannot launch kernels as fast as the device finishes them. Time spent in data loading,
    Python or blocking calls is not launch overhead and is not counted."""
    _need_device(ctx)
    ev = ctx.frames.launch_events
    if not len(ev):
        raise RuleSkipped("skipped: needs runtime launch events linked to kernels")
    # a graph launch (cudaGraphLaunch, hipGraphLaunch) runs all its kernels from one call: they
    # cost no launch each, so only the kernels launched one by one can make the host the limit
    by_graph = graph_launched(ctx.frames)
    graphs = bool(by_graph.any())
    ev = ev[~by_graph]
    if not len(ev):
        return []
    short = ev["dur_ns"] < ctx.threshold("short_kernel_ns")
    short_pct = 100.0 * float(short.mean())
    from neuron_explorer.analyzers.rules.optimizer import unfused_optimizer_exposed_ns

    # an unfused optimizer's own host time is that finding's (the specific cause wins)
    starved = max(category_ns(ctx.analysis, "host_launch") - unfused_optimizer_exposed_ns(ctx), 0)
    starved_pct = 100.0 * starved / (attributed_wall_ns(ctx.analysis, device_only=True) or 1)
    if (
        short_pct < ctx.threshold("min_short_pct")
        or starved_pct < ctx.threshold("min_idle_pct")
        or not launch_bound_explains(ctx)
    ):
        return []
    small = ev[short.to_numpy()]
    dev = ctx.frames.device
    src = (
        dev.set_index("event_id").loc[small["event_id"].to_numpy(), ["src_file", "src_line", "src_func"]]
        if dev["event_id"].is_unique
        else dev.iloc[:0]
    )
    src = src.reset_index(drop=True).assign(one=1)
    return [
        ctx.finding(
            title=f"Launch-bound: {short_pct:.0f}% of kernels are shorter than {ms(ctx.threshold('short_kernel_ns'))}",
            message=(
                f"{len(small)} of {len(ev)} kernels are short (mean {ms(small['dur_ns'].mean())}, launch call "
                f"{ms(small['launch_dur_ns'].mean())}); the device sat with nothing queued while the host launched "
                f"for {ms(starved)} ({starved_pct:.0f}% {of_wall(ctx.frames.has_steps)})."
            ),
            metrics={
                "short_kernel_pct": metric(short_pct, "%"),
                "host_launch_pct": metric(starved_pct, "%"),
                "host_launch_ns": metric(int(starved), "ns"),
                "short_kernels": metric(len(small), "kernels"),
                "mean_launch_ns": metric(float(small["launch_dur_ns"].mean()), "ns"),
            },
            cost_ns=int(starved),
            category="host_launch",
            event_ids=[int(x) for x in small.nsmallest(5, "start_ns")["event_id"]],
            source_lines=lines_from(src, "one"),
            recommendation=launch_bound_advice(
                ctx.frames.hardware, ctx.frames.run_kind, compiled_in_trace(ctx.frames), graphs
            ),
        )
    ]


@rule(
    "tensor_cores",
    family="device",
    title="GEMMs not on tensor cores",
    thresholds={
        "min_non_tc_pct": (50.0, "% of GEMM time"),
        "min_gemm_pct": (10.0, "% of kernel time"),
        "min_compute_major": (7, ""),
    },
)
def tensor_cores(ctx: RuleContext) -> list[Finding]:
    """On a device with tensor cores (compute capability >= 7), most GEMM time runs in kernels
    that do not use them (fp32 SGEMM): the TensorBoard plugin's AMP recommendation."""
    _need_device(ctx)
    k = ctx.analysis.kernels
    gemm = k[k["category"] == "gemm"]
    if not len(gemm):
        raise RuleSkipped("skipped: needs GEMM kernels")
    hw = ctx.frames.hardware
    if not hw.is_nvidia:
        raise RuleSkipped(f"skipped: tensor-core kernel names are known for NVIDIA GPUs only ({hw.platform} trace)")
    if hw.compute_major is None:
        raise RuleSkipped("skipped: needs device properties with compute capability (computeMajor)")
    if hw.compute_major < ctx.threshold("min_compute_major"):
        return []
    tc = uses_tensor_cores(gemm["name"]).to_numpy()
    gemm_ns = float(gemm["total_ns"].sum())
    if not gemm_ns > 0:  # GEMM kernels without durations (dur 0 is valid: docs/schema.md)
        raise RuleSkipped("skipped: the GEMM kernels have no recorded duration")
    non_tc_ns = float(gemm.loc[~tc, "total_ns"].sum())
    non_tc_pct = 100.0 * non_tc_ns / gemm_ns
    gemm_pct = 100.0 * gemm_ns / float(k["total_ns"].sum())
    if non_tc_pct < ctx.threshold("min_non_tc_pct") or gemm_pct < ctx.threshold("min_gemm_pct"):
        return []
    dev = ctx.frames.device
    names = set(gemm.loc[~tc, "name"].head(20))
    ev = dev[dev["name"].isin(names).to_numpy()]  # (on the categories: no string per event)
    return [
        ctx.finding(
            title=f"{non_tc_pct:.0f}% of GEMM time runs without tensor cores",
            message=(
                f"GEMMs take {gemm_pct:.0f}% of kernel time and {ms(non_tc_ns)} of it is in kernels such as "
                f"{gemm.loc[~tc, 'name'].iloc[0][:60]} that do not use tensor cores (fp32)."
            ),
            metrics={
                "non_tensor_core_pct": metric(non_tc_pct, "% of GEMM time"),
                "gemm_pct": metric(gemm_pct, "%"),
                "non_tensor_core_ns": metric(int(non_tc_ns), "ns"),
            },
            cost_ns=int(non_tc_ns * 0.5),  # tensor cores typically at least halve GEMM time
            edits=_edits.scaled(
                dev[dev["name"].isin(set(gemm.loc[~tc, "name"])).to_numpy()],
                0.5,
                "GEMMs on tensor cores (half their time)",
            ),
            event_ids=[int(x) for x in ev.nlargest(5, "dur_ns")["event_id"]],
            source_lines=lines_from(ev, "dur_ns"),
            recommendation=reduced_precision_advice(hw, ctx.frames.run_kind),
        )
    ]


def launch_bound_advice(hw: Hardware, kind: RunKind, compiled: bool = False, graphs: bool = False) -> str:
    """Fewer launches: torch.compile (graph capture where the device has it; fewer graph breaks
    where the trace already runs compiled code; the rest of the step in the graph where it
    already replays one), a fused optimizer only where the run trains, larger batches."""
    if graphs and hw.device_type in ("cuda", "hip"):
        fixes = [
            "capture the kernels still launched one by one into the graph the step already replays "
            "(torch.cuda.graph, or torch.cuda.make_graphed_callables for the modules outside it)"
        ]
    else:
        fixes = [compile_advice(hw, compiled)]
    opt = fused_optimizer_advice(hw, kind)
    if opt:
        fixes.append(opt)
    fixes.append("larger batches")
    return "Fuse small kernels: " + ", ".join(fixes) + "; avoid Python loops issuing one tiny op per element."


def reduced_precision_advice(hw: Hardware, kind: RunKind | None = None) -> str:
    """Autocast advice this hardware can take: bf16 (and TF32) from NVIDIA compute capability 8.0,
    float16 with a GradScaler on Volta/Turing (no bf16 there), bf16 on ROCm, Neuron, MTIA, XPU.
    A run without a backward pass or optimizer step (inference) gets no GradScaler (it scales
    gradients) and no word on the optimizer step."""
    if kind is not None and not kind.training:
        if hw.bf16:
            tf32 = ', or at least TF32 matmuls: torch.set_float32_matmul_precision("high")' if hw.tf32 else ""
            return f"Run the forward pass in {hw.autocast('bfloat16')} (or cast the model: model.to(torch.bfloat16)){tf32}."
        if hw.is_nvidia and hw.compute_major is None:
            return (
                f"Run the forward pass in {hw.autocast('bfloat16')} on compute capability 8.0 and newer "
                f"(torch.cuda.is_bf16_supported()), else in {hw.autocast('float16')}."
            )
        return f"Run the forward pass in {hw.autocast('float16')} (or cast the model: model.half())."
    keep = "; the optimizer step stays in fp32 (autocast leaves it alone)"
    if hw.bf16:
        tf32 = ', or at least TF32 matmuls: torch.set_float32_matmul_precision("high")' if hw.tf32 else ""
        return f"Wrap the forward pass and loss in {hw.autocast('bfloat16')}{keep}{tf32}."
    if hw.is_nvidia and hw.tensor_cores:
        return (
            f"Wrap the forward pass and loss in {hw.autocast('float16')} and scale the loss with "
            f'torch.amp.GradScaler("{hw.torch_device}"){keep}. {hw.label} has no bf16 or TF32.'
        )
    if hw.is_nvidia:  # model unknown (no deviceProperties)
        return (
            f"Wrap the forward pass and loss in {hw.autocast('bfloat16')} on compute capability 8.0 and newer "
            f"(torch.cuda.is_bf16_supported()), else in {hw.autocast('float16')} with "
            f'torch.amp.GradScaler("cuda"){keep}.'
        )
    return f"Wrap the forward pass and loss in {hw.autocast('float16')}{keep}."


_MATMUL_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
    "aten::convolution",
    "aten::_convolution",
    "aten::conv2d",
    "aten::cudnn_convolution",
)


@rule(
    "fp32_amp",
    family="device",
    title="fp32 matmuls where AMP fits",
    thresholds={"min_fp32_pct": (30.0, "% of device time")},
    severity="info",
)
def fp32_amp(ctx: RuleContext) -> list[Finding]:
    """Matmul/conv ops with float32 inputs take a large share of device time; autocast would run
    them in bf16/fp16. Needs ``record_shapes=True`` (the ops' input types)."""
    dev = _need_device(ctx)
    host = ctx.frames.host
    ops = host[host["name"].isin(_MATMUL_OPS)]
    if not len(ops):
        raise RuleSkipped("skipped: needs matmul/conv ops")
    types = ctx.frames.trace.select(None, ["event_id", "rank", "input_types"])
    t = pd.DataFrame(
        {
            "rank": types["rank"].to_numpy(zero_copy_only=False),
            "event_id": types["event_id"].to_numpy(zero_copy_only=False),
            "input_types": types["input_types"].to_numpy(zero_copy_only=False),
        }
    )
    ops = ops.merge(t, on=["rank", "event_id"], how="left")
    if ops["input_types"].isna().all():
        raise RuleSkipped("skipped: needs op input types (profile with record_shapes=True)")
    fp32 = ops["input_types"].fillna("").str.contains('"float"', case=False, regex=False).to_numpy()
    fp32_ids = pd.MultiIndex.from_arrays([ops["rank"].to_numpy()[fp32], ops["event_id"].to_numpy()[fp32]])
    key = pd.MultiIndex.from_arrays([dev["rank"].to_numpy(), dev["op_id"].to_numpy()])
    on_fp32 = key.isin(fp32_ids)
    total = float(dev["dur_ns"].sum())
    fp32_ns = float(dev["dur_ns"].to_numpy()[on_fp32].sum())
    pct = 100.0 * fp32_ns / total if total else 0.0
    if pct < ctx.threshold("min_fp32_pct"):
        return []
    ev = dev[on_fp32]
    return [
        ctx.finding(
            title=f"fp32 matmuls take {pct:.0f}% of device time",
            message=f"Matmul/conv ops with float32 inputs launched {ms(fp32_ns)} of device work ({pct:.1f}%).",
            metrics={"fp32_matmul_pct": metric(pct, "%"), "fp32_matmul_ns": metric(int(fp32_ns), "ns")},
            cost_ns=int(fp32_ns * 0.5),
            edits=_edits.scaled(ev, 0.5, "fp32 matmuls under autocast (half their time)"),
            event_ids=[int(x) for x in ev.nlargest(5, "dur_ns")["event_id"]],
            source_lines=lines_from(ev, "dur_ns"),
            recommendation=reduced_precision_advice(ctx.frames.hardware, ctx.frames.run_kind),
        )
    ]
