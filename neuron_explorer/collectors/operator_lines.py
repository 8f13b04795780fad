"""Exact lines of operator syntax, from bytecode: which line of a user function issued each op
that torch recorded with no Python call of its own (``a @ b``, ``x[i]``, ``x[i] = y``,
``a + b``, ``x += y``, ``-x``, ``a < b``, ``x.T``, ``if t:``).

torch's Python tracer records calls, not operators: an op issued by a ``BINARY_OP``
instruction sits directly under its function's frame in the event tree, between the recorded
calls (the *anchors*, each carrying the line that made it). This module places those ops:

1. Per code object, once (``CodeFlow``, cached per file, function and line): the instructions
   in order with their lines (``dis``, ``co_positions``); which ops each can issue (``+``:
   ``aten::add``; a subscript: ``aten::select``/``slice``/``index``/...; and, for any operator,
   the conversions of a non-tensor operand: ``aten::lift_fresh``, ``aten::to``, ...); which can
   make a Python call (an anchor), and which cannot (loads, stores and stack shuffles of local
   variables, forward jumps); and the control-flow graph's reachability (basic blocks,
   loops, exception handlers) as bitsets.
2. Per frame (``OperatorLines.resolve``): its children in time order become tokens, an anchor
   (the calling line) or an op (its name). A forward pass keeps, for each token, the
   instructions that can have issued it after the tokens before it; a backward pass keeps those
   from which the rest of the frame can still happen, up to a return or a yield. An op whose
   remaining instructions all lie on one line is at that line (``src_precision`` 'line').

Sound under this model: the path the program really took satisfies every constraint, so the
true instruction is always a candidate, and one candidate line is the true line. An instruction
may issue several ops (``x[:T, :T]``: two slices) or none (``d["k"]`` on a dict), so both are
allowed. Several candidate lines (a loop whose body and exit both multiply, two branches) leave
the op at its function (``src_precision`` 'function'), counted in ``stats`` as ``ambiguous``.
Op names no operator issues are skipped (they stay at the function, and constrain nothing); a
frame whose tokens contradict its code (its source edited since it ran, a call this model
cannot see) keeps function-level lines from the contradiction to the next anchor (``unmatched``).
Not modelled: a Python finalizer or signal handler run by an instruction listed as making no
call (it would show as an anchor there).
"""

from __future__ import annotations

import dis
import linecache
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import CodeType

#: A frame's children as tokens: an anchor's calling line (int) or an op's name (str).
Token = int | str

# ------------------------------------------------------------------ what instructions issue
_BINARY: dict[str, tuple[str, ...]] = {
    "+": ("add",),
    "-": ("sub", "rsub"),
    "*": ("mul",),
    "/": ("div", "reciprocal", "true_divide"),
    "//": ("floor_divide", "div"),
    "%": ("remainder", "fmod"),
    "**": ("pow",),
    "@": ("matmul",),
    "&": ("__and__", "bitwise_and", "logical_and"),
    "|": ("__or__", "bitwise_or", "logical_or"),
    "^": ("__xor__", "bitwise_xor", "logical_xor"),
    "<<": ("__lshift__", "bitwise_left_shift"),
    ">>": ("__rshift__", "bitwise_right_shift"),
}
#: Python 3.10's opcodes for the same operators (3.11 folded them into BINARY_OP).
_OLD_BINARY = {
    "ADD": "+", "SUBTRACT": "-", "MULTIPLY": "*", "TRUE_DIVIDE": "/", "FLOOR_DIVIDE": "//", "MODULO": "%",
    "POWER": "**", "MATRIX_MULTIPLY": "@", "AND": "&", "OR": "|", "XOR": "^", "LSHIFT": "<<", "RSHIFT": ">>",
}  # fmt: skip
_GET = ("select", "slice", "index", "alias", "unsqueeze", "view", "expand", "narrow", "squeeze")
_SET = (*_GET, "copy_", "fill_", "index_put_", "_index_put_impl_", "masked_fill_", "index_fill_", "masked_scatter_")
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
_TRUTH = ("is_nonzero",)
_UNARY = {"UNARY_NEGATIVE": ("neg",), "UNARY_POSITIVE": ("positive",), "UNARY_INVERT": ("bitwise_not",)}
#: Tensor attributes that are ops (a C getter, no Python call): ``x.T`` is ``aten::numpy_T``.
_ATTRIBUTES = {
    "T": ("numpy_T", "permute"),
    "mT": ("mT", "transpose"),
    "H": ("matrix_H", "numpy_T", "conj"),
    "mH": ("mH", "adjoint"),
    "real": ("real", "view_as_real", "select"),
    "imag": ("imag",),
}
#: What a subscript issues to read a 0-dim tensor index as a number (``__index__``).
_INDEX = ("item", "_local_scalar_dense", "detach_")
#: What any operator may issue before or after its own op to convert an operand (a Python
#: list or number): measured on torch 2.13.
_CONVERSIONS = ("empty", "to", "_to_copy", "lift_fresh", "lift", "detach",
                "scalar_tensor", "resolve_conj", "resolve_neg")  # fmt: skip

