"""The step-time attribution, the verdict and the findings' costs, checked against the raw JSON.

The reference here reads each real trace with the standard library (``tests/_kineto_reference``),
classifies its events from their Kineto categories and names as the attribution's spec says
(docs/rules.md, "Step-time attribution"), and splits every step window by an elementary-segment
sweep: all interval boundaries of a window cut it into segments, and each segment goes to the
first category whose intervals cover its midpoint (counted with sorted starts and ends). The
analyzer uses prefix unions over running maxima instead; the two must agree within 0.5 points.
"""

from __future__ import annotations

import itertools
import re
import warnings
from collections import defaultdict
from decimal import Decimal
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.attribution import CATEGORY_LABELS, CATEGORY_NAMES, HOST_ONLY_LABELS
from tests._kineto_reference import read_json
from tests.conftest import BUNDLED_TRACES, SCALE_TRACE, all_shared_traces

TRACES = sorted({*BUNDLED_TRACES, SCALE_TRACE, *all_shared_traces()}, key=lambda p: (p.name, str(p)))

# -- the spec, written out independently of the analyzer ---------------------------------------
COMM = re.compile(r"nccl|rccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|broadcast|sendrecv", re.I)
BLOCKING = re.compile(
    r"^(cuda|hip)(DeviceSynchronize|StreamSynchronize|EventSynchronize|CtxSynchronize|ThreadSynchronize)$"
    r"|^(cuda|hip)Memcpy(2D|3D|DtoH|HtoD|DtoD|ToSymbol|FromSymbol)?$|^hipMemcpyWithStream$"
    r"|^cu(Ctx|Stream|Event)Synchronize$|^nrt_.*wait",
    re.I,
)
COPY_CALL = re.compile(r"^(cuda|hip)Memcpy|^cuMemcpy", re.I)
LOADER = re.compile(r"^enumerate\(DataLoader\)|DataLoaderIter.*__next__")
STEP = re.compile(r"^ProfilerStep#(\d+)$")
GRACE_NS = 10_000


def _launch_grace(device: list, runtime: dict) -> int:
    """The launch latency allowed before launched work counts as queued (docs/rules.md), written
    out again: over the launches onto an idle device (no device work of the device ends after
    the launch call starts), p90 of start - call end, x 1.25, within [10 us, 200 us]; 10 us
    with fewer than 3 such launches. One rank per trace here."""
    latencies = []
    for dev, s, _e, _c, corr in device:
        if corr not in runtime:
            continue
        call_start, call_end = runtime[corr][0], runtime[corr][1]
        if all(e2 <= call_start for d2, s2, e2, _c2, _k in device if d2 == dev and s2 < s):
            latencies.append(s - call_end)
    if len(latencies) < 3:
        return GRACE_NS
    latencies.sort()
    k = 0.9 * (len(latencies) - 1)  # numpy's linear percentile
    lo = int(k)
    p90 = latencies[lo] + (latencies[min(lo + 1, len(latencies) - 1)] - latencies[lo]) * (k - lo)
    return int(min(max(p90 * 1.25, GRACE_NS), 200_000))


# one-time work (docs/rules.md, "One-time work"), written out again from the spec
COMPILING = re.compile(
    r"\(dynamo_timed\)$|^(_compile\.compile_inner|entire_frame_compile|entire_backward_compile|compile_fx_inner"
    r"|inductor_compile|backend_compile|create_aot_dispatcher_function|OutputGraph\.call_user_compiler|dynamo)$"
    r"|^TorchDynamo Cache Miss|^compile($|[\s:(])|torch/_dynamo/convert_frame\.py\(\d+\): _compile$"
    r"|torch/_inductor/compile_fx\.py\(\d+\): compile_fx_inner$"
)
CAPTURE_CALL = re.compile(r"^(cuda|hip|cu)Graph(Instantiate\w*|Upload|Destroy|ExecDestroy)$")
CAPTURE_PY = re.compile(
    r"torch/cuda/graphs\.py\(\d+\): (__enter__|__exit__|capture_begin|capture_end|make_graphed_callables)$"
    r"|torch/_inductor/cudagraph_trees\.py\(\d+\): (_record|record_function|run_eager)$"
)
CONTEXT = re.compile(
    r"^cu(Init|CtxCreate\w*|DevicePrimaryCtxRetain|ModuleLoad\w*|LibraryLoad\w*)$|^hip(Init|ModuleLoad\w*)$"
)
SETUP = re.compile(
    r"^(cuda|hip)(Malloc\w*|Free\w*|HostAlloc|HostMalloc|HostRegister|StreamCreate\w*|EventCreate\w*|SetDevice"
    r"|DeviceSetLimit|DeviceEnablePeerAccess|ExtMallocWithFlags)$"
    r"|^cu(MemAlloc\w*|MemFree\w*|MemHostAlloc|StreamCreate\w*|EventCreate\w*)$"
)
QUERY = re.compile(
    r"^(cuda|hip)(GetDevice\w*|DeviceGet\w*|GetDeviceProperties\w*|FuncGetAttributes|FuncSetAttribute"
    r"|DeviceCanAccessPeer|DriverGetVersion|RuntimeGetVersion|GetDeviceCount|PointerGetAttributes)$"
)
LAUNCH = re.compile(
    r"^(cuda|hip|cu)(LaunchKernel\w*|ModuleLaunchKernel|ExtModuleLaunchKernel|LaunchCooperativeKernel\w*)$"
)


