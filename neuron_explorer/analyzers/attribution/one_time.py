"""One-time work: what a run pays once (initialization, compilation, graph capture, warm-up
steps), told apart from the steady state by name and by position in the run.

The step-time attribution gives it its own category, ``one_time`` (``analyzers.attribution``),
so the steady-state rules never read it as host-bound or launch-bound time. Four kinds, in the
attribution's priority among themselves (the first that holds an instant takes it):

1. ``compile``: torch.compile compiling: Dynamo/AOTAutograd/Inductor spans (``... (dynamo_timed)``,
   ``dynamo``, ``entire_frame_compile``, ``entire_backward_compile``, ``TorchDynamo Cache Miss``),
   a ``compile`` span a recorder collapsed them into, and with Python frames the compile entry
   points (``convert_frame.py: _compile``, ``compile_fx.py: compile_fx_inner``). Autotuning runs
   inside these spans, so its benchmark kernels are one-time too.
2. ``graph_capture``: CUDA/HIP graph capture and instantiation: from a thread's
   ``cudaStreamBeginCapture`` to its next ``cudaStreamEndCapture``, ``cudaGraphInstantiate*`` /
   ``cudaGraphUpload`` (and their ``hip``/``cu`` forms), and with Python frames
   ``torch.cuda.graph``'s own ``__enter__`` / ``capture_begin`` / ``capture_end`` / ``__exit__``,
   ``make_graphed_callables`` and cudagraph trees' recording (``_record``, ``record_function``,
   ``run_eager``). Replays are steady work, never one-time.
3. ``warmup_step``: a warm-up step's whole window (``trace.warmup``: a leading step, at most two,
   over 1.5x the median of the later ones): allocator growth, cuDNN autotuning, first calls.
4. ``init``: setup calls, below device work in priority (a call that returns while the device
   computes costs no wall time): CUDA/HIP context creation and module loading (``cuInit``,
   ``cuCtxCreate``, ``cuDevicePrimaryCtxRetain``, ``cuModuleLoad*``, ``cuLibraryLoad*``,
   ``hipModuleLoad*``), a kernel's first launch in the trace when it takes 1 ms or more (lazy
   module loading) and a device or driver query taking 1 ms or more (the lazy context creation
   it waited for; queries and launches take microseconds, and kernel launchers query on every
   call), anywhere; and, on a trace without steps only, the allocator (``cudaMalloc``/``cudaFree``/
   ``cudaHostAlloc``/``hipMalloc``/...), stream and event creation, plus the first call of an op
   that encloses any of these calls (cuDNN/cuBLAS handle creation and algorithm selection show
   only as that op's own time). With steps, those calls in a warm-up step are the step's;
   in a steady step they recur and are not one-time (``memory_fragmentation`` reads them).

Everything here works on whole columns; ``one_time_spans`` is memoized per trace.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.columns import lookup, name_mask, ukey
from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.trace.schema import Kind

#: The kinds, in their priority among themselves (attribution classes 0..3 of ``one_time``).
KINDS: tuple[tuple[str, str], ...] = (
    ("compile", "compilation"),
    ("graph_capture", "graph capture"),
    ("warmup_step", "warm-up steps"),
    ("init", "initialization"),
)
KIND_LABELS: dict[str, str] = dict(KINDS)

#: Compilation itself (not running compiled code, not TorchDynamo's eval-frame wrappers or
#: ``torch._dynamo.disable`` decorators, which every eager torch call passes through).
COMPILE_EVENTS = (
    r"\(dynamo_timed\)$"
    r"|^(?:_compile\.compile_inner|entire_frame_compile|entire_backward_compile|compile_fx_inner|inductor_compile"
    r"|backend_compile|create_aot_dispatcher_function|OutputGraph\.call_user_compiler|dynamo)$"
    r"|^TorchDynamo Cache Miss"
    r"|^compile(?:$|[\s:(])"
    r"|torch/_dynamo/convert_frame\.py\(\d+\): _compile$"
    r"|torch/_inductor/compile_fx\.py\(\d+\): compile_fx_inner$"
)
CAPTURE_BEGIN = r"^(?:cuda|hip|cu)StreamBeginCapture\w*$"
CAPTURE_END = r"^(?:cuda|hip|cu)StreamEndCapture\w*$"
GRAPH_SETUP = r"^(?:cuda|hip|cu)Graph(?:Instantiate\w*|Upload|Destroy|ExecDestroy)$"
CAPTURE_FRAMES = (
    r"torch/cuda/graphs\.py\(\d+\): (?:__enter__|__exit__|capture_begin|capture_end|make_graphed_callables)$"
    r"|torch/_inductor/cudagraph_trees\.py\(\d+\): (?:_record|record_function|run_eager)$"
)
#: Context creation and module loading: one-time wherever they happen.
CONTEXT_CALLS = (
    r"^cu(?:Init|CtxCreate\w*|DevicePrimaryCtxRetain|ModuleLoad\w*|LibraryLoad\w*)$|^hip(?:Init|ModuleLoad\w*)$"
)
#: Setup calls: one-time on a trace without steps (with steps, a steady step's are recurring work).
SETUP_CALLS = (
    r"^(?:cuda|hip)(?:Malloc\w*|Free\w*|HostAlloc|HostMalloc|HostRegister|StreamCreate\w*|EventCreate\w*"
    r"|SetDevice|DeviceSetLimit|DeviceEnablePeerAccess|ExtMallocWithFlags)$"
    r"|^cu(?:MemAlloc\w*|MemFree\w*|MemHostAlloc|StreamCreate\w*|EventCreate\w*)$"
)
#: Device and driver queries: microseconds each, and called in the steady state too (kernel
#: launchers ask for attributes on every call); one taking a millisecond or more paid for the
#: lazy creation of the context: one-time wherever it is.
QUERY_CALLS = (
    r"^(?:cuda|hip)(?:GetDevice\w*|DeviceGet\w*|GetDeviceProperties\w*|FuncGetAttributes|FuncSetAttribute"
    r"|DeviceCanAccessPeer|DriverGetVersion|RuntimeGetVersion|GetDeviceCount|PointerGetAttributes)$"
)
LAUNCH_CALLS = (
    r"^(?:cuda|hip|cu)(?:LaunchKernel\w*|ModuleLaunchKernel|ExtModuleLaunchKernel|LaunchCooperativeKernel\w*)$"
)
#: Under this share of the wall time, what is not one-time work is no steady state: a trace of
#: initialization or compile warm-up alone is called that and gets no steady-state warnings.
MIN_STEADY_PCT = 2.0
#: A kernel's first launch this long loaded its module (lazy loading), and a query this long created
#: the context: launches and queries take microseconds.
SLOW_CALL_NS = 1_000_000

_SPAN_COLUMNS = ["rank", "start_ns", "dur_ns", "kind", "event_id"]
_MAX_DEPTH = 16


def one_time_spans(frames: TraceFrames) -> pd.DataFrame:
    """Host spans of one-time work: rank, start_ns, dur_ns, kind (compile, graph_capture, init),
    event_id (-1 for a capture interval). Warm-up steps are whole windows (``warmup_windows``)."""
    return frames.memo("one_time_spans", lambda: _spans(frames))


def _spans(frames: TraceFrames) -> pd.DataFrame:
    host = frames.host
    if not len(host):
        return pd.DataFrame({c: pd.Series(dtype="object" if c == "kind" else "int64") for c in _SPAN_COLUMNS})
    names = host["name"]
    kind = host["kind"]
    span_kinds = kind.isin([Kind.CPU_OP, Kind.ANNOTATION, Kind.PYTHON]).to_numpy()
    runtime = (kind == Kind.RUNTIME).to_numpy()
    parts = [
        _rows(host[span_kinds & name_mask(names, COMPILE_EVENTS)], "compile"),
        _rows(host[runtime & name_mask(names, GRAPH_SETUP)], "graph_capture"),
        _rows(host[(kind == Kind.PYTHON).to_numpy() & name_mask(names, CAPTURE_FRAMES)], "graph_capture"),
        _capture_intervals(host[runtime]),
        _rows(host[runtime & name_mask(names, CONTEXT_CALLS)], "init"),
        _rows(host[runtime & name_mask(names, QUERY_CALLS) & (host["dur_ns"].to_numpy() >= SLOW_CALL_NS)], "init"),
        _rows(_slow_first_launches(frames), "init"),
    ]
    if not frames.has_steps:
        slow_query = name_mask(names, QUERY_CALLS) & (host["dur_ns"].to_numpy() >= SLOW_CALL_NS)
        setup = host[runtime & (name_mask(names, SETUP_CALLS) | name_mask(names, CONTEXT_CALLS) | slow_query)]
        parts += [_rows(setup, "init"), _rows(_first_calls_enclosing(host, setup), "init")]
    out = pd.concat([p for p in parts if len(p)] or [parts[0]], ignore_index=True)
    return out[out["dur_ns"] > 0].reset_index(drop=True)


def _rows(df: pd.DataFrame, kind: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rank": df["rank"].to_numpy(np.int64),
            "start_ns": df["start_ns"].to_numpy(np.int64),
            "dur_ns": df["dur_ns"].to_numpy(np.int64),
            "kind": kind,
            "event_id": df["event_id"].to_numpy(np.int64),
        }
    )


def _capture_intervals(rt: pd.DataFrame) -> pd.DataFrame:
    """Per thread, each BeginCapture call to the next EndCapture call (the captured launches
    run nothing: the device executes them only on replay)."""
    begin = name_mask(rt["name"], CAPTURE_BEGIN)
    end = name_mask(rt["name"], CAPTURE_END)
    ev = rt[begin | end].sort_values(["rank", "tid", "start_ns"], kind="stable")
    if not len(ev):
        return _rows(ev, "graph_capture")
    is_begin = name_mask(ev["name"], CAPTURE_BEGIN)
    same = (ev["rank"].to_numpy()[1:] == ev["rank"].to_numpy()[:-1]) & (
        ev["tid"].to_numpy()[1:] == ev["tid"].to_numpy()[:-1]
    )
    pair = np.flatnonzero(is_begin[:-1] & ~is_begin[1:] & same)  # a begin followed by its end
    s = ev["start_ns"].to_numpy()
    e = s + ev["dur_ns"].to_numpy()
    return pd.DataFrame(
        {
            "rank": ev["rank"].to_numpy(np.int64)[pair],
            "start_ns": s[pair],
            "dur_ns": e[pair + 1] - s[pair],
            "kind": "graph_capture",
            "event_id": np.full(len(pair), -1, np.int64),
        }
    )


def _slow_first_launches(frames: TraceFrames) -> pd.DataFrame:
    """Launch calls of 1 ms or more that are the first launch of their kernel in the trace."""
    host = frames.host
    dev = frames.device
    launches = host[(host["kind"] == Kind.RUNTIME).to_numpy() & name_mask(host["name"], LAUNCH_CALLS)]
    if not len(launches) or not len(dev):
        return launches.iloc[:0]
    slow = launches[launches["dur_ns"].to_numpy() >= SLOW_CALL_NS]
    if not len(slow):
        return slow
    pos = lookup(
        ukey(launches["rank"].to_numpy(), launches["event_id"].to_numpy()),
        ukey(dev["rank"].to_numpy(), dev["launch_id"].to_numpy()),
    )
    ok = pos >= 0
    first = (
        pd.DataFrame(
            {
                "rank": dev["rank"].to_numpy()[ok],
                "kernel": dev["name"].astype(object).to_numpy()[ok],
                "at": launches["start_ns"].to_numpy()[pos[ok]],
                "row": pos[ok],
            }
        )
        .sort_values("at", kind="stable")
        .drop_duplicates(["rank", "kernel"])
    )
    chosen = launches.iloc[np.unique(first["row"].to_numpy())]
    return chosen[chosen["dur_ns"].to_numpy() >= SLOW_CALL_NS]


def _first_calls_enclosing(host: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """The innermost op enclosing each setup call (up its parents, past annotations and Python
    frames), where that is the op's first call (by name) on its rank: the first call pays its
    library's initialization."""
    ops = host[(host["kind"] == Kind.CPU_OP).to_numpy()]
    if not len(ops) or not len(calls):
        return ops.iloc[:0]
    keys = ukey(host["rank"].to_numpy(), host["event_id"].to_numpy())
    parents = ukey(host["rank"].to_numpy(), host["parent_id"].to_numpy())
    is_op = (host["kind"] == Kind.CPU_OP).to_numpy()
    at = lookup(keys, ukey(calls["rank"].to_numpy(), calls["parent_id"].to_numpy()))
    for _ in range(_MAX_DEPTH):  # one lookup per level, over all calls at once
        climb = (at >= 0) & ~is_op[np.maximum(at, 0)]
        if not climb.any():
            break
        at[climb] = lookup(keys, parents[at[climb]])
    at = at[(at >= 0) & is_op[np.maximum(at, 0)]]
    first = ops.sort_values("start_ns", kind="stable").drop_duplicates(["rank", "name"])
    enclosing = host.iloc[np.unique(at)]
    first_keys = ukey(first["rank"].to_numpy(), first["event_id"].to_numpy())
    return enclosing[np.isin(ukey(enclosing["rank"].to_numpy(), enclosing["event_id"].to_numpy()), first_keys)]


