"""Long fuzz run of the input boundaries through the real CLI, printing the outcome classes.

    .venv/bin/python bench/fuzz.py --importer kineto --inputs 100000
    .venv/bin/python bench/fuzz.py --importer parquet --inputs 100000 --seconds 1800
    .venv/bin/python bench/fuzz.py --importer neuron --inputs 100000

Each input is a mutation of a small real trace (tests/_fuzz.py, tests/_fuzz_parquet.py) run
in-process through ``neuron_explorer.cli.main``; outcomes are ``rejected`` (a clean one-line
error, exit 3, no output), ``correct`` (a trace that agrees with the reference and keeps the
invariants), ``traceback``, ``wrong`` and ``hang`` (past ``HANG_S`` seconds: an alarm). Every traceback or wrong input is saved under
``--save`` (default bench/results/fuzz/) to be kept as a regression input in tests/data/fuzz/.
``--seconds`` stops early; the figures printed say how many inputs ran.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import random
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests import _fuzz, _fuzz_parquet  # noqa: E402

#: Seconds one input may take before it counts as a hang (issue 43: none past 60 s).
HANG_S = 60


class _Hang(BaseException):
    """Raised by the alarm in the case that ran past ``HANG_S`` (a BaseException: no
    ``except Exception`` in the code under test can swallow it)."""


def _alarm(signum: int, frame: object) -> None:
    raise _Hang


def _kineto(rng: random.Random, seeds: list, work: Path) -> tuple[str, str, bytes, str]:
    data, mutation, gz = _fuzz.kineto_input(rng, seeds)
    # analyze (the graph walks, every rule) on a share of inputs, and on every one whose
    # mutation targets an analysis
    command = "analyze" if rng.random() < 0.05 or "ts 0" in mutation else "convert"
    outcome, detail = _fuzz.kineto_case(data, gz, work, command)
    return outcome, detail, data, mutation + (".gz" if gz else "")


def _parquet(rng: random.Random, seeds: list, work: Path) -> tuple[str, str, bytes, str]:
    data, mutation = _fuzz_parquet.parquet_input(rng, seeds)
    command = rng.choice(["info", "info", "info", "analyze", "report", "export"])
    outcome, detail = _fuzz_parquet.parquet_case(data, work, command, mutation)
    return outcome, detail, data, mutation


def _neuron(rng: random.Random, seeds: list, work: Path) -> tuple[str, str, bytes, str]:
    data, mutation = _fuzz_parquet.neuron_input(rng, seeds)
    command = "info" if rng.random() < 0.1 else "convert"
    outcome, detail = _fuzz_parquet.neuron_case(data, work, command)
    return outcome, detail, data, mutation


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--importer", choices=["kineto", "parquet", "neuron"], default="kineto")
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, default=HERE / "results" / "fuzz")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    os.environ.setdefault("NEURON_EXPLORER_WORKERS", "0")
    rng = random.Random(args.seed)
    run, seeds = {
        "kineto": (_kineto, [_fuzz.load_seed(p) for p in _fuzz.SEEDS]),
        "parquet": (_parquet, _fuzz_parquet.parquet_seeds()),
        "neuron": (_neuron, _fuzz_parquet.neuron_seeds()),
    }[args.importer]
    counts: collections.Counter[str] = collections.Counter()
    failures: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    done = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for done in range(1, args.inputs + 1):
            signal.alarm(HANG_S)
            try:
                outcome, detail, data, mutation = run(rng, seeds, work)
            except _Hang:
                outcome, detail, data, mutation = "hang", f"past {HANG_S} s", b"", "unknown (re-run the seed)"
            finally:
                signal.alarm(0)
            counts[outcome] += 1
            if outcome in ("traceback", "wrong", "hang"):
                key = f"{outcome}: {mutation}: {detail[:100]}"
                failures[key] += 1
                if failures[key] <= 2:
                    args.save.mkdir(parents=True, exist_ok=True)
                    name = hashlib.sha1(data).hexdigest()[:12]
                    (args.save / f"{args.importer}-{outcome}-{name}.bin").write_bytes(data)
            if done % 1000 == 0:
                print(f"  {done:,} inputs, {time.perf_counter() - t0:.0f} s: {dict(counts)}", flush=True)
            if args.seconds and time.perf_counter() - t0 > args.seconds:
                break
    elapsed = time.perf_counter() - t0
    print(f"\n{args.importer}: {done:,} inputs in {elapsed:.0f} s ({done / elapsed:.0f}/s), seed {args.seed}")
    for outcome, count in counts.most_common():
        print(f"  {outcome:32s} {count:8,d}  {100 * count / done:6.2f}%")
    for key, count in failures.most_common(30):
        print(f"  {count:6d} x {key}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
