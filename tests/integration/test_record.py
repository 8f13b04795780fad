"""``neuron-explorer record``: programs run as themselves and leave a complete trace (or none).

End to end through the CLI (``python -m neuron_explorer record ...``) on real programs.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

import neuron_explorer as ne
from neuron_explorer.trace.errors import TraceFormatError

pytestmark = pytest.mark.slow


def _record(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "record", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


PROGRAM = textwrap.dedent(
    """
    import sys
    import torch

    print("argv", sys.argv[1:], "name", __name__)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        loss = model(torch.randn(8, 4)).sum()
        loss.backward()
        opt.step()
    mode = sys.argv[1]
    if mode == "exit":
        sys.exit(7)
    if mode == "raise":
        raise RuntimeError("boom from the program")
    """
)


@pytest.fixture()
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM)
    return path


def test_program_runs_as_itself_and_its_exit_code_is_kept(tmp_path, program):
    proc = _record(tmp_path, "-o", "out.parquet", "prog.py", "exit", "--flag")
    assert proc.returncode == 7, proc.stderr
    assert "argv ['exit', '--flag'] name __main__" in proc.stdout
    trace = ne.load(tmp_path / "out.parquet")
    steps = trace.steps()
    assert len(steps) >= 3  # one ProfilerStep per optimizer.step()
    ops = trace.ops()
    lines = set(ops[ops["src_file"].astype(str) == str(program)]["src_line"].dropna())
    assert {9, 10, 11} <= lines  # forward, backward, optimizer lines of the program


def test_programs_exception_is_shown_and_the_trace_still_written(tmp_path, program):
    proc = _record(tmp_path, "-o", "out.parquet", "prog.py", "raise")
    assert proc.returncode == 1
    assert "RuntimeError: boom from the program" in proc.stderr
    assert "Traceback" in proc.stderr
    assert ne.load(tmp_path / "out.parquet").num_events > 0


def test_record_a_module_with_its_own_options(tmp_path):
    proc = _record(tmp_path, "-m", "neuron_explorer.examples.train_mlp", "--steps", "3", "--width", "32")
    assert proc.returncode == 0, proc.stderr
    assert "trained 3 steps" in proc.stderr  # (the example's status line: stderr)
    trace = ne.load(tmp_path / "train_mlp.parquet")
    ops = trace.ops()
    exact = ops["src_precision"].isin(["line", "forward"]).mean()
    assert exact >= 0.95, ops["src_precision"].value_counts(dropna=False)


def test_bad_invocations_get_one_line_errors(tmp_path, program):
    missing = _record(tmp_path, "nope.py")
    assert missing.returncode == 3 and "no such script" in missing.stderr and "Traceback" not in missing.stderr
    module = _record(tmp_path, "-m", "no_such_module_xyz")
    assert module.returncode == 3 and "no_such_module_xyz" in module.stderr
    sched = _record(tmp_path, "--schedule", "1,x", "prog.py")
    assert sched.returncode == 3 and "--schedule" in sched.stderr


def test_full_disk_during_write_is_reported_and_leaves_no_trace(tmp_path, program):
    # RLIMIT_FSIZE makes writes past 4 KiB fail with EFBIG (SIGXFSZ ignored): a full disk.
    wrapper = tmp_path / "limited.py"
    wrapper.write_text(
        textwrap.dedent(
            """
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        from neuron_explorer.cli import main
        sys.exit(main(sys.argv[1:]))
        """
        )
    )
    proc = subprocess.run(
        [sys.executable, str(wrapper), "record", "-o", "out.parquet", "prog.py", "ok"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    assert "cannot write the trace" in proc.stderr
    assert not (tmp_path / "out.parquet").exists()
    assert not list(tmp_path.glob(".out.parquet.*"))  # the temporary file is removed too


def test_run_killed_while_writing_leaves_no_complete_looking_file(tmp_path, program):
    # Without the SIGXFSZ handler the process is killed in the middle of writing the trace.
    wrapper = tmp_path / "killed.py"
    wrapper.write_text(
        textwrap.dedent(
            """
        import resource, sys
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        from neuron_explorer.cli import main
        sys.exit(main(sys.argv[1:]))
        """
        )
    )
    proc = subprocess.run(
        [sys.executable, str(wrapper), "record", "-o", "run", "prog.py", "ok"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0
    assert not list((tmp_path / "run").rglob("*.parquet"))
    with pytest.raises(TraceFormatError):
        ne.load(tmp_path / "run")


DIST_PROGRAM = textwrap.dedent(
    """
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        model(torch.randn(8, 4)).sum().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
    dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_gloo_ranks_write_a_hive_style_run_directory(tmp_path):
    (tmp_path / "dist.py").write_text(DIST_PROGRAM)
    port = str(_free_port())
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "neuron_explorer", "record", "-o", "run", "dist.py"],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        _, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    assert (tmp_path / "run" / "rank=0" / "trace.parquet").is_file()
    assert (tmp_path / "run" / "rank=1" / "trace.parquet").is_file()
    run = ne.load(tmp_path / "run")
    assert run.ranks == [0, 1]
    for rank, meta in run.rank_metadata.items():
        assert meta["distributed_info"]["backend"] == "gloo"
        assert meta["distributed_info"]["rank"] == rank and meta["world_size"] == 2
    names = run.to_pandas()["name"].astype(str)
    assert names.str.contains("allreduce|all_reduce").any()
