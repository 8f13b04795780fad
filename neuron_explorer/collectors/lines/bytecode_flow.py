"""One code object's control flow as bitsets: where each instruction can go next, which can
make a recorded call, which can issue which op (``bytecode_ops``), and how a frame's recorded
children (tokens: an op's name, or an anchor: a recorded call and its calling line) can follow
one another. ``operator_lines`` runs the matching over a capture; this module is per code object
and analysed once.

A token's instructions: an op's are those that issue it (and calls of types, for the
conversions ``float(t)`` makes); a Python call's are the instructions on its line that can make
one (not loads and stores of locals, nor attribute loads from modules, which call no plain
function); a C function call's are the call instructions on its line.
Reachability skips method calls (``x.view()``): a method is a Python or C function, so passing
one would have recorded a call.
"""

from __future__ import annotations

import dis
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import CodeType

from neuron_explorer.collectors.lines.bytecode_ops import TYPE_CALL_OPS, issued_ops

#: A frame's children as tokens: an op's name (str) or an anchor (``anchor(line, kind)``).
Token = int | str

#: Instructions that never make a Python call: loads, stores and stack shuffles of locals and
#: constants, forward jumps. Every other instruction may (an anchor can come from it).
_QUIET = frozenset(
    """PRECALL RETURN_VALUE RETURN_CONST NOP RESUME CACHE EXTENDED_ARG LOAD_FAST LOAD_FAST_CHECK
    LOAD_FAST_AND_CLEAR LOAD_FAST_LOAD_FAST LOAD_FAST_BORROW LOAD_FAST_BORROW_LOAD_FAST_BORROW
    STORE_FAST STORE_FAST_LOAD_FAST STORE_FAST_STORE_FAST STORE_FAST_MAYBE_NULL LOAD_CONST
    LOAD_SMALL_INT PUSH_NULL COPY SWAP DUP_TOP DUP_TOP_TWO ROT_TWO ROT_THREE ROT_FOUR ROT_N LOAD_DEREF
    STORE_DEREF LOAD_CLOSURE MAKE_CELL COPY_FREE_VARS JUMP_FORWARD KW_NAMES IS_OP NOT_TAKEN
    POP_JUMP_IF_NONE POP_JUMP_IF_NOT_NONE POP_JUMP_FORWARD_IF_NONE POP_JUMP_FORWARD_IF_NOT_NONE
    LOAD_GLOBAL LOAD_NAME""".split()  # noqa: SIM905
)
_UNCONDITIONAL = frozenset(
    ["JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP", "JUMP_NO_INTERRUPT"]
)
_TERMINATORS = frozenset(["RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"])
_EXITS = frozenset(["RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE", "RAISE_VARARGS", "RERAISE"])
_SETUPS = frozenset(["SETUP_FINALLY", "SETUP_WITH", "SETUP_ASYNC_WITH"])  # 3.10's handlers
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))
#: Besides every CALL*: instructions that call ``__enter__``/``__exit__``, which may be C code.
_CALLS_ANYTHING = frozenset(["BEFORE_WITH", "BEFORE_ASYNC_WITH", "SETUP_WITH", "SETUP_ASYNC_WITH", "WITH_EXCEPT_START"])
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


