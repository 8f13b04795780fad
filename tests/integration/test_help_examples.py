"""Every example line in a command's ``--help`` runs as printed (issue 42: the help's own
``compare sweep/ --sort n`` used to exit 3). Each runs in a folder that holds what the examples
name, built from the real fixtures: a Kineto trace and its Parquet, a two-rank run as JSON and
converted, a torch.compile trace with its TORCH_TRACE log, Neuron exports. Left out: ``mcp``
(a server on stdin) and ``ranks --dask ADDRESS`` (a scheduler on the network); ``compare`` is in
test_neuron_sweep_cli.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_explorer.collectors.neuron.synth import SynthSpec, write_parquet_export
from neuron_explorer.collectors.neuron.synth.matmul import MatmulSpec, write_matmul_json
from tests.conftest import KINETO, REPO, help_examples

COMMANDS = ("analyze", "convert", "diff", "export", "info", "metrics", "ranks", "whatif")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "120"}
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding every file the examples name."""
    w = tmp_path_factory.mktemp("examples")
    mm = KINETO / "h200" / "whatif_mm.json.gz"
    for name in ("trace.json.gz", "rank0.pt.trace.json.gz", "a.json.gz"):
        shutil.copy(mm, w / name)
    shutil.copy(KINETO / "h200" / "whatif_copies.json.gz", w / "b.json.gz")
    cli = [sys.executable, "-m", "neuron_explorer"]
    for src, dst in (
        (mm, "trace.parquet"),
        (mm, "base.parquet"),
        (KINETO / "h200" / "whatif_copies.json.gz", "new.parquet"),
    ):
        assert _run([*cli, "convert", str(src), "-o", str(w / dst), "-q"], w).returncode == 0
    # A two-rank run: as JSON (run/, run_dir/) and converted (run_pq/, base/, new/).
    for d in ("run", "run_dir"):
        (w / d).mkdir()
        for rank in (0, 1):
            shutil.copy(KINETO / "hta" / f"sampled_rank-{rank}.json.gz", w / d / f"rank{rank}.json.gz")
    for d in ("run_pq", "base", "new"):
        for rank in (0, 1):
            src = KINETO / "hta" / f"sampled_rank-{rank}.json.gz"
            assert (
                _run(
                    [*cli, "convert", str(src), "-o", str(w / d / f"rank={rank}" / "trace.parquet"), "-q"], w
                ).returncode
                == 0
            )
    # torch.compile: the trace and the TORCH_TRACE log of its run.
    shutil.copy(KINETO / "cpu_compiled" / "trace.json.gz", w / "train.json.gz")
    (w / "torch_trace").mkdir()
    shutil.copy(KINETO / "cpu_compiled" / "torch_trace.log.gz", w / "torch_trace" / "torch_trace.log.gz")
    # Neuron: a neuron-profile JSON and a Parquet export directory.
    write_matmul_json(w / "profile.json", MatmulSpec(n=512))
    write_parquet_export(w / "inspect" / "export", SynthSpec())
    return w


@pytest.mark.parametrize("command", COMMANDS)
def test_every_example_in_the_help_runs(command: str, workspace: Path, tmp_path: Path) -> None:
    examples = help_examples(command)
    assert examples, f"{command} --help has no examples"
    ran = 0
    for i, args in enumerate(examples):
        if "--dask" in args:
            continue  # a Dask scheduler on the network
        cwd = workspace
        if command == "convert":
            # Each writes an output that must not exist yet (convert never overwrites): its own copy.
            cwd = Path(shutil.copytree(workspace, tmp_path / f"w{i}"))
            shutil.rmtree(cwd / "run_pq")
        if args[:2] == ["neuron-explorer", command]:
            r = _run([sys.executable, "-m", "neuron_explorer", *args[1:]], cwd)
        elif args[0] == "python":
            r = _run([sys.executable, *args[1:]], cwd)
        else:
            pytest.fail(f"{command} --help: an example that is not a command: {args}")
        # 0, or 1 where the example says it gates (--fail-on, --fail-on-regression)
        ok = (0, 1) if any(a.startswith("--fail-on") for a in args) else (0,)
        assert r.returncode in ok, f"{' '.join(args)}: exit {r.returncode}: {r.stderr[-2000:]}"
        assert "Traceback" not in r.stderr, f"{' '.join(args)}: {r.stderr[-2000:]}"
        ran += 1
    assert ran
