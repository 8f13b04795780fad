"""The Kineto event vocabulary bench/synth.py writes with: ids, clocks, and the text of each event.

``EventFactory`` holds what a profiled process accumulates (External ids, correlation ids, Ev Idx,
Python ids, sequence numbers, the host and device clocks, allocator totals) and appends events to
a ``Step`` buffer; ``render``, ``header`` and ``tail`` turn them into the exact text layout of
Kineto's ``ChromeTraceLogger`` (libkineto/src/output_json.cpp). bench/synth.py composes these
primitives into training steps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

HOST_PID = 2_417_883
MAIN_TID = 2_417_883
BWD_TID = 2_418_190
DEVICE = 0
COMPUTE_STREAM = 7
NCCL_STREAM = 20
RANK, WORLD_SIZE = 0, 8
BASE_TIME_NS = 1_733_140_800_000_000_000
BF16 = "c10::BFloat16"

# cbid values CUPTI assigns to these runtime calls.
CBID = {
    "cudaLaunchKernel": 211,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaStreamSynchronize": 131,
    "cudaEventRecord": 135,
    "cudaStreamWaitEvent": 147,
    "cudaStreamIsCapturing": 317,
}

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
GEMM_NN = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
GEMM_NT = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"
LAYER_NORM = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
LAYER_NORM_BWD = "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)"
FLASH_FWD = "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)"
FLASH_BWD = "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 2, 2, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 8, cutlass::bfloat16_t> >, true, false, false, false, false, true, false, false>(pytorch_flash::Flash_bwd_params)"
GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
GELU_BWD = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, c10::BFloat16)#1}, std::array<char*, 3ul>)"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
REDUCE = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 4> >(at::native::ReduceOp<c10::BFloat16, at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, c10::BFloat16, 4, 4>)"
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, float, at::native::(anonymous namespace)::LogSoftMaxForwardEpilogue>(float*, c10::BFloat16 const*, int)"
NLL = "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float*, float*, float const*, long const*, float const*, bool, long, long, long, long)"
ADAMW = "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, bool*, bool*>(at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double*, double, double, double, double, double, bool, bool*, bool*)"
NCCL_ALLREDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _fmt_ts(ns: int) -> str:
    """Kineto's ``{us}.{ns:03}`` rendering of a relative nanosecond time."""
    return f"{ns // 1000}.{ns % 1000:03d}"


@dataclass(slots=True)
class Event:
    """A complete ("X") event under construction; its duration is known once its children are."""

    cat: str
    name: str
    pid: int
    tid: int
    ts: int
    dur: int
    args: str


class Step:
    """The events of one ProfilerStep, rendered in Kineto's order: host threads first, then the
    CUPTI records (runtime calls, kernels, copies) with their flows."""

    __slots__ = ("device", "host")

    def __init__(self) -> None:
        self.host: list[Any] = []
        self.device: list[Any] = []

    def __len__(self) -> int:
        return len(self.host) + len(self.device)


