"""The issue-25 audit's independent side: for every warning or error finding, its headline number
recomputed from the raw Kineto JSON (the standard library, numpy, and the attribution sweep of
tests/unit/test_attribution_truth.py, none of the analyzers' code), and whether its cause and its
fix hold for the trace, judged from the raw events.

``check(path, finding) -> Verdict``; ``tests/unit/test_audit_findings.py`` asserts on it and
``scripts/audit_findings.py`` prints it as the audit table.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from tests._kineto_reference import read_json

#: A number agrees with its recomputation within this (relative), or within half a point for %.
REL = 0.05


@dataclass
class Verdict:
    metric: str
    ours: float
    ref: float | None  # None: no independent recomputation for this rule
    cause: bool
    fix: bool
    why: str = ""

    @property
    def number(self) -> bool:
        if self.ref is None:
            return False
        tol = max(REL * abs(self.ref), 0.5 if self.metric.endswith("pct") else 0.0)
        return abs(self.ours - self.ref) <= tol

    @property
    def holds(self) -> bool:
        return self.number and self.cause and self.fix


def _ns(x: Any) -> int:
    return int(float(x) * 1000)


@dataclass
class Raw:
    doc: dict[str, Any]
    spans: list[dict[str, Any]]

    def of(self, pred: Any) -> list[dict[str, Any]]:
        return [e for e in self.spans if pred(e)]


@cache
def raw(path: Path) -> Raw:
    doc = read_json(path)
    spans = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]
    return Raw(doc, spans)


def iv(events: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in events]


def union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def length(intervals: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in union(intervals))


def intersect(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    a, b = union(a), union(b)
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def sweep(path: Path) -> tuple[dict[str, int], int]:
    from tests.unit.test_attribution_truth import reference

    return reference(path)


def steady_ns(path: Path) -> int:
    totals, wall = sweep(path)
    return wall - totals["one_time"]


def is_device(e: dict[str, Any]) -> bool:
    cat = str(e.get("cat") or "").lower()
    return cat in ("kernel", "gpu_memcpy", "gpu_memset") or cat.endswith("_kernel")


def is_runtime(e: dict[str, Any]) -> bool:
    cat = str(e.get("cat") or "").lower()
    return cat.endswith(("_runtime", "_driver")) or cat == "runtime"


def steps(r: Raw) -> list[tuple[int, int]]:
    return iv(r.of(lambda e: re.match(r"ProfilerStep#\d+$", str(e.get("name", ""))) is not None))


def training(r: Raw) -> bool:
    """A backward pass or an optimizer step in the raw events."""
    return any(
        "Backward" in str(e.get("name", ""))
        or str(e.get("name", "")).startswith(("Optimizer.step#", "autograd::engine"))
        for e in r.spans
    )


def device_type(r: Raw) -> str:
    props = r.doc.get("deviceProperties") or []
    name = str(props[0].get("name", "")) if props else ""
    if "AMD" in name or any(str(e.get("name", "")).startswith("hip") for e in r.spans if is_runtime(e)):
        return "hip"
    if any(is_device(e) for e in r.spans):
        return "cuda"
    return "cpu"


# ------------------------------------------------------------------ what applies to the run


def advice_applies(r: Raw, text: str) -> tuple[bool, str]:
    """The fix is for the run that was traced: no training advice on inference, graph capture
    only on CUDA/ROCm, bf16 only where the device has it."""
    if not training(r) and re.search(r"fused=True|foreach=True|GradScaler|no_sync|checkpoint\(", text):
        return False, "training advice on an inference trace"
    dt = device_type(r)
    if dt not in ("cuda", "hip") and re.search(r"CUDA graph|HIP graph", text):
        return False, "graph capture on a device without it"
    if dt == "hip" and "CUDA graph" in text:
        return False, "CUDA graphs on ROCm"
    props = r.doc.get("deviceProperties") or []
    if props and props[0].get("computeMajor") == 7 and "bfloat16" in text and "AMD" not in str(props[0].get("name")):
        return False, "bf16 on a V100"
    return True, ""


# ------------------------------------------------------------------ per rule


def _device_idle(path: Path, f: Any) -> Verdict:
    totals, _ = sweep(path)
    busy = totals["compute"] + totals["communication"] + totals["copy"]
    pct = 100.0 * busy / max(steady_ns(path), 1)
    return Verdict("busy_pct", f.metrics["busy_pct"]["value"], pct, pct < 50.0, True)


def _launch_bound(path: Path, f: Any) -> Verdict:
    """Short kernels among those launched one call each (a graph launch's kernels cost no launch
    each, so they are left out), and the host launching with the device idle (the sweep)."""
    r = raw(path)
    corr = {
        (e.get("args") or {}).get("correlation")
        for e in r.spans
        if is_runtime(e) and not re.match(r"(cuda|cu|hip)GraphLaunch", str(e.get("name", "")))
    }
    launched = [e for e in r.spans if is_device(e) and (e.get("args") or {}).get("correlation") in corr]
    short = 100.0 * sum(_ns(e["dur"]) < 10_000 for e in launched) / max(len(launched), 1)
    totals, _ = sweep(path)
    starved = 100.0 * totals["host_launch"] / max(steady_ns(path), 1)
    return Verdict(
        "short_kernel_pct", f.metrics["short_kernel_pct"]["value"], short, short >= 50 and starved >= 10, True
    )


def _host_bound(path: Path, f: Any) -> Verdict:
    """The device idle with nothing queued while the host runs ops or runtime calls (the sweep's
    host_launch), as a share of the steady time, less an unfused optimizer's exposed time (that
    finding's); the cause holds when short kernels (launch_bound) and tiny ops do not explain
    it; the fix names graph capture where the device has it, and on a trace already compiled
    says so instead of advising torch.compile(model)."""
    r = raw(path)
    totals, _ = sweep(path)
    foreach = any(re.search(r"_foreach_|_fused_|multi_tensor", str(e.get("name", ""))) for e in r.spans)
    opt = 0
    if not foreach:
        windows = intersect(iv(r.of(lambda e: str(e.get("name", "")).startswith("Optimizer.step#"))), steps(r))
        opt = length(windows) - length(intersect(windows, iv([e for e in r.spans if is_device(e)])))
    pct = 100.0 * max(totals["host_launch"] - opt, 0) / max(steady_ns(path), 1)
    corr = {
        (e.get("args") or {}).get("correlation")
        for e in r.spans
        if is_runtime(e) and not re.match(r"(cuda|cu|hip)GraphLaunch", str(e.get("name", "")))
    }
    launched = [e for e in r.spans if is_device(e) and (e.get("args") or {}).get("correlation") in corr]
    short = 100.0 * sum(_ns(e["dur"]) < 10_000 for e in launched) / max(len(launched), 1)
    cause = pct >= 20.0 and short < 50.0
    compiled = any(re.match(r"Torch-Compiled Region|CompiledFunction", str(e.get("name", ""))) for e in r.spans)
    rec = f.recommendation
    if device_type(r) in ("cuda", "hip"):
        fix = 'mode="reduce-overhead"' in rec and (not compiled or "in place of the default mode" in rec)
    else:
        fix = ("graph breaks" in rec) if compiled else ("torch.compile(model)" in rec)
    return Verdict("host_launch_pct", f.metrics["host_launch_pct"]["value"], pct, cause, fix)


def _tensor_cores(path: Path, f: Any) -> Verdict:
    r = raw(path)
    gemm = [e for e in r.spans if is_device(e) and re.search(r"gemm|cutlass|cublas|xmma|nvjet", e["name"], re.I)]
    simt = [e for e in gemm if re.search(r"sgemm|simt|ffma", e["name"], re.I)]
    pct = 100.0 * sum(_ns(e["dur"]) for e in simt) / max(sum(_ns(e["dur"]) for e in gemm), 1)
    return Verdict("non_tensor_core_pct", f.metrics["non_tensor_core_pct"]["value"], pct, pct >= 50, True)


def _python_overhead(path: Path, f: Any) -> Verdict:
    totals, _ = sweep(path)
    pct = 100.0 * totals["host_python"] / max(steady_ns(path), 1)
    return Verdict("python_pct", f.metrics["python_pct"]["value"], pct, pct >= 40, True)


def _exposed_comm(path: Path, f: Any) -> Verdict:
    totals, _ = sweep(path)
    pct = 100.0 * totals["communication"] / max(steady_ns(path), 1)
    return Verdict("exposed_comm_pct", f.metrics["exposed_comm_pct"]["value"], pct, pct >= 10, True)


def _sync_memcpy(path: Path, f: Any) -> Verdict:
    r = raw(path)
    if "replayed_saving_ns" in f.metrics:
        # copies that hold back the host work after them: the count is the blocking copy calls in
        # steps (a memcpy call whose device copy touched pageable memory, or cudaMemcpy itself);
        # the cause holds when the device ran work during most of each call (the host waited for
        # queued work, not for an idle device); the saving itself is the replay's (no raw figure)
        runtime = {(e.get("args") or {}).get("correlation"): e for e in r.spans if is_runtime(e)}
        calls = [
            runtime[(e.get("args") or {}).get("correlation")]
            for e in r.spans
            if e.get("cat") == "gpu_memcpy"
            and "Pageable" in e["name"]
            and (e.get("args") or {}).get("correlation") in runtime
        ]
        calls += [e for e in r.spans if is_runtime(e) and e["name"] in ("cudaMemcpy", "hipMemcpy")]
        in_steps = [c for c in calls if intersect(iv([c]), steps(r))]
        busy = union(iv([e for e in r.spans if is_device(e)]))
        covered = [sum(hi - lo for lo, hi in intersect(iv([c]), busy)) / max(_ns(c["dur"]), 1) for c in in_steps]
        cause = bool(covered) and sum(x >= 0.5 for x in covered) >= 0.5 * len(covered)
        return Verdict("copies", f.metrics["copies"]["value"], float(len(in_steps)), cause, True)
    syncs = [e for e in r.spans if is_runtime(e) and re.search(r"Synchronize$", e["name"])]
    totals, _ = sweep(path)
    in_steps = intersect(iv(syncs), steps(r))
    pct = 100.0 * totals["host_blocked"] / max(steady_ns(path), 1)
    # the blocked time is the copies' only when no synchronize call blocks inside the steps
    return Verdict("blocked_pct", f.metrics["blocked_pct"]["value"], pct if not in_steps else None, True, True)


def _device_queue_wait(path: Path, f: Any) -> Verdict:
    r = raw(path)
    runtime = {(e.get("args") or {}).get("correlation"): e for e in r.spans if is_runtime(e)}
    by_dev: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    busy: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    for e in r.spans:
        if not is_device(e):
            continue
        dev = (e.get("args") or {}).get("device", e.get("pid"))
        s = _ns(e["ts"])
        busy[dev].append((s, s + _ns(e["dur"])))
        call = runtime.get((e.get("args") or {}).get("correlation"))
        if call is not None:
            q0 = _ns(call["ts"]) + _ns(call["dur"]) + 10_000
            if s > q0:
                by_dev[dev].append((q0, s))
    # work launched before the trace (no launch in it) that starts before the first recorded launch
    # waited from the trace's first event (docs/rules.md, device_queue_wait)
    first_event = min(_ns(e["ts"]) for e in r.spans)
    launches = [_ns(e["ts"]) for e in r.spans if is_runtime(e) and re.search(r"Launch|Memcpy|Memset", e["name"])]
    first_launch = min(launches) if launches else None
    for e in r.spans:
        if is_device(e) and (e.get("args") or {}).get("correlation") not in runtime:
            s = _ns(e["ts"])
            if first_launch is not None and s < first_launch and s > first_event:
                by_dev[(e.get("args") or {}).get("device", e.get("pid"))].append((first_event, s))
    windows = steps(r) or [(first_event, max(_ns(e["ts"]) + _ns(e["dur"]) for e in r.spans))]
    queued = 0
    for dev in busy:
        q = intersect(by_dev[dev], windows)
        queued += length(q) - length(intersect(q, busy[dev]))
    pct = 100.0 * queued / max(steady_ns(path), 1)
    return Verdict("queued_idle_pct", f.metrics["queued_idle_pct"]["value"], pct, pct >= 5, True)


def _unfused_optimizer(path: Path, f: Any) -> Verdict:
    r = raw(path)
    opt = iv(r.of(lambda e: str(e.get("name", "")).startswith("Optimizer.step#")))
    dev = iv([e for e in r.spans if is_device(e)])
    inside = intersect(opt, steps(r))
    exposed = length(inside) - length(intersect(inside, dev))
    foreach = any(re.search(r"_foreach_|_fused_|multi_tensor", str(e.get("name", ""))) for e in r.spans)
    return Verdict("exposed_ns", f.metrics["exposed_ns"]["value"], exposed, not foreach, True)


def _tiny_ops(path: Path, f: Any) -> Verdict:
    """Framework ops dispatched from Python or the loop (their innermost enclosing event on their
    thread is no op: a stack sweep over ops and Python frames) per step, and their mean time."""
    r = raw(path)
    by_tid: dict[Any, list[tuple[int, int, bool]]] = defaultdict(list)
    for e in r.spans:
        if e.get("cat") in ("cpu_op", "python_function"):
            s = _ns(e["ts"])
            by_tid[(e.get("pid"), e.get("tid"))].append((s, s + _ns(e["dur"]), e.get("cat") == "cpu_op"))
    top: list[int] = []
    for spans in by_tid.values():
        stack: list[tuple[int, int, bool]] = []
        for s, e, is_op in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1][1] <= s:
                stack.pop()
            if is_op and not (stack and stack[-1][2]):
                top.append(e - s)
            stack.append((s, e, is_op))
    n_steps = max(len(steps(r)), 1)
    per_step = len(top) / n_steps
    mean = sum(top) / max(len(top), 1)
    return Verdict(
        "ops_per_step", f.metrics["ops_per_step"]["value"], per_step, per_step >= 1000 and mean <= 50_000, True
    )


def _slow_collective(path: Path, f: Any) -> Verdict:
    r = raw(path)
    size = {"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8}
    bw = []
    for e in r.spans:
        a = e.get("args") or {}
        if not (is_device(e) and "nccl" in e["name"].lower() and "In msg nelems" in a):
            continue
        nbytes = max(int(a["In msg nelems"]), int(a.get("Out msg nelems", 0))) * size.get(str(a.get("dtype")), 4)
        n = int(a.get("Group size", 1))
        coll = str(a.get("Collective name", e["name"])).lower()
        factor = 2 * (n - 1) / n if "all_reduce" in coll or "allreduce" in coll else (n - 1) / n if n > 1 else 1
        if nbytes >= 1 << 20 and _ns(e["dur"]) > 0:
            bw.append(nbytes / (_ns(e["dur"]) / 1e9) * factor / 1e9)
    peak = f.metrics["peak_busbw_gbps"]["value"]
    slow = [b for b in bw if b < 0.25 * peak]
    ref = median(slow) if slow else None
    return Verdict("median_busbw_gbps", f.metrics["median_busbw_gbps"]["value"], ref, bool(slow), True)


#: Datasheet peaks the recomputation holds the op against (docs/perf.md: the same vendor figures)
PEAKS = {  # name fragment: (bf16 matrix FLOP/s, memory bytes/s)
    "H200": (989.4e12, 4.8e12),
    "H100": (989.4e12, 3.35e12),
    "MI300X": (1307.4e12, 5.3e12),
    "A100": (312e12, 1.555e12),
    "B200": (2250e12, 8.0e12),
}
BPE = {"float": 4, "c10::BFloat16": 2, "c10::Half": 2, "double": 8}


def _op_below_roofline(path: Path, f: Any) -> Verdict:
    """The op group's share of its roof from its raw op events, their kernels (by External id), the
    shapes' FLOPs (GEMM: 2MNK, + MN for a bias) or bytes (elementwise: every input at its size and
    the broadcast output), and the device's datasheet peaks; the cause from the raw input types
    and strides."""
    r = raw(path)
    name, shapes = f.title.split(" at ")[0].split(" ", 1)
    ops = [e for e in r.spans if e.get("cat") == "cpu_op" and e["name"] == name]
    ops = [e for e in ops if _shape_text((e.get("args") or {}).get("Input Dims")) == shapes]
    ext = {(e.get("args") or {}).get("External id") for e in ops}
    kernels = [k for k in r.spans if is_device(k) and (k.get("args") or {}).get("External id") in ext]
    ns = sum(_ns(k["dur"]) for k in kernels)
    ran = {(k.get("args") or {}).get("External id") for k in kernels}
    ops = [e for e in ops if (e.get("args") or {}).get("External id") in ran]  # calls that ran device work
    args = (ops[0].get("args") or {}) if ops else {}
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    dev = str((r.doc.get("deviceProperties") or [{}])[0].get("name", ""))
    flops_peak, bw = next((v for k, v in PEAKS.items() if k in dev), (None, None))
    ref = None
    if ns and flops_peak and name in ("aten::mm", "aten::addmm"):
        a, b = (dims[0], dims[1]) if name == "aten::mm" else (dims[1], dims[2])
        m, k, n = a[0], a[1], b[1]
        flops = 2 * m * n * k + (m * n if name == "aten::addmm" else 0)
        ref = 100.0 * flops * len(ops) / (ns / 1e9) / flops_peak
    elif ns and bw:
        tensors = [d for d in dims if isinstance(d, list) and d]
        out = list(np.broadcast_shapes(*[tuple(d) for d in tensors])) if tensors else []
        nbytes = (
            sum(int(np.prod(d)) for d in tensors) + (int(np.prod(out)) if name != "aten::copy_" else 0)
        ) * BPE.get(types[0] if types else "", 2)
        ref = 100.0 * nbytes * len(ops) / (ns / 1e9) / bw
    cause = fix = True
    why = ""
    if "fp32 math" in f.message:
        cause = any(t == "float" for t in types)
        fix = "autocast" in f.recommendation and "bfloat16" in f.recommendation
    elif "strided" in f.message:
        cause = _non_contiguous(dims, args.get("Input Strides"))
        fix = "contiguous" in f.recommendation
        why = "" if cause else "inputs are contiguous"
    return Verdict("pct_of_peak", f.metrics["pct_of_peak"]["value"], ref, cause, fix, why)


def _shape_text(dims: Any) -> str:
    """The title's shape text, ``[16,16,559,64] x [1,1,559,64]``, from raw Input Dims."""
    return " x ".join("[" + ",".join(str(x) for x in d) + "]" for d in (dims or []) if isinstance(d, list) and d)


