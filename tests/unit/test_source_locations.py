"""One way to show a source location: relative to the trace's user files, elided from the left,
the ``:line`` and its precision never cut; and the text report that uses it at 80 and 200 columns."""

from __future__ import annotations

import io
import re

import pandas as pd
import pyarrow as pa
import pytest

from neuron_explorer.analyzers import analyze
from neuron_explorer.reports.location import FUNCTION_LEVEL_HINT, Locations, common_root, elide_left
from neuron_explorer.reports.markdown import render as render_markdown
from neuron_explorer.reports.text import render as render_text
from neuron_explorer.trace.model import Trace

DEEP = "/work/very/long/checkout/path/of/the/evaluation/harness/eval/cases/pipeline"


def test_a_location_is_relative_to_the_common_root_of_the_user_files() -> None:
    where = Locations.for_files([f"{DEEP}/model.py", f"{DEEP}/data/loader.py", "/usr/lib/python3/torch/nn/x.py"])
    assert where.root == DEEP  # library files do not widen the root
    assert where.format(f"{DEEP}/model.py", 40, "forward") == "model.py:40 (forward)"
    assert where.format(f"{DEEP}/data/loader.py", 7) == "data/loader.py:7"
    # installed packages read from the package on
    assert where.format("/venv/lib/python3.12/site-packages/torch/nn/linear.py", 125) == "torch/nn/linear.py:125"


def test_files_that_share_only_the_filesystem_root_are_shown_relative_to_the_current_directory() -> None:
    assert common_root(["/home/me/a.py", "/srv/b.py"], cwd="/home/me") == "/home/me"
    where = Locations(common_root(["/home/me/a.py", "/srv/b.py"], cwd="/home/me"))
    assert where.format("/home/me/a.py", 1) == "a.py:1"
    assert where.format("/srv/b.py", 2) == "/srv/b.py:2"
    assert common_root(["train.py"]) is None  # relative paths are shown as the trace wrote them


@pytest.mark.parametrize("width", range(8, 90, 3))
def test_at_any_width_the_line_number_and_precision_survive_and_the_path_gives_way_from_the_left(width: int) -> None:
    where = Locations(None)
    path = f"{DEEP}/model.py"
    exact = where.format(path, 40, "forward", "line", width=width)
    assert exact.endswith(":40") or ":40 (" in exact
    assert len(exact) <= max(width, len(":40") + 2)
    coarse = where.format(path, 5, "step", "function", width=width)
    assert re.search(r":5 \((step; )?(def, function-level|def)\)$", coarse), coarse
    if len(coarse) > width:  # only when even "…:5 (def)" cannot fit
        assert coarse == "…" + coarse[1:] and width < len(":5 (def)") + 3
    if width >= len(path) + len(":40 (forward)"):
        assert exact == f"{path}:40 (forward)"
    elif width >= len(path) + len(":40"):  # the function gives way before the path
        assert exact == f"{path}:40"
    elif width >= 20:
        assert exact.startswith("…/") and "model.py:40" in exact


def test_elision_cuts_at_a_directory_boundary() -> None:
    assert elide_left("/a/bb/ccc/dddd/model.py", 16) == "…/dddd/model.py"
    assert elide_left("model.py", 20) == "model.py"


def test_precision_of_a_finding_line_comes_from_the_line_profile() -> None:
    where = Locations(None, {("t.py", 5): "function"})
    assert where.finding_line({"file": "t.py", "line": 5, "func": "step"}) == "t.py:5 (step; def, function-level)"
    assert where.finding_line({"file": "t.py", "line": 6}) == "t.py:6"
    assert where.is_function_level("t.py", 5) and not where.is_function_level("t.py", 6)


def _trace_with_lines(tmp_path) -> Trace:
    """Host ops on two deep lines: one exact (line), one known only as a def (function)."""
    rows = []
    for s in range(3):
        t0 = s * 10_000_000
        rows += [
            dict(event_id=3 * s, kind="step", name=f"ProfilerStep#{s}", start_ns=t0, dur_ns=9_000_000, step=s),
            dict(event_id=3 * s + 1, kind="cpu_op", name="aten::mm", start_ns=t0 + 10, dur_ns=4_000_000, step=s,
                 parent_id=3 * s, src_file=f"{DEEP}/model.py", src_line=40, src_func="forward",
                 src_precision="line"),
            dict(event_id=3 * s + 2, kind="cpu_op", name="aten::add", start_ns=t0 + 5_000_000, dur_ns=3_000_000,
                 step=s, parent_id=3 * s, src_file=f"{DEEP}/data/collate_and_pad_the_batches.py", src_line=5,
                 src_func="collate", src_precision="function"),
        ]  # fmt: skip
    df = pd.DataFrame(rows).assign(rank=0, tid=1, device_type="cpu")
    return Trace.read(Trace(pa.Table.from_pandas(df, preserve_index=False), {}).write(tmp_path / "t.parquet"))


@pytest.mark.parametrize("columns", [80, 200])
def test_text_report_never_cuts_a_line_number_at_80_or_200_columns(tmp_path, columns: int) -> None:
    a = analyze(_trace_with_lines(tmp_path))
    out = io.StringIO()
    render_text(a, out, width=columns)
    text = out.getvalue()
    table = text[text.index("Top source lines") :]
    rows = [ln for ln in table.splitlines() if "model.py" in ln or "collate" in ln]
    assert len(rows) == 2, table
    assert all(len(ln) <= columns for ln in rows)
    assert "model.py:40" in rows[0]
    assert ":5 (" in rows[1] and "def" in rows[1]  # function-level says so, even at 80 columns
    assert "/work/very" not in table  # relative to the files' common root
    assert FUNCTION_LEVEL_HINT in text.replace("\n", " ")
    if columns == 200:  # room enough: the whole relative path, function and precision
        assert "data/collate_and_pad_the_batches.py:5 (collate; def, function-level)" in rows[1]


def test_skipped_rules_fold_into_one_summary_and_verbose_lists_them(tmp_path) -> None:
    a = analyze(_trace_with_lines(tmp_path))
    assert len(a.skipped) > 3
    short, full = io.StringIO(), io.StringIO()
    render_text(a, short, width=2000)
    render_text(a, full, width=2000, verbose=True)
    summary = [ln for ln in short.getvalue().splitlines() if "did not apply" in ln]
    assert len(summary) == 1 and summary[0].startswith(f"{len(a.skipped)} rules did not apply")
    assert summary[0].rstrip().endswith("--verbose lists them")
    assert re.search(r"device events \(\d+\)", summary[0])
    counts = [int(n) for n in re.findall(r"\((\d+)\)", summary[0])]
    assert sum(counts) == len(a.skipped)
    for rule_id, why in a.skipped:
        assert f"{rule_id}: {why}" in full.getvalue()
        assert f"{rule_id}:" not in short.getvalue()


def test_markdown_uses_the_same_locations(tmp_path) -> None:
    a = analyze(_trace_with_lines(tmp_path))
    md = render_markdown(a)
    assert "`model.py:40 (forward)`" in md
    assert "`data/collate_and_pad_the_batches.py:5 (collate; def, function-level)`" in md
    assert f"<summary>{len(a.skipped)} rules did not apply" in md
