"""The bytecode matcher on other Python versions' bytecode (3.10's INPLACE_*/CALL_FUNCTION,
3.12's inlined comprehensions and LOAD_ATTR method flag, 3.13's CALL_KW and TO_BOOL).

The frames of a real capture (this interpreter's torch) are turned into tokens, then every
other CPython found on PATH (``python3.10`` ... ``python3.13``; skipped when there is none)
places the same tokens using its own compile of the same sources, with the three bytecode
modules alone (they need nothing but the standard library). No op may land on a different line
than here, where the exact-lines mode confirms them (test_operator_lines.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from neuron_explorer.collectors.lines import operator_lines  # noqa: E402
from neuron_explorer.collectors.lines.operator_lines import (  # noqa: E402
    C_CALL,
    KNOWN_OPS,
    PY_CALL,
    PY_SPECIAL,
    OperatorLines,
    anchor,
)

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("bytecode_ops", "bytecode_flow", "operator_lines")


def _other_pythons() -> list[str]:
    """Every CPython 3.10+ other than this one found on PATH or under pyenv, that runs."""
    found = []
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for v in ("3.10", "3.11", "3.12", "3.13", "3.14"):
        if v == mine:
            continue
        candidates = [
            shutil.which(f"python{v}"),
            *sorted(str(p) for p in Path.home().glob(f".pyenv/versions/{v}.*/bin/python{v}")),
        ]
        for c in candidates:
            if c and subprocess.run([c, "-c", "pass"], capture_output=True, timeout=60).returncode == 0:
                found.append(c)
                break
    return found


OTHERS = _other_pythons()

REPLAY = """
import json, sys
sys.path.insert(0, sys.argv[1])
from neuron_explorer.collectors.lines.operator_lines import OperatorLines
frames = json.load(open(sys.argv[2]))
ol = OperatorLines()
out = []
for f in frames:
    flow = ol.flow(f["path"], f["func"], f["line"])
    out.append(None if flow is None else ol.resolve(flow, f["tokens"], flow.starts(f["line"])))
print(json.dumps({"version": sys.version.split()[0], "lines": out}))
"""


def _frames() -> list[dict]:
    from torch._C._profiler import _ExtraFields_PyCall, _ExtraFields_PyCCall, _ExtraFields_TorchOp

    from tests.planted import operator_syntax, tiny_ops

    paths = {os.path.basename(m.__file__): os.path.abspath(m.__file__) for m in (operator_syntax, tiny_ops)}
    states = [(m, m.setup()) for m in (operator_syntax, tiny_ops)]
    for m, s in states:
        m.step(s)
    with torch.profiler.profile(with_stack=True) as prof:
        for m, s in states:
            m.step(s)
    out = []
    todo = list(prof.profiler.kineto_results.experimental_event_tree())
    while todo:
        node = todo.pop()
        todo.extend(node.children)
        head, _, func = node.name.partition("): ")
        file, _, line = head.rpartition("(")
        path = paths.get(os.path.basename(file))
        if path is None or not func or not line.isdigit():
            continue
        tokens: list = []
        for c in node.children:
            ef = c.extra_fields
            if isinstance(ef, _ExtraFields_TorchOp) and c.name in KNOWN_OPS:
                tokens.append(c.name)
            elif isinstance(ef, _ExtraFields_PyCall):
                called = c.name.rpartition(": ")[2]
                special = called.startswith("__") and called.endswith("__")
                tokens.append(anchor(ef.caller.line_number, PY_SPECIAL if special else PY_CALL))
            elif isinstance(ef, _ExtraFields_PyCCall):
                tokens.append(anchor(ef.caller.line_number, C_CALL))
        out.append({"path": path, "func": func, "line": int(line), "tokens": tokens})
    return out


@pytest.mark.skipif(not OTHERS, reason="no other CPython on PATH")
def test_other_pythons_place_the_same_tokens_on_the_same_lines(tmp_path):
    frames = _frames()
    here = OperatorLines()
    mine = [
        here.resolve(fl, f["tokens"], fl.starts(f["line"]))
        for f in frames
        if (fl := here.flow(f["path"], f["func"], f["line"]))
    ]
    assert here.stats["exact"] > 3000
    (tmp_path / "frames.json").write_text(json.dumps(frames))
    pkg = tmp_path / "pkg" / "neuron_explorer" / "collectors" / "lines"
    pkg.mkdir(parents=True)
    for init in (pkg / "__init__.py", pkg.parent / "__init__.py", pkg.parent.parent / "__init__.py"):
        init.write_text("")
    for name in MODULES:
        shutil.copy(Path(operator_lines.__file__).with_name(f"{name}.py"), pkg / f"{name}.py")
    for python in OTHERS:
        r = subprocess.run(
            [python, "-c", REPLAY, str(tmp_path / "pkg"), str(tmp_path / "frames.json")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        got = json.loads(r.stdout)
        theirs = [lines for lines in got["lines"] if lines is not None]
        compared = placed = 0
        for f, a, b in zip([f for f in frames if here.flow(f["path"], f["func"], f["line"])], mine, got["lines"]):
            if b is None:  # (3.12 inlines comprehensions: no code object of their own)
                assert f["func"].startswith("<")
                continue
            for tok, x, y in zip(f["tokens"], a, b):
                if isinstance(tok, str) and x >= 0 and y >= 0:
                    compared += 1
                    assert x == y, (got["version"], f["func"], tok, x, y)
                placed += isinstance(tok, str) and y >= 0
        assert theirs and compared > 3000 and placed >= 0.99 * compared, (got["version"], placed, compared)
