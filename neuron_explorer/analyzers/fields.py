"""Units and meanings of every field of the metric tables (the agent-facing ``fields`` table).

A test checks that every column the analyzers produce is described here, so a metric cannot
be added without its unit and meaning.
"""

from __future__ import annotations

_COMMON = {
    "rank": ("", "Distributed rank."),
    "step": (
        "",
        "Profiler step number; -1 when the trace has no ProfilerStep spans and the row covers the whole trace.",
    ),
    "device": ("index", "Device index; -1 for a host-only row."),
    "device_type": ("", "cpu, cuda, hip, neuron, mtia, ..."),
    "stream": ("id", "Device queue (stream) id."),
    "start_ns": ("ns", "Absolute start time of the row's window or event."),
    "end_ns": ("ns", "Absolute end time of the row's window."),
    "event_id": ("id", "event_id of the trace event this row describes (-1 when none)."),
    "name": ("", "Kernel or op name as recorded."),
    "count": ("events", "Number of events."),
    "src_file": ("path", "User source file."),
    "src_line": ("line", "Line in src_file."),
    "src_func": ("", "Function containing the line."),
    "src_precision": ("", "How exact the attribution is: line, function, launch, forward, generated."),
}

_CATEGORIES = (
    (
        "one_time",
        "One-time work: compilation, graph capture, a warm-up step (above device work), setup calls (below it).",
    ),
    ("compute", "A compute kernel ran on the device; on a host-only row, a framework op ran."),
    ("communication", "A communication kernel ran and no compute: exposed communication."),
    ("copy", "A memcpy or memset ran and nothing above: exposed copies."),
    ("host_blocked", "The device ran nothing while a host thread was in a blocking call (sync, blocking copy)."),
    ("device_wait", "The device ran nothing while launched work waited in its queue (a dependency)."),
    ("data_loading", "The device ran nothing, nothing queued, while the host was in a DataLoader span."),
    ("host_launch", "The device ran nothing, nothing queued, while the host ran ops or runtime calls."),
    ("host_python", "The device ran nothing while the host was only in Python frames (with_stack traces)."),
    ("untraced", "The device ran nothing and the host was in no recorded event: the rest of wall_ns."),
)

