"""Every figure shown to people is formatted here, by its unit: one function for the text,
markdown, HTML (pre-formatted in Python), TUI and MCP outputs.

Units are the strings metrics and fields carry (``{"value": v, "unit": u}``, ``fields.parquet``):
``ns`` (durations), ``bytes``, ``bytes/s``, ``FLOP/s``/``FLOPs``, ``%`` (0-100, possibly with a
qualifier: ``% of GEMM time``), ``x`` (a ratio) and counts (anything else: ``ops/step``,
``copies``, ``steps``). A count is never shown as a time and a byte total never as seconds.
"""

from __future__ import annotations

import math
from typing import Any

#: The display kind of a unit: how ``format_quantity`` shows a value of it.
TIME, BYTES, BYTE_RATE, FLOPS, PERCENT, RATIO, COUNT = (
    "time",
    "bytes",
    "byte_rate",
    "flops",
    "percent",
    "ratio",
    "count",
)


def unit_kind(unit: str | None) -> str:
    """``"ns"`` -> time, ``"bytes"`` -> bytes, ``"% of wall"`` -> percent, ``"ops/step"`` -> count."""
    u = (unit or "").strip()
    if u in ("ns", "ns/step"):
        return TIME
    if u in ("bytes", "B", "bytes/step"):
        return BYTES
    if u in ("bytes/s", "B/s"):
        return BYTE_RATE
    if u.startswith("FLOP"):
        return FLOPS
    if u.startswith("%"):
        return PERCENT
    if u == "x" or u.startswith("x "):
        return RATIO
    return COUNT


def format_duration(ns: float) -> str:
    """``1_234_000`` -> ``"1.23 ms"``: three significant digits, ns to s."""
    sign, a = ("-" if ns < 0 else ""), abs(float(ns))
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if a >= scale:
            return f"{sign}{_sig(a / scale)} {unit}"
    return f"{sign}{a:.0f} ns"


def format_bytes(b: float) -> str:
    """Binary units: ``248_270_000_000`` -> ``"231 GiB"``."""
    sign, a = ("-" if b < 0 else ""), abs(float(b))
    for unit, scale in (("TiB", 2.0**40), ("GiB", 2.0**30), ("MiB", 2.0**20), ("KiB", 2.0**10)):
        if a >= scale:
            return f"{sign}{_sig(a / scale)} {unit}"
    return f"{sign}{a:.0f} B"


def _si(v: float, unit: str) -> str:
    a = abs(v)
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{_sig(v / scale)} {prefix}{unit}"
    return f"{_sig(v)} {unit}"


def _sig(x: float) -> str:
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}" if a >= 1 or a == 0 else f"{x:.2g}"


def format_count(v: float) -> str:
    """``1378`` -> ``"1,378"``; ``86.25`` -> ``"86.2"``."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"


def format_quantity(value: Any, unit: str | None) -> str:
    """A value shown by its unit (see the module docstring); ``"-"`` for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if not isinstance(value, (int, float)):
        return f"{value} {unit or ''}".strip()
    u = (unit or "").strip()
    kind = unit_kind(u)
    rest = u.split("/", 1)[1] if "/" in u and kind in (TIME, BYTES) else ""
    per = f"/{rest}" if rest else ""
    if kind == TIME:
        return format_duration(value) + per
    if kind == BYTES:
        return format_bytes(value) + per
    if kind == BYTE_RATE:
        return format_bytes(value) + "/s"
    if kind == FLOPS:
        return _si(float(value), u)
    if kind == PERCENT:
        return f"{float(value):.1f}%" + u[1:]
    if kind == RATIO:
        return f"{_sig(float(value))}x" + u[1:]
    return f"{format_count(value)} {u}".strip()


def format_metric(m: dict[str, Any] | None) -> str:
    """A finding metric or threshold ``{"value", "unit"}``."""
    if not isinstance(m, dict):
        return "-" if m is None else str(m)
    return format_quantity(m.get("value"), m.get("unit"))


def format_line_value(src: dict[str, Any]) -> str:
    """What a finding's source line holds, by its unit (``value``/``unit``; older findings: ``ns``)."""
    if "value" in src:
        return format_quantity(src.get("value"), src.get("unit"))
    return format_quantity(src.get("ns"), "ns")
