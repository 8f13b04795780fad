"""Exact lines of operator syntax, from bytecode: which line of a user function issued each op
that torch recorded with no Python call of its own (``a @ b``, ``x[i]``, ``x[i] = y``,
``a + b``, ``x += y``, ``-x``, ``a < b``, ``x.T``, ``if t:``).

torch's Python tracer records calls, not operators: an op issued by a ``BINARY_OP`` instruction
sits directly under its function's frame in the event tree, between the recorded calls (the
*anchors*, each carrying the line that made it). This module places those ops:

1. Per code object, once (``bytecode_flow.CodeFlow``; the source compiled by this interpreter,
   cached per file): the instructions and their lines, which ops each can issue
   (``bytecode_ops``), which can make a recorded call, and what can follow what.
2. Per frame (``OperatorLines.resolve``): its children in time order become tokens, an op (its
   name) or an anchor (its calling line and kind: a plain Python function, a special method, a
   C function). A forward pass keeps, per token, the instructions that can have made it after
   the tokens before it; a backward pass those from which the rest of the frame can still
   happen, up to a return or a yield. An op whose remaining instructions all lie on one line is
   at that line (``src_precision`` 'line').

Sound under the model of ``bytecode_flow``: the path the program took satisfies every
constraint, so the true instruction is always a candidate, and one candidate line is the true
line. Several candidate lines (the multiply after a loop whose body multiplies too, an op in
either branch of an ``if``) leave the op at its function (``src_precision`` 'function'),
counted in ``stats`` as ``ambiguous``. Op names no operator issues are no tokens (they stay at
the function and constrain nothing); a stretch of a frame whose tokens contradict its code
stays at the function up to the next anchor (``unmatched``); a source modified after the
capture began is not read. docs/capture.md, "Operator syntax", says what is not modelled.
"""

from __future__ import annotations

import itertools
import linecache
import os
from dataclasses import dataclass, field
from types import CodeType

from neuron_explorer.collectors.lines.bytecode_flow import (
    C_CALL,
    OP,
    PY_CALL,
    PY_SPECIAL,
    STAY_KINDS,
    CodeFlow,
    Token,
    analyse,
    anchor,
    kind_of,
)
from neuron_explorer.collectors.lines.bytecode_ops import KNOWN_OPS

__all__ = ["C_CALL", "KNOWN_OPS", "PY_CALL", "PY_SPECIAL", "OperatorLines", "Token", "anchor"]


@dataclass
class OperatorLines:
    """Places a capture's operator-syntax ops on lines; source files are compiled and code
    objects analysed once each. ``stats`` counts the op tokens seen and what became of them."""

    stats: dict[str, int] = field(
        default_factory=lambda: {"frames": 0, "ops": 0, "exact": 0, "ambiguous": 0, "unmatched": 0, "code_objects": 0}
    )
    _codes: dict[str, list[CodeType] | None] = field(default_factory=dict)
    _flows: dict[tuple[str, str, int], CodeFlow | None] = field(default_factory=dict)
    _by_code: dict[CodeType, CodeFlow | None] = field(default_factory=dict)
    #: Sources modified after this time (ns since the epoch; the capture's start) are not read:
    #: their bytecode is no longer what ran.
    unchanged_since_ns: int | None = None

    def flow(self, path: str, func: str, line: int) -> CodeFlow | None:
        """The analysed code object of function ``func`` in ``path`` whose frame reported
        ``line`` (its def line, or where it resumed); None when the source cannot be read."""
        key = (path, func, line)
        if key in self._flows:
            return self._flows[key]
        code = self._find(path, func, line)
        flow = None
        if code is not None:
            if code in self._by_code:
                flow = self._by_code[code]
            else:
                try:
                    flow = analyse(code)
                    self.stats["code_objects"] += 1
                except Exception:  # an interpreter whose bytecode this reader does not know
                    flow = None
                self._by_code[code] = flow
        self._flows[key] = flow
        return flow

    def _find(self, path: str, func: str, line: int) -> CodeType | None:
        codes = self._codes.get(path, ())
        if path not in self._codes:
            codes = self._codes[path] = None if self._edited(path) else _compile(path)
        if not codes:
            return None
        named = [c for c in codes if c.co_name == func]
        exact = [c for c in named if c.co_firstlineno == line]
        if len(exact) == 1:
            return exact[0]
        if exact:
            return None  # two functions of that name on one line: cannot tell which ran
        holding = [c for c in named if any(ln == line for _, _, ln in c.co_lines())]
        return holding[0] if len(holding) == 1 else None

    def resolve(self, flow: CodeFlow, tokens: list[Token], start: int) -> list[int]:
        """The exact line of each op token (-1: ambiguous, unmatched, or an anchor).

        The per-token work is a dictionary lookup in the flow's memos (a loop repeats the same
        sets), so a frame of thousands of tiny ops costs a few microseconds an op."""
        n = len(tokens)
        # stays[k]: token k may come from the instruction that made token k - 1 (STAY_KINDS)
        kinds = [kind_of(t) for t in tokens]
        stays = [False] + [a == b and a in STAY_KINDS for a, b in itertools.pairwise(kinds)]
        fwd = [0] * n
        restart = [False] * n
        memo = flow._fwd
        cur = start
        for k, tok in enumerate(tokens):
            if cur:
                key = (cur, stays[k], tok)
                nxt = memo.get(key)
                if nxt is None:
                    nxt = flow.forward(cur, stays[k], tok)
            else:
                nxt = 0
            if not nxt and kinds[k] != OP:
                nxt = flow.candidates(tok)  # the anchor contradicts what came before: start over from it
                restart[k] = True
            fwd[k] = cur = nxt
        out = [-1] * n
        after, stay = flow.exits, True
        memo = flow._bwd
        everything = flow.everything
        exact = ambiguous = unmatched = 0
        for k in range(n - 1, -1, -1):
            tok, f = tokens[k], fwd[k]
            if f:
                key = (after, stay, tok)
                b = memo.get(key)
                if b is None:
                    b = flow.backward(after, stay, tok)
                b &= f
                if not b:  # the frame did not end the way the code says (an exception left it)
                    b = f
            else:
                b = 0
            if kinds[k] == OP:
                line = flow.line_of(b) if b else -1
                out[k] = line
                if line >= 0:
                    exact += 1
                elif b:
                    ambiguous += 1
                else:
                    unmatched += 1
            after = b if b and not restart[k] else everything
            stay = stays[k]
        stats = self.stats
        stats["ops"] += exact + ambiguous + unmatched
        stats["exact"] += exact
        stats["ambiguous"] += ambiguous
        stats["unmatched"] += unmatched
        stats["frames"] += 1
        return out

    def _edited(self, path: str) -> bool:
        if self.unchanged_since_ns is None:
            return False
        try:
            return os.stat(path).st_mtime_ns > self.unchanged_since_ns
        except OSError:
            return False  # (not a file: linecache may still hold it)


def _compile(path: str) -> list[CodeType] | None:
    """Every code object of a source file (the module's and all nested ones), compiled by this
    interpreter, as the profiled program was; None when the file cannot be read or compiled."""
    try:
        linecache.checkcache(path)  # (a cached copy may predate an edit)
        text = "".join(linecache.getlines(path))
        if not text:
            return None
        top = compile(text, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, OverflowError, MemoryError, RecursionError):
        return None
    out = []
    todo = [top]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(k for k in c.co_consts if isinstance(k, CodeType))
    return out
