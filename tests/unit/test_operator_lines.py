"""Operator syntax (``a @ b``, ``x[i]``, ``a + b``) placed on its line from bytecode
(collectors.lines.operator_lines), checked on real captures of real code.

The ground truth is the exact-lines mode (``profile(exact_lines=True)``), which marks each
torch call with its calling line at run time: every op the bytecode places on a line must be
on the line the marker names, and what the bytecode cannot tell apart must stay at its
function rather than be guessed.
"""

from __future__ import annotations

import dis
import importlib.util
import os
import re
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import neuron_explorer as ne  # noqa: E402
from neuron_explorer.collectors.lines.bytecode_flow import _method_call  # noqa: E402
from neuron_explorer.collectors.lines.operator_lines import OperatorLines  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

USER_CODE = textwrap.dedent(
    """
    import torch


    def attention(q, k, v):
        s = (q @ k.transpose(0, 1)) * 0.5  # LINE:scores
        p = s.softmax(dim=-1)
        return p @ v  # LINE:context


    def loop(a, v):
        acc = torch.zeros(4)
        for i in range(6):
            acc = acc + a[i] * v  # LINE:body
        return acc * 0.5  # LINE:after


    def branch(a, b, flag):
        if flag:
            y = a * b
        else:
            y = a * 2
        return y.sum()


    def decorated_twice(f):
        def inner(*args):
            return f(*args)
        return inner


    @decorated_twice
    def wrapped(a):
        return -a  # LINE:negate


    def gen(a):
        for i in range(2):
            yield a[i] + 1  # LINE:yielded
    """
)


def _marks(path: Path) -> dict[str, int]:
    """``# LINE:<name>`` -> line number."""
    out = {}
    for n, text in enumerate(path.read_text().splitlines(), 1):
        m = re.search(r"# LINE:(\w+)", text)
        if m:
            out[m.group(1)] = n
    return out


def _load(tmp_path: Path, name: str = "user_ops", code: str = USER_CODE):
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def _run_all(user) -> None:
    a, b = torch.randn(6, 4), torch.randn(6, 4)
    user.attention(a, b, b)
    user.loop(a, b[0])
    user.branch(a, b, True)
    user.wrapped(a)
    list(user.gen(a))


def _top_ops(trace, path: Path):
    """The ops not nested in another op, in time order, whose source is ``path``."""
    df = trace.to_pandas(
        columns=[
            "event_id",
            "kind",
            "name",
            "parent_id",
            "start_ns",
            "src_file",
            "src_line",
            "src_precision",
            "src_func",
        ]
    )
    for col in ("kind", "name", "src_file", "src_func", "src_precision"):
        df[col] = df[col].astype(str)
    kind_of = dict(zip(df["event_id"], df["kind"]))
    parent_kind = df["parent_id"].map(kind_of)
    top = df[(df["kind"] == "cpu_op") & (parent_kind != "cpu_op")]
    top = top[top["src_file"].astype(str) == str(path)]
    return top.sort_values("start_ns").reset_index(drop=True)


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """The user code above, captured plainly and in the exact-lines mode."""
    tmp = tmp_path_factory.mktemp("oplines")
    user, path = _load(tmp)
    torch.manual_seed(0)
    _run_all(user)  # (lazy initialisation outside the capture)
    with ne.profile(on_error="raise") as plain:
        _run_all(user)
    with ne.profile(on_error="raise", exact_lines=True) as exact:
        _run_all(user)
    return plain.trace, exact.trace, path


def test_operators_on_straight_lines_get_those_lines(captured):
    plain, _, path = captured
    marks = _marks(path)
    ops = _top_ops(plain, path)
    att = ops[ops["src_func"].astype(str) == "attention"]
    by_line = {int(k): sorted(v) for k, v in att.groupby("src_line")["name"]}
    assert by_line[marks["scores"]] == ["aten::matmul", "aten::mul", "aten::transpose"]  # (transpose: a call)
    assert by_line[marks["context"]] == ["aten::matmul"]
    assert set(att["src_precision"].astype(str)) == {"line"}
    neg = ops[ops["name"] == "aten::neg"]
    assert list(neg["src_line"]) == [marks["negate"]] and list(neg["src_precision"]) == ["line"]


