"""The issue-25 audit: every warning and error finding on every real trace in tests/data (and
../shared/fixtures when present, by content), one markdown row each: the trace, the rule, the
title, its headline number against an independent recomputation from the raw JSON, and whether
its cause and its fix hold for the trace. The recomputations and judgements are written in
tests/_audit_reference.py (not the code under test); tests/unit/test_audit_findings.py asserts
on them. Each trace's verdict is listed too.

    .venv/bin/python scripts/audit_findings.py [--min-severity warning] > audit.md
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import neuron_explorer as ne  # noqa: E402
from neuron_explorer.analyzers import analyze  # noqa: E402
from tests._audit_reference import check  # noqa: E402


def traces() -> list[Path]:
    """Kineto JSON traces (the raw events a recomputation needs), once per content."""
    roots = [ROOT / "tests/data/kineto", ROOT.parent / "shared/fixtures/kineto"]
    seen: dict[str, Path] = {}  # by content: ../shared holds the same files under other names
    for root in roots:
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*.json*")):
            if p.name.endswith((".json", ".json.gz")) and "perf_report" not in str(p) and "provenance" not in p.name:
                seen.setdefault(hashlib.sha1(p.read_bytes()).hexdigest(), p)
    return list(seen.values())


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-severity", default="warning")
    args = ap.parse_args()
    rows, verdicts = [], []
    held = total = 0
    for path in traces():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = analyze(ne.load(path))
        verdicts.append(f"| {path.name} | {a.summary['verdict'].replace('|', '/')} |")
        for f in a.filter(args.min_severity):
            v = check(path, f)
            total += 1
            held += v.holds
            title = f.title.replace("|", "/")
            rows.append(
                f"| {path.name} | {f.rule_id} | {f.severity} | {title} | {v.metric} | {_fmt(v.ours)} | {_fmt(v.ref)} | "
                f"{'yes' if v.number else 'no'} | {'yes' if v.cause else 'no'} | {'yes' if v.fix else 'no'} | "
                f"{v.why or ''} |"
            )
    print("| trace | rule | sev | title | number | ours | recomputed | number holds | cause holds | fix holds | note |")
    print("|---|---|---|---|---|---:|---:|---|---|---|---|")
    print("\n".join(rows))
    print(
        f"\n{held} of {total} warning/error findings hold in number, cause and fix ({100.0 * held / max(total, 1):.0f}%)."
    )
    print("\n| trace | verdict |\n|---|---|")
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
