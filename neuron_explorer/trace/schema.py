"""The trace format: the Arrow schema of the events table, its version and its vocabulary.

This module is the single source of truth for the columns of a trace. ``docs/schema.md`` is
checked against it by a test, and the agent-facing ``fields`` table is built from it, so a
column cannot be added without its type, unit and meaning.

Versioning is semver: a reader accepts any file of the same major version (new minor versions
only add columns or metadata keys, which older readers ignore) and refuses a newer major.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = "1.4.0"
#: Columns added by a minor version: a file written before it lacks them by design (null there).
ADDED_IN: dict[str, tuple[int, int]] = {
    "hlo_name": (1, 1),
    **dict.fromkeys(("process_group", "process_group_desc", "in_msg_nelems", "out_msg_nelems", "msg_dtype"), (1, 2)),
    "capture_op_id": (1, 3),
    "src_lines": (1, 4),
}
SCHEMA_MAJOR = int(SCHEMA_VERSION.split(".")[0])

#: Parquet footer key holding the JSON trace metadata.
METADATA_KEY = b"neuron_explorer"


class Kind:
    """Normalized event kinds, the same for every device; ``category`` keeps the original."""

    CPU_OP = "cpu_op"  # framework operator (aten::..., autograd nodes, custom ops)
    PYTHON = "python"  # a Python function call (python_function)
    ANNOTATION = "annotation"  # record_function / user annotation on the host
    STEP = "step"  # ProfilerStep#N, the training or inference step
    RUNTIME = "runtime"  # runtime / driver API call on the host (cudaLaunchKernel, ...)
    SYNC = "sync"  # a host or device synchronization (cuda_sync, cudaDeviceSynchronize)
    KERNEL = "kernel"  # compute work executed on a device queue
    COLLECTIVE = "collective"  # a communication kernel (NCCL, RCCL, Neuron CC) on a device queue
    MEMCPY = "memcpy"  # a copy executed by the device (H2D, D2H, D2D, P2P, DMA)
    MEMSET = "memset"  # a memset executed by the device
    DEVICE_ANNOTATION = "device_annotation"  # an annotation drawn on a device queue
    MEMORY = "memory"  # an allocation or free ([memory] instant)
    INSTANT = "instant"  # any other instant event
    FLOW = "flow"  # a flow endpoint (ac2g, fwdbwd); kept so export is exact
    METADATA = "metadata"  # a process/thread name or sort index ("ph": "M")
    TRACE = "trace"  # the profiler's own span ("Trace", "overhead")
    OTHER = "other"  # anything not recognized; its category says what it was


#: Kinds that execute on a device queue.
DEVICE_KINDS = (Kind.KERNEL, Kind.COLLECTIVE, Kind.MEMCPY, Kind.MEMSET)
#: Kinds that are spans on a host thread and nest into a call tree.
HOST_SPAN_KINDS = (Kind.CPU_OP, Kind.PYTHON, Kind.ANNOTATION, Kind.STEP, Kind.RUNTIME, Kind.SYNC)


class Precision:
    """How exact ``src_file``/``src_line`` is for an event."""

    LINE = "line"  # the exact line of user code that made the call
    FUNCTION = "function"  # only the user function is known; src_line is its def line
    LAUNCH = "launch"  # inherited from the op that launched this device event
    FORWARD = "forward"  # a backward op, inherited from its forward op
    GENERATED = "generated"  # no user frame encloses it; src_file is generated code (Inductor, FX)
    GRAPH_CAPTURE = "graph_capture"  # replayed from a CUDA/HIP graph: the line of the op that captured it
    COMPILED = "compiled"  # a compiled region's kernel or op: the user lines Inductor's provenance names
    NONE = None


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    unit: str
    description: str


_I64 = pa.int64()
_I32 = pa.int32()
_F64 = pa.float64()
_STR = pa.string()
_DSTR = pa.dictionary(pa.int32(), pa.string())
_SHAPE = pa.list_(pa.int32())
#: One user line: file, line, function (``src_lines``).
SOURCE_LINE = pa.struct([pa.field("file", pa.string()), pa.field("line", pa.int32()), pa.field("func", pa.string())])

COLUMNS: tuple[Column, ...] = (
    Column("event_id", _I64, "id", "Row id, unique within one rank's file: the target of every *_id link column."),
    Column("rank", _I32, "", "Distributed rank that recorded the event (0 when the run was not distributed)."),
    Column(
        "kind",
        _DSTR,
        "",
        "Normalized kind: cpu_op, python, annotation, step, runtime, sync, kernel, collective, memcpy, memset, device_annotation, memory, instant, flow, metadata, trace, other.",
    ),
    Column(
        "category",
        _DSTR,
        "",
        "Original category as the profiler wrote it (Kineto `cat`), e.g. cuda_runtime, Kernel, mtia_ccp_events.",
    ),
    Column(
        "ph",
        _DSTR,
        "",
        "Chrome trace phase: X (span), i (instant), s/f/t (flow), M (metadata), C (counter), b/e (async).",
    ),
    Column(
        "name",
        _DSTR,
        "",
        "Event name as recorded: aten::addmm, cudaLaunchKernel, the kernel's full name, ProfilerStep#3.",
    ),
    Column(
        "device_type",
        _DSTR,
        "",
        "Where the event ran: cpu for host events, else cuda, hip, mtia, neuron, xpu, hpu, privateuseone.",
    ),
    Column("device", _I32, "index", "Device index for device events and device memory events; null on the host."),
    Column(
        "stream",
        _I64,
        "id",
        "Device queue (CUDA/HIP stream, Neuron engine or DMA queue) for device events; null on the host.",
    ),
    Column("pid", _I64, "id", "Process id as written in the trace (for device events Kineto writes the device here)."),
    Column("tid", _I64, "id", "Thread id as written in the trace (for device events Kineto writes the stream here)."),
    Column(
        "start_ns",
        _I64,
        "ns",
        "Absolute start time, nanoseconds since the Unix epoch when the profiler knew it, aligned across ranks.",
    ),
    Column("dur_ns", _I64, "ns", "Duration; 0 for instants, flows and metadata."),
    Column("parent_id", _I64, "id", "Innermost enclosing host span on the same thread (call tree); null at the top."),
    Column("correlation_id", _I64, "id", "Runtime correlation id shared by a launch and the device work it launched."),
    Column(
        "external_id",
        _I64,
        "id",
        "Kineto External id: shared by a framework op, the runtime calls inside it and their device work.",
    ),
    Column(
        "launch_id",
        _I64,
        "id",
        "For device events: event_id of the runtime call that launched it (null when the launch is not in the trace).",
    ),
    Column(
        "op_id",
        _I64,
        "id",
        "For device events, runtime calls and memory events: event_id of the framework op (cpu_op) that issued it.",
    ),
    Column(
        "fwd_id",
        _I64,
        "id",
        "For backward ops and the ops nested in them: event_id of the forward op they differentiate.",
    ),
    Column(
        "capture_op_id",
        _I64,
        "id",
        "For device work replayed from a CUDA/HIP graph: event_id of the op whose launch call recorded it at capture (op_id stays the graph launch's op). Added in 1.3.0.",
    ),
    Column(
        "step",
        _I32,
        "",
        "Profiler step number (from ProfilerStep#N) the event belongs to; device work takes its launch's step.",
    ),
    Column(
        "cycle", _I32, "", "Schedule cycle (0-based) the event was recorded in; 0 for a single capture or an import."
    ),
    Column("sequence_nr", _I64, "id", "Autograd sequence number (shared by a forward op and its backward node)."),
    Column("src_file", _DSTR, "path", "User source file responsible for the event (see src_precision)."),
    Column(
        "src_line",
        _I32,
        "line",
        "Line in src_file: the calling line, or the def line when src_precision is 'function'.",
    ),
    Column("src_func", _DSTR, "", "User function containing src_line."),
    Column(
        "src_module", _DSTR, "", "nn.Module path the event ran under, e.g. 'Sequential_0.Linear_1' (innermost last)."
    ),
    Column(
        "src_precision",
        _DSTR,
        "",
        "How exact the attribution is: line, function, launch (inherited from the launching op), forward (backward op, from its forward op), generated (no user frame encloses the event: src_file is the generated code it ran in, Inductor output or an FX graph module), compiled (a compiled region's kernel or op: the first of the user lines Inductor's provenance names, all of them in src_lines), null (none).",
    ),
    Column(
        "src_lines",
        pa.list_(SOURCE_LINE),
        "line",
        "Every user line a compiled region's kernel or op fuses, as {file, line, func}, in Inductor's node order (the first is src_file/src_line); null elsewhere. Added in 1.4.0.",
    ),
    Column(
        "input_shapes", _STR, "json", "Operator input shapes as JSON (`Input Dims`), when recorded with record_shapes."
    ),
    Column(
        "input_types", _STR, "json", "Operator input dtypes as JSON (`Input type`), when recorded with record_shapes."
    ),
    Column(
        "flops", _I64, "flop", "Floating-point operations of the op, when the profiler estimated them (with_flops)."
    ),
    Column(
        "bytes",
        _I64,
        "bytes",
        "Bytes moved by a memcpy/memset or a collective's message size; allocation size (negative = free) on memory events.",
    ),
    Column("bandwidth_gbps", _F64, "GB/s", "Achieved bandwidth of a memcpy/memset as recorded by the profiler."),
    Column(
        "memcpy_kind",
        _DSTR,
        "",
        "Copy direction and memory of a memcpy: HtoD, DtoH, DtoD, HtoH, PtoP, with '(Pageable)' or '(Pinned)' when known.",
    ),
    Column("grid", _SHAPE, "blocks", "Kernel grid dimensions [x, y, z]."),
    Column("block", _SHAPE, "threads", "Kernel block dimensions [x, y, z]."),
    Column("registers_per_thread", _I32, "registers", "Registers per thread of a kernel."),
    Column("shared_memory_bytes", _I64, "bytes", "Shared memory per block of a kernel."),
    Column("blocks_per_sm", _F64, "blocks", "Blocks per SM of a kernel as recorded by CUPTI."),
    Column("warps_per_sm", _F64, "warps", "Warps per SM of a kernel as recorded by CUPTI."),
    Column("occupancy_pct", _F64, "%", "Estimated achieved occupancy of a kernel, 0-100."),
    Column(
        "mem_total_allocated_bytes", _I64, "bytes", "Memory events: total allocated on the device after this event."
    ),
    Column(
        "mem_total_reserved_bytes",
        _I64,
        "bytes",
        "Memory events: total reserved by the caching allocator after this event.",
    ),
    Column("mem_addr", _I64, "address", "Memory events: address of the block."),
    Column("graph_id", _I64, "id", "CUDA graph id of a kernel replayed from a graph."),
    Column(
        "flow_id",
        _I64,
        "id",
        "The event's own `id` field: for flow endpoints the flow id (ac2g: the correlation id; fwdbwd: pairs s and f).",
    ),
    Column(
        "collective_name",
        _DSTR,
        "",
        "Collective operation name (allreduce, all_gather, ...), from NCCL/record_param_comms args.",
    ),
    Column("group_size", _I32, "ranks", "Size of the process group of a collective."),
    Column(
        "hlo_name",
        _DSTR,
        "",
        "Compiler (HLO) instruction a device event implements, e.g. 'dot.7' (Neuron instructions); null elsewhere. Added in 1.1.0.",
    ),
    Column(
        "process_group",
        _DSTR,
        "",
        "Process group of a collective: the `Process Group Name` argument (c10d's group name, '0' for the default group); null when not recorded. Added in 1.2.0.",
    ),
    Column(
        "process_group_desc",
        _DSTR,
        "",
        "The process group's description: the `Process Group Description` argument (default_pg, or the name given to new_group); null when not recorded. Added in 1.2.0.",
    ),
    Column(
        "in_msg_nelems",
        _I64,
        "elements",
        "Elements of a collective's input message: the `In msg nelems` argument; null when not recorded. Added in 1.2.0.",
    ),
    Column(
        "out_msg_nelems",
        _I64,
        "elements",
        "Elements of a collective's output message: the `Out msg nelems` argument; null when not recorded. Added in 1.2.0.",
    ),
    Column(
        "msg_dtype",
        _DSTR,
        "",
        "Element type of a collective's message as the `dtype` argument names it (Float, BFloat16, Long, ...); null when not recorded. Added in 1.2.0.",
    ),
    Column(
        "args", _STR, "json", "Every argument the profiler recorded, as lossless JSON text exactly as in the source."
    ),
    Column(
        "extra",
        _STR,
        "json",
        "Top-level event fields other than the standard ones (id, bp, s, ...), as JSON; null when none.",
    ),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
COLUMN_BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
EVENTS_SCHEMA: pa.Schema = pa.schema([pa.field(c.name, c.type) for c in COLUMNS])


def parse_version(text: str) -> tuple[int, int, int]:
    parts = str(text).split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"not a semantic version: {text!r}")
    return int(parts[0]), int(parts[1]), int(parts[2])
