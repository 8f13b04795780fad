"""Which frames are the user's code: one definition (``trace.frames.path_origin``) shared by
capture, import and the rules. Paths are written the way real traces write them."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from neuron_explorer.analyzers.metrics.source_lines import is_user_file
from neuron_explorer.collectors.build.source_map import UserCode
from neuron_explorer.trace.frames import path_origin

LIBRARY = [
    "neuron-explorer",  # the launcher, as a recorded trace names it
    "/home/u/.venv/bin/neuron-explorer",
    "/work/wt/x/neuron_explorer/cli/record.py",
    "neuron_explorer/__main__.py",
    "typing_extensions.py",
    "_distutils_hack/__init__.py",
    "linecache.py",
    "tokenize.py",
    "traceback.py",
    "logging/__init__.py",
    "runpy.py",
    "<frozen runpy>",
    "<frozen importlib._bootstrap>",
    "/usr/lib/python3.11/runpy.py",
    "/opt/conda/lib/python3.10/site-packages/PIL/Image.py",
    "/usr/local/lib/python3.10/dist-packages/scipy/ndimage/_interpolation.py",
    "torch/nn/modules/module.py",
    "scipy/ndimage/_interpolation.py",
    "aiter/ops/triton/gemm_a8w8.py",  # a vendored package, written relative to its sys.path entry
    "torch/_dynamo/eval_frame.py",  # Dynamo's own source: its disable wrappers run in eager code
    "/opt/conda/lib/python3.10/site-packages/torch/_dynamo/eval_frame.py",
    # issue 40 item 8: an editable install's source checkout of a known library, and a garbled
    # frame name whose "file" is call text from a package's import
    "/app/aiter/aiter/jit/utils/torch_guard.py",
    "/src/transformers/src/transformers/models/bert/modeling_bert.py",
    "CANN(version: packaging.version.Version, ...)",
]
GENERATED = [
    "/tmp/torchinductor_root/ab/cabcdef.py",
    "<eval_with_key>.3",
    "/root/.triton/cache/ab12/launcher.py",
    "<fx_graph_module>",
]
USER = [
    "train.py",
    "test.py",
    "/usr/src/app/train.py",
    "/home/u/project/model/layers.py",
    "neuron_explorer/examples/train_mlp.py",  # the bundled demo is what the demo profiles
    "/work/wt/x/neuron_explorer/examples/train_mlp.py",
    "/home/u/My Project (copy)/train.py",  # parentheses in a folder name are still a path
    "/home/u/vllm_experiments/run.py",  # a library's name inside a user folder's name
]


@pytest.mark.parametrize("path", LIBRARY)
def test_libraries_the_standard_library_and_the_tool_are_not_user_code(path: str) -> None:
    assert path_origin(path) == "library"
    assert not UserCode.default().is_user(path)
    assert not is_user_file(path)


@pytest.mark.parametrize("path", GENERATED)
def test_generated_code_is_marked_generated(path: str) -> None:
    assert path_origin(path) == "generated"
    assert not UserCode.default().is_user(path)
    assert not is_user_file(path)


@pytest.mark.parametrize("path", USER)
def test_the_users_own_files_are_user_code(path: str) -> None:
    assert path_origin(path) == "user"
    assert UserCode.default().is_user(path)
    assert is_user_file(path)


def test_this_interpreters_own_library_folders_are_library() -> None:
    import json

    assert path_origin(json.__file__) == "library"
    assert path_origin(sys.executable) == "library"


def test_exclude_and_include_patterns_override() -> None:
    assert UserCode.default(["/project/vendor/"]).origin("/project/vendor/x.py") == "library"
    assert UserCode.default(include=["site-packages/mylib/"]).is_user("/v/site-packages/mylib/a.py")


def test_the_environment_variable_excludes_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_EXPLORER_EXCLUDE", "/project/vendor/")
    assert not is_user_file("/project/vendor/x.py")
    assert is_user_file("/project/train.py")


def _py(name: str, ts: float, dur: float, pid: int = 1) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": dur}


def _op(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def test_imported_ops_under_generated_code_are_marked_generated_or_go_to_the_user_caller(tmp_path) -> None:
    import json

    import neuron_explorer as ne

    inductor = "/tmp/torchinductor_root/ab/cabcdef.py"
    events = [
        # the user's function calls the compiled code: the op belongs to the user's function
        _py("train.py(10): step", 0, 100),
        _py("torch/_dynamo/eval_frame.py(600): _fn", 1, 98),
        _py(f"{inductor}(30): call", 2, 96),
        _op("aten::mm", 3, 10),
        # compiled code run with no user frame above it (e.g. from a library's loop): generated
        _py("site-packages/lightning/loop.py(5): run", 200, 100),
        _py(f"{inductor}(30): call", 201, 98),
        _op("aten::addmm", 202, 10),
        # the launcher and the standard library are never the user's code
        _py("neuron-explorer(8): <module>", 400, 100),
        _py("traceback.py(200): format_stack", 401, 98),
        _op("aten::add", 402, 10),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 0}))
    ev = ne.load(path).events.to_pandas().set_index("name")
    assert (ev.loc["aten::mm", "src_file"], ev.loc["aten::mm", "src_precision"]) == ("train.py", "function")
    assert (ev.loc["aten::addmm", "src_file"], ev.loc["aten::addmm", "src_precision"]) == (inductor, "generated")
    assert pd.isna(ev.loc["aten::add", "src_file"])


def test_a_library_checkout_or_a_garbled_frame_never_becomes_the_users_line(tmp_path) -> None:
    """The op's line walks up past an editable checkout of aiter (``/app/aiter/aiter/...``) and
    a frame whose name is call text, to the user's frame that called them."""
    import json

    import neuron_explorer as ne

    events = [
        _py("bench.py(42): run_gemm", 0, 100),
        _py("CANN(version: packaging.version.Version, ...)(3): <lambda>", 1, 98),
        _py("/app/aiter/aiter/jit/utils/torch_guard.py(88): wrapper", 2, 96),
        _op("aten::mm", 3, 10),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 0}))
    ev = ne.load(path).events.to_pandas().set_index("name")
    assert (ev.loc["aten::mm", "src_file"], int(ev.loc["aten::mm", "src_line"])) == ("bench.py", 42)


@pytest.mark.parametrize(("hot_file", "named"), [("/tmp/torchinductor_root/ab/cabc.py", False), ("train.py", True)])
def test_host_hotspot_names_only_the_users_code(tmp_path, hot_file: str, named: bool) -> None:
    """Inductor's generated wrapper spending 80% of the step in its own Python is not "your code";
    the same time in the user's train.py is (the control: the rule can fire here)."""
    import json

    import neuron_explorer as ne
    from neuron_explorer.analyzers import analyze

    events = []
    for i in range(4):
        t0 = i * 10_000.0
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": t0,
             "dur": 10_000.0},
            _py("run.py(3): main", t0 + 1, 9_998),
            _py(f"{hot_file}(2533): call", t0 + 2, 8_000),
            _op("aten::mm", t0 + 8_100, 1_000),
        ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 0}))
    a = analyze(ne.load(path))
    hot = [f for f in a.findings if f.rule_id == "host_hotspot"]
    assert bool(hot and hot[0].source_lines[0]["file"] == hot_file) is named
    for f in a.findings:
        assert all("torchinductor" not in str(sl.get("file")) for sl in f.source_lines)
