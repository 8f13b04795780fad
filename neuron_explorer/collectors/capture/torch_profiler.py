"""``neuron_explorer.profile()``: torch.profiler.profile that also writes a Parquet trace.

It *is* a ``torch.profiler.profile`` (a subclass), so ``step()``, ``key_averages()``,
``export_chrome_trace()``, schedules and a user's own ``on_trace_ready`` work unchanged. What
it adds:

- defaults that serve users: every activity this torch build can record
  (``supported_activities()``: CPU, CUDA, XPU, MTIA, HPU, PrivateUse1 such as ``neuron``),
  ``record_shapes`` and ``with_stack`` on (``with_stack`` is what makes exact source lines);
- each schedule cycle's in-memory results are converted (``capture_convert``) and written
  atomically, one file per cycle (``capture_output``). Converting means reading torch's result
  objects, which is only safe, and only stays out of the user's trace, while no profiler session
  records: with ``background=True`` (default) a cycle that ends while more cycles follow is kept
  and converted when the ``with`` block exits (or once ``max_pending`` cycles wait), so the
  training loop is not held up at the cycle boundary; every trace is complete and on disk when
  the ``with`` block exits. ``background=False`` converts at each cycle's end. (A worker thread
  was tried and rejected: torch's Python tracer then records the converter's own calls, and
  reading results while the next session records corrupted it in our tests.);
- ``.trace`` / ``.path`` (the last cycle's), ``.traces`` / ``.paths`` (all), ``.errors``;
- it never breaks the user's program: a profiler already running, a capture that recorded
  nothing, a failed conversion or write are reported (a ``CaptureWarning`` by default,
  ``on_error="raise"`` for a ``CollectorError``) and never replace the user's own exception.
"""

from __future__ import annotations

import functools
import gzip
import shutil
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import torch
import torch.profiler

from neuron_explorer import environment
from neuron_explorer.collectors.build._conversion import conversion_settings
from neuron_explorer.collectors.build.source_map import UserCode
from neuron_explorer.collectors.capture.capture_convert import convert_results, saved_export
from neuron_explorer.collectors.capture.capture_output import distributed_info, run_metadata, trace_path
from neuron_explorer.collectors.capture.compile_watch import CompileWatch
from neuron_explorer.collectors.lines.compiled_lines import apply_compiled_lines
from neuron_explorer.trace.atomic import OutputError
from neuron_explorer.trace.errors import CollectorError
from neuron_explorer.trace.model import Trace
from neuron_explorer.version import __version__

OnError = Literal["warn", "raise", "ignore"]


#: zstd level of the args text in captured traces. Captured args (shapes, dtypes, ids) are as
#: small at level 1 as at the importer's level 7 (measured: 1.10 MB for a 102k-event profile)
#: and written twice as fast, at the context's exit where the program waits.
CAPTURE_ARGS_ZSTD_LEVEL = 1


class CaptureWarning(UserWarning):
    """A capture problem that did not stop the user's program (see ``profile.errors``)."""


def profiler_running() -> bool:
    """True when a torch profiler (Kineto or legacy) is recording in this process."""
    try:
        return bool(torch._C._autograd._profiler_enabled())
    except AttributeError:  # pragma: no cover - very old torch
        return bool(torch.autograd.profiler._profiler_enabled())