def _bits(mask: int) -> Iterable[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


#: Anchor kinds (a token is ``line * 4 + kind``): a Python call of a plain function (one per
#: instruction), a Python call of a special method (``__getattr__``, ``__init__``: an
#: instruction can make several), a C function call (its call instruction's one call).
PY_CALL, PY_SPECIAL, C_CALL = 1, 2, 3
OP = 0  # (the kind of an op's token)
#: Token kinds that may come from the same instruction as the token before when that is of the
#: same kind: one operator can issue several ops (``x[:T, :T]``: two slices), one instruction
#: can call several special methods (a class's ``__new__`` and ``__init__``). A call
#: instruction makes one call, and an instruction either makes a recorded call or issues ops
#: directly (an operator, or a call of a type such as ``float(t)``), not both.
STAY_KINDS = (OP, PY_SPECIAL)


def kind_of(token: Token) -> int:
    return OP if isinstance(token, str) else token & 3


def anchor(line: int, kind: int) -> int:
    """The token of a recorded call of ``kind`` made at ``line``."""
    return line * 4 + kind


@dataclass
class CodeFlow:
    """One code object's instructions as bitsets: what each can issue, where it can go next."""

    first_line: int
    lines: list[int]  # per instruction; -1 where it has none
    issues: dict[str, int]  # op name -> instructions that can issue it
    any_op: int  # call instructions: a call of a type (``float(t)``) issues ops with no call event
    calls: dict[int, int]  # line -> instructions on it that can make a Python call
    plain: dict[int, int]  # the same, less attribute loads from modules (a special method's only)
    c_calls: dict[int, int]  # line -> its call instructions (where a C function call comes from)
    reach: list[int]  # per instruction: the instructions reachable from it (1+ steps)
    exits: int  # returns, yields, raises
    resumes: dict[int, int]  # line -> instructions a generator resumes at after a yield there
    everything: int
    _reach_memo: dict[int, int] = field(default_factory=dict)
    _fwd: dict[tuple[int, bool, Token], int] = field(default_factory=dict)
    _bwd: dict[tuple[int, bool, Token], int] = field(default_factory=dict)
    _line_memo: dict[int, int] = field(default_factory=dict)

    def candidates(self, token: Token) -> int:
        """The instructions that can have made ``token``."""
        if isinstance(token, str):
            return self.issues.get(token, 0) | (self.any_op if token in TYPE_CALL_OPS else 0)
        line, kind = token >> 2, token & 3
        table = self.c_calls if kind == C_CALL else self.plain if kind == PY_CALL else self.calls
        return table.get(line, 0)

    def reach_of(self, states: int) -> int:
        hit = self._reach_memo.get(states)
        if hit is None:
            hit = 0
            reach = self.reach
            for i in _bits(states):
                hit |= reach[i]
            self._reach_memo[states] = hit
        return hit

    def forward(self, states: int, stay: bool, token: Token) -> int:
        """Where ``token`` can have come from, after being at ``states``; ``stay``: it may be the
        same instruction (``STAY_KINDS``)."""
        key = (states, stay, token)
        hit = self._fwd.get(key)
        if hit is None:
            here = states if stay else 0
            hit = self._fwd[key] = (here | self.reach_of(states)) & self.candidates(token)
        return hit

    def backward(self, after: int, stay: bool, token: Token) -> int:
        """The instructions that can make ``token`` and then be at one of ``after``."""
        key = (after, stay, token)
        hit = self._bwd.get(key)
        if hit is None:
            hit = 0
            reach = self.reach
            for i in _bits(self.candidates(token)):
                if (((1 << i) if stay else 0) | reach[i]) & after:
                    hit |= 1 << i
            self._bwd[key] = hit
        return hit

    def line_of(self, states: int) -> int:
        """The one line all ``states`` lie on; -1 when they span several (or none)."""
        hit = self._line_memo.get(states)
        if hit is None:
            lines = {self.lines[i] for i in _bits(states)}
            hit = self._line_memo[states] = lines.pop() if len(lines) == 1 else -1
        return hit

    def starts(self, line: int) -> int:
        """Where a frame whose call event says ``line`` began: the entry when that is the def
        line, a generator's resume points after a yield on that line, else anywhere (a frame
        already running when profiling began)."""
        start = self.resumes.get(line, 0)
        if line == self.first_line:
            start |= 1
        return start or self.everything


def analyse(code: CodeType) -> CodeFlow:
    """Instructions, their lines and reachability of one code object (see the module docstring)."""
    bc = dis.Bytecode(code)
    ins = list(bc)
    n = len(ins)
    index = {x.offset: i for i, x in enumerate(ins)}
    lines: list[int] = []
    last = code.co_firstlineno
    for x in ins:
        positions = getattr(x, "positions", None)
        if positions is not None:
            line = positions.lineno if positions.lineno is not None else -1
        else:  # 3.10: starts_line marks the first instruction of each line
            last = x.starts_line if x.starts_line is not None else last
            line = last
        lines.append(line)
    # successors of each instruction, and exception handlers as extra edges
    handler_edges: list[tuple[int, int, int]] = []  # (first, last exclusive, handler) instruction indices
    for entry in getattr(bc, "exception_entries", None) or ():
        lo, hi = index.get(entry.start), _index_at_or_after(index, entry.end, n)
        if lo is not None and entry.target in index:
            handler_edges.append((lo, hi, index[entry.target]))
    succ: list[list[int]] = []
    for i, x in enumerate(ins):
        out: list[int] = []
        target = index.get(x.argval) if x.opcode in _JUMPS and isinstance(x.argval, int) else None
        if x.opname in _SETUPS and target is not None:
            handler_edges.append((i + 1, n, target))  # 3.10: any instruction after the setup may raise into it
        if x.opname in _UNCONDITIONAL:
            out = [target] if target is not None else []
        elif x.opname not in _TERMINATORS:
            if i + 1 < n:
                out.append(i + 1)
            if target is not None:
                out.append(target)
        succ.append(out)
    for lo, hi, h in handler_edges:
        for i in range(lo, hi):
            succ[i].append(h)
    methods = [x.opname.startswith("CALL") and _method_call(ins, i) for i, x in enumerate(ins)]
    reach = _reachability(succ, sum(1 << i for i, m in enumerate(methods) if m))

    issues: dict[str, int] = {}
    calls: dict[int, int] = {}
    plain: dict[int, int] = {}
    c_calls: dict[int, int] = {}
    resumes: dict[int, int] = {}
    exits = any_op = 0
    generator = bool(code.co_flags & _GENERATOR_FLAGS)
    module_chain = False
    for i, x in enumerate(ins):
        bit = 1 << i
        # ``F.softmax``, ``torch.nn.functional.gelu``: attributes of a global (a module) call
        # no plain Python function (a module has no properties; its ``__getattr__`` is special)
        module_attr = module_chain and x.opname in ("LOAD_ATTR", "LOAD_METHOD")
        if x.opname in ("LOAD_GLOBAL", "LOAD_NAME", "IMPORT_NAME"):
            module_chain = True
        elif x.opname not in ("PUSH_NULL", "CACHE", "EXTENDED_ARG") and not module_attr:
            module_chain = False
        for name in issued_ops(x):
            issues[name] = issues.get(name, 0) | bit
        if x.opname.startswith("CALL") or x.opname in _CALLS_ANYTHING:
            if not methods[i]:  # a method is a Python or C function: a recorded call
                any_op |= bit
            if x.opname.startswith("CALL") and lines[i] >= 0:
                c_calls[lines[i]] = c_calls.get(lines[i], 0) | bit
        if x.opname not in _QUIET and lines[i] >= 0:
            calls[lines[i]] = calls.get(lines[i], 0) | bit
            if not module_attr:
                plain[lines[i]] = plain.get(lines[i], 0) | bit
        if x.opname in _EXITS:
            exits |= bit
        if generator and x.opname == "YIELD_VALUE" and i + 1 < n and lines[i] >= 0:
            resumes[lines[i]] = resumes.get(lines[i], 0) | (1 << (i + 1))
    return CodeFlow(
        code.co_firstlineno, lines, issues, any_op, calls, plain, c_calls, reach, exits, resumes, (1 << n) - 1
    )


_NEW_ATTR_LOADS = sys.version_info >= (3, 12)  # LOAD_ATTR's low bit: a method load pushing two


def _pushes(x: dis.Instruction) -> int | None:
    """How many values ``x`` pushes; None where that does not tell where values come from."""
    op = x.opname
    if op in ("LOAD_METHOD",) or (op in ("LOAD_GLOBAL", "LOAD_SUPER_ATTR") and (x.arg or 0) & 1):
        return 2
    if op == "LOAD_ATTR":
        return 2 if _NEW_ATTR_LOADS and (x.arg or 0) & 1 else 1
    if op.startswith(("STORE_", "DELETE_")) or op in ("POP_TOP", "PRECALL", "KW_NAMES", "NOP", "CACHE", "EXTENDED_ARG"):
        return 0
    if x.opcode in _JUMPS or op.startswith(
        ("SWAP", "ROT_", "DUP_TOP", "UNPACK_", "BEFORE_", "SETUP_", "RETURN", "RAISE")
    ):
        return None
    return 1


def _method_call(ins: list[dis.Instruction], j: int) -> bool:
    """Whether call instruction ``ins[j]`` calls a method loaded by ``obj.name`` (a Python or C
    function, so a recorded call), found by walking back over the stack effects of the
    instructions that built its arguments. False when unsure."""
    x = ins[j]
    if x.opname == "CALL_METHOD":  # 3.10
        return True
    if x.opname not in ("CALL", "CALL_KW"):
        return False
    pos = (x.arg or 0) + (2 if x.opname == "CALL_KW" else 1)  # the slot under callable/self
    last = j - 1
    while last >= 0 and ins[last].opname in ("PRECALL", "KW_NAMES"):  # 3.11: this call's own
        last -= 1
    for k in range(last, max(j - 200, -1), -1):
        y = ins[k]
        p = _pushes(y)
        if p is None:
            return False
        if pos < p:
            return y.opname == "LOAD_METHOD" or (y.opname in ("LOAD_ATTR", "LOAD_SUPER_ATTR") and p == 2)
        try:
            effect = dis.stack_effect(y.opcode, y.arg if y.opcode >= dis.HAVE_ARGUMENT else None, jump=False)
        except ValueError:
            return False
        pos -= effect
        if y.is_jump_target:
            return False  # (values may come from another path)
    return False


def _index_at_or_after(index: dict[int, int], offset: int, n: int) -> int:
    if offset in index:
        return index[offset]
    later = [i for off, i in index.items() if off >= offset]
    return min(later) if later else n


def _reachability(succ: list[list[int]], mandatory: int = 0) -> list[int]:
    """Per instruction, the bitset of instructions reachable from it in one or more steps
    without passing through a ``mandatory`` one (a method call: it would have been recorded);
    computed over basic blocks (a fixpoint, loops converge in a few rounds), then spread."""
    n = len(succ)
    if n == 0:
        return []
    leader = [False] * n
    leader[0] = True
    for i, out in enumerate(succ):
        if out != [i + 1] or (mandatory >> i) & 1 or (mandatory >> (i + 1)) & 1:
            for t in out:
                leader[t] = True
            if i + 1 < n:
                leader[i + 1] = True
    starts = [i for i in range(n) if leader[i]]
    block_of = [0] * n
    ends = [*starts[1:], n]
    masks = []
    for b, (s, e) in enumerate(zip(starts, ends)):
        for i in range(s, e):
            block_of[i] = b
        masks.append(((1 << e) - 1) ^ ((1 << s) - 1))
    # a block's successors: those of its last instruction, plus handlers any instruction reaches
    bsucc = [
        sorted({block_of[t] for i in range(s, e) for t in succ[i] if t != i + 1 or i + 1 == e})
        for s, e in zip(starts, ends)
    ]
    breach = [0] * len(starts)
    changed = True
    while changed:
        changed = False
        for b in range(len(starts) - 1, -1, -1):
            r = 0
            for s in bsucc[b]:
                r |= masks[s] | (0 if masks[s] & mandatory else breach[s])
            if r != breach[b]:
                breach[b] = r
                changed = True
    reach = [0] * n
    for b, (s, e) in enumerate(zip(starts, ends)):
        for i in range(s, e):
            reach[i] = (((1 << e) - 1) ^ ((1 << (i + 1)) - 1)) | breach[b]
    return reach
