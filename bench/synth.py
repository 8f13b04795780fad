"""Synthetic Kineto (torch.profiler) GPU trace generator for the ingest benchmarks.

Writes a trace of exactly N events (default 5,000,000) shaped like what torch.profiler exports
for a DDP transformer training loop on an 8-GPU NCCL job: the metadata keys Kineto writes
(schemaVersion, deviceProperties, distributedInfo, the profiler option flags,
displayTimeUnit, baseTimeNanoseconds, traceName after the events), ``ProfilerStep#N``
annotations, ``python_function`` frames (nn.Module calls, user code, torch code, builtins),
nested ``cpu_op`` events with External id / Sequence number / Input Dims, an autograd thread
running the backward pass with ``fwdbwd`` flows, ``cuda_runtime`` launches with correlation
ids and ``ac2g`` flows, kernels with grid / block / occupancy on a compute stream, NCCL
all-reduce kernels on a communication stream, ``gpu_memcpy`` / ``gpu_memset`` with bytes,
``[memory]`` instants and ``gpu_user_annotation`` step spans. The text follows Kineto's own
layout (``libkineto/src/output_json.cpp``): one event spans several lines, ``ts`` and ``dur``
are microseconds with three decimals relative to ``baseTimeNanoseconds``.

Generation streams: one training step is built in memory, written, and dropped, so memory is
constant whatever N is. The RNG is seeded: the same arguments give byte-identical output
(only ``traceName``, the output path, differs between paths).

    .venv/bin/python bench/synth.py                       # bench/data/synth_5m.json.gz
    .venv/bin/python bench/synth.py -n 200000 -o /tmp/s.json.gz --seed 7
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, BinaryIO

from _kineto_events import (
    ADAMW,
    ADD,
    BF16,
    BWD_TID,
    COMPUTE_STREAM,
    DEVICE,
    FLASH_BWD,
    FLASH_FWD,
    GELU,
    GELU_BWD,
    GEMM,
    GEMM_NN,
    GEMM_NT,
    HOST_PID,
    LAYER_NORM,
    LAYER_NORM_BWD,
    MAIN_TID,
    NCCL_ALLREDUCE,
    NCCL_STREAM,
    NLL,
    RANK,
    REDUCE,
    SOFTMAX,
    TAIL_EVENTS,
    WORLD_SIZE,
    Event,
    EventFactory,
    Step,
    header,
    render,
    tail,
)

try:  # ISA-L compresses several times faster than zlib at a similar ratio.
    from isal import igzip as _gzip_module

    _GZIP_LEVEL = 2
except ImportError:  # pragma: no cover - isal is a dependency of the project
    _gzip_module = gzip  # type: ignore[assignment]
    _GZIP_LEVEL = 6

DEFAULT_EVENTS = 5_000_000
DEFAULT_OUTPUT = Path(__file__).resolve().parent / "data" / "synth_5m.json.gz"


class TraceSynthesizer(EventFactory):
    """Builds training steps of a GPT-like model (``layers`` transformer blocks) event by event."""

    def __init__(self, seed: int = 0, layers: int = 12, batch: int = 8, seq: int = 1024, hidden: int = 1024) -> None:
        super().__init__(seed)
        self.layers = layers
        self.batch, self.seq, self.hidden = batch, seq, hidden

    # ------------------------------------------------------------------------- model pieces
    def _linear(self, step: Step, parent_py: int, idx: int, out_features: int, backward: list[tuple[Any, ...]]) -> None:
        b, s, h = self.batch, self.seq, self.hidden
        mod, mod_id = self._python(step, f"nn.Module: Linear_{idx}", parent_py)
        fwd, fwd_id = self._python(step, "torch/nn/modules/linear.py(124): forward", mod_id)
        builtin, _ = self._python(step, "<built-in function linear>", fwd_id)
        lin, _ = self._op(
            step,
            MAIN_TID,
            "aten::linear",
            f"[[{b}, {s}, {h}], [{out_features}, {h}], [{out_features}]]",
            f'["{BF16}", "{BF16}", "{BF16}"]',
        )
        t, _ = self._op(step, MAIN_TID, "aten::t", f"[[{out_features}, {h}]]", f'["{BF16}"]', seq=True)
        t_seq = self.sequence_nr
        tr, _ = self._op(
            step, MAIN_TID, "aten::transpose", f"[[{out_features}, {h}], [], []]", f'["{BF16}", "Scalar", "Scalar"]'
        )
        st, _ = self._op(
            step, MAIN_TID, "aten::as_strided", f"[[{out_features}, {h}], [], [], []]", f'["{BF16}", "", "", ""]'
        )
        self._close(st, 300)
        self._close(tr, 300)
        self._close(t, 300)
        mm, ext = self._op(
            step,
            MAIN_TID,
            "aten::addmm",
            f"[[{out_features}], [{b * s}, {h}], [{h}, {out_features}], [], []]",
            f'["{BF16}", "{BF16}", "{BF16}", "Scalar", "Scalar"]',
            seq=True,
        )
        self._memory(step, MAIN_TID, self.host_t, b * s * out_features * 2)
        flops = 2 * b * s * h * out_features
        self._launch(
            step,
            MAIN_TID,
            ext,
            "kernel",
            GEMM,
            max(3_000, flops // 400_000),
            grid=(out_features // 128, b * s // 128, 1),
            block=(384, 1, 1),
        )
        self._close(mm)
        self._close(lin)
        for ev in (builtin, fwd, mod):
            self._close(ev, 400)
        backward.append(("AddmmBackward0", mm, self.sequence_nr, out_features))
        backward.append(("TBackward0", t, t_seq, out_features))

    def _elementwise(
        self,
        step: Step,
        op_name: str,
        kernel: str,
        backward_name: str | None,
        backward: list[tuple[Any, ...]],
        n_inputs: int = 2,
    ) -> None:
        b, s, h = self.batch, self.seq, self.hidden
        dims = "[" + ", ".join([f"[{b}, {s}, {h}]"] * n_inputs) + "]"
        types = "[" + ", ".join([f'"{BF16}"'] * n_inputs) + "]"
        ev, ext = self._op(step, MAIN_TID, op_name, dims, types, seq=backward_name is not None)
        self._memory(step, MAIN_TID, self.host_t, b * s * h * 2)
        self._launch(
            step,
            MAIN_TID,
            ext,
            "kernel",
            kernel,
            self._jitter(28_000),
            grid=(b * s * h // 512, 1, 1),
            block=(128, 1, 1),
        )
        self._close(ev)
        if backward_name:
            backward.append((backward_name, ev, self.sequence_nr, h))

    def _layer_norm(self, step: Step, parent_py: int, idx: int, backward: list[tuple[Any, ...]]) -> None:
        b, s, h = self.batch, self.seq, self.hidden
        mod, mod_id = self._python(step, f"nn.Module: LayerNorm_{idx}", parent_py)
        fwd, _ = self._python(step, "torch/nn/modules/normalization.py(216): forward", mod_id)
        ln, _ = self._op(
            step,
            MAIN_TID,
            "aten::layer_norm",
            f"[[{b}, {s}, {h}], [], [{h}], [{h}], [], []]",
            f'["{BF16}", "ScalarList", "{BF16}", "{BF16}", "Scalar", "Scalar"]',
        )
        nat, ext = self._op(
            step,
            MAIN_TID,
            "aten::native_layer_norm",
            f"[[{b}, {s}, {h}], [], [{h}], [{h}], []]",
            f'["{BF16}", "ScalarList", "{BF16}", "{BF16}", "Scalar"]',
            seq=True,
        )
        self._memory(step, MAIN_TID, self.host_t, b * s * h * 2)
        self._launch(
            step, MAIN_TID, ext, "kernel", LAYER_NORM, self._jitter(22_000), grid=(b * s, 1, 1), block=(128, 1, 1)
        )
        self._close(nat)
        self._close(ln)
        self._close(fwd, 300)
        self._close(mod, 300)
        backward.append(("NativeLayerNormBackward0", nat, self.sequence_nr, h))

    def _attention(self, step: Step, parent_py: int, backward: list[tuple[Any, ...]]) -> None:
        b, s, h = self.batch, self.seq, self.hidden
        heads = h // 64
        fn, _ = self._python(step, "<built-in function scaled_dot_product_attention>", parent_py)
        sdpa, _ = self._op(
            step,
            MAIN_TID,
            "aten::scaled_dot_product_attention",
            f"[[{b}, {heads}, {s}, 64], [{b}, {heads}, {s}, 64], [{b}, {heads}, {s}, 64], [], [], [], []]",
            f'["{BF16}", "{BF16}", "{BF16}", "", "Scalar", "Scalar", ""]',
        )
        flash, ext = self._op(
            step,
            MAIN_TID,
            "aten::_scaled_dot_product_flash_attention",
            f"[[{b}, {heads}, {s}, 64], [{b}, {heads}, {s}, 64], [{b}, {heads}, {s}, 64], [], [], [], []]",
            f'["{BF16}", "{BF16}", "{BF16}", "Scalar", "Scalar", "Scalar", ""]',
            seq=True,
        )
        emp, _ = self._op(
            step,
            MAIN_TID,
            "aten::empty_like",
            f"[[{b}, {heads}, {s}, 64], [], [], [], [], []]",
            f'["{BF16}", "", "", "", "", "Scalar"]',
        )
        self._memory(step, MAIN_TID, self.host_t, b * s * h * 2)
        self._close(emp, 300)
        self._launch(
            step,
            MAIN_TID,
            ext,
            "kernel",
            FLASH_FWD,
            self._jitter(180_000),
            grid=(s // 128, b * heads, 1),
            block=(128, 1, 1),
        )
        self._close(flash)
        self._close(sdpa)
        self._close(fn, 300)
        backward.append(("ScaledDotProductFlashAttentionBackward0", flash, self.sequence_nr, h))

    def _block(self, step: Step, parent_py: int, layer: int, backward: list[tuple[Any, ...]]) -> None:
        h = self.hidden
        mod, mod_id = self._python(step, f"nn.Module: Block_{layer}", parent_py)
        call, call_id = self._python(step, "torch/nn/modules/module.py(1762): _call_impl", mod_id)
        fwd, fwd_id = self._python(step, "model.py(71): forward", call_id)
        self._layer_norm(step, fwd_id, 2 * layer, backward)
        attn, attn_id = self._python(step, f"nn.Module: CausalSelfAttention_{layer}", fwd_id)
        attn_fwd, attn_fwd_id = self._python(step, "model.py(38): forward", attn_id)
        self._linear(step, attn_fwd_id, 4 * layer, 3 * h, backward)
        split, _ = self._op(
            step,
            MAIN_TID,
            "aten::split",
            f"[[{self.batch}, {self.seq}, {3 * h}], [], []]",
            f'["{BF16}", "Scalar", "Scalar"]',
        )
        self._close(split, 400)
        self._attention(step, attn_fwd_id, backward)
        self._linear(step, attn_fwd_id, 4 * layer + 1, h, backward)
        self._close(attn_fwd, 300)
        self._close(attn, 300)
        self._elementwise(step, "aten::add", ADD, "AddBackward0", backward)
        self._layer_norm(step, fwd_id, 2 * layer + 1, backward)
        mlp, mlp_id = self._python(step, f"nn.Module: MLP_{layer}", fwd_id)
        mlp_fwd, mlp_fwd_id = self._python(step, "model.py(55): forward", mlp_id)
        self._linear(step, mlp_fwd_id, 4 * layer + 2, 4 * h, backward)
        self._elementwise(step, "aten::gelu", GELU, "GeluBackward0", backward, n_inputs=1)
        self._linear(step, mlp_fwd_id, 4 * layer + 3, h, backward)
        self._close(mlp_fwd, 300)
        self._close(mlp, 300)
        self._elementwise(step, "aten::add", ADD, "AddBackward0", backward)
        for ev in (fwd, call, mod):
            self._close(ev, 300)

    # ------------------------------------------------------------------------- a step
    def step(self) -> Step:
        """One training step: input copy, forward, loss, backward with DDP all-reduce, AdamW."""
        self.step_number += 1
        step = Step()
        b, s = self.batch, self.seq
        step_start_gpu = max(self.gpu_t, self.host_t)
        prof = self._annotation(step, MAIN_TID, f"ProfilerStep#{self.step_number}")
        loop, loop_id = self._python(step, "train.py(142): train_step", None)
        # Input batch to the device (pinned host memory, asynchronous).
        to, _ = self._op(
            step, MAIN_TID, "aten::to", f"[[{b}, {s}], [], [], [], [], []]", '["long int", "", "", "", "Scalar", ""]'
        )
        cp, _ = self._op(
            step,
            MAIN_TID,
            "aten::_to_copy",
            f"[[{b}, {s}], [], [], [], [], [], []]",
            '["long int", "", "", "", "", "Scalar", ""]',
        )
        copy_, ext = self._op(
            step, MAIN_TID, "aten::copy_", f"[[{b}, {s}], [{b}, {s}], []]", '["long int", "long int", "Scalar"]'
        )
        self._launch(
            step, MAIN_TID, ext, "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", self._jitter(6_000), nbytes=b * s * 8
        )
        self._close(copy_)
        self._close(cp)
        self._close(to)
        # Forward.
        backward: list[tuple[Any, ...]] = []
        model, model_id = self._python(step, "nn.Module: GPT_0", loop_id)
        call, call_id = self._python(step, "torch/nn/modules/module.py(1762): _call_impl", model_id)
        fwd, fwd_id = self._python(step, "model.py(112): forward", call_id)
        emb, ext = self._op(
            step,
            MAIN_TID,
            "aten::embedding",
            f"[[50304, {self.hidden}], [{b}, {s}], [], [], []]",
            f'["{BF16}", "long int", "Scalar", "Scalar", "Scalar"]',
            seq=True,
        )
        self._memory(step, MAIN_TID, self.host_t, b * s * self.hidden * 2)
        self._launch(
            step,
            MAIN_TID,
            ext,
            "kernel",
            "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)",
            self._jitter(30_000),
            grid=(4096, 1, 1),
            block=(128, 1, 1),
        )
        self._close(emb)
        backward.append(("EmbeddingBackward0", emb, self.sequence_nr, self.hidden))
        for layer in range(self.layers):
            self._block(step, fwd_id, layer, backward)
        for ev in (fwd, call, model):
            self._close(ev, 300)
        # Loss.
        ce, _ = self._op(
            step,
            MAIN_TID,
            "aten::cross_entropy_loss",
            f"[[{b * s}, 50304], [{b * s}], [], [], [], []]",
            f'["{BF16}", "long int", "", "Scalar", "Scalar", "Scalar"]',
        )
        ls, ext = self._op(
            step,
            MAIN_TID,
            "aten::_log_softmax",
            f"[[{b * s}, 50304], [], []]",
            f'["{BF16}", "Scalar", "Scalar"]',
            seq=True,
        )
        self._launch(
            step, MAIN_TID, ext, "kernel", SOFTMAX, self._jitter(240_000), grid=(b * s, 1, 1), block=(1024, 1, 1)
        )
        self._close(ls)
        nll, ext = self._op(
            step,
            MAIN_TID,
            "aten::nll_loss_forward",
            f"[[{b * s}, 50304], [{b * s}], [], [], []]",
            '["float", "long int", "", "Scalar", "Scalar"]',
            seq=True,
        )
        self._launch(step, MAIN_TID, ext, "kernel", NLL, self._jitter(9_000), grid=(1, 1, 1), block=(32, 1, 1))
        self._close(nll)
        self._close(ce)
        # loss.backward(): the autograd engine runs the graph on its own thread.
        bw_py, _ = self._python(step, "torch/_tensor.py(626): backward", loop_id)
        self._close(bw_py, 400)
        main_resume = self.host_t
        self._backward(step, backward)
        self.host_t = max(self.host_t, main_resume)
        # Optimizer.
        opt = self._annotation(step, MAIN_TID, "Optimizer.step#AdamW.step")
        adam, ext = self._op(step, MAIN_TID, "aten::_fused_adamw_", None, None)
        for _ in range(4):
            self._launch(
                step, MAIN_TID, ext, "kernel", ADAMW, self._jitter(160_000), grid=(320, 1, 1), block=(512, 1, 1)
            )
        self._close(adam)
        self._close(opt)
        zero = self._annotation(step, MAIN_TID, "Optimizer.zero_grad#AdamW.zero_grad")
        self._close(zero, 2_000)
        # loss.item(): a device-to-host copy and a wait for the stream.
        item, _ = self._op(step, MAIN_TID, "aten::item", "[[]]", '["float"]')
        dense, ext = self._op(step, MAIN_TID, "aten::_local_scalar_dense", "[[]]", '["float"]')
        self._launch(step, MAIN_TID, ext, "gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", self._jitter(2_500), nbytes=4)
        wait = max(0, max(self.gpu_t, self.nccl_t) - self.host_t) + 3_000
        self._runtime(step, MAIN_TID, ext, "cudaStreamSynchronize", wait)
        self._close(dense)
        self._close(item)
        self._close(loop, 1_000)
        self._close(prof, 2_000)
        # The GPU-side span of the step, as Kineto writes it (1 ns wider on each side).
        gpu_end = max(self.gpu_t, self.nccl_t)
        step.device.append(
            (
                "X",
                Event(
                    "gpu_user_annotation",
                    f"ProfilerStep#{self.step_number}",
                    DEVICE,
                    COMPUTE_STREAM,
                    step_start_gpu - 1,
                    gpu_end - step_start_gpu + 2,
                    f'"External id": {prof.args.split(",", 1)[0].split(": ")[1]}',
                ),
            )
        )
        self.host_t = max(self.host_t, gpu_end) + self._jitter(40_000)
        return step

    def _backward(self, step: Step, backward: list[tuple[Any, ...]]) -> None:
        """Autograd nodes in reverse order on the backward thread, DDP buckets on the NCCL stream."""
        b, s = self.batch, self.seq
        bucket_every = max(1, len(backward) // 4)
        for i, (node, fwd_ev, seq_nr, width) in enumerate(reversed(backward)):
            self.fwdbwd_id += 1
            step.host.append(("s", self.fwdbwd_id, HOST_PID, MAIN_TID, fwd_ev.ts))
            outer, _ = self._op(step, BWD_TID, f"autograd::engine::evaluate_function: {node}", None, None)
            inner, _ = self._op(step, BWD_TID, node, None, None)
            inner.args = inner.args.replace(
                ',"Record function id": 0',
                f', "Sequence number": {seq_nr}, "Fwd thread id": 1,"Record function id": 0',
                1,
            )
            step.host.append(("f", self.fwdbwd_id, HOST_PID, BWD_TID, inner.ts))
            if node == "AddmmBackward0":
                for kernel in (GEMM_NN, GEMM_NT):
                    mm, ext = self._op(
                        step,
                        BWD_TID,
                        "aten::mm",
                        f"[[{b * s}, {width}], [{width}, {self.hidden}]]",
                        f'["{BF16}", "{BF16}"]',
                    )
                    self._memory(step, BWD_TID, self.host_t, b * s * width * 2)
                    self._launch(
                        step,
                        BWD_TID,
                        ext,
                        "kernel",
                        kernel,
                        self._jitter(90_000),
                        grid=(width // 128, 64, 1),
                        block=(256, 1, 1),
                    )
                    self._close(mm)
                red, ext = self._op(
                    step, BWD_TID, "aten::sum", f"[[{b * s}, {width}], [], [], []]", f'["{BF16}", "", "Scalar", ""]'
                )
                self._launch(
                    step,
                    BWD_TID,
                    ext,
                    "kernel",
                    REDUCE,
                    self._jitter(12_000),
                    grid=(width // 32, 1, 1),
                    block=(32, 16, 1),
                )
                self._close(red)
            elif node == "TBackward0":
                tr, _ = self._op(step, BWD_TID, "aten::t", f"[[{self.hidden}, {width}]]", f'["{BF16}"]')
                self._close(tr, 300)
            else:
                kernel = {
                    "NativeLayerNormBackward0": LAYER_NORM_BWD,
                    "ScaledDotProductFlashAttentionBackward0": FLASH_BWD,
                    "GeluBackward0": GELU_BWD,
                    "AddBackward0": ADD,
                }.get(node, REDUCE)
                op_name = {
                    "NativeLayerNormBackward0": "aten::native_layer_norm_backward",
                    "ScaledDotProductFlashAttentionBackward0": "aten::_scaled_dot_product_flash_attention_backward",
                    "GeluBackward0": "aten::gelu_backward",
                    "EmbeddingBackward0": "aten::embedding_dense_backward",
                }.get(node)
                if op_name:
                    op, ext = self._op(
                        step, BWD_TID, op_name, f"[[{b}, {s}, {width}], [{b}, {s}, {width}]]", f'["{BF16}", "{BF16}"]'
                    )
                    if node == "EmbeddingBackward0":
                        self._launch(
                            step,
                            BWD_TID,
                            ext,
                            "gpu_memset",
                            "Memset (Device)",
                            self._jitter(3_000),
                            nbytes=50304 * self.hidden * 2,
                        )
                    self._memory(step, BWD_TID, self.host_t, b * s * width * 2)
                    dur = self._jitter(400_000 if node.startswith("Scaled") else 30_000)
                    self._launch(
                        step, BWD_TID, ext, "kernel", kernel, dur, grid=(b * s * width // 1024, 1, 1), block=(256, 1, 1)
                    )
                    self._close(op)
            self._memory(step, BWD_TID, self.host_t, -b * s * width * 2)
            self._close(inner)
            self._close(outer)
            if (i + 1) % bucket_every == 0:
                self._all_reduce(step)

    def _all_reduce(self, step: Step) -> None:
        """A DDP gradient bucket: c10d all-reduce queued on the NCCL stream behind an event wait."""
        ann = self._annotation(step, BWD_TID, "nccl:all_reduce")
        comms, ext = self._op(step, BWD_TID, "record_param_comms", None, None)
        nelems = 25 * 2**20 // 2
        comms.args = comms.args.replace(
            ', "Ev Idx"',
            f', "Collective name": "allreduce", "dtype": "BFloat16", "In msg nelems": {nelems}, "Out msg nelems": {nelems}, '
            f'"Group size": {WORLD_SIZE}, "Process Group Name": "0", "Process Group Description": "default_pg", '
            f'"Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "Rank": {RANK}, "Ev Idx"',
            1,
        )
        self._runtime(step, BWD_TID, ext, "cudaEventRecord")
        self._runtime(step, BWD_TID, ext, "cudaStreamWaitEvent")
        self.nccl_t = max(self.nccl_t, self.gpu_t)
        coll = (
            f',\n      "Collective name": "allreduce", "In msg nelems": {nelems}, "Out msg nelems": {nelems}, "Group size": {WORLD_SIZE}, '
            f'"dtype": "BFloat16", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3, 4, 5, 6, 7]"'
        )
        self._launch(
            step,
            BWD_TID,
            ext,
            "kernel",
            NCCL_ALLREDUCE,
            self._jitter(900_000),
            stream=NCCL_STREAM,
            grid=(24, 1, 1),
            block=(640, 1, 1),
            extra_args=coll,
        )
        self._runtime(step, BWD_TID, ext, "cudaEventRecord")
        self._close(comms)
        self._close(ann)


# ----------------------------------------------------------------------------- writing
def _open_output(path: Path, gzipped: bool, level: int | None) -> BinaryIO:
    if gzipped:
        return _gzip_module.open(path, "wb", compresslevel=_GZIP_LEVEL if level is None else level)  # type: ignore[return-value]
    return open(path, "wb", buffering=1 << 20)


def write_trace(
    path: Path, events: int, seed: int = 0, layers: int = 12, level: int | None = None, progress: bool = False
) -> dict[str, Any]:
    """Write a trace of exactly ``events`` events to ``path`` (atomically: temp file, then
    rename); returns counts for the caller to print."""
    if events < TAIL_EVENTS + 1:
        raise ValueError(
            f"a trace needs at least {TAIL_EVENTS + 1} events (the fixed metadata events are {TAIL_EVENTS})"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    gen = TraceSynthesizer(seed=seed, layers=layers)
    budget = events - TAIL_EVENTS
    written = steps = 0
    first_ns = gen.host_t
    started = time.perf_counter()
    trace_id = f"{random.Random(seed).getrandbits(128):032X}"
    try:
        with _open_output(tmp, path.name.endswith(".gz"), level) as fh:
            fh.write(header(trace_id).encode())
            while written < budget:
                snap = gen.snapshot()
                step = gen.step()
                fewer = gen.layers
                while written + len(step) > budget and fewer > 0:
                    # The last steps: fewer transformer blocks until one fits the budget.
                    fewer = max(0, min(fewer - 1, fewer * (budget - written) // max(len(step), 1)))
                    gen.restore(snap)
                    gen.layers = fewer
                    step = gen.step()
                if written + len(step) > budget:
                    gen.restore(snap)
                    gen.layers = 0
                    step = gen.padding(budget - written)
                else:
                    steps += 1
                fh.write(render(step).encode())
                written += len(step)
                if progress and steps % 50 == 0:
                    rate = written / (time.perf_counter() - started)
                    print(f"\r  {written:,}/{events:,} events ({rate:,.0f}/s)", end="", file=sys.stderr, flush=True)
            text, n_tail = tail(first_ns - 100_000, gen.host_t, str(path))
            fh.write(text.encode())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if progress:
        print(file=sys.stderr)
    return {
        "events": written + n_tail,
        "steps": steps,
        "layers_per_step": layers,
        "bytes": path.stat().st_size,
        "seconds": time.perf_counter() - started,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-n", "--events", type=int, default=DEFAULT_EVENTS, help=f"exact number of events (default {DEFAULT_EVENTS:,})"
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help="output .json or .json.gz (default bench/data/synth_5m.json.gz)",
    )
    parser.add_argument("--seed", type=int, default=0, help="RNG seed: the same seed and size give the same bytes")
    parser.add_argument(
        "--layers", type=int, default=12, help="transformer blocks per step (sets events per step, ~330 per block)"
    )
    parser.add_argument("--level", type=int, default=None, help=f"gzip level (default {_GZIP_LEVEL} with ISA-L)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    args = parser.parse_args(argv)
    try:
        info = write_trace(args.output, args.events, args.seed, args.layers, args.level, progress=not args.quiet)
    except ValueError as exc:
        print(f"synth.py: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"wrote {args.output}: {info['events']:,} events, {info['steps']} steps, "
        f"{info['bytes'] / 1e6:,.1f} MB in {info['seconds']:.1f} s ({info['events'] / info['seconds']:,.0f} events/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