def in_one_time(frames: TraceFrames, events: pd.DataFrame) -> np.ndarray:
    """Per row of ``events`` (host events): True when it starts inside one-time work (a one-time
    span or a warm-up step): a steady-state rule leaves it out."""
    start = events["start_ns"].to_numpy(np.int64)
    return overlaps_one_time(frames, events["rank"].to_numpy(np.int64), start, start + 1)


def overlaps_one_time(frames: TraceFrames, rank: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per interval ``[start, end)`` of ``rank``: True when one-time work (a one-time span or a
    warm-up step) lies in it, in part or whole (an idle gap around a compile is the compile's)."""
    from neuron_explorer.analyzers.core.intervals import clip_to_windows, merge_windows

    spans = one_time_spans(frames)
    warm = warmup_windows(frames)
    r = np.concatenate([spans["rank"].to_numpy(np.int64), warm["rank"].to_numpy(np.int64)])
    s = np.concatenate([spans["start_ns"].to_numpy(np.int64), warm["start_ns"].to_numpy(np.int64)])
    e = np.concatenate([(spans["start_ns"] + spans["dur_ns"]).to_numpy(np.int64), warm["end_ns"].to_numpy(np.int64)])
    out = np.zeros(len(start), bool)
    if not len(s) or not len(start):
        return out
    wr, ws, we = merge_windows(r, s, e)
    rows, _, _, _ = clip_to_windows(
        np.asarray(rank, np.int64),
        np.asarray(start, np.int64),
        np.maximum(np.asarray(end, np.int64), start + 1),
        wr,
        ws,
        we,
    )
    out[rows] = True
    return out


def only_one_time(attribution: pd.DataFrame, steps: pd.DataFrame) -> bool:
    """True when the trace holds one-time work and nothing to call a steady state: what is not
    one-time is under ``MIN_STEADY_PCT`` of the wall time and no step is a steady one (a step not
    flagged warm-up with time that is not one-time)."""
    if not len(attribution):
        return False
    wall = float(attribution["wall_ns"].sum())
    once = float(attribution["one_time_ns"].sum())
    if once <= 0 or wall - once >= MIN_STEADY_PCT / 100.0 * wall:
        return False
    real = steps[(steps["step"] >= 0) & ~steps["is_warmup"]] if len(steps) else steps
    if not len(real):
        return True
    at = attribution.groupby(["rank", "step"])[["wall_ns", "one_time_ns"]].sum()
    key = pd.MultiIndex.from_frame(real[["rank", "step"]])
    rows = at.reindex(key)
    return not bool((rows["wall_ns"] > rows["one_time_ns"]).any())


def warmup_windows(frames: TraceFrames) -> pd.DataFrame:
    """The warm-up steps' windows (rank, step, start_ns, end_ns), by ``steps.step_table``'s rule."""

    def compute() -> pd.DataFrame:
        from neuron_explorer.analyzers.metrics.steps import step_table

        st = step_table(frames)
        return st.loc[st["is_warmup"], ["rank", "step", "start_ns", "end_ns"]].reset_index(drop=True)

    return frames.memo("warmup_windows", compute)
