"""Run a Python program under the profiler and write its trace (like python -m cProfile).

  neuron-explorer record [-o OUT] [options] script.py [args...]
  neuron-explorer record [-o OUT] [options] -m module [args...]

The program runs as itself: its sys.argv, __main__, exit code and exceptions are unchanged, and
the trace is written even when it raises or calls sys.exit. Every optimizer.step() ends a
profiler step (ProfilerStep#N), so per-step analysis works without changing the program;
without an optimizer, --step-on FUNCTION ends a step at each return of FUNCTION, and repeated
runs of a torch.compile region make the steps; --schedule records only some steps (wait,warmup,active[,repeat[,skip_first]], counted in
optimizer steps). Under torchrun / torch.distributed each rank writes OUT/rank=N/trace.parquet.
"""

from __future__ import annotations

import argparse
import builtins
import io
import os
import runpy
import sys
import traceback
import types
import warnings
from pathlib import Path
from typing import Any

EXIT_NO_TRACE = 3


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="a .parquet file, or a run directory (distributed runs always get one); "
        "default: <script or module name>.parquet in the current directory",
    )
    parser.add_argument(
        "--schedule",
        metavar="W,U,A[,R[,S]]",
        help="record only some steps: wait, warmup, active[, repeat[, skip_first]] optimizer steps; "
        "each cycle is its own file (x.parquet, x.cycle1.parquet, ...)",
    )
    parser.add_argument(
        "--activities",
        metavar="LIST",
        help="comma-separated ProfilerActivity names (cpu,cuda,xpu,mtia,hpu,privateuse1); default: all this torch build supports",
    )
    parser.add_argument(
        "--no-stack", action="store_true", help="do not record Python calls (no source lines; lower overhead)"
    )
    parser.add_argument("--no-shapes", action="store_true", help="do not record operator input shapes")
    parser.add_argument("--memory", action="store_true", help="record allocations (profile_memory)")
    parser.add_argument("--flops", action="store_true", help="estimate FLOPs of matmul/conv ops (with_flops)")
    parser.add_argument(
        "--modules", action="store_true", help="record nn.Module hierarchy for TorchScript (with_modules)"
    )
    parser.add_argument("--no-steps", action="store_true", help="do not end a profiler step at each optimizer.step()")
    parser.add_argument(
        "--step-on",
        metavar="FUNCTION",
        help="end a step each time FUNCTION (a name, or FILE:NAME) returns, instead of at each optimizer.step() "
        "(for loops without an optimizer; without it, repeated runs of a compiled region make the steps)",
    )
    parser.add_argument(
        "--exact-lines",
        action="store_true",
        help="mark every torch call made from your code with its line while recording, so operator "
        "syntax (a @ b, x[i]) gets its exact line even where the bytecode leaves several (slower: ~1.2x step time)",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a path substring that is not user code, for source lines (repeatable)",
    )
    parser.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a path substring that IS user code even under site-packages (repeatable)",
    )
    # nargs=REMAINDER: everything after -m MODULE belongs to the module, options included
    parser.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        metavar="MODULE [args...]",
        help="run a library module as a script, like python -m",
    )
    parser.add_argument(
        "program", nargs=argparse.REMAINDER, metavar="script.py [args...]", help="the program and its arguments"
    )


def _require_torch() -> None:
    """``record`` captures with torch.profiler: without torch, one line saying how to install it
    (a plain ``pip install -e .`` analyses traces but cannot capture)."""
    import importlib.util

    from neuron_explorer.trace.errors import CollectorError

    try:
        found = importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise CollectorError(
            "record needs torch, which is not installed here: pip install 'neuron-explorer[capture]' "
            "(or pip install -e '.[capture]' in a checkout); analysing a trace needs no torch"
        )


def run(args: argparse.Namespace) -> int:
    from neuron_explorer.cli.signals import Terminated
    from neuron_explorer.trace.errors import CollectorError

    if args.module is not None:
        if not args.module:
            raise CollectorError("-m needs a module name: record -m package.module [args...]")
        args.module, args.program = args.module[0], [*args.module[1:], *args.program]

    if args.module is None and not args.program:
        raise CollectorError("nothing to run: give a script (record train.py) or a module (record -m package.module)")
    if args.module is None:
        script = Path(args.program[0])
        if not script.is_file():
            raise CollectorError("no such script", script)
        name = script.stem
    else:
        name = args.module.rsplit(".", 1)[-1]
    output = Path(args.output) if args.output else Path(f"{name}.parquet")
    _require_torch()
    kwargs = _profile_kwargs(args)
    program = _load_program(args)  # alive until the trace is converted (see _run_program)

    from neuron_explorer.collectors.capture.torch_profiler import profile

    prof = profile(output=output, on_error="ignore", **kwargs)
    hook = None if args.no_steps or args.step_on else _step_at_optimizer_steps(prof)
    code = 0
    user_exc: BaseException | None = None
    try:
        with prof:
            code = _run_program(program)
    except SystemExit as exc:  # sys.exit() inside the program: its code, after the trace is written
        code = _exit_code(exc)
    except (KeyboardInterrupt, Terminated):  # a signal to this command, not the program's error
        raise
    except BaseException as exc:  # the program's own exception: shown as Python would, exit 1
        user_exc = exc
        code = 1
    finally:
        if hook is not None:
            hook.remove()
    if user_exc is not None:
        traceback.print_exception(type(user_exc), user_exc, user_exc.__traceback__)
    return _summarize(prof, code)


