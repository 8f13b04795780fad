"""Tables that fit the width they are given, for every text output (analyze, info, diff, ...).

The rules (issue 28): numbers never wrap; when a table is too wide its headers first take their
short labels (a legend under the table says what they mean), then columns marked optional are
dropped, then secondary names (shapes) shrink, and only then are names cut, in the middle, and
so that different names never read the same. Text from a trace (event names, file names) goes
through ``printable`` first: control characters and escape sequences never reach the terminal.

``output_width`` picks the width: a terminal's own, ``$COLUMNS`` when set, else (a pipe or a
file) a wide one so tables keep their natural width instead of rich's 80-column fallback.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from neuron_explorer.trace.printable import printable as _printable

ELLIPSIS = "…"
#: The width text output is laid out for when it goes to a pipe or a file and $COLUMNS is unset:
#: wide enough for every table's natural width (names up to ``NAME_CAP``).
PIPE_WIDTH = 200
#: The longest name shown whole however wide the output.
NAME_CAP = 120
#: Names are cut to this width before optional columns are dropped, and never below
#: ``NAME_FLOOR`` characters.
NAME_COMFORT = 36
NAME_FLOOR = 16
SHAPE_FLOOR = 16

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: Any) -> str:
    """``text`` safe to print on a terminal (``trace.printable.printable``: control characters,
    escape sequences and direction overrides written as escapes); None prints as nothing."""
    return "" if text is None else _printable(text)


#: Prose (verdicts, findings) in a pipe or a file wraps here; tables take their own width.
PIPE_PROSE_WIDTH = 100


def make_console(out: IO[str] | None = None, width: int | None = None) -> Any:
    """A rich console for text output: ``width`` when given, else the terminal's, ``$COLUMNS``,
    or for a pipe prose wrapped at ``PIPE_PROSE_WIDTH`` and tables up to ``PIPE_WIDTH`` wide
    (their natural width) instead of rich's 80-column fallback."""
    from rich.console import Console
    from rich.table import Table

    chosen = width or output_width(out)
    piped = width is None and chosen == PIPE_WIDTH

    class _Console(Console):
        prose_width = PIPE_PROSE_WIDTH if piped else None

        def print(self, *objects: Any, width: int | None = None, **kwargs: Any) -> None:  # type: ignore[override]
            if width is None and self.prose_width and not any(isinstance(o, Table) for o in objects):
                width = self.prose_width
            super().print(*objects, width=width, **kwargs)

        def on_broken_pipe(self) -> None:
            # rich would exit with status 1 here; ``cli.main`` ends a closed pipe quietly
            # with the shell's status for it instead
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")

    return _Console(file=out, width=chosen, highlight=False, soft_wrap=False, emoji=False)


#: A space that keeps a number with the word after it ("7.54 ms", "250 kernels", "step 6 (+265%)")
_GLUED = re.compile(r"(?<=\d) (?=[^\s\d][^\s]{0,9}(?:\s|$))")
#: Written into prose to keep two words on one line ("data_loading_ns" and its value)
KEEP = "\u00a0"


def wrap_prose(text: Any, width: int, hang: int = 0) -> list[Any]:
    """``text`` (a rich ``Text``, styles kept) in lines of ``width``, broken only at spaces that
    do not join a number to the word after it, nor ``KEEP`` (rich would break at any space and
    print "8.22" and "µs" on two lines); continuation lines are indented ``hang`` spaces. A
    word longer than the width (a templated kernel name, a path) is broken inside (``_fold``):
    no line is wider than ``width``, and nothing of the name is cut."""
    from rich.text import Text

    plain = text.plain
    glued = {m.start() for m in _GLUED.finditer(plain)}
    breaks = [i for i, ch in enumerate(plain) if ch == " " and i not in glued]
    lines: list[tuple[int, int]] = []
    start, last = 0, None
    for b in [*breaks, len(plain)]:
        room = width - (hang if lines else 0)
        if b - start > room and last is not None and last > start:
            lines.append((start, last))
            start = last + 1
        last = b
    lines.append((start, len(plain)))
    lines = [
        piece
        for k, (s, e) in enumerate(lines)
        for piece in _fold(plain, s, e, width - (hang if k else 0), width - hang)
    ]
    out = []
    for k, (s, e) in enumerate(lines):
        piece = text[s:e]
        piece = Text(piece.plain.replace(KEEP, " "), style=piece.style, spans=piece.spans, end="")
        out.append(Text(" " * hang) + piece if k else piece)
    return out


#: Where a word longer than a line (a templated kernel name, a path) may be broken: after these.
_FOLD_AFTER = "(<,:/_>)."