#: Instructions that never make a Python call: loads, stores and stack shuffles of locals and
#: constants, forward jumps. Every other instruction may (an anchor can come from it).
_QUIET = frozenset(
    [
        "PRECALL",
        "RETURN_VALUE",
        "RETURN_CONST",
        "NOP",
        "RESUME",
        "CACHE",
        "EXTENDED_ARG",
        "LOAD_FAST",
        "LOAD_FAST_CHECK",
        "LOAD_FAST_AND_CLEAR",
        "LOAD_FAST_LOAD_FAST",
        "LOAD_FAST_BORROW",
        "LOAD_FAST_BORROW_LOAD_FAST_BORROW",
        "STORE_FAST",
        "STORE_FAST_LOAD_FAST",
        "STORE_FAST_STORE_FAST",
        "STORE_FAST_MAYBE_NULL",
        "LOAD_CONST",
        "LOAD_SMALL_INT",
        "PUSH_NULL",
        "COPY",
        "SWAP",
        "DUP_TOP",
        "DUP_TOP_TWO",
        "ROT_TWO",
        "ROT_THREE",
        "ROT_FOUR",
        "ROT_N",
        "LOAD_DEREF",
        "STORE_DEREF",
        "LOAD_CLOSURE",
        "MAKE_CELL",
        "COPY_FREE_VARS",
        "JUMP_FORWARD",
        "KW_NAMES",
        "IS_OP",
        "NOT_TAKEN",
        "POP_JUMP_IF_NONE",
        "POP_JUMP_IF_NOT_NONE",
        "POP_JUMP_FORWARD_IF_NONE",
        "POP_JUMP_FORWARD_IF_NOT_NONE",
        "LOAD_GLOBAL",
        "LOAD_NAME",
    ]
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


def _aten(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(f"aten::{n}" for n in names)


def _binary_names(symbol: str) -> tuple[str, ...]:
    inplace = symbol.endswith("=") and symbol not in ("==", "!=", "<=", ">=")
    base = _BINARY.get(symbol[:-1] if inplace else symbol, ())
    if not inplace:
        return base
    dunder = [f"__i{n[2:]}" for n in base if n.startswith("__")]
    return (*base, *(f"{n}_" for n in base if not n.startswith("__")), *dunder)


def issued_ops(ins: dis.Instruction) -> tuple[str, ...]:
    """The ops (``aten::...``) this instruction can issue on tensors; () for none."""
    op = ins.opname
    names: tuple[str, ...] = ()
    operands = True  # an operator whose operands may need converting to tensors first
    if op == "BINARY_OP":
        names = (*_GET, *_INDEX) if ins.argrepr == "[]" else _binary_names(ins.argrepr)  # 3.14: "[]" subscripts
    elif op.startswith(("BINARY_", "INPLACE_")) and op.split("_", 1)[1] in _OLD_BINARY:
        symbol = _OLD_BINARY[op.split("_", 1)[1]]
        names = _binary_names(symbol + "=" if op.startswith("INPLACE_") else symbol)
    elif op in ("BINARY_SUBSCR", "BINARY_SLICE"):
        names = (*_GET, *_INDEX)
    elif op in ("STORE_SUBSCR", "STORE_SLICE"):
        names = (*_SET, *_INDEX)
    elif op == "COMPARE_OP":
        names = _COMPARE
    elif op in _UNARY:
        names, operands = _UNARY[op], False
    elif op in ("UNARY_NOT", "TO_BOOL") or ("JUMP" in op and ("IF_TRUE" in op or "IF_FALSE" in op)):
        names, operands = _TRUTH, False
    elif op == "LOAD_ATTR" and isinstance(ins.argval, str) and ins.argval in _ATTRIBUTES:
        names, operands = _ATTRIBUTES[ins.argval], False
    if not names:
        return ()
    return _aten((*names, *_CONVERSIONS)) if operands else _aten(names)


#: What a call that records no call event can issue: a call of a type (``float(t)``,
#: ``int(t)``, ``bool(t)``, ``range(t)``) converts a tensor to a number. (Other C callables that
#: call torch functions themselves, ``list(map(torch.add, xs, ys))``, are not modelled.)
TYPE_CALL_OPS: frozenset[str] = frozenset(_aten((*_TRUTH, *_INDEX, *_CONVERSIONS)))

#: Every op name an operator can issue: other ops under a user frame are not tokens.
KNOWN_OPS: frozenset[str] = frozenset(
    _aten(
        (
            *(n for s in _BINARY for n in _binary_names(s) + _binary_names(s + "=")),
            *_SET, *_COMPARE, *_TRUTH, *(n for v in _UNARY.values() for n in v),
            *(n for v in _ATTRIBUTES.values() for n in v), *_INDEX, *_CONVERSIONS,
        )
    )
)  # fmt: skip


# ------------------------------------------------------------------ one code object
def staying(before: Token | None, token: Token) -> bool:
    """Whether ``token`` may come from the instruction that made ``before``: one operator can
    issue several ops (``x[:T, :T]``: two slices) and one instruction can call several special
    methods (a class's ``__new__`` and ``__init__``), but a call instruction makes one call, and
    an instruction either makes a recorded call or issues ops directly (an operator, or a call
    of a type such as ``float(t)``), not both."""
    k = _kind(before)
    return k == _kind(token) and k in (_OP, PY_SPECIAL)


def _bits(mask: int) -> Iterable[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


#: Anchor kinds (a token is ``line * 4 + kind``): a Python call of a plain function (one per
#: instruction), a Python call of a special method (``__getattr__``, ``__init__``: an
#: instruction can make several), a C function call (its call instruction's one call).
PY_CALL, PY_SPECIAL, C_CALL = 1, 2, 3
_OP = 0


def anchor(line: int, kind: int) -> int:
    """The token of a recorded call of ``kind`` made at ``line``."""
    return line * 4 + kind


def _kind(token: Token | None) -> int:
    if token is None:
        return -1
    return _OP if isinstance(token, str) else token & 3


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
        same instruction (see ``staying``)."""
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


# ------------------------------------------------------------------ one capture
@dataclass
class OperatorLines:
    """Places a capture's operator-syntax ops on lines; source files are compiled and code
    objects analysed once each. ``stats`` counts the op tokens seen and what became of them."""

    stats: dict[str, int] = field(
        default_factory=lambda: {"frames": 0, "ops": 0, "exact": 0, "ambiguous": 0, "unmatched": 0, "code_objects": 0}
    )
    _codes: dict[str, list[CodeType] | None] = field(default_factory=dict)
    _flows: dict[tuple[str, str, int], CodeFlow | None] = field(default_factory=dict)

    def flow(self, path: str, func: str, line: int) -> CodeFlow | None:
        """The analysed code object of function ``func`` in ``path`` whose frame reported
        ``line`` (its def line, or where it resumed); None when the source cannot be read."""
        key = (path, func, line)
        if key in self._flows:
            return self._flows[key]
        code = self._find(path, func, line)
        flow = None
        if code is not None:
            try:
                flow = analyse(code)
                self.stats["code_objects"] += 1
            except Exception:  # an interpreter whose bytecode this reader does not know
                flow = None
        self._flows[key] = flow
        return flow

    def _find(self, path: str, func: str, line: int) -> CodeType | None:
        codes = self._codes.get(path, ())
        if path not in self._codes:
            codes = self._codes[path] = _compile(path)
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
        """The exact line of each op token (-1: ambiguous, unmatched, or an anchor)."""
        n = len(tokens)
        fwd = [0] * n
        restart = [False] * n
        cur, prev = start, None
        for k, tok in enumerate(tokens):
            nxt = flow.forward(cur, staying(prev, tok), tok) if cur else 0
            if not nxt and not isinstance(tok, str):
                nxt = flow.candidates(tok)  # the anchor contradicts what came before: start over from it
                restart[k] = True
            fwd[k] = cur = nxt
            prev = tok
        out = [-1] * n
        after, stay = flow.exits, True
        stats = self.stats
        for k in range(n - 1, -1, -1):
            tok, f = tokens[k], fwd[k]
            if f:
                b = flow.backward(after, stay, tok) & f
                if not b:  # the frame did not end the way the code says (an exception left it)
                    b = f
            else:
                b = 0
            if isinstance(tok, str):
                stats["ops"] += 1
                line = flow.line_of(b) if b else -1
                out[k] = line
                stats["exact" if line >= 0 else "ambiguous" if b else "unmatched"] += 1
            after = b if b and not restart[k] else flow.everything
            stay = staying(tokens[k - 1], tok) if k else False
        stats["frames"] += 1
        return out


def _compile(path: str) -> list[CodeType] | None:
    """Every code object of a source file (the module's and all nested ones), compiled by this
    interpreter, as the profiled program was; None when the file cannot be read or compiled."""
    try:
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