FIELDS: dict[str, dict[str, tuple[str, str]]] = {
    "steps": {
        "dur_ns": ("ns", "Step wall time (ProfilerStep span)."),
        "is_warmup": ("bool", "Leading step over 1.5x the median of later steps (at most two)."),
        "is_outlier": ("bool", "Steady step over 3 robust standard deviations and 25% from the rank's median."),
        "dev_from_median_pct": ("%", "Deviation from the rank's steady median step time, 0-100 scale."),
    },
    "attribution": {
        "wall_ns": ("ns", "Wall time of the step window; the ten category columns below sum to it."),
        **{
            f"{name}_ns": ("ns", f"{label} (priority {i}; docs/rules.md, 'Step-time attribution')")
            for i, (name, label) in enumerate(_CATEGORIES)
        },
        **{f"{name}_pct": ("%", f"{name}_ns / wall_ns, 0-100.") for name, _ in _CATEGORIES},
    },
    "breakdown": {
        "wall_ns": ("ns", "Wall time of the step window; the *_ns parts below sum to it."),
        "compute_ns": ("ns", "Time a compute kernel ran on the device (priority 1)."),
        "memcpy_ns": ("ns", "Time a memcpy ran and no compute kernel (priority 2)."),
        "memset_ns": ("ns", "Time a memset ran and nothing above (priority 3)."),
        "communication_ns": (
            "ns",
            "Time a communication kernel ran and nothing above: exposed communication (priority 4).",
        ),
        "host_exposed_ns": ("ns", "Device idle while the host ran a framework op, runtime or sync call (priority 5)."),
        "idle_ns": ("ns", "Neither device nor host framework work: the rest of wall_ns."),
        "compute_pct": ("%", "compute_ns / wall_ns, 0-100."),
        "memcpy_pct": ("%", "memcpy_ns / wall_ns, 0-100."),
        "memset_pct": ("%", "memset_ns / wall_ns, 0-100."),
        "communication_pct": ("%", "communication_ns / wall_ns, 0-100."),
        "host_exposed_pct": ("%", "host_exposed_ns / wall_ns, 0-100."),
        "idle_pct": ("%", "idle_ns / wall_ns, 0-100."),
    },
    "temporal": {
        "span_ns": ("ns", "First device event start to last device event end (HTA's kernel time)."),
        "busy_ns": ("ns", "Union of all device events."),
        "idle_ns": ("ns", "span_ns - busy_ns."),
        "compute_ns": ("ns", "Union of compute kernels (not communication, not memcpy/memset)."),
        "non_compute_ns": ("ns", "busy_ns - compute_ns (communication and memory kernels)."),
        "idle_pct": ("%", "idle_ns / span_ns, 0-100."),
        "compute_pct": ("%", "compute_ns / span_ns, 0-100."),
        "non_compute_pct": ("%", "non_compute_ns / span_ns, 0-100."),
    },
    "idle": {
        "idle_ns": ("ns", "Sum of gaps between consecutive device events on the stream."),
        "host_wait_ns": ("ns", "Gaps where the next event's launch started after the previous event ended."),
        "kernel_wait_ns": ("ns", "Other gaps shorter than 30 us (back-to-back launch latency)."),
        "other_ns": ("ns", "Remaining gaps (waits on other streams, events, syncs)."),
        "host_wait_pct": ("%", "host_wait_ns / idle_ns, 0-100."),
        "kernel_wait_pct": ("%", "kernel_wait_ns / idle_ns, 0-100."),
        "other_pct": ("%", "other_ns / idle_ns, 0-100."),
        "gaps": ("gaps", "Number of gaps measured."),
    },
    "kernels": {
        "category": ("", "gemm, attention, conv, elementwise, reduction, communication, memory, other."),
        "total_ns": ("ns", "Summed duration."),
        "mean_ns": ("ns", "Mean duration."),
        "min_ns": ("ns", "Shortest duration."),
        "max_ns": ("ns", "Longest duration."),
        "pct": ("%", "Share of all device event time, 0-100."),
    },
    "kernel_types": {
        "kernel_type": ("", "HTA kernel type set running: COMPUTATION, COMMUNICATION, MEMORY, or 'A overlapping B'."),
        "total_ns": ("ns", "Time during which exactly this set of kernel types ran (overlap counted once)."),
        "pct": ("%", "Share of device-busy time, 0-100."),
    },
    "ops": {
        "host_total_ns": ("ns", "Summed host duration of the op (children included)."),
        "host_self_ns": ("ns", "Summed host duration minus direct host children."),
        "device_ns": ("ns", "Device time of the work this op issued itself (op_id)."),
        "kernel_count": ("events", "Device events this op issued itself."),
    },
    "source_lines": {
        "host_ns": ("ns", "Host self time of the events attributed to the line."),
        "python_ns": (
            "ns",
            "Self time of the user's own Python frames attributed to the line: Python work outside framework ops and library code.",
        ),
        "device_ns": ("ns", "Device time of the device events attributed to the line."),
        "kernel_count": ("events", "Device events attributed to the line."),
        "alloc_bytes": ("bytes", "Bytes allocated by the line (memory events)."),
        "alloc_count": ("allocs", "Allocations made by the line."),
        "event_count": ("events", "Host events attributed to the line."),
    },
    "launches": {
        "launches": ("events", "Device events with their launch in the trace."),
        "launch_dur_mean_ns": ("ns", "Mean duration of the launching runtime call."),
        "launch_dur_p95_ns": ("ns", "95th percentile of the launching runtime call."),
        "launch_delay_mean_ns": ("ns", "Mean of device start minus launch start."),
        "launch_delay_p50_ns": ("ns", "Median launch delay."),
        "launch_delay_p95_ns": ("ns", "95th percentile launch delay."),
        "queue_depth_mean": ("events", "Mean number of events queued on the stream at each launch."),
        "queue_depth_max": ("events", "Largest queue depth seen."),
        "long_launches": ("events", "Launch calls over 50 us."),
        "long_delays": ("events", "Launch delays over 100 us."),
        "short_kernels": ("events", "Device events under 10 us."),
    },
    "overlap": {
        "comm_ns": ("ns", "Union of communication kernels."),
        "compute_ns": ("ns", "Union of compute kernels."),
        "overlapped_ns": ("ns", "Communication time during which compute also ran."),
        "exposed_comm_ns": ("ns", "comm_ns - overlapped_ns."),
        "overlap_pct": ("%", "overlapped_ns / comm_ns, 0-100."),
    },
    "neuron_operators": {
        "layer": ("", "Framework layer of the Neuron instructions (the export's `layer`)."),
        "hlo_name": ("", "HLO instruction they implement (the export's `hlo_name`, e.g. dot.7)."),
        "hlo_op": ("", "hlo_name without its .N suffix (dot.7 -> dot)."),
        "instructions": ("events", "Instructions of the (layer, HLO op), semaphore waits excluded."),
        "device_ns": ("ns", "Sum of their durations on the NeuronCore engines."),
        "device_pct": ("%", "device_ns over the NeuronCore's instruction time (waits excluded), 0-100."),
        "engines": ("engines", "Number of distinct engines they ran on."),
    },
    "neuron_engines": {
        "core": (
            "",
            "Physical core of the logical NeuronCore (`device`) the unit is on: the subgraph's number "
            "(sg00 -> 0, sg01 -> 1, measured on trn2 with two physical cores per logical core).",
        ),
        "queue_type": ("", "DMA queue's type from its rows (e.g. instruction, data; null: engine or unknown)."),
        "unit": ("", "Engine (Tensor, Vector, Scalar, GpSimd, Sync) or DMA queue name."),
        "type": ("", "engine or dma."),
        "instructions": ("events", "Instructions on the engine (semaphore waits included); DMA: packet rows."),
        "waits": ("events", "Semaphore-wait instructions on the engine (null for a DMA queue)."),
        "transfers": ("events", "DMA transfers on the queue (packet groups, aggregated or not)."),
        "bytes": ("bytes", "DMA bytes the queue moved (its packets' sum)."),
        "active_ns": ("ns", "Union of the unit's active intervals over the whole profile (waits excluded)."),
        "kernel_active_ns": ("ns", "The same, inside the kernel window."),
        "kernel_util_pct": ("%", "kernel_active_ns over the kernel window, 0-100."),
        "span_util_pct": ("%", "active_ns over the profile's span (total_time), 0-100."),
    },
    "op_perf": {
        "category": ("", "Op category: gemm, attention, conv, elementwise, reduction, norm, communication, other."),
        "shapes": ("json", "Input shapes of the op group (Kineto Input Dims), compact JSON."),
        "dtypes": ("json", "Input dtypes of the op group (Kineto Input type), compact JSON."),
        "count": ("calls", "Calls of the op group that ran device work."),
        "kernel_time_us": ("us", "Summed device time of the group's kernels (memsets included)."),
        "gflops": ("GFLOP", "Modelled floating-point operations of one call (null: no model)."),
        "data_moved_mb": ("MiB", "Modelled bytes read and written by one call, in MiB (null: no model)."),
        "tflops_per_s": ("TFLOP/s", "Achieved: gflops * count / kernel time."),
        "tb_per_s": ("TB/s", "Achieved: data moved * count / kernel time (10^12 bytes/s)."),
        "flops_per_byte": ("FLOP/byte", "Arithmetic intensity: FLOPs / bytes of one call."),
        "bound": (
            "",
            "Roofline bound: compute when the intensity is at or above the device's ridge point, else memory.",
        ),
        "pct_of_peak": ("%", "Achieved share of the bound's roof (peak FLOP/s or bandwidth), 0-100."),
        "peak_tflops_per_s": ("TFLOP/s", "Device peak for the group's compute dtype on the units it runs on."),
        "compute_dtype": ("", "Dtype the math runs in: fp64, fp32, bf16, fp16, fp8, ..."),
        "params": ("json", "Model parameters (M/N/K, attention dims, causal, non-contiguous operands)."),
        "device_time_pct": ("%", "Share of all device event time, 0-100."),
    },
    "rank_steps": {
        "wall_ns": ("ns", "Wall time of the rank's step window (mean over its devices' attribution rows)."),
        **{
            f"{name}_ns": ("ns", f"{label} (the attribution's category, mean over the rank's devices)")
            for name, label in _CATEGORIES
        },
        "busy_ns": ("ns", "compute_ns + copy_ns: the device work the rank does between collectives."),
    },
    "collectives": {
        "pg": ("", "Process group: 'pg <process_group>' (the Process Group Name argument), else 'stream <id>'."),
        "seq": ("", "Order of the collective among its rank's collectives of the group in the step (0-based)."),
        "collective_name": ("", "allreduce, all_gather, broadcast, ... (args), else the kernel name's operation."),
        "algorithm": (
            "",
            "The NCCL algorithm the kernel name carries (RING, TREE, NVLS, ...); null when it names none.",
        ),
        "protocol": ("", "The NCCL protocol the kernel name carries (LL, LL128, SIMPLE); null when it names none."),
        "num_ranks": ("ranks", "Ranks of the trace on which this instance was matched (1: no peer profiled)."),
        "first_arrival_ns": ("ns", "Earliest start of the instance's collective kernel over the ranks."),
        "last_arrival_ns": ("ns", "Latest start: the rank every other one waits for arrives then."),
        "skew_ns": ("ns", "last_arrival_ns - first_arrival_ns."),
        "last_rank": ("", "The rank that arrived last (the lowest on a tie)."),
        "wait_ns": ("ns", "Wait the last rank causes: sum over the other ranks of last arrival - their arrival."),
        "bytes": (
            "bytes",
            "Message size: max(in_msg_nelems, out_msg_nelems) x the size of msg_dtype, else the bytes column; null when not recorded.",
        ),
        "group_size": ("ranks", "Size of the process group (args), null when not recorded."),
        "xfer_ns": ("ns", "Duration of the last rank's kernel: the transfer, with no waiting."),
        "algbw_gbps": ("GB/s", "bytes / xfer_ns (null without bytes)."),
        "busbw_gbps": (
            "GB/s",
            "algbw x NCCL's bus factor: all_reduce 2(n-1)/n, all_gather/reduce_scatter/all_to_all (n-1)/n, else 1.",
        ),
    },
    "collective_sizes": {
        "collective_name": ("", "As in collectives."),
        "algorithm": ("", "As in collectives; '-' when the kernel names none."),
        "protocol": ("", "As in collectives; '-' when the kernel names none."),
        "size_bytes": ("bytes", "Lower bound of the power-of-two message size bucket [size_bytes, 2 x size_bytes)."),
        "count": ("collectives", "Instances in the bucket with a known size and bus bandwidth."),
        "bytes_mean": ("bytes", "Mean message size of those instances."),
        "busbw_median_gbps": ("GB/s", "Median bus bandwidth of the instances (collectives.busbw_gbps)."),
        "busbw_min_gbps": ("GB/s", "Lowest bus bandwidth of the instances."),
        "busbw_max_gbps": ("GB/s", "Highest bus bandwidth of the instances."),
        "xfer_ns": ("ns", "Sum of the instances' transfer times (collectives.xfer_ns)."),
    },
    "memory_at_peak": {
        "scope": ("", "trace: the trace's peak of the device; step: the peak of one step."),
        "peak_ns": ("ns", "Time of the memory event after which the allocated total peaked."),
        "peak_event_id": ("id", "event_id of that memory event."),
        "peak_allocated_bytes": ("bytes", "Allocated total at the peak (the trace's Total Allocated)."),
        "phase": (
            "",
            "What the blocks are for: before_trace (allocated before the trace began), before_first_step, "
            "activations (saved for backward), gradients, optimizer_state, temporaries, retained (outlives its "
            "step), unexplained (the replay and the totals disagree).",
        ),
        "src_module": ("", "nn.Module path the allocation ran under."),
        "op": ("", "Framework op that made the allocation."),
        "live_bytes": ("bytes", "Bytes alive at the peak made by this phase, line, module and op."),
        "blocks": ("blocks", "Allocations alive at the peak in the row."),
        "pct_of_peak": ("%", "live_bytes as a share of peak_allocated_bytes, 0-100."),
    },
    "memory_live": {
        "start_allocated_bytes": ("bytes", "Allocated total when the step began."),
        "end_allocated_bytes": ("bytes", "Allocated total when the step ended."),
        "peak_allocated_bytes": ("bytes", "Highest allocated total inside the step (-1: no memory event in it)."),
        "peak_ns": ("ns", "When the step's peak was reached (-1: none)."),
        "peak_reserved_bytes": ("bytes", "Highest reserved total inside the step (-1: none)."),
        "alloc_bytes": ("bytes", "Bytes the step allocated."),
        "alloc_count": ("allocs", "Allocations the step made."),
        "survived_bytes": ("bytes", "Of the step's allocations, bytes still alive when the step ended."),
        "retained_bytes": ("bytes", "Of the step's allocations, bytes never freed in the trace."),
    },
    "memory_replay": {
        "events": ("events", "Memory events of the device."),
        "events_with_total": ("events", "Of them, events carrying Total Allocated."),
        "agreeing_events": ("events", "Events after which the replay plus offset_bytes equals Total Allocated."),
        "offset_bytes": ("bytes", "Bytes allocated before the trace began (Total Allocated minus the replay)."),
        "first_mismatch_event_id": ("id", "First event where the replay disagrees (-1: none)."),
        "first_mismatch_ns": ("ns", "Its time (-1: none)."),
        "mismatched_events": ("events", "Events where the replay disagrees."),
        "max_diff_bytes": ("bytes", "Largest disagreement."),
        "lost_frees": ("blocks", "Addresses allocated again with no free between."),
        "size_mismatches": ("blocks", "Blocks freed with another size than allocated."),
        "agrees": ("", "True when the replay agrees at every event."),
        "reason": ("", "Why it agrees (the offset) or where and why not."),
    },
    "memory_fragmentation": {
        "peak_reserved_bytes": ("bytes", "Highest Total Reserved of the device."),
        "allocated_at_reserved_peak_bytes": ("bytes", "Allocated total at that moment."),
        "reserved_gap_at_peak_bytes": ("bytes", "Reserved but not allocated at the reserved peak."),
        "largest_gap_bytes": ("bytes", "Largest reserved-minus-allocated over the trace."),
        "largest_gap_ns": ("ns", "When it was reached."),
        "largest_gap_event_id": ("id", "The memory event where it was reached."),
        "largest_gap_pct": ("%", "largest_gap_bytes as a share of the reserved total then, 0-100."),
        "steady_steps": ("steps", "Steady (non-warm-up) steps with memory events."),
        "reserved_growth_steady_bytes": ("bytes", "Reserved peak of the last steady step minus the first's."),
        "malloc_calls_in_steps": ("calls", "cudaMalloc/hipMalloc calls inside steady steps (the rank's)."),
        "free_calls_in_steps": ("calls", "cudaFree/hipFree calls inside steady steps (the rank's)."),
        "allocator_call_ns_in_steps": ("ns", "Host time of those calls."),
    },
    "op_categories": {
        "category": ("", "Op category (see op_perf.category)."),
        "kernel_time_us": ("us", "Device time of the category: ops' kernels and unlinked kernels by name."),
        "device_time_pct": ("%", "Share of all device event time, 0-100."),
        "modelled_pct": ("%", "Share of the category's device time whose op group has a FLOP/byte model, 0-100."),
        "tflops_per_s": ("TFLOP/s", "Modelled FLOPs over the modelled device time of the category."),
        "tb_per_s": ("TB/s", "Modelled bytes over the modelled device time of the category."),
    },
    "findings": {
        "rule_id": ("", "Rule that produced the finding (docs/rules.md)."),
        "severity": ("", "info, warning or error."),
        "title": ("", "One-line summary."),
        "message": ("", "What was found, with numbers."),
        "cost_ns": (
            "ns",
            "Time the problem costs: a part of one attribution category that no other finding claims (ranking key).",
        ),
        "category": ("", "The step-time attribution category cost_ns is part of (the attribution table's columns)."),
        "metrics": ("json", "Evidence: {name: {value, unit}}."),
        "threshold": ("json", "Thresholds used: {name: {value, unit}}."),
        "time_ranges": ("json", "[[start_ns, end_ns], ...] of the evidence."),
        "event_ids": ("json", "event_ids of the evidence events."),
        "source_lines": ("json", "[{file, line, func, ns}, ...] responsible lines, most costly first."),
        "recommendation": ("", "What to do."),
        "finding_rank": ("", "Rank the finding concerns (null when all)."),
    },
}