def _fold(plain: str, s: int, e: int, first: int, rest: int) -> list[tuple[int, int]]:
    """The line ``plain[s:e]`` as pieces of at most ``first`` characters, then ``rest`` (the
    continuation lines' room; each at least 20): a word longer than the line is broken after
    the last ``_FOLD_AFTER`` character that fits, else at the width, so the whole name is
    printed, on two or more lines, and none is wider."""
    room = max(first, 20)
    out = []
    while e - s > room:
        cut = max((s + i + 1 for i, ch in enumerate(plain[s : s + room]) if ch in _FOLD_AFTER), default=s + room)
        if cut - s < room // 2:  # a break point far back would leave a short line: fold at the width
            cut = s + room
        out.append((s, cut))
        s = cut
        room = max(rest, 20)
    out.append((s, e))
    return out


def print_prose(console: Any, text: Any, hang: int = 0) -> None:
    """``text`` wrapped by ``wrap_prose`` at the console's prose width and printed line by line."""
    for line in wrap_prose(text, prose_width(console), hang):
        console.print(line, crop=False, overflow="ignore")


def table_width(console: Any) -> int:
    """The width tables may take on ``console`` (wider than its prose in a pipe)."""
    return int(console.width)


def prose_width(console: Any) -> int:
    """The width prose wraps at on ``console``."""
    return int(getattr(console, "prose_width", None) or console.width)


def output_width(out: IO[str] | None = None) -> int | None:
    """The width to lay text out for: None (rich asks the terminal) on a terminal, ``$COLUMNS``
    when set, else ``PIPE_WIDTH``."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = out
    if stream is None:
        import sys

        stream = sys.stdout
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):
        pass
    return PIPE_WIDTH


def text_width(out: IO[str] | None = None) -> int:
    """``output_width`` as a number: a terminal's own columns where that says None."""
    width = output_width(out)
    if width is not None:
        return width
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


@dataclass
class Column:
    """One column. ``kind``: ``name`` (cut in the middle, last), ``shape`` (a secondary name:
    shrunk before names are cut), ``text`` (short words, never cut) or ``num`` (right-aligned,
    never cut). ``short`` is the header used when the full one does not fit (listed in the
    legend with ``meaning``); ``drop`` > 0 marks a column that may be left out, highest first."""

    label: str
    kind: str = "num"
    short: str | None = None
    meaning: str | None = None
    drop: int = 0

    @property
    def right(self) -> bool:
        return self.kind == "num"


@dataclass
class Fitted:
    columns: list[Column]
    headers: list[str]
    rows: list[list[str]]
    widths: list[int]
    legend: str
    dropped: list[str]