class profile(torch.profiler.profile):
    """torch.profiler.profile plus a Parquet trace per schedule cycle.

    Takes every argument of ``torch.profiler.profile`` and:

    output: a ``.parquet`` file or a run directory (``None``: keep the trace in memory only).
    user_code: what counts as the user's code for source lines (default: everything outside
        torch, the standard library, site-packages and ``NEURON_EXPLORER_EXCLUDE``).
    background: convert cycles that end while more follow at the context's exit (default True).
    max_pending: with background, how many finished cycles may wait before they are converted
        at a cycle end anyway (bounds the memory they hold).
    on_error: ``"warn"`` (default), ``"raise"`` (``CollectorError`` at exit, unless the user's
        own exception is already propagating) or ``"ignore"`` (only ``.errors``).
    compile_provenance: while recording, have Inductor keep which user lines each kernel fuses
        (and record its C++ kernels), so compiled regions get their lines (``compile_watch``).
    step_on: a function (``NAME`` or ``FILE:NAME``) each return of which ends a step, for
        programs that never call ``step()`` (``collectors.capture.inferred_steps``).
    exact_lines: mark every torch call made from user code with its calling line while
        profiling (``collectors.lines.exact_lines``), so operator syntax gets its exact line even where
        the bytecode leaves several candidates; costs a Python call per torch call.
    """

    def __init__(
        self,
        *,
        activities: Iterable[Any] | None = None,
        schedule: Callable[[int], Any] | None = None,
        on_trace_ready: Callable[..., Any] | None = None,
        record_shapes: bool = True,
        profile_memory: bool = False,
        with_stack: bool = True,
        with_flops: bool = False,
        with_modules: bool = False,
        output: str | Path | None = None,
        user_code: UserCode | None = None,
        background: bool = True,
        max_pending: int = 4,
        on_error: OnError = "warn",
        compile_provenance: bool = True,
        step_on: str | None = None,
        exact_lines: bool = False,
        **torch_kwargs: Any,
    ) -> None:
        if on_error not in ("warn", "raise", "ignore"):
            raise ValueError(f"on_error must be 'warn', 'raise' or 'ignore', not {on_error!r}")
        if activities is None:
            activities = sorted(torch.profiler.supported_activities(), key=lambda a: int(a.value))
        activities = list(activities)
        torch_args: dict[str, Any] = dict(
            activities=activities,
            schedule=schedule,
            on_trace_ready=on_trace_ready,
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            with_modules=with_modules,
            **torch_kwargs,
        )
        # Everything needed to build a fresh profiler (the decorator form makes one per call).
        self._init_args: dict[str, Any] = dict(
            torch_args,
            output=output,
            user_code=user_code,
            background=background,
            max_pending=max_pending,
            on_error=on_error,
            compile_provenance=compile_provenance,
            step_on=step_on,
            exact_lines=exact_lines,
        )
        super().__init__(**torch_args)
        self.output = Path(output) if output is not None else None
        self.user_code = user_code or default_user_code()
        self.background = background
        self.max_pending = max_pending
        self.on_error: OnError = on_error
        self.step_on = step_on
        self.trace: Trace | None = None
        self.path: Path | None = None
        self.traces: list[Trace] = []
        self.paths: list[Path] = []
        self.errors: list[str] = []
        #: per cycle: events, seconds blocking the program, seconds converting and writing
        self.timings: list[dict[str, Any]] = []
        self._options = {
            "activities": [_activity_name(a) for a in activities],
            "record_shapes": record_shapes,
            "profile_memory": profile_memory,
            "with_stack": with_stack,
            "with_flops": with_flops,
            "with_modules": with_modules,
            "schedule": schedule is not None,
            "exact_lines": bool(exact_lines),
        }
        self._exact_mode: Any = None
        self._cycle = 0
        self._last_dist: dict[str, Any] | None = None
        self._reported = 0
        self._disabled = False
        self._pending: list[functools.partial[None]] = []
        self._closing = False
        self._lock = threading.Lock()
        self._compile_watch = CompileWatch(
            pause=not environment.value(environment.TRACE_COMPILE), provenance=compile_provenance
        )

    # ------------------------------------------------------------------ context and decorator
    def prepare_trace(self) -> None:
        # torch warns that each cycle starts with its events cleared: that is what a trace per
        # cycle wants, so the warning would only alarm (record --schedule printed it).
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*Profiler clears events at the end of each cycle")
            super().prepare_trace()

    def __enter__(self) -> profile:
        if profiler_running():
            self._disabled = True
            self._error(
                "another torch profiler is already recording in this process, so this one would record "
                "nothing; the code runs unprofiled. Stop the other profiler first (only one Kineto session "
                "can run at a time)."
            )
            self._report(None)
            return self
        entered = super().__enter__()
        self._compile_watch.install()
        if self._options["exact_lines"]:
            from neuron_explorer.collectors.lines.exact_lines import ExactLinesMode

            self._exact_mode = ExactLinesMode(self.user_code)
            self._exact_mode.__enter__()
        return entered

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if self._disabled:
            return None
        self._closing = True  # the stop() below ends the last cycle: nothing records after it
        self._compile_watch.remove()
        if self._exact_mode is not None:
            mode, self._exact_mode = self._exact_mode, None
            mode.__exit__(None, None, None)
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            self._closing = False
            self._flush()
        self._report(exc)
        return None

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Use as a decorator: each call of ``func`` is profiled by a fresh profile with these
        arguments; its results are copied onto this object."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            inner = type(self)(**self._init_args)
            try:
                with inner:
                    return func(*args, **kwargs)
            finally:
                for name in ("trace", "path", "traces", "paths", "errors", "timings"):
                    setattr(self, name, getattr(inner, name))

        return wrapper

    def step(self) -> None:
        if not self._disabled:
            self._note_distributed()
            super().step()

    def export_chrome_trace(self, path: str, *args: Any, **kwargs: Any) -> None:
        """torch's own export; when this capture had to be converted through that export (a
        torch release whose in-memory records are unknown here), the file it already wrote,
        since torch saves a result once only."""
        results = getattr(self.profiler, "kineto_results", None) if self.profiler is not None else None
        saved = saved_export(results) if results is not None else None
        if saved is None:
            return super().export_chrome_trace(path, *args, **kwargs)
        opener = gzip.open if str(path).endswith(".gz") else open
        with open(saved, "rb") as src, opener(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
        return None

    def _note_distributed(self) -> None:
        # A program often destroys its process group before the profile ends: remember it.
        info = distributed_info()
        if info is not None and info["source"] == "torch.distributed":
            self._last_dist = info

    # ------------------------------------------------------------------ cycle end
    def _trace_ready(self) -> None:
        """End of a schedule cycle: hand the cycle to the converter, then the user's handler."""
        t0 = time.perf_counter()
        try:
            self._capture_cycle()
        except Exception as exc:  # the user's program must go on
            self._error(f"capture of cycle {self._cycle - 1} failed: {type(exc).__name__}: {exc}")
        blocked = time.perf_counter() - t0
        if self.timings and self.timings[-1].get("blocking_s") is None:
            self.timings[-1]["blocking_s"] = blocked
        super()._trace_ready()

    def _capture_cycle(self) -> None:
        results = getattr(self.profiler, "kineto_results", None) if self.profiler is not None else None
        cycle = self._cycle
        self._cycle += 1
        timing: dict[str, Any] = {"cycle": cycle, "blocking_s": None}
        self.timings.append(timing)
        if results is None:
            self._error(f"cycle {cycle}: the profiler returned no results")
            return
        self._note_distributed()
        dist = self._last_dist or distributed_info()
        rank = int(dist["rank"]) if dist else 0
        world = int(dist["world_size"]) if dist else 1
        meta = {
            "collector": "torch_profiler",
            "collector_version": __version__,
            **run_metadata(),
            "profiler_options": dict(self._options),
            "distributed_info": dist,
            "rank": rank,
            "rank_known": dist is not None,
            "world_size": world,
            "cycle": cycle,
            "trace_start_ns": int(results.trace_start_ns()),
            "base_time_ns": None,
            "trace_metadata": {},
        }
        path = trace_path(self.output, rank, world, cycle) if self.output is not None else None
        job = functools.partial(self._convert, results, meta, path, cycle, list(sys.path), timing)
        self._pending.append(job)
        if not self.background or self._closing or len(self._pending) >= self.max_pending:
            self._flush()

    def _convert(
        self,
        results: Any,
        meta: dict[str, Any],
        path: Path | None,
        cycle: int,
        search_path: list[str],
        timing: dict[str, Any],
    ) -> None:
        t0 = time.perf_counter()
        try:
            with conversion_settings():
                trace = convert_results(results, meta, self.user_code, search_path, cycle=cycle, step_on=self.step_on)
                try:
                    graphs = self._compile_watch.graphs
                    if graphs:
                        trace = apply_compiled_lines(trace, graphs, self.user_code)
                except Exception as exc:  # the trace stands without them, saying why
                    trace.metadata["compiled_lines"] = {"error": f"{type(exc).__name__}: {exc}"}
        except Exception as exc:
            if environment.debug():
                traceback.print_exc()
            self._error(f"cycle {cycle}: converting the profile failed: {type(exc).__name__}: {exc}")
            return
        timing["events"] = trace.num_events
        timing["convert_s"] = time.perf_counter() - t0
        if trace.num_events == 0:
            self._error(
                f"cycle {cycle} recorded no events; was another torch profiler started while this one was "
                "running? (only one can record at a time)"
            )
            return
        if path is not None:
            t1 = time.perf_counter()
            try:
                trace.write(path, args_zstd_level=CAPTURE_ARGS_ZSTD_LEVEL)
            except (OutputError, OSError) as exc:  # (OutputError: trace.atomic's, the OS error named)
                why = exc.message if isinstance(exc, OutputError) else (exc.strerror or exc)
                self._error(str(CollectorError(f"cannot write the trace ({why})", path)))
                path = None
            timing["write_s"] = time.perf_counter() - t1
            if path is not None:
                timing["path"] = str(path)
        with self._lock:
            self.traces.append(trace)
            self.trace = trace
            if path is not None:
                self.paths.append(path)
                self.path = path

    def _flush(self) -> None:
        """Convert and write every waiting cycle, oldest first (no session records now)."""
        pending, self._pending = self._pending, []
        for job in pending:
            job()  # records its own errors

    # ------------------------------------------------------------------ errors
    def _error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def _report(self, user_exc: BaseException | None) -> None:
        new = self.errors[self._reported :]
        self._reported = len(self.errors)
        if not new or self.on_error == "ignore":
            return
        text = "neuron_explorer.profile: " + "; ".join(new)
        if user_exc is not None:
            # The user's exception goes on unchanged; ours rides along as a note and a warning.
            if hasattr(user_exc, "add_note"):
                user_exc.add_note(text)
            warnings.warn(text, CaptureWarning, stacklevel=3)
        elif self.on_error == "raise":
            raise CollectorError("; ".join(new), self.output)
        else:
            warnings.warn(text, CaptureWarning, stacklevel=3)


def default_user_code(exclude: Iterable[str] = (), include: Iterable[str] = ()) -> UserCode:
    """``UserCode.default`` with the given extra patterns (the launcher script running us and the
    bundled examples are decided by ``trace.frames.path_origin``)."""
    return UserCode.default(exclude, include)


def _activity_name(activity: Any) -> str:
    name = getattr(activity, "name", str(activity))
    # A renamed PrivateUse1 backend shows up as an alias (e.g. NEURON): record the canonical name.
    if int(getattr(activity, "value", -1)) == int(torch.profiler.ProfilerActivity.PrivateUse1.value):
        return "PrivateUse1"
    return str(name)
