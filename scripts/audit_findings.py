"""List every warning and error finding on every real trace in tests/data (and ../shared/fixtures
when present), one markdown row each: the trace, the rule, the title, its cost and how it was
priced, and the attribution category it bills. The issue-25 audit reads this table beside the
truth tests (tests/unit/test_rules_truth.py, test_rules_real_traces.py), which recompute each
figure from the raw events.

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


def traces() -> list[Path]:
    roots = [ROOT / "tests/data/kineto", ROOT.parent / "shared/fixtures/kineto"]
    seen: dict[str, Path] = {}  # by content: ../shared holds the same files under other names
    for root in roots:
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*.json*")):
            if p.name.endswith((".json", ".json.gz")) and "perf_report" not in str(p):
                seen.setdefault(hashlib.sha1(p.read_bytes()).hexdigest(), p)
    return list(seen.values())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-severity", default="warning")
    args = ap.parse_args()
    print("| trace | rule | sev | title | cost | method | category |")
    print("|---|---|---|---|---|---|---|")
    for path in traces():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a = analyze(ne.load(path))
        except Exception as exc:  # a trace the importer refuses is listed, not fatal
            print(f"| {path.name} | (not analyzed: {type(exc).__name__}: {str(exc)[:80]}) | | | | | |")
            continue
        found = a.filter(args.min_severity)
        if not found:
            print(f"| {path.name} | (none) | | | | | |")
        for f in found:
            method = getattr(f, "cost_method", "attribution")
            title = f.title.replace("|", "/")
            print(f"| {path.name} | {f.rule_id} | {f.severity} | {title} | {f.cost_ns / 1e6:.2f} ms | {method} | {f.category} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