def middle(text: str, width: int, head: int | None = None) -> str:
    """``text`` in at most ``width`` characters, cut in the middle (``head`` characters kept at
    the start, default two thirds)."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    h = (keep * 2) // 3 if head is None else max(0, min(head, keep))
    t = keep - h
    return text[:h] + ELLIPSIS + (text[len(text) - t :] if t else "")


def distinct(names: Sequence[str], width: int, shorten: Callable[[str, int], str] | None = None) -> list[str]:
    """Labels of at most ``width`` characters for ``names``, different wherever the names are
    different: ``shorten`` (default: cut in the middle) first, then, for names that would read
    the same, the cut moves to show where they differ, and as a last resort a ``~N`` suffix."""
    full = [printable(n) for n in names]
    labels = [printable(shorten(n, width)) if shorten else middle(f, width) for n, f in zip(names, full)]
    labels = [lab if len(lab) <= width else middle(lab, width) for lab in labels]
    # names that read the same are cut again together; names whose new cuts read like another
    # group's join that group (union-find), so two groups cannot trade labels for ever
    parent = list(range(len(names)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for _ in range(6):
        groups: dict[str, list[int]] = {}
        for i, lab in enumerate(labels):
            groups.setdefault(lab, []).append(i)
        clashes = [ix for ix in groups.values() if len({full[i] for i in ix}) > 1]
        if not clashes:
            return labels
        for ix in clashes:
            for i in ix[1:]:
                parent[root(i)] = root(ix[0])
        components: dict[int, list[int]] = {}
        for ix in clashes:
            for i in ix:
                components.setdefault(root(i), [])
        for i in range(len(names)):
            if root(i) in components:
                components[root(i)].append(i)
        for ix in components.values():
            for i, lab in zip(ix, _distinguishing_cut([full[i] for i in ix], width, set())):
                labels[i] = lab
    # still clashing (names differing only beyond what fits): number them, one number per name
    owners: dict[str, set[str]] = {}
    for lab, f in zip(labels, full):
        owners.setdefault(lab, set()).add(f)
    tags: dict[str, str] = {}
    counters: dict[str, int] = {}
    out = []
    for lab, f in zip(labels, full):
        if len(owners[lab]) > 1:
            if f not in tags:
                base = middle(f, max(width - 3, 1))
                counters[base] = counters.get(base, 0) + 1
                tags[f] = f"{base}~{counters[base]}"
            lab = tags[f]
        out.append(lab)
    return out


def _distinguishing_cut(texts: list[str], width: int, taken: set[str]) -> list[str]:
    """Cuts of ``texts`` that differ from each other. What the names share at both ends is cut
    down so the part where they differ shows (``Kernel<cutlass_80_…256x64_16x4_nn…(Params)``);
    where that part is too long, the cut point of a plain middle cut moves until they differ."""
    texts = list(texts)
    uniq = len(set(texts))
    prefix = _common_prefix(texts)
    suffix = _common_prefix([t[::-1] for t in texts])
    cores = []
    for t in texts:
        if len(t) <= width:
            cores.append(t)
            continue
        cs = min(suffix, len(t) - prefix)
        core = t[prefix : len(t) - cs]
        room = width - len(core) - 2
        if room < 2:
            break
        head = min(prefix, (room * 2) // 3)
        tail = min(cs, room - head)
        head = min(prefix, room - tail)
        left = t[:head] + (ELLIPSIS if head < prefix else "")
        right = (ELLIPSIS if tail < cs else "") + (t[len(t) - tail :] if tail else "")
        cores.append(left + core + right)
    else:
        if len(set(cores)) == uniq and all(len(c) <= width for c in cores):
            return cores
    keep = max(width - 1, 1)
    for h in [*range((keep * 2) // 3, keep + 1), *range((keep * 2) // 3 - 1, -1, -1)]:
        cut = [middle(t, width, h) for t in texts]
        if len(set(cut)) == uniq:
            return cut
    return [middle(t, width) for t in texts]


def _common_prefix(texts: list[str]) -> int:
    first = min(texts)
    last = max(texts)
    return _first_diff(first, last)


def _first_diff(a: str, b: str) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def overhead(n: int) -> int:
    """Characters rich's boxed table spends around ``n`` columns (a bar and a space each side
    of every cell, one closing bar)."""
    return 3 * n + 1


def compact_overhead(n: int) -> int:
    """Characters an unboxed table (``box=None``, no edge padding) spends between ``n`` columns."""
    return 2 * max(n - 1, 0)


def fit(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    width: int,
    shorten: dict[int, Callable[[str, int], str]] | None = None,
    cap: int = NAME_CAP,
    gap: Callable[[int], int] = overhead,
) -> Fitted:
    """Lay ``rows`` (cells as strings) out in ``width`` characters following the module's rules.
    ``shorten`` maps a name column's index to its own shortener (kernel names); ``gap(n)`` is
    what the layout spends between and around ``n`` columns."""
    cols = list(columns)
    cells = [[printable(c) for c in r] for r in rows]
    raw = [list(r) for r in rows]
    idx = list(range(len(cols)))
    use_short = [False] * len(cols)

    def header(i: int) -> str:
        c = cols[i]
        return (c.short or c.label) if use_short[i] else c.label

    def natural(i: int) -> int:
        vals = [len(r[i]) for r in cells]
        body = max(vals, default=0)
        if cols[i].kind in ("name", "shape"):
            body = min(body, cap)
        return max(len(header(i)), body)

    def min_width(i: int) -> int:
        c = cols[i]
        if c.kind == "name":
            return max(len(header(i)), min(NAME_FLOOR, natural(i)))
        if c.kind == "shape":
            return max(len(header(i)), min(SHAPE_FLOOR, natural(i)))
        return natural(i)

    def total(kept: list[int], widths: dict[int, int]) -> int:
        return sum(widths[i] for i in kept) + gap(len(kept))

    # a column empty on every row says nothing
    kept = [i for i in idx if not rows or any(r[i] for r in cells)]
    widths = {i: natural(i) for i in idx}
    # 1. short headers
    if total(kept, widths) > width:
        for i in idx:
            if cols[i].short:
                use_short[i] = True
        widths = {i: natural(i) for i in idx}

    # 2. shapes shrink to their floor and names to a comfortable width, 3. optional columns are
    # dropped, 4. only then are names cut further, down to their floor
    def squeeze(kept: list[int], name_floor: int) -> dict[int, int]:
        w = {i: natural(i) for i in kept}
        over = total(kept, w) - width
        for kind, floor_of in (
            ("shape", min_width),
            ("name", lambda i: max(min_width(i), min(name_floor, natural(i)))),
        ):
            flex = [i for i in kept if cols[i].kind == kind]
            while over > 0 and flex:
                widest = max(flex, key=lambda i: w[i])
                floor = floor_of(widest)
                if w[widest] <= floor:
                    flex.remove(widest)
                    continue
                others = [w[i] for i in flex if i != widest]
                target = max(floor, max(others, default=floor), w[widest] - over)
                if target >= w[widest]:
                    target = w[widest] - 1
                over -= w[widest] - target
                w[widest] = target
        return w

    widths = squeeze(kept, NAME_COMFORT)
    dropped: list[str] = []
    while total(kept, widths) > width:
        optional = [i for i in kept if cols[i].drop]
        if not optional:
            break
        victim = max(optional, key=lambda i: (cols[i].drop, i))
        kept.remove(victim)
        dropped.append(cols[victim].label)
        widths = squeeze(kept, NAME_COMFORT)
    if total(kept, widths) > width:
        widths = squeeze(kept, NAME_FLOOR)

    out_rows = [[r[i] for i in kept] for r in cells]
    for j, i in enumerate(kept):
        if cols[i].kind in ("name", "shape"):
            fn = (shorten or {}).get(i)
            values = distinct([raw_r[i] for raw_r in raw], widths[i], fn)
            for r, v in zip(out_rows, values):
                r[j] = v
    legend_items = [
        f"{cols[i].short} = {cols[i].meaning or cols[i].label}"
        for i in kept
        if use_short[i] and cols[i].short and cols[i].short != cols[i].label
    ]
    return Fitted(
        columns=[cols[i] for i in kept],
        headers=[header(i) for i in kept],
        rows=out_rows,
        widths=[widths[i] for i in kept],
        legend=("; ".join(legend_items)),
        dropped=dropped,
    )


def rich_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    width: int,
    shorten: dict[int, Callable[[str, int], str]] | None = None,
) -> tuple[Any, str]:
    """A rich ``Table`` of ``rows`` fitted to ``width`` and the legend line for it ("" when the
    headers are the full ones). Every cell is plain text (no rich markup) on one line."""
    from rich.table import Table
    from rich.text import Text

    f = fit(columns, rows, width, shorten)
    boxed = sum(f.widths) + overhead(len(f.widths)) <= width
    if not boxed:  # no room for the borders: the same columns with one space between, no box
        f = fit(columns, rows, width, shorten, gap=compact_overhead)
    t = (
        Table(title=Text(title), title_justify="left")
        if boxed
        else Table(title=Text(title), title_justify="left", box=None, show_edge=False, pad_edge=False, padding=(0, 1))
    )
    justify = ["right" if c.right else "left" for c in f.columns]
    for h, w, j in zip(f.headers, f.widths, justify):
        t.add_column(
            Text(h, justify=j),  # type: ignore[arg-type]
            justify=j,  # type: ignore[arg-type]
            no_wrap=True,
            overflow="ellipsis",  # cells are cut to fit already ("ignore" would also drop justify)
            min_width=w,
            max_width=w,
        )
    for r in f.rows:
        t.add_row(*(Text(c, justify=j) for c, j in zip(r, justify)))  # type: ignore[arg-type]
    notes = []
    if f.legend:
        notes.append(f.legend)
    if f.dropped:
        notes.append(f"left out to fit {width} columns: {', '.join(f.dropped)}")
    return t, "; ".join(notes)


def print_table(
    console: Any,
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    shorten: dict[int, Callable[[str, int], str]] | None = None,
) -> None:
    """``rich_table`` at the console's width, printed with its legend (dim, under it)."""
    from rich.text import Text

    t, legend = rich_table(title, columns, rows, table_width(console), shorten)
    console.print(t, crop=False)
    if legend:
        console.print(Text(legend, style="dim"))


def plain_table(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Any]],
    width: int,
    indent: str = "  ",
    shorten: dict[int, Callable[[str, int], str]] | None = None,
) -> list[str]:
    """The same fitted table as plain text lines (two spaces between columns), for renderers
    that print without rich (``diff``); the legend, when there is one, is the last line."""
    sep = 2
    f = fit(columns, rows, width, shorten, gap=lambda n: len(indent) + sep * max(n - 1, 0))

    def line(cells: list[str]) -> str:
        out = [c.rjust(w) if col.right else c.ljust(w) for c, w, col in zip(cells, f.widths, f.columns)]
        return (indent + (" " * sep).join(out)).rstrip()

    lines = [line(f.headers), *(line(r) for r in f.rows)]
    notes = [
        x for x in (f.legend, f"left out to fit {width} columns: {', '.join(f.dropped)}" if f.dropped else "") if x
    ]
    if notes:
        import textwrap

        lines += textwrap.wrap("; ".join(notes), width=max(width, 40), initial_indent=indent, subsequent_indent=indent)
    return lines