class EventFactory:
    """Counters and clocks of one profiled rank, and one method per kind of event it emits."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.external_id = 0
        self.correlation = 1_000_000
        self.ev_idx = 0
        self.python_id = 0
        self.sequence_nr = 0
        self.fwdbwd_id = 0
        self.allocated = 6 * 2**30
        self.reserved = 12 * 2**30
        self.live_blocks: dict[int, list[int]] = {}
        self.addr = 0x7F3A_0000_0000
        self.host_t = 50_000_000  # ns after baseTimeNanoseconds
        self.gpu_t = self.host_t
        self.nccl_t = self.host_t
        self.step_number = 0

    # ------------------------------------------------------------------------- primitives
    def _jitter(self, mean_ns: int) -> int:
        r = self.rng.random()
        return max(1, int(mean_ns * (0.6 + 0.8 * r)))

    def _next_ext(self) -> int:
        self.external_id += 1
        return self.external_id

    def _next_ev(self) -> int:
        self.ev_idx += 1
        return self.ev_idx

    def _cpu_args(self, ext: int, dims: str | None, types: str | None, extra: str = "") -> str:
        if dims is None:
            return f'"External id": {ext},"Record function id": 0{extra}, "Ev Idx": {self._next_ev()}'
        n = dims.count("[") - 1
        concrete = ", ".join(['""'] * max(n, 1))
        strides = dims.replace("1024", "1").replace("768", "1") if n else "[]"
        return (
            f'"External id": {ext},"Record function id": 0{extra}, "Concrete Inputs": [{concrete}], '
            f'"Input type": {types}, "Input Strides": {strides}, "Input Dims": {dims}, "Ev Idx": {self._next_ev()}'
        )

    def _memory(self, step: Step, tid: int, ts: int, nbytes: int) -> None:
        self.allocated += nbytes
        if self.allocated > self.reserved:
            self.reserved += 2**30
        # a free names the address of the latest live block of its size, as the allocator's do
        live = self.live_blocks.setdefault(abs(nbytes), [])
        if nbytes < 0 and live:
            addr = live.pop()
        else:
            self.addr += 0x20_0000
            addr = self.addr
            if nbytes > 0:
                live.append(addr)
        step.host.append(
            (
                "i",
                f"""
  {{
    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
    "pid": {HOST_PID}, "tid": {tid},
    "ts": {_fmt_ts(ts)},
    "args": {{
      "Total Reserved": {self.reserved}, "Total Allocated": {self.allocated}, "Bytes": {nbytes}, "Addr": {addr}, "Device Id": {DEVICE}, "Device Type": 1, "Ev Idx": {self._next_ev()}
    }}
  }},""",
            )
        )

    def _launch(
        self,
        step: Step,
        tid: int,
        ext: int,
        kind: str,
        name: str,
        dur_ns: int,
        stream: int = COMPUTE_STREAM,
        grid: tuple[int, int, int] = (1, 1, 1),
        block: tuple[int, int, int] = (128, 1, 1),
        nbytes: int = 0,
        extra_args: str = "",
    ) -> None:
        """A runtime call at the host cursor that queues ``kind`` work on ``stream``."""
        self.correlation += 1
        corr = self.correlation
        api = {"kernel": "cudaLaunchKernel", "gpu_memcpy": "cudaMemcpyAsync", "gpu_memset": "cudaMemsetAsync"}[kind]
        api_start = self.host_t
        api_dur = self._jitter(4_500 if kind == "kernel" else 7_000)
        self.host_t += api_dur
        if stream == NCCL_STREAM:
            start = max(self.nccl_t, api_start + api_dur + 2_000)
            self.nccl_t = start + dur_ns
        else:
            start = max(self.gpu_t + self._jitter(1_200), api_start + api_dur + 3_000)
            self.gpu_t = start + dur_ns
        step.device.append(
            (
                "X",
                Event(
                    "cuda_runtime",
                    api,
                    HOST_PID,
                    tid,
                    api_start,
                    api_dur,
                    f'"External id": {ext},\n      "cbid": {CBID[api]}, "correlation": {corr}',
                ),
            )
        )
        step.device.append(("s", corr, HOST_PID, tid, api_start))
        if kind == "kernel":
            threads = block[0] * block[1] * block[2]
            blocks = grid[0] * grid[1] * grid[2]
            bps = blocks / 132
            regs = self.rng.choice((32, 64, 96, 128, 168))
            occ = min(100, max(1, int(threads * min(bps, 16) / 20.48)))
            args = (
                f'"External id": {ext},\n      "queued": 0, "device": {DEVICE}, "context": 1,\n      "stream": {stream}, "correlation": {corr},\n'
                f'      "registers per thread": {regs},\n      "shared memory": {self.rng.choice((0, 16384, 49152, 98304))},\n'
                f'      "blocks per SM": {bps:.6f},\n      "warps per SM": {bps * threads / 32:.6f},\n'
                f'      "grid": [{grid[0]}, {grid[1]}, {grid[2]}],\n      "block": [{block[0]}, {block[1]}, {block[2]}],\n'
                f'      "est. achieved occupancy %": {occ}{extra_args}'
            )
        else:
            bw = nbytes / dur_ns  # bytes per ns == GB/s
            args = (
                f'"External id": {ext},\n      "device": {DEVICE}, "context": 1,\n      "stream": {stream}, "correlation": {corr},\n'
                f'      "bytes": {nbytes}, "memory bandwidth (GB/s)": {bw!r}'
            )
        step.device.append(("X", Event(kind, name, DEVICE, stream, start, dur_ns, args)))
        step.device.append(("f", corr, DEVICE, stream, start))

    def _runtime(self, step: Step, tid: int, ext: int | None, api: str, dur_ns: int | None = None) -> None:
        """A runtime call that queues no device work (no flow, no kernel)."""
        self.correlation += 1
        d = dur_ns if dur_ns is not None else self._jitter(2_000)
        ext_text = f'"External id": {ext},\n      ' if ext is not None else ""
        step.device.append(
            (
                "X",
                Event(
                    "cuda_runtime",
                    api,
                    HOST_PID,
                    tid,
                    self.host_t,
                    d,
                    f'{ext_text}"cbid": {CBID[api]}, "correlation": {self.correlation}',
                ),
            )
        )
        self.host_t += d

    def _op(
        self, step: Step, tid: int, name: str, dims: str | None = None, types: str | None = None, seq: bool = False
    ) -> tuple[Event, int]:
        """Open a cpu_op at the host cursor; the caller closes it with ``_close``."""
        ext = self._next_ext()
        extra = ""
        if seq:
            self.sequence_nr += 1
            extra = f', "Sequence number": {self.sequence_nr}, "Fwd thread id": 0'
        ev = Event("cpu_op", name, HOST_PID, tid, self.host_t, 0, self._cpu_args(ext, dims, types, extra))
        step.host.append(("X", ev))
        self.host_t += self._jitter(1_500)
        return ev, ext

    def _close(self, ev: Event, tail_ns: int = 800) -> None:
        self.host_t += self._jitter(tail_ns)
        ev.dur = self.host_t - ev.ts

    def _python(self, step: Step, name: str, parent: int | None) -> tuple[Event, int]:
        self.python_id += 1
        pid_text = "null" if parent is None else str(parent)
        ev = Event(
            "python_function",
            name,
            HOST_PID,
            MAIN_TID,
            self.host_t,
            0,
            f'"Python parent id": {pid_text}, "Python id": {self.python_id}, "Ev Idx": {self._next_ev()}',
        )
        step.host.append(("X", ev))
        self.host_t += self._jitter(600)
        return ev, self.python_id

    def _annotation(self, step: Step, tid: int, name: str) -> Event:
        ev = Event(
            "user_annotation",
            name,
            HOST_PID,
            tid,
            self.host_t,
            0,
            f'"External id": {self._next_ext()},"Record function id": 0, "Ev Idx": {self._next_ev()}',
        )
        step.host.append(("X", ev))
        self.host_t += self._jitter(1_000)
        return ev

    # ------------------------------------------------------------------------- state
    def snapshot(self) -> tuple[dict[str, Any], object]:
        """Every counter and the RNG state, to undo a step that does not fit the event budget."""
        state = {k: v for k, v in self.__dict__.items() if k != "rng"}
        return state, self.rng.getstate()

    def restore(self, snap: tuple[dict[str, Any], object]) -> None:
        self.__dict__.update(snap[0])
        self.rng.setstate(snap[1])  # type: ignore[arg-type]

    def padding(self, count: int) -> Step:
        """``count`` [memory] instants (allocation then free) on the main thread: fills the
        last few events of the budget when not even a step without layers fits."""
        step = Step()
        for i in range(count):
            self._memory(step, MAIN_TID, self.host_t, 4096 if i % 2 == 0 else -4096)
            self.host_t += self._jitter(500)
        return step


# ----------------------------------------------------------------------------- rendering
def render(step: Step) -> str:
    """The step's events as Kineto writes them, each followed by a comma."""
    out: list[str] = []
    for records, flow_cat in ((step.host, "fwdbwd"), (step.device, "ac2g")):
        for rec in records:
            tag = rec[0]
            if tag == "X":
                e = rec[1]
                out.append(
                    f'\n  {{\n    "ph": "X", "cat": "{e.cat}", "name": "{e.name}", "pid": {e.pid}, "tid": {e.tid},\n'
                    f'    "ts": {_fmt_ts(e.ts)}, "dur": {_fmt_ts(e.dur)},\n    "args": {{\n      {e.args}\n    }}\n  }},'
                )
            elif tag == "i":
                out.append(rec[1])
            else:  # a flow start ("s") or end ("f")
                _, fid, pid, tid, ts = rec
                bp = ', "bp": "e"' if tag == "f" else ""
                out.append(
                    f'\n  {{\n    "ph": "{tag}", "id": {fid}, "pid": {pid}, "tid": {tid}, "ts": {_fmt_ts(ts)},\n'
                    f'    "cat": "{flow_cat}", "name": "{flow_cat}"{bp}\n  }},'
                )
    return "".join(out)


