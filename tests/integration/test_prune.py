"""Pruning one-time Python in the capture (issue 30): builtin calls without torch work are
dropped and library frames without torch work collapse into spans, without moving any op's line.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import neuron_explorer as ne
from neuron_explorer.collectors.build.source_map import UserCode
from neuron_explorer.collectors.capture.capture_convert import convert_results

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUILTIN_CALLS = 30_000  # str.startswith + isinstance + dict.get calls made by builtin_loop()

LIBRARY = """
TABLE = {f"k{i}": i for i in range(50)}


def helper(x):
    return x.startswith("k1") or isinstance(x, bytes)


NAMES = [k for k in TABLE if helper(k)]


def apply(fn, values):
    return [fn(v) for v in values]
"""


def builtin_loop(n: int) -> int:
    names = [f"n{i % 31}" for i in range(100)]
    table = dict.fromkeys(names, 1)
    hits = 0
    for i in range(n // 3):
        s = names[i % 100]
        if s.startswith("n1"):
            hits += 1
        if isinstance(s, str):
            hits += table.get(s, 0)
    return hits


def user_callback(v: int) -> int:
    return v + 1


def program(lib_root: Path, model: torch.nn.Module, x: torch.Tensor) -> None:
    import importlib

    sys.path.insert(0, str(lib_root))
    try:
        mods = [importlib.import_module(f"lazy_lib_prune.m{i}") for i in range(20)]
    finally:
        sys.path.remove(str(lib_root))
    builtin_loop(BUILTIN_CALLS)
    mods[0].apply(user_callback, range(5))  # a library frame calling user code: not collapsed
    time.sleep(0.03)  # a long C call: kept
    y = model(x)  # MODEL_LINE
    z = torch.matmul(y, y.T)  # MATMUL_LINE
    (z.sum() + y.mean()).backward()  # BACKWARD_LINE


def _line(marker: str) -> int:
    for i, text in enumerate(Path(__file__).read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# {marker}") and "def " not in text:
            return i
    raise AssertionError(marker)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """One capture, converted twice: pruning on and off (``NEURON_EXPLORER_NO_PRUNE``)."""
    root = tmp_path_factory.mktemp("lib") / "site-packages"
    pkg = root / "lazy_lib_prune"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for i in range(20):
        (pkg / f"m{i}.py").write_text(LIBRARY)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    with torch.profiler.profile(with_stack=True, record_shapes=True, profile_memory=True) as prof:
        program(root, model, x)
    results = prof.profiler.kineto_results
    meta = {"collector": "torch_profiler", "trace_metadata": {}, "base_time_ns": None}
    user = UserCode.default()
    old = os.environ.pop("NEURON_EXPLORER_NO_PRUNE", None)
    try:
        pruned = convert_results(results, meta, user, list(sys.path))
        os.environ["NEURON_EXPLORER_NO_PRUNE"] = "1"
        full = convert_results(results, meta, user, list(sys.path))
    finally:
        os.environ.pop("NEURON_EXPLORER_NO_PRUNE", None)
        if old is not None:
            os.environ["NEURON_EXPLORER_NO_PRUNE"] = old
    return pruned, full


SRC = ["src_file", "src_line", "src_func", "src_precision", "src_module"]


def _keyed(df):
    df = df.copy()
    for c in SRC:
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    return {(str(r.name), int(r.start_ns), int(r.tid)): tuple(getattr(r, c) for c in SRC) for r in df.itertuples()}


def test_every_op_and_allocation_keeps_its_source_line(both):
    pruned, full = both
    for kind in ("cpu_op", "memory"):
        a = _keyed(pruned.to_pandas().query("kind == @kind"))
        b = _keyed(full.to_pandas().query("kind == @kind"))
        assert len(b) > 0 or kind == "memory", kind
        assert a == b, kind
    ops = full.to_pandas().query("kind == 'cpu_op'")
    here = ops[ops["src_file"].astype(str) == __file__]
    lines = set(here["src_line"].dropna().astype(int))
    assert {_line("MODEL_LINE"), _line("MATMUL_LINE"), _line("BACKWARD_LINE")} <= lines


def test_builtin_calls_and_import_frames_are_gone(both):
    pruned, full = both
    meta = pruned.metadata["pruned"]
    assert meta["builtin_calls"] >= BUILTIN_CALLS
    assert meta["collapsed_spans"] >= 20 and meta["collapsed_events"] > 0
    assert meta["builtin_call_ns"] > 0 and meta["collapsed_ns"] > 0
    assert pruned.num_events <= full.num_events - BUILTIN_CALLS - meta["collapsed_events"]
    assert full.metadata["pruned"]["builtin_calls"] == 0
    py = pruned.to_pandas().query("kind == 'python'")
    names = py["name"].astype(str)
    # only calls that took over PRUNE_CCALL_NS stay (a preempted one on a busy machine)
    assert names.str.contains("method startswith of str").sum() < BUILTIN_CALLS // 300
    assert full.to_pandas()["name"].astype(str).str.contains("method startswith of str").sum() >= BUILTIN_CALLS // 3
    # kept: the long C call, the user callback the library calls, the user's own frames
    assert names.str.contains("sleep").any()
    assert names.str.endswith(": user_callback").sum() == 5
    assert names.str.endswith(": builtin_loop").sum() == 1
    # the imports: one span per import_module call, none of the import machinery below it
    assert names.str.endswith(": import_module").sum() == 20
    assert not names.str.startswith("<frozen importlib._bootstrap").any()
    full_names = full.to_pandas().query("kind == 'python'")["name"].astype(str)
    assert full_names.str.startswith("<frozen importlib._bootstrap").sum() >= 20 * 5


def test_record_heavy_one_time_python_end_to_end(tmp_path):
    calls, modules = 120_000, 100
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "250"}
    env.pop("NEURON_EXPLORER_NO_PRUNE", None)
    script = [str(ROOT / "bench" / "one_time_python.py"), "--modules", str(modules), "--calls", str(calls)]
    out = tmp_path / "t.parquet"
    r = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "record", "-o", str(out), *script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    trace = ne.load(out)
    pruned = trace.metadata["pruned"]
    assert pruned["builtin_calls"] >= calls
    assert pruned["collapsed_spans"] >= modules
    assert trace.num_events < 20_000  # the steps' ops, their Python, and one span per import
    assert len(trace.steps()) == 4  # one per optimizer.step()
    info = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "info", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert info.returncode == 0, info.stderr
    line = next(x for x in info.stdout.splitlines() if x.startswith("Pruned one-time Python"))
    assert f"{pruned['builtin_calls']:,} builtin calls" in line
    assert f"collapsed into {pruned['collapsed_spans']:,} spans" in line
