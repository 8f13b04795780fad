"""Cross-rank view of a converted run, rank by rank (process pool or Dask): the rank that delays the collectives.

Reads a run converted with ``convert RUN_DIR -o OUT_DIR`` (``OUT_DIR/rank=N/trace.parquet``);
each rank's part (collective arrivals, step attribution, then the work before the collectives
the culprit delayed) is one task, so the client never holds the run. Prints the rank that
delays the collectives with its extra work and source line (when it passes the ``culprit_rank``
thresholds, docs/rules.md "Ranks"), the wait each rank causes, the most skewed collectives with
their bus bandwidth, and the per-rank step time.

Examples:
  neuron-explorer ranks run_pq/
  neuron-explorer ranks run_pq/ --workers 4 --format json
  neuron-explorer ranks run_pq/ --dask tcp://scheduler:8786
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from neuron_explorer.trace.errors import TraceFormatError
from neuron_explorer.trace.units import format_bytes


def prepare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="OUT_DIR", help="a converted run: OUT_DIR/rank=N/trace.parquet")
    parser.add_argument("--workers", type=int, metavar="N", help="a local Dask cluster of N worker processes")
    parser.add_argument("--dask", metavar="ADDRESS", help="the Dask scheduler at ADDRESS")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--top", type=int, default=5, help="rows of each table (default 5)")


def summarize(path: Path, workers: int | None, dask: str | None, top: int) -> dict[str, Any]:
    """The JSON-able cross-rank summary of a converted run (what ``ranks`` prints)."""
    from neuron_explorer.analyzers.ranks.culprit import rank_summary
    from neuron_explorer.analyzers.ranks.run_ranks import run_tables
    from neuron_explorer.analyzers.result import records
    from neuron_explorer.analyzers.rules import all_rules
    from neuron_explorer.collectors.kineto.run_dir import is_json_run
    from neuron_explorer.parallel import make_executor

    if is_json_run(path):
        raise TraceFormatError(
            "a run of JSON traces: convert it first (neuron-explorer convert RUN_DIR -o OUT_DIR)", path
        )
    if path.is_dir() and not any(path.rglob("*.parquet")):
        from neuron_explorer.collectors.load import raw_captures_refusal

        raw_captures_refusal(path)  # raw Neuron captures only: say how to export them
    with make_executor(workers=workers, dask=dask) as ex:
        t = run_tables(path, ex)
        how = ex.describe()
    rs = t.rank_steps
    per_rank = rank_summary(rs, t.wait_by_rank)
    matched = t.collectives[t.collectives["num_ranks"] >= 2]
    out: dict[str, Any] = {
        "run": str(path),
        "executor": how,
        "ranks": int(rs["rank"].nunique()) if len(rs) else len(t.files),
        "collectives": len(t.collectives),
        "matched_collectives": len(matched),
        "total_wait_ns": int(matched["wait_ns"].sum()),
        "culprit": None,
        "wait_by_rank": records(t.wait_by_rank, top),
        "most_skewed": records(matched.sort_values("skew_ns", ascending=False, kind="stable"), top),
        "per_rank": records(per_rank, top),
        "bandwidth_by_size": records(t.collective_sizes),
    }
    if t.culprit is None or t.late is None:
        return out
    th = {k: v[0] for k, v in all_rules()["culprit_rank"].thresholds.items()}
    top_rank = t.wait_by_rank.iloc[0]
    caused = float(top_rank["caused_wait_ns"])
    share = 100.0 * caused / float(t.wait_by_rank["caused_wait_ns"].sum() or 1)
    others_wall = float(rs.loc[rs["rank"] != t.culprit, "wall_ns"].sum()) or 1.0
    wait_pct = 100.0 * caused / others_wall
    if share >= th["min_share_pct"] and wait_pct >= th["min_wait_pct"]:
        out["culprit"] = {
            "rank": t.culprit,
            "caused_wait_ns": int(caused),
            "wait_share_pct": share,
            "wait_pct": wait_pct,
            "times_last": int(top_rank["times_last"]),
            "instances": int(top_rank["instances"]),
            "extra_ns": t.late["extra_ns"],
            "lines": t.late["lines"],
        }
    return out


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def _signed(ns: float) -> str:
    return ("+" if ns >= 0 else "-") + _ms(abs(ns))


def _printer() -> Any:
    """``print`` for the text output: each line wrapped to the output's width (continuation
    lines indented under it) with control characters from trace names escaped."""
    import builtins
    import textwrap

    from neuron_explorer.reports.fit import printable, text_width

    width = max(text_width(), 40)

    def say(line: str = "") -> None:
        text = printable(line)
        lead = text[: len(text) - len(text.lstrip())]
        for part in textwrap.wrap(text, width=width, subsequent_indent=lead + "    ") or [""]:
            builtins.print(part)

    return say


def run(args: argparse.Namespace) -> int:
    s = summarize(Path(args.run), args.workers, args.dask, args.top)
    if args.format == "json":
        from neuron_explorer.cli._common import write_stdout

        write_stdout(json.dumps(s, indent=2) + "\n")
        return 0
    say = _printer()  # every line below wrapped to the terminal, names made printable
    say(f"{s['run']}: {s['ranks']} ranks, {s['matched_collectives']} of {s['collectives']} collectives matched "
          f"across ranks, {_ms(s['total_wait_ns'])} of waiting in them ({s['executor']})")  # fmt: skip
    c = s["culprit"]
    if c is None:
        say("No rank delays the collectives beyond the culprit_rank thresholds.")
    else:
        say(f"Rank {c['rank']} delays the collectives: last at {c['times_last']} of {c['instances']}, the others "
              f"wait {_ms(c['caused_wait_ns'])} for it ({c['wait_share_pct']:.0f}% of all waiting).")  # fmt: skip
        e = c["extra_ns"]
        say(f"  before them, against the median rank: compute {_signed(e['compute'])}, copies "
              f"{_signed(e['copy'])}, other (host work or idle) {_signed(e['other'])}")  # fmt: skip
        for ln in c["lines"]:
            where = f"{ln['file']}:{ln['line']} ({ln['op']})" if ln["file"] else str(ln["op"])
            say(f"  {where}: +{_ms(ln['ns'])} of device time")
    say("Wait caused per rank:")
    for r in s["wait_by_rank"]:
        say(f"  rank {r['rank']}: last at {r['times_last']} of {r['instances']}, {_ms(r['caused_wait_ns'])}")
    say("Most skewed collectives:")
    for r in s["most_skewed"]:
        bw = f", {r['busbw_gbps']:.1f} GB/s bus" if r["busbw_gbps"] is not None else ""
        say(f"  {r['pg']} step {r['step']} #{r['seq']} {r['collective_name']}: skew {_ms(r['skew_ns'])}, "
              f"last rank {r['last_rank']}, wait {_ms(r['wait_ns'])}{bw}")  # fmt: skip
    say("Busiest ranks (mean per step):")
    for r in s["per_rank"]:
        say(f"  rank {r['rank']}: wall {_ms(r['wall_ns'])}, busy {_ms(r['busy_ns'])} "
              f"({r['busy_vs_median_pct']:+.0f}% vs median)")  # fmt: skip
    if s["bandwidth_by_size"]:
        say("Bus bandwidth by message size (median, min-max over the collectives):")
        for r in s["bandwidth_by_size"]:
            how = "/".join(x for x in (r["algorithm"], r["protocol"]) if x != "-") or "algorithm not named"
            say(f"  {r['collective_name']} {format_bytes(r['size_bytes'])}-{format_bytes(2 * r['size_bytes'])} ({how}): "
                  f"{r['count']} x, {r['busbw_median_gbps']:.1f} GB/s ({r['busbw_min_gbps']:.1f}-"
                  f"{r['busbw_max_gbps']:.1f})")  # fmt: skip
    return 0
