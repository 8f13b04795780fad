"""Exact lines for operator syntax, end to end: ``neuron-explorer record`` of the GPT-style block
(tests/gpu/gpt_block.py, attention written with ``@``, ``*``, ``~``, indexing and residual
``+``) on the CPU, plainly and with ``--exact-lines``; and the planted loop of tiny ops named
at its operator line.

The block marks its operator-syntax lines ``# LINE:<name>``; the figures the tests check are
recomputed here from the raw events (pandas merges on event ids), not read from our tables.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")

import neuron_explorer as ne

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BLOCK = ROOT / "tests" / "gpu" / "gpt_block.py"
STEPS = 3
#: What each marked line issues by operator syntax alone (no Python call of its own).
OPERATOR_OPS = {
    "scores": {"aten::matmul", "aten::mul"},  # (q @ k.transpose(-2, -1)) * scale
    "mask": {"aten::alias", "aten::bitwise_not"},  # ~self.mask[:T, :T]
    "context": {"aten::matmul"},  # att @ v
    "residual1": {"aten::add"},  # x + self.attention(...)
    "residual2": {"aten::add"},  # x + self.out(...)
}


def _marks(path: Path) -> dict[str, int]:
    return {
        m.group(1): n
        for n, text in enumerate(path.read_text().splitlines(), 1)
        if (m := re.search(r"# LINE:(\w+)", text))
    }


def _cli(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "neuron_explorer", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("exact_lines")
    out = {}
    for mode, extra in (("plain", []), ("exact", ["--exact-lines"])):
        path = tmp / f"{mode}.parquet"
        r = _cli("record", *extra, "-o", str(path), str(BLOCK), "--steps", str(STEPS), "--device", "cpu", cwd=tmp)
        assert r.returncode == 0, r.stderr[-3000:]
        out[mode] = path
    return out


def _events(path: Path) -> pd.DataFrame:
    df = ne.load(path).to_pandas(
        columns=[
            "event_id",
            "kind",
            "name",
            "parent_id",
            "fwd_id",
            "start_ns",
            "dur_ns",
            "tid",
            "src_file",
            "src_line",
            "src_func",
            "src_precision",
        ]
    )
    for col in ("kind", "name", "src_file", "src_func", "src_precision"):
        df[col] = df[col].astype(str)
    return df


def _top_ops(df: pd.DataFrame) -> pd.DataFrame:
    kinds = df[["event_id", "kind"]].rename(columns={"event_id": "parent_id", "kind": "parent_kind"})
    ops = df[df["kind"] == "cpu_op"].merge(kinds, on="parent_id", how="left")
    return ops[ops["parent_kind"] != "cpu_op"]


def test_op_time_from_user_code_is_at_exact_lines(recorded):
    df = _events(recorded["plain"])
    top = _top_ops(df)
    user = top[top["src_file"] != "None"]
    # an inherited line is exact when its forward op's is (a backward op carries its forward op's line)
    fwd = df[["event_id", "src_precision"]].rename(columns={"event_id": "fwd_id", "src_precision": "fwd_precision"})
    user = user.merge(fwd, on="fwd_id", how="left")
    exact = (user["src_precision"] == "line") | (
        (user["src_precision"] == "forward") & (user["fwd_precision"] == "line")
    )
    share = 100.0 * user.loc[exact, "dur_ns"].sum() / user["dur_ns"].sum()
    assert share >= 95.0, user.loc[~exact, ["name", "src_line", "src_precision"]].head(20)
    # info says the same
    r = _cli("info", "--format", "json", str(recorded["plain"]), cwd=ROOT)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["source"]["time"]["op_user_exact_pct"] == pytest.approx(share, abs=0.01)
    assert info["operator_lines"]["exact"] == STEPS * 7 and info["operator_lines"]["ambiguous"] == 0


def test_every_op_on_an_operator_syntax_line_is_at_that_line(recorded):
    marks = _marks(BLOCK)
    df = _events(recorded["plain"])
    top = _top_ops(df)
    in_block = top[top["src_file"] == str(BLOCK)]
    # nothing the block's own functions issued is left at a def line
    assert set(in_block["src_precision"]) == {"line", "forward"}, in_block[in_block["src_precision"] == "function"]
    forward_ops = in_block[in_block["src_precision"] == "line"]
    for mark, names in OPERATOR_OPS.items():
        here = forward_ops[forward_ops["src_line"] == marks[mark]]
        for name in names:
            assert (here["name"] == name).sum() == STEPS, (mark, name, here["name"].value_counts().to_dict())
    # and anywhere else: no op with those names from those functions sits on another line
    syntax = forward_ops[forward_ops["name"].isin({n for v in OPERATOR_OPS.values() for n in v})]
    assert set(syntax["src_line"]) <= {marks[m] for m in OPERATOR_OPS}
    # their backward ops inherit the same lines
    bwd = df[(df["src_file"] == str(BLOCK)) & df["name"].isin(["MulBackward0", "BmmBackward0", "AddBackward0"])]
    assert set(bwd["src_precision"]) == {"forward"}
    assert set(bwd["src_line"]) == {marks["scores"], marks["context"], marks["residual1"], marks["residual2"]}


def test_the_exact_mode_gives_the_same_lines(recorded):
    plain, exact = (_top_ops(_events(recorded[m])) for m in ("plain", "exact"))
    cols = ["name", "src_line", "src_precision"]
    p = plain[plain["src_file"] == str(BLOCK)].sort_values(["tid", "start_ns"])[cols].reset_index(drop=True)
    e = exact[exact["src_file"] == str(BLOCK)].sort_values(["tid", "start_ns"])[cols].reset_index(drop=True)
    assert len(p) > 100
    pd.testing.assert_frame_equal(p, e)
    # the markers are read, not kept: no annotation rows named after them
    assert not _events(recorded["exact"])["name"].str.startswith("neuron_explorer.line ").any()


def test_the_tiny_ops_loop_is_named_at_its_operator_line(tmp_path):
    from neuron_explorer.analyzers import analyze

    out = tmp_path / "tiny.parquet"
    r = subprocess.run(
        [sys.executable, "-m", "tests.planted._harness", "tiny_ops", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    planted = ROOT / "tests" / "planted" / "tiny_ops.py"
    line = _marks(planted)["tiny_ops"]
    finding = next(f for f in analyze(ne.load(out)).findings if f.rule_id == "tiny_ops")
    top = finding.source_lines[0]
    assert (Path(top["file"]).name, top["line"]) == ("tiny_ops.py", line), finding.source_lines
    ops = _top_ops(_events(out))
    loop = ops[(ops["src_func"] == "step") & ops["name"].isin(["aten::select", "aten::mul", "aten::add"])]
    at_line = loop[(loop["src_line"] == line) & (loop["src_precision"] == "line")]
    assert len(at_line) >= 0.99 * len(loop) and len(loop) >= 4 * 3600
