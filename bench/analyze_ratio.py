"""`analyze` against earlier commits, alternating in one run: the ratio of each format's time.

    .venv/bin/python bench/analyze_ratio.py [TRACE] [--ref COMMIT ...] [--rounds N]

TRACE defaults to the 216k-event V100 trace (tests/data/kineto/hta/df_index_resolver.json.gz),
converted to Parquet once. Each reference commit is exported (``git archive``) into a temporary
folder and run with this venv, its package first on the path, so every side reads the same
Parquet with the same libraries. Each round runs every (code, format) pair once, one whole
``neuron-explorer analyze`` process each, in turn, so load on a shared machine hits every side
alike; the median wall and CPU time over rounds are compared (CPU time: the steadier figure on
a shared machine). Defaults: 295e021 (before the dependency graph) and b7f78d4 (before replay pricing).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_measured

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = ROOT / "tests" / "data" / "kineto" / "hta" / "df_index_resolver.json.gz"


def export(commit: str, into: Path) -> Path:
    out = into / commit
    out.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def run_once(code: Path, parquet: Path, fmt: str) -> tuple[float, float]:
    """Wall and CPU seconds of one ``neuron-explorer analyze`` process (output discarded)."""
    env = {"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin", "COLUMNS": "140"}
    m = run_measured(
        [sys.executable, "-m", "neuron_explorer", "analyze", str(parquet), "--format", fmt],
        cwd=code,
        env=env,
    )
    if m.returncode:
        raise SystemExit(f"{code}: {m.stderr[-2000:]}")
    return m.wall_s, m.cpu_s


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", nargs="?", type=Path, default=DEFAULT_TRACE)
    p.add_argument("--ref", action="append", default=None, help="reference commit (repeatable)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    refs = args.ref or ["295e021", "b7f78d4"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        parquet = args.trace
        if parquet.suffix != ".parquet":
            parquet = tmp_path / "trace.parquet"
            subprocess.run(
                [sys.executable, "-m", "neuron_explorer", "convert", str(args.trace), "-o", str(parquet), "-q"],
                cwd=ROOT,
                check=True,
            )
        codes = {"this": ROOT, **{r: export(r, tmp_path) for r in refs}}
        times: dict[tuple[str, str], list[tuple[float, float]]] = {(c, f): [] for c in codes for f in ("text", "json")}
        for _ in range(args.rounds):
            for fmt in ("text", "json"):
                for name, code in codes.items():
                    times[(name, fmt)].append(run_once(code, parquet, fmt))
    print(f"{args.trace.name}: one `analyze` process each (wall and CPU s), median of {args.rounds} rounds")
    for fmt in ("text", "json"):
        for what, i in (("wall", 0), ("cpu", 1)):
            ours = statistics.median(t[i] for t in times[("this", fmt)])
            line = [f"  {fmt:5s} {what:4s} this {ours:.2f} s"]
            for r in refs:
                ref = statistics.median(t[i] for t in times[(r, fmt)])
                line.append(f"{r} {ref:.2f} s ({ours / ref:.2f}x)")
            print(", ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
