"""The opt-in exact-lines mode (``record --exact-lines``, ``profile(exact_lines=True)``): every
torch call made from user code is wrapped in a profiler marker naming its calling line.

Operator syntax (``a @ b``, ``x[i]``) makes no Python call, so the profiler cannot say which
line issued it; ``operator_lines`` recovers most such lines from bytecode after the fact, but a
loop or a branch can leave several candidates. This mode removes the guesswork at run time: a
``TorchFunctionMode`` sees every torch function and Tensor method call, operators included;
for each it finds the first frame up the stack that is user code (``UserCode``: outside torch,
the standard library, installed packages and this tool) and records the call inside
``torch._C._profiler._RecordFunctionFast`` named ``MARKER_PREFIX + "<line> <function> <file>"``.
The conversion turns each marker into the exact line of every op beneath it and drops the
marker itself (``capture_tree.walk_tree(markers=True)``, ``capture_convert``), so the trace
holds the same events as a plain capture, with more exact lines. Without the Python tracer
(``--no-stack``) the markers are the only source of lines, and still give every op its line.

Costs a Python call per torch call (bench/exact_lines.py measures the ratio to plain capture).
The mode is per thread: calls made on other threads (a DataLoader's workers) are not marked.
Under ``torch.compile`` it steps aside: TorchDynamo traces the modes on the stack, and this one
tells it (``torch.compiler.is_compiling()``) to call each function plainly, so compiled
regions are neither marked nor broken.
"""

from __future__ import annotations

import sys
from types import CodeType, FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from neuron_explorer.collectors.build.source_map import UserCode, marker_name

_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)

#: How far up the stack a call's user frame is looked for.
MAX_DEPTH = 64


class ExactLinesMode(TorchFunctionMode):
    """Marks each torch call made from user code with its calling line (see the module docstring)."""

    def __init__(self, user_code: UserCode | None = None) -> None:
        super().__init__()
        self.user_code = user_code or UserCode.default()
        self._is_user: dict[CodeType, bool] = {}
        self._names: dict[tuple[CodeType, int], str] = {}
        try:
            self._marker: Any = torch._C._profiler._RecordFunctionFast
        except AttributeError:  # an older torch: the slower, public marker
            self._marker = torch.autograd.profiler.record_function

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if kwargs is None:
            kwargs = {}
        if _compiling():
            # TorchDynamo traces the modes on the stack: it takes this branch and so neither
            # marks nor guards on this mode's caches (the compiled region's lines are its own)
            return func(*args, **kwargs)
        frame = self._user_frame(sys._getframe(1))
        if frame is None:
            return func(*args, **kwargs)
        key = (frame.f_code, frame.f_lineno)
        name = self._names.get(key)
        if name is None:
            code = frame.f_code
            name = self._names[key] = marker_name(frame.f_lineno, code.co_name, code.co_filename)
        with self._marker(name):
            return func(*args, **kwargs)

    def _user_frame(self, frame: FrameType | None) -> FrameType | None:
        is_user = self._is_user
        for _ in range(MAX_DEPTH):
            if frame is None:
                return None
            code = frame.f_code
            user = is_user.get(code)
            if user is None:
                user = is_user[code] = self.user_code.is_user(code.co_filename)
            if user:
                return frame
            frame = frame.f_back
        return None
