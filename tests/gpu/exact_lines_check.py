"""GPU check of issue 30's exact lines: operator syntax and the kernels it launches.

    python tests/gpu/exact_lines_check.py EAGER.parquet EXACT.parquet

EAGER.parquet: ``neuron-explorer record tests/gpu/gpt_block.py`` (eager, on CUDA); EXACT.parquet:
the same with ``--exact-lines``. Prints PASS/FAIL lines and figures, exits 1 on a FAIL:

- every op on a ``# LINE:`` operator-syntax line of gpt_block.py (``@``, ``*``, ``~``,
  indexing, residual ``+``) is at that line, and so is every kernel it launched;
- at least 95% of the device time, and of the op time from user code, is at an exact line
  (an inherited line counting when its origin is exact), recomputed here by merges;
- the exact-lines mode puts the block's ops and their kernels on the same lines.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

import neuron_explorer as ne
from neuron_explorer.trace.line_coverage import line_coverage

BLOCK = Path(__file__).resolve().parent / "gpt_block.py"
OPERATOR_OPS = {
    "scores": {"aten::matmul", "aten::mul"},
    "mask": {"aten::alias", "aten::bitwise_not"},
    "context": {"aten::matmul"},
    "residual1": {"aten::add"},
    "residual2": {"aten::add"},
}
FAILED: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        FAILED.append(name)


def frame(path: Path) -> pd.DataFrame:
    cols = ["event_id", "kind", "name", "parent_id", "fwd_id", "op_id", "start_ns", "dur_ns", "tid", "src_file",
            "src_line", "src_precision"]  # fmt: skip
    df = ne.load(path).to_pandas(columns=cols)
    for c in ("kind", "name", "src_file", "src_precision"):
        df[c] = df[c].astype(str)
    return df


def origin_exact(df: pd.DataFrame, rows: pd.DataFrame) -> pd.Series:
    """Whether each row's line is exact at its origin: launch -> op -> forward op."""
    prec = df.set_index("event_id")["src_precision"]
    fwd = df.set_index("event_id")["fwd_id"]
    p = rows["src_precision"].copy()
    via_op = rows["op_id"].where(p == "launch")
    p = p.where(p != "launch", via_op.map(prec))
    fwd_of = rows["fwd_id"].where(rows["src_precision"] != "launch", via_op.map(fwd))
    p = p.where(p != "forward", fwd_of.map(prec))
    return p == "line"


def main() -> int:
    plain, exact = (frame(Path(p)) for p in sys.argv[1:3])
    marks = {
        m.group(1): n for n, t in enumerate(BLOCK.read_text().splitlines(), 1) if (m := re.search(r"# LINE:(\w+)", t))
    }
    kinds = plain[["event_id", "kind"]].rename(columns={"event_id": "parent_id", "kind": "parent_kind"})
    ops = plain[plain["kind"] == "cpu_op"].merge(kinds, on="parent_id", how="left")
    top = ops[(ops["parent_kind"] != "cpu_op") & (ops["src_file"] == str(BLOCK)) & (ops["src_precision"] == "line")]
    for mark, names in OPERATOR_OPS.items():
        here = top[top["src_line"] == marks[mark]]
        check(f"ops at {mark} (line {marks[mark]})", names <= set(here["name"]), str(sorted(set(here["name"]))))
    syntax = top[top["name"].isin({n for v in OPERATOR_OPS.values() for n in v})]
    check("no operator op of the block elsewhere", set(syntax["src_line"]) <= {marks[m] for m in OPERATOR_OPS})
    dev = plain[plain["kind"].isin(["kernel", "memcpy", "memset"])]
    # a kernel's op is the innermost (aten::bmm under aten::matmul): climb to the top-level op
    is_op = plain.set_index("event_id")["kind"] == "cpu_op"
    parent = plain.set_index("event_id")["parent_id"]
    top_op = dev["op_id"].copy()
    for _ in range(12):
        up = top_op.map(parent)
        climb = up.map(is_op).fillna(False).astype(bool)
        top_op = top_op.where(~climb, up)
    launched = dev[top_op.isin(syntax["event_id"])]
    line_of_op = syntax.set_index("event_id")["src_line"]
    check(
        "kernels of operator ops carry the op's line",
        len(launched) > 0
        and (launched["src_line"].to_numpy() == top_op[launched.index].map(line_of_op).to_numpy()).all(),
        f"{len(launched)} kernels",
    )
    dev_exact = 100 * dev.loc[origin_exact(plain, dev), "dur_ns"].sum() / max(dev["dur_ns"].sum(), 1)
    top_all = ops[(ops["parent_kind"] != "cpu_op") & (ops["src_file"] != "None")]
    op_exact = 100 * top_all.loc[origin_exact(plain, top_all), "dur_ns"].sum() / max(top_all["dur_ns"].sum(), 1)
    cov = line_coverage(ne.load(Path(sys.argv[1])))
    check(
        "device time at an exact line >= 95%",
        dev_exact >= 95,
        f"{dev_exact:.2f}% (line_coverage {cov['device_exact_pct']})",
    )
    check(
        "user op time at an exact line >= 95%",
        op_exact >= 95,
        f"{op_exact:.2f}% (line_coverage {cov['op_user_exact_pct']})",
    )
    check("line_coverage agrees", abs(dev_exact - (cov["device_exact_pct"] or 0)) < 0.01)

    def block_lines(df: pd.DataFrame) -> pd.DataFrame:
        k = df[["event_id", "kind"]].rename(columns={"event_id": "parent_id", "kind": "parent_kind"})
        o = df[df["kind"] == "cpu_op"].merge(k, on="parent_id", how="left")
        o = o[(o["parent_kind"] != "cpu_op") & (o["src_file"] == str(BLOCK))]
        return o.sort_values(["tid", "start_ns"])[["name", "src_line", "src_precision"]].reset_index(drop=True)

    p, e = block_lines(plain), block_lines(exact)
    steps_p, steps_e = (int((d["name"] == "aten::bitwise_not").sum()) for d in (p, e))
    per = len(p) // max(steps_p, 1)
    same = steps_p and steps_e and p.head(per * min(steps_p, steps_e)).equals(e.head(per * min(steps_p, steps_e)))
    check("exact mode: the same lines", bool(same), f"{len(p)} vs {len(e)} block ops")
    ek = exact[exact["kind"] == "kernel"]
    check("exact mode: no marker rows", not exact["name"].str.startswith("neuron_explorer.line ").any())
    print(
        f"FIGURES device_exact_pct={dev_exact:.2f} op_user_exact_pct={op_exact:.2f} kernels={len(dev)} exact_kernels={len(ek)}"
    )
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