def test_a_loop_body_is_its_line_and_an_op_with_two_candidate_lines_stays_at_its_function(captured):
    plain, _, path = captured
    marks = _marks(path)
    ops = _top_ops(plain, path)
    loop = ops[ops["src_func"].astype(str) == "loop"]
    body = loop[loop["src_line"] == marks["body"]]
    assert sorted(body["name"].astype(str).value_counts().items()) == [
        ("aten::add", 6),
        ("aten::mul", 6),
        ("aten::select", 6),
    ]
    assert set(body["src_precision"]) == {"line"}
    # the last multiply could be the loop's (its add on a number) or the one after it: not guessed
    last = loop.iloc[-1]
    assert last["name"] == "aten::mul" and last["src_precision"] == "function"
    assert last["src_line"] == marks["body"] - 3  # the def line
    # a multiply in either branch of an if: two candidate lines, left at the function
    branch = ops[ops["src_func"].astype(str) == "branch"]
    mul = branch[branch["name"] == "aten::mul"]
    assert len(mul) == 1 and mul["src_precision"].iloc[0] == "function"
    stats = plain.metadata["operator_lines"]
    assert stats["ambiguous"] >= 2 and stats["exact"] >= 20 and stats["unmatched"] == 0


def test_generator_resumes_find_their_code_and_lines(captured):
    plain, _, path = captured
    marks = _marks(path)
    ops = _top_ops(plain, path)
    gen = ops[ops["src_func"].astype(str) == "gen"]
    assert sorted(gen["name"]) == ["aten::add", "aten::add", "aten::select", "aten::select"]
    assert set(gen["src_line"]) == {marks["yielded"]} and set(gen["src_precision"]) == {"line"}


def test_every_line_the_bytecode_gives_is_the_line_the_exact_mode_records(captured):
    plain, exact, path = captured
    p, e = _top_ops(plain, path), _top_ops(exact, path)
    assert list(p["name"]) == list(e["name"])  # the same ops, in the same order
    assert set(e["src_precision"]) == {"line"}  # the markers leave nothing at the function
    placed = p["src_precision"] == "line"
    assert placed.sum() >= 0.9 * len(p)
    assert (p.loc[placed, "src_line"].to_numpy() == e.loc[placed, "src_line"].to_numpy()).all()


def test_planted_operator_syntax_workload_agrees_with_the_exact_mode(tmp_path):
    """Loops, branches, subscript stores, in-place operators, comprehensions, generators, calls
    of types (float(t)), try: recorded twice in fresh processes by the planted harness."""
    from tests.planted import operator_syntax

    path = Path(operator_syntax.__file__).resolve()
    traces = {}
    for mode in ("plain", "exact"):
        out = tmp_path / f"{mode}.parquet"
        code = (
            "import sys; from tests.planted import _harness as h, operator_syntax as m; import neuron_explorer as ne; "
            "import torch; s = m.setup(); m.step(s); torch.set_num_threads(1)\n"
            f"with ne.profile(output={str(out)!r}, exact_lines={mode == 'exact'}, on_error='raise'):\n"
            "    m.step(s); m.step(s)\n"
        )
        import subprocess

        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        traces[mode] = ne.load(out)
    p, e = _top_ops(traces["plain"], path), _top_ops(traces["exact"], path)
    assert list(p["name"]) == list(e["name"]) and len(p) > 100
    placed = (p["src_precision"] == "line").to_numpy()
    assert placed.mean() >= 0.85, p[~placed]
    assert (p["src_line"].to_numpy()[placed] == e["src_line"].to_numpy()[placed]).all()
    # every marked line holds ops in both captures
    lines = set(e["src_line"])
    for name, line in _marks(path).items():
        assert line in lines, name


