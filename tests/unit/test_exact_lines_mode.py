"""The exact-lines mode (``profile(exact_lines=True)``): torch calls marked with their calling
line at run time, read back by the conversion and dropped as rows."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import neuron_explorer as ne  # noqa: E402
from neuron_explorer.collectors.build.source_map import marker_name, parse_marker  # noqa: E402

USER_CODE = textwrap.dedent(
    """
    import torch


    def forward(model, x, w):
        h = model(x)
        y = h @ w
        return y[0] + 1
    """
)
MODEL_LINE, MATMUL_LINE, INDEX_LINE = 6, 7, 8


def _load(tmp_path: Path):
    path = tmp_path / "user mode.py"  # (a space in the path: the marker keeps it)
    path.write_text(USER_CODE)
    spec = importlib.util.spec_from_file_location("user_mode", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def test_marker_names_round_trip():
    name = marker_name(12, "step", "/a dir/my file.py")
    assert parse_marker(name) == ("/a dir/my file.py", 12, "step")
    assert parse_marker("aten::mm") is None and parse_marker("neuron_explorer.line x f f.py") is None


def test_without_the_python_tracer_the_markers_alone_give_every_op_its_line(tmp_path):
    user, path = _load(tmp_path)
    model = torch.nn.Linear(4, 4)
    x, w = torch.randn(3, 4), torch.randn(4, 4)
    user.forward(model, x, w)
    with ne.profile(with_stack=False, exact_lines=True, on_error="raise") as prof:
        user.forward(model, x, w)
    df = prof.trace.to_pandas(columns=["kind", "name", "src_file", "src_line", "src_precision"])
    ops = df[df["kind"].astype(str) == "cpu_op"]
    assert not ops["name"].astype(str).str.startswith("neuron_explorer.line").any()
    line = {str(n): int(v) for n, v in zip(ops["name"], ops["src_line"]) if v == v}
    assert line["aten::linear"] == MODEL_LINE and line["aten::addmm"] == MODEL_LINE  # (inside the module)
    assert line["aten::matmul"] == MATMUL_LINE
    assert line["aten::select"] == INDEX_LINE and line["aten::add"] == INDEX_LINE
    assert set(ops["src_file"].astype(str)) == {str(path)}
    assert set(ops["src_precision"].astype(str)) == {"line"}
    assert prof.trace.metadata["profiler_options"]["exact_lines"] is True


def test_the_mode_ends_with_the_profile_even_when_the_program_raises():
    from torch.overrides import _get_current_function_mode_stack

    with pytest.raises(ZeroDivisionError), ne.profile(exact_lines=True, on_error="ignore"):
        assert _get_current_function_mode_stack()
        torch.ones(2) + 1
        1 / 0  # noqa: B018
    assert not _get_current_function_mode_stack()
    with ne.profile(on_error="ignore"):  # off by default
        assert not _get_current_function_mode_stack()


def test_a_compiled_function_runs_under_the_mode():
    # TorchDynamo traces the modes on the stack; the mode must step aside, not break the program
    def f(a, b):
        return (a @ b).relu() + 1

    compiled = torch.compile(f, backend="eager")
    a = torch.randn(8, 8)
    with ne.profile(exact_lines=True, on_error="raise") as prof:
        for _ in range(2):
            got = compiled(a, a)
    assert torch.allclose(got, f(a, a))
    assert not prof.errors and prof.trace.num_events > 0
