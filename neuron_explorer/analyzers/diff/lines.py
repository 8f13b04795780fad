"""Matching source lines across two versions of the code.

A change that adds a line shifts every line below it, so ``model.py:88`` in the base may be
``model.py:89`` in the new run. When the source file can be read on both sides (``read_lines``,
injected by the caller: analyzers do no I/O), a line is matched by its file, function, text
and the occurrence of that text in the file; otherwise by file and line number.

User files are matched by their last path parts, as few as tell a side's files apart, so runs
from different checkouts (``/ci/a/repo/model.py`` against ``/ci/b/repo/model.py``) match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from neuron_explorer.trace.frames import is_library_path

ReadLines = Callable[[str], "Sequence[str] | None"]


def _parts(path: str) -> list[str]:
    return path.replace("\\", "/").split("/")


def _suffix_length(user: set[str]) -> int:
    """The fewest trailing path parts that tell apart the different user files of one side
    (two paths are the same file when one ends with the other, e.g. relative and absolute)."""
    parts = [_parts(f) for f in user]
    for k in range(1, max((len(p) for p in parts), default=1) + 1):
        groups: dict[tuple[str, ...], list[list[str]]] = {}
        for p in parts:
            groups.setdefault(tuple(p[-k:]), []).append(p)
        if all(all(_same(a, b) for a in g for b in g) for g in groups.values()):
            return k
    return max((len(p) for p in parts), default=1)


def _same(a: list[str], b: list[str]) -> bool:
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return long[len(long) - len(short) :] == short


def file_keys(base_files: set[str], new_files: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Per side, file path -> the key it is matched on: user files by their last path parts
    (as few as tell a side's files apart), library files by their whole path."""
    user_b = {f for f in base_files if not is_library_path(f)}
    user_n = {f for f in new_files if not is_library_path(f)}
    k = max(_suffix_length(user_b), _suffix_length(user_n))

    def keyed(files: set[str], user: set[str]) -> dict[str, str]:
        return {f: ("/".join(_parts(f)[-k:]) if f in user else f) for f in files}

    return keyed(base_files, user_b), keyed(new_files, user_n)


class _Source:
    """Line texts and occurrence numbers of the files of one side, by file key, read once each
    (from the first of the key's paths that can be read: a trace may name one file both by a
    relative and an absolute path)."""

    def __init__(self, read_lines: ReadLines | None, keys: dict[str, str]) -> None:
        self.read_lines = read_lines
        self.paths: dict[str, list[str]] = {}
        for path, key in keys.items():
            self.paths.setdefault(key, []).append(path)
        self.cache: dict[str, tuple[list[str], list[int]] | None] = {}

    def _read(self, key: str) -> Sequence[str] | None:
        for path in sorted(self.paths.get(key, []), key=lambda p: not p.startswith("/")):
            raw = self.read_lines(path) if self.read_lines else None
            if raw is not None:
                return raw
        return None

    def get(self, path: str) -> tuple[list[str], list[int]] | None:
        if path not in self.cache:
            raw = self._read(path)
            if raw is None:
                self.cache[path] = None
            else:
                texts = [t.strip() for t in raw]
                seen: dict[str, int] = {}
                occ = []
                for t in texts:
                    occ.append(seen.get(t, 0))
                    seen[t] = seen.get(t, 0) + 1
                self.cache[path] = (texts, occ)
        return self.cache[path]


def line_keys(
    base: pd.DataFrame, new: pd.DataFrame, read_lines: ReadLines | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """For the distinct (src_file, src_line, src_func) rows of each side: ``line_key`` (equal on
    both sides for the same line of code), ``file_key``, ``text`` ("" when unreadable) and the
    ``label`` it is shown with."""
    fb, fn = file_keys(set(base["src_file"]), set(new["src_file"]))
    src_b, src_n = _Source(read_lines, fb), _Source(read_lines, fn)
    # text matching for a file only when both sides can read it, else the keys could never meet
    readable = {k for k in set(fb.values()) if src_b.get(k) is not None} & {
        k for k in set(fn.values()) if src_n.get(k) is not None
    }

    def keyed(df: pd.DataFrame, keys: dict[str, str], src: _Source) -> pd.DataFrame:
        out = df[["src_file", "src_line", "src_func"]].drop_duplicates(["src_file", "src_line"]).reset_index(drop=True)
        line_key, file_key, text = [], [], []
        for f, ln, func in zip(out["src_file"], out["src_line"], out["src_func"]):
            fk = keys[f]
            got = src.get(fk)
            if got is not None and 0 < ln <= len(got[0]) and got[0][ln - 1] and fk in readable:
                t = got[0][ln - 1]
                line_key.append(f"{fk}\x00{func}\x00{t}\x00{got[1][ln - 1]}")
            else:
                t = got[0][ln - 1] if got is not None and 0 < ln <= len(got[0]) else ""
                line_key.append(f"{fk}\x00{ln}")
            file_key.append(fk)
            text.append(t)
        labels = [line_label(fk, ln, t) for fk, ln, t in zip(file_key, out["src_line"], text)]
        return out.assign(line_key=line_key, file_key=file_key, text=text, label=labels)

    return keyed(base, fb, src_b), keyed(new, fn, src_n)


def line_label(file_key: str, line: int, text: str = "", max_text: int = 60) -> str:
    """``model.py:88 (x.item())``: the file's last two path parts, the line and its code."""
    parts = file_key.replace("\\", "/").split("/")
    short = "/".join(parts[-2:])
    label = f"{short}:{int(line)}"
    text = text.split("  # ", 1)[0].rstrip()  # an inline comment (PEP 8 style) is not the code
    if text:
        t = text if len(text) <= max_text else text[: max_text - 3] + "..."
        label += f" ({t})"
    return label