def _non_contiguous(dims: Any, strides: Any) -> bool:
    for d, s in zip(dims or [], strides or []):
        if not d or not s or len(d) != len(s):
            continue
        expect, ok = 1, True
        for size, stride in zip(reversed(d), reversed(s)):
            if size > 1 and stride != expect:
                ok = False
            expect *= size
        if not ok:
            return True
    return False


def _eager_attention(path: Path, f: Any) -> Verdict:
    """On a CPU trace the ops' own time stands in for kernel time: the softmax and bmm ops' self
    time (their span less the ops inside it) over all op time (the union of the ops' spans)."""
    r = raw(path)
    ops = r.of(lambda e: e.get("cat") == "cpu_op")
    by_tid: dict[Any, list[tuple[int, int, str]]] = defaultdict(list)
    for (s, e), op in zip(iv(ops), ops):
        by_tid[op.get("tid")].append((s, e, op["name"]))
    total = attn = 0
    for spans in by_tid.values():
        total += length([(s, e) for s, e, _ in spans])
        for s, e, n in spans:
            if n in ("aten::_softmax", "aten::bmm"):
                inner = [(t, u) for t, u, _ in spans if s <= t and u <= e and (t, u) != (s, e)]
                attn += (e - s) - length(inner)
    pct = 100.0 * attn / max(total, 1)
    soft = [op for op in ops if op["name"] == "aten::_softmax"]
    return Verdict(
        "share_pct",
        f.metrics["share_pct"]["value"],
        pct,
        bool(soft),
        "scaled_dot_product_attention" in f.recommendation,
    )