def describe(table: str, field: str) -> tuple[str, str]:
    """(unit, description) of a field; common fields are shared by every table."""
    if field in FIELDS.get(table, {}):
        return FIELDS[table][field]
    if field in _COMMON:
        return _COMMON[field]
    if table == "neuron_summary":
        return _neuron_summary_field(field)
    raise KeyError(f"{table}.{field} has no description in analyzers/fields.py")


_NEURON_SUMMARY = {
    "source": ("", "The device profile file."),
    "bound": ("", "compute or memory: arithmetic intensity against the NeuronCore's ridge point (null: unknown)."),
    "kernel_time_ns": ("ns", "Kernel window: first to last instruction that is not a semaphore wait, or DMA."),
    "kernel_start_ns": (
        "ns",
        "Start of the kernel window, device-relative: the first kernel layer of layer_summary, "
        "else the end of the longest stretch where only semaphore waits run (docs/neuron.md).",
    ),
    "kernel_window_source": (
        "",
        "What set the kernel window: layer (layer_summary), wait (the fixed wait's end) or work (first work row).",
    ),
    "wait_start_ns": ("ns", "Start of the longest stretch where only semaphore waits run (the fixed wait)."),
    "wait_end_ns": ("ns", "End of that stretch."),
    "after_kernel_ns": ("ns", "Profile time after the kernel window ends (total_time - kernel_end_ns)."),
    "matmul_instructions": ("events", "MATMUL instructions (semaphore waits excluded)."),
    "matmul_ns": ("ns", "Summed duration of the MATMUL instructions."),
    "matmul_dtype": (
        "",
        "The dtype most MATMULs read (src=<dtype>@ in their operands: fp32, bf16, fp16, fp8, ...), or unknown.",
    ),
    "matmul_dtype_known_instructions": ("events", "MATMULs whose operands name their dtype."),
    "matmul_fp32_share_pct": ("%", "Share of those reading fp32 operands (a quarter of the 16-bit rate), 0-100."),
    "hlo_named_instructions": ("events", "Non-wait instructions with an HLO name (0: an NKI or hand-written kernel)."),
    "kernel_end_ns": ("ns", "End of the kernel window, device-relative."),
    "mfu_kernel_pct": ("%", "MFU over the kernel window: the Summary's MFU x total_time / kernel time."),
    "hfu_kernel_pct": ("%", "HFU over the kernel window."),
    "mbu_kernel_pct": ("%", "MBU over the kernel window."),
    "dma_transfer_total_bytes": ("bytes", "DMA bytes of every packet group (aggregated row or not)."),
}


