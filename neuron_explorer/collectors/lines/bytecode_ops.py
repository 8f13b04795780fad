"""Which ops each bytecode instruction can issue on tensors, with no Python call of its own.

Measured on torch 2.13 (one capture per operator): ``a + b`` issues ``aten::add``, ``x[i]``
``aten::select``, ``x[:T, :T]`` two ``aten::slice``, ``x[idx] = y`` ``aten::index_put_``,
``~m`` ``aten::bitwise_not``, ``x.T`` ``aten::numpy_T``, ``if t:`` ``aten::is_nonzero``; an
operator whose operand is a Python list or number first converts it (``aten::lift_fresh``,
``aten::to``, ...). Operators torch implements in Python (``a ** b``, ``a // b``, ``1 - a``)
make a Python call and need no table. ``operator_lines`` reads these tables.
"""

from __future__ import annotations

import dis
from collections.abc import Iterable

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
    elif op == "CALL_INTRINSIC_1" and "UNARY_POSITIVE" in ins.argrepr:  # 3.12+: ``+x``
        names, operands = _UNARY["UNARY_POSITIVE"], False
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
