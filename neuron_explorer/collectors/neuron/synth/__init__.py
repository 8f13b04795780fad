"""A generator of realistic Neuron exports, for tests and demos (no Trainium needed).

``write_parquet_export`` writes a Neuron Explorer Parquet export directory (Instruction split
in two parts, DmaPacketAggregated beside DmaPacket, CcOp, ActiveTime, ExecutionInfo,
SystemProfileEvents, StackFrame*, Summary, Metadata, SchemaFields); ``write_legacy_json`` the
``neuron-profile`` JSON of the same run; ``write_framework_trace`` the torch.profiler (Kineto)
JSON that launched it. All three come from one timeline with a planted bottleneck
(``timeline``), follow the conventions confirmed on real files (docs/neuron.md) and return the
ground truth the tests compare against.

Writes files only; it imports ``collectors/neuron``'s model and the layers below, and nothing reads it but tests, benchmarks and demos.
"""

from neuron_explorer.collectors.neuron.synth.framework import write_framework_trace
from neuron_explorer.collectors.neuron.synth.legacy import write_legacy_json
from neuron_explorer.collectors.neuron.synth.parquet import write_parquet_export
from neuron_explorer.collectors.neuron.synth.timeline import (
    LAYER_ATTN,
    LAYER_MLP,
    LIB_FILE,
    PROFILES,
    SPILL_QUEUE,
    TE_PEAK_FLOPS_PER_S,
    USER_FILE,
    WAIT_OPCODE,
    SynthSpec,
    active_time,
    host_exec_starts,
    packets,
    summary,
    timeline,
)

__all__ = [
    "LAYER_ATTN",
    "LAYER_MLP",
    "LIB_FILE",
    "PROFILES",
    "SPILL_QUEUE",
    "TE_PEAK_FLOPS_PER_S",
    "USER_FILE",
    "WAIT_OPCODE",
    "SynthSpec",
    "active_time",
    "host_exec_starts",
    "packets",
    "summary",
    "timeline",
    "write_framework_trace",
    "write_legacy_json",
    "write_parquet_export",
]