_DEVICE_PROPERTIES = ",".join(
    f"""
      {{
      "id": {i}, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "numSms": 132,
      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472
    }}"""
    for i in range(WORLD_SIZE)
)


def header(trace_id: str) -> str:
    """Everything before the first event, in Kineto's order and indentation."""
    ranks = ", ".join(str(r) for r in range(WORLD_SIZE))
    return f"""
  {{
    "schemaVersion": 1,
    "deviceProperties": [{_DEVICE_PROPERTIES}
    ],
      "distributedInfo": {{"backend": "nccl", "rank": {RANK}, "world_size": {WORLD_SIZE}, "pg_count": 1, "pg_config": [{{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": {WORLD_SIZE}, "ranks": [{ranks}]}}], "nccl_version": "2.21.5"}},
      "with_stack": 1,
      "profile_memory": 1,
      "record_shapes": 1,
      "with_modules": 1,
      "trace_id": "{trace_id}",
      "host_name": "synth-node-0",
      "cupti_version": 24,
      "cuda_runtime_version": 12040,
      "cuda_driver_version": 12080,
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": {BASE_TIME_NS},
  "traceEvents": ["""


def tail(start_ns: int, end_ns: int, trace_name: str) -> tuple[str, int]:
    """The process/thread metadata, the profiler span and the window end, as Kineto closes a
    trace; returns the text and how many events it holds."""
    t = _fmt_ts(start_ns)
    events: list[str] = []

    def meta(name: str, pid: int | str, tid: int, key: str, value: str) -> None:
        events.append(
            f'\n  {{\n    "name": "{name}", "ph": "M", "ts": {t}, "pid": {pid}, "tid": {tid},\n    "args": {{\n      "{key}": {value}\n    }}\n  }},'
        )

    for pid, label, sort in ((HOST_PID, "CPU", HOST_PID), (DEVICE, f"GPU {DEVICE}", 5_000_000 + DEVICE)):
        meta("process_name", pid, 0, "name", '"python3"')
        meta("process_labels", pid, 0, "labels", f'"{label}"')
        meta("process_sort_index", pid, 0, "sort_index", str(sort))
    for tid in (MAIN_TID, BWD_TID):
        meta("thread_name", HOST_PID, tid, "name", f'"thread {tid} (python3)"')
        meta("thread_sort_index", HOST_PID, tid, "sort_index", str(tid))
    for stream in (COMPUTE_STREAM, NCCL_STREAM):
        meta("thread_name", DEVICE, stream, "name", f'"stream {stream} "')
        meta("thread_sort_index", DEVICE, stream, "sort_index", str(stream + 0x1000000))
    events.append(
        f'\n  {{\n    "ph": "X", "cat": "Trace", "ts": {t}, "dur": {_fmt_ts(end_ns - start_ns)},\n'
        f'    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n    "args": {{\n      "Op count": 0\n    }}\n  }},'
    )
    events.append(
        f'\n  {{\n    "name": "process_sort_index", "ph": "M", "ts": {t},\n    "pid": "Spans", "tid": 0,\n    "args": {{\n      "sort_index": 536870912\n    }}\n  }},'
    )
    events.append(
        f'\n  {{\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {t}\n  }},'
    )
    events.append(
        f'\n  {{\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": {_fmt_ts(end_ns)}\n  }}\n  ],'
    )
    text = "".join(events) + f'\n  "traceName": "{trace_name}"\n}}'
    return text, len(events)


TAIL_EVENTS = tail(0, 0, "")[1]
