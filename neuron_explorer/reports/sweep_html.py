"""The HTML page of ``neuron-explorer compare --html``: a chart and the table, self-contained.

The chart is inline SVG (no script, no network): the Y column against the X column, one point
per trace, joined in X order. By default Y is the kernel time (Neuron) or the span (other
traces) and X the size the file names carry (m*k*n, else the sequence length, batch or one
matrix size; analyzers/sweep.py), else the row order.
"""

from __future__ import annotations

import html
import math

import pandas as pd

W, H, PAD = 760, 360, 60


def _pick(df: pd.DataFrame, y: str | None, x: str | None) -> tuple[str, str | None, pd.DataFrame]:
    from neuron_explorer.analyzers.sweep import CompareError

    data = df.copy()
    if y is None:
        y = next(
            (c for c in ("kernel_time_ns", "total_time_ns", "span_ns") if c in data and data[c].notna().any()), None
        )
        if y is None:
            raise CompareError("--html: no kernel_time_ns, total_time_ns or span_ns column to chart")
    if x is None:
        from neuron_explorer.analyzers.sweep import chart_axis

        x = chart_axis(data)
        if x == "m*k*n":
            data["m*k*n"] = data["m"] * data["k"] * data["n"]
    for c in (y, x):
        if c is not None and c not in data:
            raise CompareError(f"--chart: no column {c!r}")
    return y, x, data


def chart_svg(df: pd.DataFrame, y: str | None = None, x: str | None = None) -> str:
    y, x, data = _pick(df, y, x)
    ys = pd.to_numeric(data[y], errors="coerce")
    xs = pd.to_numeric(data[x], errors="coerce") if x else pd.Series(range(len(data)), index=data.index, dtype=float)
    ok = ys.notna() & xs.notna()
    pts = sorted(zip(xs[ok].tolist(), ys[ok].tolist(), data.loc[ok, "file"].astype(str).tolist()))
    if not pts:
        return "<p>No values to chart.</p>"
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y1 = max(p[1] for p in pts) or 1.0

    def sx(v: float) -> float:
        return PAD + (W - 2 * PAD) * ((v - x0) / (x1 - x0) if x1 > x0 else 0.5)

    def sy(v: float) -> float:
        return H - PAD - (H - 2 * PAD) * (v / y1)

    poly = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b, _ in pts)
    dots = "".join(
        f'<circle cx="{sx(a):.1f}" cy="{sy(b):.1f}" r="4"><title>{html.escape(f)}: {b:g}</title></circle>'
        for a, b, f in pts
    )
    ticks = "".join(
        f'<text x="{PAD - 6}" y="{sy(y1 * i / 4) + 4:.1f}" text-anchor="end">{_short(y1 * i / 4)}</text>'
        for i in range(5)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
        f'aria-label="{html.escape(y)} by {html.escape(x or "row")}">'
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#888"/>'
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#888"/>'
        f'<polyline points="{poly}" fill="none" stroke="#36c" stroke-width="2"/>'
        f'<g fill="#36c">{dots}</g><g font-size="11">{ticks}</g>'
        f'<text x="{W / 2}" y="{H - 15}" text-anchor="middle">{html.escape(x or "row")} '
        f"({_short(x0)} to {_short(x1)})</text>"
        f'<text x="15" y="{H / 2}" transform="rotate(-90 15 {H / 2})" text-anchor="middle">{html.escape(y)}</text>'
        "</svg>"
    )


def _short(v: float) -> str:
    if v == 0 or not math.isfinite(v):
        return "0"
    return f"{v:.3g}"


def render(df: pd.DataFrame, y: str | None = None, x: str | None = None) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{'' if pd.isna(v) else html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in df.itertuples(index=False)
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>neuron-explorer compare</title>"
        "<style>body{font-family:sans-serif}table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style></head><body>"
        f"<h1>{len(df)} traces</h1>{chart_svg(df, y, x)}<table><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></body></html>\n"
    )
