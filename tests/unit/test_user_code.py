"""Which frames are the user's code: one definition (``trace.frames.path_origin``) shared by
capture, import and the rules. Paths are written the way real traces write them."""

from __future__ import annotations

import sys

import pytest

from neuron_explorer.analyzers.rules._evidence import is_user_file
from neuron_explorer.collectors.source_map import UserCode
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
]
GENERATED = [
    "/tmp/torchinductor_root/ab/cabcdef.py",
    "<eval_with_key>.3",
    "torch/_dynamo/eval_frame.py",
    "/opt/conda/lib/python3.10/site-packages/torch/_dynamo/eval_frame.py",
    "/root/.triton/cache/ab12/launcher.py",
]
USER = [
    "train.py",
    "test.py",
    "/usr/src/app/train.py",
    "/home/u/project/model/layers.py",
    "neuron_explorer/examples/train_mlp.py",  # the bundled demo is what the demo profiles
    "/work/wt/x/neuron_explorer/examples/train_mlp.py",
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