_WINDOW_PARTS = {
    "preamble": ("the preamble (device time 0 to the fixed wait, or to the kernel)", "in the preamble"),
    "fixed_wait": ("the fixed wait (the longest stretch in which only semaphore waits run)", "in the fixed wait"),
    "kernel": ("the kernel window", "in the kernel window"),
}
_PART_SUFFIXES = {
    "_ns": ("ns", "Length of"),
    "_instructions": ("events", "Instructions, semaphore waits excluded, that start"),
    "_matmul_instructions": ("events", "MATMUL instructions that start"),
    "_hardware_flops": ("FLOP", "Hardware FLOPs (the export's raw_flops) of instructions that start"),
    "_dma_bytes": ("bytes", "DMA bytes of the packets that start"),
    "_engines_active_ns": ("ns", "Union of the engines' busy time (waits excluded)"),
    "_dma_active_ns": ("ns", "Union of the DMA queues' busy time"),
}


def _neuron_summary_field(field: str) -> tuple[str, str]:
    """A ``neuron_summary`` column: AWS's Summary field with our units, or one we derive."""
    if field in _NEURON_SUMMARY:
        return _NEURON_SUMMARY[field]
    if field.startswith("matmul_") and field.endswith("_instructions") and field.count("_") == 2:
        dtype = field.split("_")[1]
        return "events", f"MATMUL instructions whose operands read {dtype} (src=<dtype>@..., e.g. src=bfloat16@)."
    if field.startswith("matmul_") and field.endswith("_ns") and field.count("_") == 2:
        return "ns", f"Summed duration of the MATMUL instructions whose operands read {field.split('_')[1]}."
    for part, (name, where) in _WINDOW_PARTS.items():
        for suffix, (unit, what) in _PART_SUFFIXES.items():
            if field == f"{part}{suffix}":
                return unit, f"{what} {name if suffix == '_ns' else where} (docs/neuron.md, The kernel window)."
    aws = "AWS Summary field, or derived from the events where the Summary lacks it (docs/neuron.md)"
    for suffix, unit, note in (
        ("_pct", "%", "a 0-1 fraction in the export, 0-100 here"),
        ("_ns", "ns", "seconds in the export"),
        ("_bytes", "bytes", ""),
        ("_size", "bytes", ""),
        ("_count", "events", ""),
        ("_flops", "FLOP", ""),
    ):
        if field.endswith(suffix):
            return unit, f"{aws}{'; ' + note if note else ''}."
    return "", f"{aws}."