def test_a_source_edited_while_profiling_gives_no_line(tmp_path):
    # the edit moves ``p @ v`` up a line, where its bytecode would fit the recorded calls just as
    # well: the file changed after the capture began, so its ops stay at their function
    user, path = _load(tmp_path, "edited")
    marks = _marks(path)
    a = torch.randn(6, 4)
    user.attention(a, a, a)
    with ne.profile(on_error="raise") as prof:
        user.attention(a, a, a)
        text = path.read_text()
        edited = text.replace(
            "    p = s.softmax(dim=-1)\n    return p @ v  # LINE:context",
            "    p = s.softmax(dim=-1); x = p @ v\n    return x",
        )
        assert edited != text
        path.write_text(edited)
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    ops = _top_ops(prof.trace, path)
    syntax = ops[ops["name"].isin(["aten::matmul", "aten::mul"])]
    assert len(syntax) == 3 and set(syntax["src_precision"]) == {"function"}
    assert marks["context"] - 1 not in set(syntax["src_line"])


def test_method_calls_are_told_from_calls_of_types_and_functions():
    def f(a, x, n):
        return float(a[n - 1, 0].abs()) + g(x, y=2) + x.m(1)(2) + x.k(a, b=2)  # noqa: F821

    ins = list(dis.get_instructions(f))
    calls = [j for j, x in enumerate(ins) if x.opname.startswith("CALL")]
    got = [_method_call(ins, j) for j in calls]
    # abs() a method; float() a type; g() a function; x.m(1) a method, its result called; x.k() a method
    assert got == [True, False, False, True, False, True]


def test_code_objects_are_found_by_def_line_and_by_a_generators_resume_line(tmp_path):
    _, path = _load(tmp_path, "lookup")
    marks = _marks(path)
    ol = OperatorLines()
    src = path.read_text().splitlines()
    wrapped_def = next(n for n, t in enumerate(src, 1) if t.startswith("@decorated_twice"))
    assert ol.flow(str(path), "wrapped", wrapped_def) is not None  # (a decorated function's first line)
    gen_def = next(n for n, t in enumerate(src, 1) if t.startswith("def gen"))
    assert ol.flow(str(path), "gen", gen_def).first_line == gen_def
    assert ol.flow(str(path), "gen", marks["yielded"]).first_line == gen_def  # resumed at its yield
    assert ol.flow(str(path), "missing", gen_def) is None
    assert ol.flow(str(tmp_path / "nope.py"), "gen", 1) is None
    assert ol.stats["code_objects"] == 2


def test_conversion_cost_of_placing_operator_lines_is_small(tmp_path):
    """The walk with and without operator lines over one real capture (a loop of 2,400 tiny
    ops, the worst case: every op is operator syntax): the placing costs a bounded share."""
    import time

    from neuron_explorer.collectors.build.source_map import UserCode
    from neuron_explorer.collectors.capture.capture_tree import FileResolver, walk_tree

    user, _ = _load(tmp_path, "cost")
    a, v = torch.randn(6, 4), torch.randn(4)
    with torch.profiler.profile(with_stack=True) as prof:
        for _ in range(130):
            user.loop(a, v)
    roots = prof.profiler.kineto_results.experimental_event_tree()
    best = {}
    for syntax in (False, True, False, True):
        t0 = time.perf_counter()
        tree = walk_tree(roots, FileResolver(UserCode.default()), syntax=syntax)
        best[syntax] = min(best.get(syntax, np.inf), time.perf_counter() - t0)
    assert tree.operator_lines["ops"] == 130 * 19 and tree.operator_lines["exact"] >= 130 * 18
    assert best[True] < 3 * best[False] + 0.05, best