_SYNC = re.compile(r"^(cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize)$")


def _sync_in_loop(path: Path, f: Any) -> Verdict:
    """A replay by hand on one thread and one device queue: the synchronizing calls inside steps
    wait for nothing (each keeps only its time after the device finished the work launched
    before it); every host event after a call moves up by what the calls before it no longer
    wait; a device event starts at its own start moved up by its launch's shift, or when the
    device event before it ends, whichever is later. The saving is how much earlier the last
    step ends: the later of the host's moved end and the device's. Measured on the H200 CUDA-graph
    trace: 819.4 us by hand, 817.3 us by the graph's replay."""
    r = raw(path)
    win = sorted(steps(r)) or [(min(a for a, _ in iv(r.spans)), max(b for _, b in iv(r.spans)))]  # no steps: one window
    lo, hi = win[0][0], win[-1][1]
    runtime = sorted((e for e in r.spans if is_runtime(e)), key=lambda e: _ns(e["ts"]))
    device = sorted((e for e in r.spans if is_device(e)), key=lambda e: _ns(e["ts"]))
    launch_of = {(e.get("args") or {}).get("correlation"): e for e in runtime}
    dev_iv = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in device]
    # each sync's wait: from its start until the device work launched before it is done
    cuts = []  # (time on the host, ns no longer waited from then on)
    for e in runtime:
        a, b = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
        if not (_SYNC.match(str(e.get("name", ""))) and lo <= a < hi):
            continue
        done = max((de for (ds, de), d in zip(dev_iv, device) if (_launch_start(launch_of, d) or ds) < a), default=a)
        cuts.append((b, max(0, min(b, done) - a)))

    def shift_at(t: int) -> int:
        return sum(w for at, w in cuts if at <= t)

    prev = -(1 << 62)
    last_dev = -(1 << 62)
    for (ds, de), d in zip(dev_iv, device):
        ls = _launch_start(launch_of, d)
        start = max(ds - shift_at(ls if ls is not None else ds), prev)
        prev = start + (de - ds)
        if ds < hi:
            last_dev = max(last_dev, prev)
    host_end = hi - shift_at(hi)
    new_end = max(host_end, last_dev)
    saving = max(hi - new_end, 0)
    return Verdict("saving_ns", float(f.cost_ns), float(saving), True, True)


def _launch_start(launch_of: dict[Any, dict[str, Any]], d: dict[str, Any]) -> int | None:
    e = launch_of.get((d.get("args") or {}).get("correlation"))
    return None if e is None else _ns(e["ts"])


CHECKS = {
    "sync_in_loop": _sync_in_loop,
    "device_idle": _device_idle,
    "launch_bound": _launch_bound,
    "host_bound": _host_bound,
    "tensor_cores": _tensor_cores,
    "python_overhead": _python_overhead,
    "exposed_comm": _exposed_comm,
    "sync_memcpy": _sync_memcpy,
    "device_queue_wait": _device_queue_wait,
    "unfused_optimizer": _unfused_optimizer,
    "tiny_ops": _tiny_ops,
    "slow_collective": _slow_collective,
    "op_below_roofline": _op_below_roofline,
    "eager_attention": _eager_attention,
}


def check(path: Path, finding: Any) -> Verdict:
    fn = CHECKS.get(finding.rule_id)
    if fn is None:
        return Verdict("-", float(finding.cost_ns), None, False, False, "no independent recomputation")
    v = fn(path, finding)
    ok, why = advice_applies(raw(path), finding.recommendation)
    if not ok:
        v.fix, v.why = False, why
    return v