def _warmup(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Leading steps (at most two) over 1.5x the median of the steps after the first two."""
    later = [e - s for s, e in windows[2:]]
    if not later:
        return []
    limit = 1.5 * float(np.median(later))
    out = []
    for s, e in windows[:2]:
        if e - s <= limit:
            break
        out.append((s, e))
    return out


def one_time_layers(spans: list[dict], windows: list[tuple[int, int]], has_steps: bool) -> tuple[list, list]:
    """(one-time intervals above device work: compile, capture, warm-up steps; one-time setup
    calls below it), from the raw events."""
    above, below = [], []
    captures: dict[object, list[tuple[int, int, bool]]] = defaultdict(list)
    ops_by_tid: dict[object, list[tuple[int, int, str]]] = defaultdict(list)
    first_op: dict[str, int] = {}
    kernel_first: dict[str, tuple[int, object]] = {}
    launch_of: dict[object, tuple[int, int, str]] = {}
    setup = []
    for e in sorted(spans, key=lambda e: _ns(e["ts"])):
        cat, name = str(e.get("cat") or "").lower(), str(e.get("name") or "")
        s, d = _ns(e["ts"]), _ns(e["dur"])
        args = e.get("args") or {}
        if cat in ("cpu_op", "operator", "user_annotation", "python_function") and COMPILING.search(name):
            above.append((s, s + d))
        if cat == "python_function" and CAPTURE_PY.search(name):
            above.append((s, s + d))
        if cat in ("cpu_op", "operator"):
            ops_by_tid[(e.get("pid"), e.get("tid"))].append((s, s + d, name))
            first_op.setdefault(name, s)
        if _is_runtime(cat):
            if CAPTURE_CALL.search(name):
                above.append((s, s + d))
            if re.search(r"StreamBeginCapture", name) or re.search(r"StreamEndCapture", name):
                captures[(e.get("pid"), e.get("tid"))].append((s, s + d, "Begin" in name))
            slow_query = bool(QUERY.search(name)) and d >= 1_000_000
            if CONTEXT.search(name) or slow_query:
                below.append((s, s + d))
            if LAUNCH.search(name):
                launch_of[args.get("correlation")] = (s, s + d, name)
            if not has_steps and (SETUP.search(name) or CONTEXT.search(name) or slow_query):
                setup.append((s, s + d, (e.get("pid"), e.get("tid"))))
        if _device_class(cat, name) is not None and "correlation" in args:
            kernel_first.setdefault(name, (10**30, None))
            corr = args["correlation"]
            kernel_first[name] = min(kernel_first[name], (launch_of.get(corr, (10**30,))[0], corr), key=lambda x: x[0])
    for calls in captures.values():
        for (s, _e, b), (_s2, e2, b2) in itertools.pairwise(calls):
            if b and not b2:
                above.append((s, e2))
    for _at, corr in kernel_first.values():
        if corr in launch_of and launch_of[corr][1] - launch_of[corr][0] >= 1_000_000:
            below.append(launch_of[corr][:2])
    for s, e, tid in setup:
        below.append((s, e))
        inside = [(os_, oe, n) for os_, oe, n in ops_by_tid.get(tid, []) if os_ <= s and e <= oe]
        if inside:
            os_, oe, n = min(inside, key=lambda x: x[1] - x[0])  # the innermost op around the call
            if first_op.get(n) == os_:
                below.append((os_, oe))
    if has_steps:
        above.extend(_warmup(windows))
    return above, below


def _ns(x: object) -> int:
    return int(Decimal(str(x)) * 1000)


def _is_runtime(cat: str) -> bool:
    return cat.endswith(("_runtime", "_driver")) or cat == "runtime"


def _device_class(cat: str, name: str) -> int | None:
    """0 compute, 1 communication, 2 copy; None for events that are not device work."""
    if cat in ("gpu_memcpy", "memcpy", "gpu_memset", "memset") or "memcpy" in cat or "memset" in cat:
        return 2
    if cat in ("kernel", "mtia_ccp_events") or cat.endswith("_kernel"):
        return 1 if COMM.search(name) else 0
    return None


@cache
def reference(path: Path) -> tuple[dict[str, int], int]:
    """Category totals (ns) and total wall (ns, once per device) from the raw JSON."""
    doc = read_json(path)
    spans = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]
    device, runtime, blocking, loading, ops, python, steps = [], {}, [], [], [], [], {}
    pageable_corr = set()
    markers: list[int] = []
    host_extent = []
    for e in spans:
        cat, name = str(e.get("cat") or "").lower(), str(e.get("name") or "")
        s, d = _ns(e["ts"]), _ns(e["dur"])
        cls = _device_class(cat, name)
        if cls is not None:
            if d >= 0:
                args = e.get("args") or {}
                device.append((args.get("device", e.get("pid")), s, s + d, cls, args.get("correlation")))
                if cls == 2 and "Pageable" in name:
                    pageable_corr.add(args.get("correlation"))
            continue
        if cat in ("cpu_op", "operator", "user_annotation", "python_function", "cuda_sync") or _is_runtime(cat):
            host_extent.append((s, s + d))
        if cat in ("cpu_op", "user_annotation") and name.startswith("Optimizer.step#"):
            markers.append(s)
        if cat == "user_annotation" and (m := STEP.match(name)) and d > 0:
            n = int(m.group(1))
            if n not in steps or d >= steps[n][1] - steps[n][0]:
                steps[n] = (s, s + d)
        if cat in ("cpu_op", "operator", "user_annotation") and LOADER.search(name):
            loading.append((s, s + d))
        if _is_runtime(cat):
            runtime[(e.get("args") or {}).get("correlation")] = (s, s + d, name)
            ops.append((s, s + d))
            if BLOCKING.search(name):
                blocking.append((s, s + d))
        elif cat == "cuda_sync":
            blocking.append((s, s + d))
            ops.append((s, s + d))
        elif cat in ("cpu_op", "operator"):
            ops.append((s, s + d))
        elif cat == "python_function":
            python.append((s, s + d))
    for corr in pageable_corr:
        if corr in runtime and COPY_CALL.search(runtime[corr][2]):
            blocking.append(runtime[corr][:2])
    grace = _launch_grace(device, runtime)
    queued = defaultdict(list)
    for dev, s, _e, _c, corr in device:
        if corr in runtime and s > runtime[corr][1] + grace:
            queued[dev].append((runtime[corr][1] + grace, s))
    if steps:
        windows = sorted(steps.values())
        # the trailing partial step is not a step (docs/schema.md: an optimizer step in every
        # earlier step and none in it, or, unmarked, under half the shortest of >= 3 full steps)
        if len(windows) >= 2:
            marked = [any(ws <= m < we for m in markers) for ws, we in windows]
            short = len(windows) >= 4 and (windows[-1][1] - windows[-1][0]) < 0.5 * min(
                we - ws for ws, we in windows[:-1]
            )
            if (any(marked) and all(marked[:-1]) and not marked[-1]) or (not any(marked) and short):
                windows = windows[:-1]
    else:
        ends = host_extent + [(s, e) for _d, s, e, _c, _x in device]
        windows = [(min(s for s, _ in ends), max(e for _, e in ends))]
    once_above, once_below = one_time_layers(spans, windows, bool(steps))
    devices = sorted({d for d, *_ in device}, key=str) or [None]
    totals = dict.fromkeys(CATEGORY_NAMES, 0)
    wall = 0
    for dev in devices:
        on_dev = [x for x in device if x[0] == dev]
        if dev is None:  # host only: data loading > ops (the compute) > Python > untraced
            layers = [
                ("one_time", once_above),
                ("one_time_calls", once_below),
                ("data_loading", loading),
                ("compute", ops),
                ("host_python", python),
            ]
        else:
            layers = [
                ("one_time", once_above),
                ("compute", [(s, e) for _d, s, e, c, _x in on_dev if c == 0]),
                ("communication", [(s, e) for _d, s, e, c, _x in on_dev if c == 1]),
                ("copy", [(s, e) for _d, s, e, c, _x in on_dev if c == 2]),
                ("one_time_calls", once_below),
                ("host_blocked", blocking),
                ("device_wait", queued[dev]),
                ("data_loading", loading),
                ("host_launch", ops),
                ("host_python", python),
            ]
        for ws, we in windows:
            wall += we - ws
            for name, ns in _sweep(ws, we, layers).items():
                totals["one_time" if name == "one_time_calls" else name] += ns
    return totals, wall


def _sweep(ws: int, we: int, layers: list[tuple[str, list[tuple[int, int]]]]) -> dict[str, int]:
    """Elementary segments of [ws, we): each goes to the first layer covering its midpoint."""
    clipped = []
    cuts = [ws, we]
    for _name, iv in layers:
        a = np.array([(max(s, ws), min(e, we)) for s, e in iv if min(e, we) > max(s, ws)], dtype=np.int64).reshape(
            -1, 2
        )
        clipped.append(a)
        cuts.extend(a.ravel().tolist())
    b = np.unique(np.array(cuts, dtype=np.int64))
    mid2 = b[:-1] + b[1:]  # twice the midpoint: integer, compared with twice the bounds
    length = np.diff(b)
    owner = np.full(len(length), len(layers))
    for k in range(len(layers) - 1, -1, -1):
        a = clipped[k]
        starts, ends = np.sort(a[:, 0] * 2), np.sort(a[:, 1] * 2)
        covered = np.searchsorted(starts, mid2, side="right") - np.searchsorted(ends, mid2, side="right") > 0
        owner[covered] = k
    out = {name: int(length[owner == k].sum()) for k, (name, _) in enumerate(layers)}
    out["untraced"] = int(length[owner == len(layers)].sum())
    return out


@cache
def analysis(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return analyze(ne.load(path))


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_attribution_matches_an_independent_sweep_of_the_raw_json(path: Path) -> None:
    expected, wall = reference(path)
    a = analysis(path)
    ours_wall = int(a.attribution["wall_ns"].sum())
    assert abs(ours_wall - wall) <= max(1e-4 * wall, 1000), (ours_wall, wall)
    for name in CATEGORY_NAMES:
        ours = 100.0 * a.attribution[f"{name}_ns"].sum() / ours_wall
        ref = 100.0 * expected[name] / wall
        assert ours == pytest.approx(ref, abs=0.5), f"{name}: ours {ours:.2f}% vs reference {ref:.2f}%"


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_findings_never_claim_more_than_the_wall_time_or_their_category(path: Path) -> None:
    a = analysis(path)
    wall = int(a.attribution["wall_ns"].sum())
    assert sum(f.cost_ns for f in a.findings) <= wall
    # a replay-priced cost is the step-time saving of its edit, dependencies moved: it may exceed
    # its category (a sync's saving moves the device work behind it); it is deducted from the
    # category first, and the attribution-priced claims share what is left (analyzers/ledger.py)
    by_category: dict[str, int] = defaultdict(int)
    replayed: dict[str, int] = defaultdict(int)
    for f in a.findings:
        assert f.cost_ns == 0 or f.category in CATEGORY_NAMES, (f.rule_id, f.category)
        (replayed if f.cost_method == "replay" else by_category)[str(f.category)] += f.cost_ns
    for name, claimed in by_category.items():
        if name in CATEGORY_NAMES:
            left = max(int(a.attribution[f"{name}_ns"].sum()) - replayed.get(name, 0), 0)
            assert claimed <= left, (name, claimed, left)


@pytest.mark.parametrize("path", TRACES, ids=[p.name for p in TRACES])
def test_verdict_names_the_largest_category(path: Path) -> None:
    a = analysis(path)
    expected, wall = reference(path)
    largest = max(CATEGORY_NAMES, key=lambda c: expected[c])
    runner_up = sorted((expected[c] for c in CATEGORY_NAMES), reverse=True)[1]
    if 100.0 * (expected[largest] - runner_up) / wall < 1.0:
        pytest.skip("two categories within a point of each other: either may be named")
    pct = 100.0 * expected[largest] / wall
    labels = HOST_ONLY_LABELS if a.summary["device_types"] == ["cpu"] else CATEGORY_LABELS
    if largest == "one_time":
        # one-time work leads: the verdict says so, then what the steady state is made of
        steady = {c: expected[c] for c in CATEGORY_NAMES if c != "one_time"}
        if 100.0 * sum(steady.values()) / wall < 2.0 and not a.summary["one_time"]["steady_steps"]:
            assert a.summary["verdict"].startswith("Only one-time work: ")
        else:
            rest = max(steady, key=lambda c: steady[c])
            assert a.summary["verdict"].startswith("Mostly one-time work: ")
            assert (
                "the steady state (" in a.summary["verdict"] and f"is mostly {labels[rest]} (" in a.summary["verdict"]
            )
    else:
        assert a.summary["verdict"].startswith(f"Mostly {labels[largest]} (")
    assert a.summary[f"{largest}_pct"] == pytest.approx(pct, abs=0.5)
