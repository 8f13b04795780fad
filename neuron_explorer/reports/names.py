"""Kernel names for people: C++ (Itanium ABI) mangled names demangled, and long template names
shortened for chart labels. Every output that shows a kernel name uses these; the mangled name
stays in the data (and in tooltips) so nothing is lost."""

from __future__ import annotations

import re
from functools import lru_cache

ELLIPSIS = "…"


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """``_Z3fooPKc`` -> ``foo(char const*)``; any other name (already readable, or a mangled
    one the demangler cannot read) comes back unchanged."""
    if not name.startswith("_Z"):
        return name
    try:
        from itanium_demangler import parse

        node = parse(name)
    except Exception:  # a malformed or unsupported name: show it as recorded
        return name
    return str(node) if node is not None else name


def display_kernel_name(name: str) -> str:
    """A kernel name as text output shows it: demangled, without the parts every kernel repeats
    (``void``, namespaces, anonymous namespaces); ``short_kernel_name`` cuts it further."""
    text = demangle(name).removeprefix("void ").replace("(anonymous namespace)::", "")
    return _QUALIFIER.sub("", text)


def short_kernel_name(name: str, width: int = 60) -> str:
    """A kernel name in at most ``width`` characters for a chart label. Demangled, then the
    parts that repeat across kernels go first (``void``, namespaces, anonymous namespaces), then
    nested template arguments collapse to ``…`` (deepest first), and only then is the tail cut:
    kernels that differ in their template arguments keep different labels. The full name
    belongs in the tooltip."""
    text = demangle(name)
    if len(text) <= width:
        return text
    text = text.removeprefix("void ").replace("(anonymous namespace)::", "")
    text = _QUALIFIER.sub("", text)
    for keep in (3, 2, 1):
        if len(text) <= width:
            return text
        text = _collapse(text, keep)
    return text if len(text) <= width else text[: width - 1] + ELLIPSIS


_QUALIFIER = re.compile(r"\b(?:[A-Za-z_]\w*::)+(?=[A-Za-z_~])")


def _collapse(text: str, keep: int) -> str:
    """``text`` with the contents of brackets nested deeper than ``keep`` replaced by ``…``."""
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch in "<(":
            if depth <= keep:
                out.append(ch)
            if depth == keep:
                out.append(ELLIPSIS)
            depth += 1
        elif ch in ">)" and depth > 0:
            depth -= 1
            if depth <= keep:
                out.append(ch)
        elif depth <= keep:
            out.append(ch)
    return "".join(out).replace(ELLIPSIS + ELLIPSIS, ELLIPSIS)
