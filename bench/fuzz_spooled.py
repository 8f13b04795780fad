"""Differential fuzzing of the out-of-core build against the in-memory one.

    .venv/bin/python bench/fuzz_spooled.py --inputs 2000 [--seed 3000] [--batch 7]

Each input is a mutated real trace (tests/_fuzz.py), imported twice in this process: in memory
(``build_trace``) and spooled (``collectors.kineto.spooled``, walking the call tree in batches of
``--batch`` events). Outcomes: ``same trace`` (equal columns, dictionaries decoded, and equal
metadata), ``same error`` (both refuse it with the same message), ``differ`` (saved under
``--save`` with what differs) and ``traceback`` (any other exception, saved).
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import pyarrow as pa  # noqa: E402

from neuron_explorer.collectors.kineto import kineto_json, spooled  # noqa: E402
from neuron_explorer.trace.errors import TraceFormatError  # noqa: E402
from tests import _fuzz  # noqa: E402


def _plain(table: pa.Table) -> dict[str, pa.Array]:
    out = {}
    for f in table.schema:
        col = table.column(f.name)
        out[f.name] = (col.cast(f.type.value_type) if pa.types.is_dictionary(f.type) else col).combine_chunks()
    return out


def _import(path: Path, spool: bool) -> object:
    os.environ["NEURON_EXPLORER_SPOOL_EVENTS"] = "0" if spool else str(1 << 40)
    try:
        return kineto_json.import_kineto_json(path)
    except TraceFormatError as exc:
        return str(exc)


def _case(path: Path) -> tuple[str, str]:
    memory, spool = _import(path, False), _import(path, True)
    if isinstance(memory, str) or isinstance(spool, str):
        if memory == spool:
            return "same error", ""
        return "differ", f"in memory: {str(memory)[:200]!r}; spooled: {str(spool)[:200]!r}"
    try:
        a, b = _plain(memory.events), _plain(spool.events)  # type: ignore[attr-defined]
        cols = [k for k in a if k not in b or not a[k].equals(b[k])]
        meta = [
            k for k in set(memory.metadata) | set(spool.metadata) if memory.metadata.get(k) != spool.metadata.get(k)
        ]  # type: ignore[attr-defined]
    finally:
        spool.close()  # type: ignore[attr-defined]
    if cols or meta:
        return "differ", f"columns {cols}, metadata {meta}"
    return "same trace", ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=7, help="events per walked batch of the spooled build")
    parser.add_argument("--save", default=str(HERE / "results" / "fuzz_spooled"))
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    spooled.BATCH_EVENTS = args.batch
    seeds = [_fuzz.load_seed(p, 40) for p in _fuzz.SEEDS]
    rng = random.Random(args.seed)
    counts: collections.Counter[str] = collections.Counter()
    save = Path(args.save)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.inputs):
            data, mutation, gz = _fuzz.kineto_input(rng, seeds)
            src = Path(tmp) / ("in.json.gz" if gz else "in.json")
            src.write_bytes(data)
            try:
                outcome, detail = _case(src)
            except Exception:
                outcome, detail = "traceback", traceback.format_exc(limit=3)
            counts[outcome] += 1
            if outcome in ("differ", "traceback"):
                save.mkdir(parents=True, exist_ok=True)
                (save / f"{args.seed}_{i}{src.suffix}").write_bytes(data)
                (save / f"{args.seed}_{i}.txt").write_text(f"{mutation}\n{detail}\n")
                print(f"input {i}: {outcome}: {mutation}: {detail[:300]}", file=sys.stderr)
    dt = time.perf_counter() - t0
    print(f"{args.inputs:,} inputs in {dt:.0f} s (seed {args.seed}, batches of {args.batch}): {dict(counts)}")
    return 1 if counts["differ"] or counts["traceback"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