def _profile_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    import torch.profiler

    from neuron_explorer.collectors.capture.torch_profiler import default_user_code
    from neuron_explorer.trace.errors import CollectorError

    kwargs: dict[str, Any] = {
        "record_shapes": not args.no_shapes,
        "with_stack": not args.no_stack,
        "profile_memory": args.memory,
        "with_flops": args.flops,
        "with_modules": args.modules,
        "user_code": default_user_code(args.exclude, args.include),
    }
    if args.exact_lines:
        kwargs["exact_lines"] = True
    if args.activities:
        kwargs["activities"] = [_activity(a) for a in args.activities.split(",") if a.strip()]
    if args.step_on:
        if args.schedule or args.no_steps:
            raise CollectorError("--step-on finds the steps after the run: it takes no --schedule or --no-steps")
        if args.no_stack:
            raise CollectorError("--step-on needs the Python calls: it takes no --no-stack")
        kwargs["step_on"] = args.step_on
    elif args.schedule:
        kwargs["schedule"] = _schedule(args.schedule)
    elif not args.no_steps:
        # One cycle that never ends on its own, so ProfilerStep#N spans mark every step.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kwargs["schedule"] = torch.profiler.schedule(wait=0, warmup=0, active=1 << 62, repeat=1)
    return kwargs


def _activity(name: str) -> Any:
    import torch.profiler

    from neuron_explorer.trace.errors import CollectorError

    wanted = name.strip().lower()
    for member_name, member in torch.profiler.ProfilerActivity.__members__.items():
        if member_name.lower() == wanted:
            return member
    choices = ", ".join(m.lower() for m in torch.profiler.ProfilerActivity.__members__)
    raise CollectorError(f"unknown activity {name!r}; choose from {choices}")


def _schedule(text: str) -> Any:
    import torch.profiler

    from neuron_explorer.trace.errors import CollectorError

    try:
        parts = [int(p) for p in text.split(",")]
        if not 3 <= len(parts) <= 5 or any(p < 0 for p in parts) or parts[2] < 1:
            raise ValueError
    except ValueError:
        raise CollectorError(
            f"--schedule {text!r}: expected wait,warmup,active[,repeat[,skip_first]] "
            "as non-negative integers with active >= 1"
        ) from None
    keys = ("wait", "warmup", "active", "repeat", "skip_first")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.profiler.schedule(**dict(zip(keys, parts)))


def _step_at_optimizer_steps(prof: Any) -> Any:
    """End a profiler step after every optimizer.step() of any optimizer."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    def hook(*_: Any) -> None:
        prof.step()

    return register_optimizer_step_post_hook(hook)


def _load_program(args: argparse.Namespace) -> dict[str, Any]:
    """Compile the script or find the module's code, as python would, before profiling starts."""
    from neuron_explorer.trace.errors import CollectorError

    if args.module is not None:
        try:
            _, spec, code = runpy._get_module_details(args.module)  # type: ignore[attr-defined]
        except ImportError as exc:  # runpy's error says what is missing
            raise CollectorError(f"cannot run module {args.module!r}: {exc}") from None
        path, package, sys_path0 = spec.origin, spec.parent, os.getcwd()
        argv = [path, *args.program]
    else:
        path = os.path.abspath(args.program[0])
        try:
            with io.open_code(path) as fh:
                code = compile(fh.read(), path, "exec")
        except (OSError, SyntaxError, ValueError) as exc:
            raise CollectorError(f"cannot run the script: {type(exc).__name__}: {exc}", path) from None
        spec, package, sys_path0 = None, None, os.path.dirname(path)
        argv = list(args.program)
    main = types.ModuleType("__main__")
    main.__dict__.update(
        {
            "__file__": path,
            "__cached__": None,
            "__loader__": getattr(spec, "loader", None),
            "__package__": package,
            "__spec__": spec,
            "__builtins__": builtins,
        }
    )
    return {"code": code, "module": main, "argv": argv, "sys_path0": sys_path0}


def _run_program(program: dict[str, Any]) -> int:
    """Run the program as ``__main__``. The caller keeps ``program`` (its code and module) alive
    until the trace is converted: torch's Python tracer refers to code objects without owning
    them and reads their names only then."""
    saved_argv, saved_main = list(sys.argv), sys.modules.get("__main__")
    sys.argv = list(program["argv"])
    sys.path.insert(0, program["sys_path0"])
    sys.modules["__main__"] = program["module"]
    try:
        exec(program["code"], program["module"].__dict__)
    finally:
        sys.argv = saved_argv
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        sys.path.pop(0)
    return 0


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)  # sys.exit("message") prints it and exits 1, as Python does
    return 1


def _summarize(prof: Any, code: int) -> int:
    from neuron_explorer.trace.printable import printable

    for timing in prof.timings:
        if timing.get("path"):
            print(f"neuron-explorer: wrote {printable(timing['path'])} ({timing['events']} events)", file=sys.stderr)
    for err in prof.errors:
        print(f"neuron-explorer: error: {printable(err)}", file=sys.stderr)
    steps_from = prof.trace.metadata.get("steps_from") if prof.trace is not None else None
    if steps_from and steps_from.get("calls") == 0:
        print(
            f"neuron-explorer: warning: --step-on {printable(steps_from['function'])}: no call of it was recorded, "
            "so the trace has no steps",
            file=sys.stderr,
        )
    if not prof.paths and code == 0:
        if not prof.errors:
            print(
                "neuron-explorer: error: the program ended before any step was recorded; no trace written",
                file=sys.stderr,
            )
        return EXIT_NO_TRACE
    return code
