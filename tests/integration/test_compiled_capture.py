"""Recording torch.compile programs (issue 30): the compiler is not recorded, each compile is one
span, the compiled region's kernels and ops carry the lines they come from, and a loop without an
optimizer gets its steps. Real ``neuron-explorer record`` runs on the CPU, through the CLI.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import neuron_explorer as ne

pytestmark = pytest.mark.slow

ITERATIONS = 4

COMPILED = textwrap.dedent(
    f"""
    import torch
    import torch.nn.functional as F


    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(128, 256)
            self.out = torch.nn.Linear(256, 128)

        def forward(self, x):
            h = F.gelu(self.fc(x))  # LINE:hidden
            y = self.out(h) * 0.5  # LINE:scaled
            return x + y.relu()  # LINE:residual


    torch.manual_seed(0)
    model = torch.compile(Block())
    x = torch.randn(64, 128, requires_grad=True)
    for _ in range({ITERATIONS}):  # forward and backward, no optimizer
        model(x).sum().backward()
    """
)

EAGER = textwrap.dedent(
    """
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(32, 64)


    def train_step(batch):
        return model(batch).sum().backward()


    for _ in range(5):
        x = x + 0  # between the calls: part of the next step
        train_step(x)
    """
)


def _record(tmp_path: Path, script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "prog.py"
    path.write_text(script)
    return subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "record", "-o", "out.parquet", *args, str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor_cache"), **(env or {})},
    )


def _marks(script: str) -> dict[int, str]:
    return {i: line.split("# LINE:")[1].strip() for i, line in enumerate(script.splitlines(), 1) if "# LINE:" in line}


@pytest.fixture(scope="module")
def compiled_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("compiled")
    done = _record(tmp, COMPILED)
    assert done.returncode == 0, done.stderr
    return tmp


@pytest.fixture(scope="module")
def compiled_trace(compiled_dir: Path) -> ne.Trace:
    return ne.load(compiled_dir / "out.parquet")


def _compiler_frames(df: Any) -> Any:
    names = df["name"].astype(str)
    return names.str.contains(r"torch/_(?:dynamo|inductor|functorch)/", regex=True) & (df["kind"] == "python")


def test_each_compile_is_one_span_and_the_compiler_is_not_recorded(compiled_trace: ne.Trace) -> None:
    df = compiled_trace.to_pandas()
    names = df["name"].astype(str)
    spans = df[names.str.startswith("compile: ")]
    assert set(spans["kind"].astype(str)) == {"annotation"}
    assert {"compile: torch.compile", "compile: 0/0", "compile: 0/0 backward"} <= set(spans["name"].astype(str))
    # no Python call of Dynamo, AOTAutograd or Inductor starts inside a compile span: the
    # tracer was paused (only our own frame that paused it spans each compile)
    py = df[df["kind"] == "python"]
    inside = py["start_ns"].apply(lambda t: ((spans["start_ns"] < t) & (t < spans["start_ns"] + spans["dur_ns"])).any())
    assert not inside.any(), py[inside]["name"].astype(str).head().tolist()
    compiler = _compiler_frames(df)
    # what remains is the runtime wrappers torch runs at every call: step 0 (the compile's step)
    # holds about what a later step holds, not the ~10^5-10^6 calls compiling makes
    per_step = df[compiler].groupby(df["step"].fillna(-1)).size()
    assert per_step.get(0, 0) < 3 * per_step.drop([-1, 0], errors="ignore").median()
    assert compiler.sum() < 1000
    assert compiled_trace.num_events < 20_000


def test_trace_compile_records_the_compiler_again(compiled_dir: Path, compiled_trace: ne.Trace) -> None:
    # the same program, its compile now served by the cache the first run filled: Dynamo still
    # traces it, and with NEURON_EXPLORER_TRACE_COMPILE=1 its calls are recorded, in the spans
    (compiled_dir / "again").mkdir()
    done = _record(
        compiled_dir / "again",
        COMPILED,
        env={"NEURON_EXPLORER_TRACE_COMPILE": "1", "TORCHINDUCTOR_CACHE_DIR": str(compiled_dir / "inductor_cache")},
    )
    assert done.returncode == 0, done.stderr
    again = ne.load(compiled_dir / "again" / "out.parquet")
    assert (again.to_pandas()["name"].astype(str) == "compile: 0/0").sum() == 1

    def python_calls_recorded(trace: ne.Trace) -> int:  # kept, collapsed or dropped by pruning
        pruned = trace.metadata["pruned"]
        kept = int((trace.to_pandas()["kind"] == "python").sum())
        return kept + pruned["collapsed_events"] + pruned["builtin_calls"]

    assert python_calls_recorded(again) > 5 * python_calls_recorded(compiled_trace)


def test_a_loop_without_optimizer_gets_a_step_per_compiled_region_run(compiled_trace: ne.Trace) -> None:
    steps = compiled_trace.steps()
    assert len(steps) == ITERATIONS
    assert not compiled_trace.metadata.get("dropped_steps")  # an inferred last step is a whole step
    assert compiled_trace.metadata["steps_from"] == {"compiled_region": "0/0", "runs": ITERATIONS, "steps": ITERATIONS}
    df = compiled_trace.to_pandas()
    runs = df[df["name"].astype(str) == "Torch-Compiled Region: 0/0"]
    assert sorted(runs["step"].tolist()) == list(range(ITERATIONS))


def test_the_compiled_region_kernels_and_ops_carry_the_lines_they_come_from(compiled_trace: ne.Trace) -> None:
    marks = _marks(COMPILED)
    df = compiled_trace.to_pandas()
    ops = df[df["kind"] == "cpu_op"]
    names = ops["name"].astype(str)
    kernels = ops[names.str.contains(r"^graph_\d+_cpp_fused", regex=True)]
    externs = ops[names.isin(["aten::mm", "aten::addmm"]) & (ops["src_precision"].astype(str) == "compiled")]
    assert len(kernels) >= 2 * ITERATIONS  # forward and backward kernels, every run
    for row in kernels.itertuples():
        assert row.src_precision == "compiled"
        lines = [x["line"] for x in row.src_lines]
        assert lines and set(lines) <= set(marks), (row.name, lines)
        assert row.src_line == lines[0] and str(row.src_file).endswith("prog.py")
        # a kernel named for an op fuses the line that wrote it (the name says which aten ops)
        if "gelu" in row.name:
            assert "hidden" in {marks[ln] for ln in lines}
        if "relu" in row.name or "threshold" in row.name:
            assert "residual" in {marks[ln] for ln in lines}
    # the extern matmuls of every run: the Linear lines (forward and backward)
    assert len(externs) >= 2 * ITERATIONS
    assert set(externs["src_line"]) <= {ln for ln, m in marks.items() if m in ("hidden", "scaled")}
    meta = compiled_trace.metadata["compiled_lines"]
    assert meta["source"] == "in_process" and meta["graphs"] == 2 and meta["matched_calls"] > 0


def test_step_on_ends_a_step_at_each_return_of_the_function(tmp_path: Path) -> None:
    done = _record(tmp_path, EAGER, "--step-on", "train_step")
    assert done.returncode == 0, done.stderr
    trace = ne.load(tmp_path / "out.parquet")
    df = trace.to_pandas()
    calls = df[(df["kind"] == "python") & df["name"].astype(str).str.endswith(": train_step")]
    steps = df[df["kind"] == "step"].sort_values("start_ns")
    assert len(calls) == len(steps) == 5
    assert trace.metadata["steps_from"] == {"function": "train_step", "calls": 5, "steps": 5}
    ends = (calls["start_ns"] + calls["dur_ns"]).sort_values().tolist()
    assert ((steps["start_ns"] + steps["dur_ns"]).tolist()) == ends  # each step ends as a call returns
    assert steps["start_ns"].tolist()[1:] == ends[:-1]
    assert sorted(calls["step"].tolist()) == list(range(5))


def test_step_on_a_function_never_called_says_so(tmp_path: Path) -> None:
    done = _record(tmp_path, EAGER, "--step-on", "no_such_function")
    assert done.returncode == 0
    assert "--step-on no_such_function: no call of it was recorded" in done.stderr
    assert len(ne.load(tmp_path / "out.parquet").steps()) == 0


def test_step_on_takes_no_schedule(tmp_path: Path) -> None:
    done = _record(tmp_path, EAGER, "--step-on", "train_step", "--schedule", "1,1,1")
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and "--step-on" in done.stderr


def test_compiled_kernel_time_counts_at_an_exact_line(compiled_trace: ne.Trace) -> None:
    from neuron_explorer.trace.line_coverage import line_coverage

    cov = line_coverage(compiled_trace)
    df = compiled_trace.to_pandas()
    ops = df[df["kind"] == "cpu_op"]
    top = ops[~ops["parent_id"].isin(ops["event_id"])]  # ops not nested in another op
    compiled = top[top["src_precision"].astype(str) == "compiled"]["dur_ns"].sum()
    assert compiled > 0
    assert cov["op_by_precision_pct"]["compiled"] == pytest.approx(100 * compiled / top["dur_ns"].sum(), abs=0.01)
    assert (
        cov["op_exact_pct"] >= cov["op_by_precision_pct"]["compiled"] + cov["op_by_precision_pct"].get("line", 0) - 0.01
    )
