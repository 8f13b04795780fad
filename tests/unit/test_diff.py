"""``diff``: per-step comparison of two traces, its confidence, the CI gate and the renderers.

The HTA ``trace_compare`` pair is checked against numbers computed here from the raw JSON with
plain Python (never from the code under test). Synthetic Kineto traces built by ``kineto``
below plant known changes for the statistics and the gate.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers.diff import DiffError, diff_traces, gate
from neuron_explorer.analyzers.diff.stats import bootstrap_delta
from neuron_explorer.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto" / "hta" / "trace_compare"
BASE, TEST = DATA / "base.json.gz", DATA / "test.json.gz"


# ------------------------------------------------------------------ the HTA pair, independently
def _raw(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def _expected(path: Path) -> dict[str, Any]:
    """Per-step kernel and op totals from the raw events: an event belongs to the ProfilerStep
    window its start (a device event: its launching runtime call's start) falls in; an op's time
    is its duration minus its direct children's on the same thread."""
    events = _raw(path)
    windows = [(e["ts"], e["ts"] + e["dur"]) for e in events if e["name"].startswith("ProfilerStep#")]

    def step_of(ts: float) -> int | None:
        return next((i for i, (s, e) in enumerate(windows) if s <= ts < e), None)

    host = [e for e in events if e["cat"] in ("cpu_op", "cuda_runtime", "user_annotation", "python_function")]
    launches = {e["args"]["correlation"]: e["ts"] for e in events if e["cat"] == "cuda_runtime"}
    kernels: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in events:
        launched = launches.get(e["args"].get("correlation"), e["ts"]) if "args" in e else e["ts"]
        if e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset") and step_of(launched) is not None:
            kernels[e["name"]][0] += 1
            kernels[e["name"]][1] += e["dur"] * 1000

    def contains(a: dict, b: dict) -> bool:
        return a is not b and (a["pid"], a["tid"]) == (b["pid"], b["tid"]) and a["ts"] <= b["ts"] and b["ts"] + b["dur"] <= a["ts"] + a["dur"]  # fmt: skip

    ops: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    op_shapes: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    for e in events:
        if e["cat"] not in ("cpu_op", "cuda_runtime") or step_of(e["ts"]) is None:
            continue
        inside = [c for c in host if contains(e, c)]
        direct = [c for c in inside if not any(contains(p, c) for p in inside)]
        self_ns = (e["dur"] - sum(c["dur"] for c in direct)) * 1000
        shapes = json.dumps(e["args"]["Input Dims"]) if "Input Dims" in e["args"] else ""
        for table, key in ((ops, e["name"]), (op_shapes, (e["name"], shapes))):
            table[key][0] += 1
            table[key][1] += self_ns
    return {
        "steps": len(windows),
        "step_ns": 1000 * sum(e - s for s, e in windows) / len(windows),
        "kernels": kernels,
        "ops": ops,
        "op_shapes": op_shapes,
    }


def _per_step(table: dict, n: int) -> dict:
    return {k: (c / n, t / n) for k, (c, t) in table.items()}


def test_hta_pair_matches_an_independent_computation_from_the_raw_json():
    d = diff_traces(ne.load(BASE), ne.load(TEST))
    eb, en = _expected(BASE), _expected(TEST)
    assert (d.base["num_steps"], d.new["num_steps"]) == (eb["steps"], en["steps"]) == (2, 2)
    step = d.metrics.set_index("metric").loc["step"]
    assert step["base_ns"] == pytest.approx(eb["step_ns"]) and step["new_ns"] == pytest.approx(en["step_ns"])

    def check(table: str, keys: list[str], expected_b: dict, expected_n: dict) -> None:
        got = d.tables[table]
        b, n = _per_step(expected_b, eb["steps"]), _per_step(expected_n, en["steps"])
        assert len(got) == len(set(b) | set(n))
        for r in got.to_dict(orient="records"):
            key = r["name"] if len(keys) == 1 else (r["name"], json.dumps(json.loads(r["shapes"])) if r["shapes"] else "")  # fmt: skip
            bc, bt = b.get(key, (0, 0.0))
            nc, nt = n.get(key, (0, 0.0))
            assert (r["base_count"], r["new_count"]) == pytest.approx((bc, nc)), key
            assert (r["base_ns"], r["new_ns"]) == pytest.approx((bt, nt)), key
            assert r["delta_ns"] == pytest.approx(nt - bt), key
            assert r["status"] == ("new" if not bc else "gone" if not nc else "same" if (bc, bt) == (nc, nt) else "changed")  # fmt: skip

    check("kernels", ["name"], eb["kernels"], en["kernels"])
    check("ops", ["name"], eb["ops"], en["ops"])
    check("op_shapes", ["name", "shapes"], eb["op_shapes"], en["op_shapes"])
    # what the pair plants: three ops only in the test trace, and one add<int> kernel fewer
    new_ops = set(d.tables["ops"].query("status == 'new'")["name"])
    assert new_ops == set(en["ops"]) - set(eb["ops"]) == {"All2All_Pooled_Req", "AddmmBackward0", "CatBackward0"}
    assert d.regressions("ops").iloc[0]["name"] == "All2All_Pooled_Req"
    assert d.answer == []  # the biggest, +155.5 us, is 0.14% of a 111 ms step: below the answer's floor
    # two steps a side: no confidence, said so
    assert not d.enough_steps and d.metrics["confidence"].isna().all()
    assert any("not enough steps" in n for n in d.notes)


def test_attribution_categories_add_up_to_the_step_time_on_both_sides():
    d = diff_traces(ne.load(BASE), ne.load(TEST))
    m = d.metrics.set_index("metric")
    cats = m.drop(index="step")
    assert len(cats) >= 2
    assert cats["base_ns"].sum() == pytest.approx(m.loc["step", "base_ns"])
    assert cats["new_ns"].sum() == pytest.approx(m.loc["step", "new_ns"])
    assert cats["delta_ns"].sum() == pytest.approx(m.loc["step", "delta_ns"], abs=1)


# ------------------------------------------------------------------ synthetic traces
def kineto(
    step_us: list[float],
    gemm_us: list[float],
    item_calls: list[int] | None = None,
    allreduce_bytes: tuple[int, ...] = (),
) -> dict:
    """A Kineto trace: one ProfilerStep per entry, each with an aten::mm that launches a gemm
    kernel of the given duration; ``item_calls`` adds that many aten::item + cudaMemcpyAsync +
    DtoH memcpy per step; ``allreduce_bytes``: one NCCL all-reduce kernel of each size per step."""
    ev: list[dict] = []
    t, corr = 1_000_000.0, 1
    for i, (dur, g) in enumerate(zip(step_us, gemm_us)):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1, "ts": t, "dur": dur})  # fmt: skip
        ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t + 1, "dur": 20, "args": {"Input Dims": [[64, 64], [64, 64]]}})  # fmt: skip
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2, "dur": 5, "args": {"correlation": corr}})  # fmt: skip
        ev.append({"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": t + 10, "dur": g, "args": {"correlation": corr, "device": 0, "stream": 7}})  # fmt: skip
        corr += 1
        for j, size in enumerate(allreduce_bytes):
            s = t + 20 + g + 100 * j
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 3 + j, "dur": 1, "args": {"correlation": corr}})  # fmt: skip
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "pid": 0, "tid": 9, "ts": s, "dur": 50, "args": {"correlation": corr, "device": 0, "stream": 9, "Collective name": "allreduce", "In msgsize": size}})  # fmt: skip
            corr += 1
        for k in range((item_calls or [0] * len(step_us))[i]):
            s = t + 30 + g + 10 * k
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::item", "pid": 1, "tid": 1, "ts": s, "dur": 8, "args": {"Input Dims": [[]]}})  # fmt: skip
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": s + 1, "dur": 6, "args": {"correlation": corr}})  # fmt: skip
            ev.append({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7, "ts": s + 2, "dur": 3, "args": {"correlation": corr, "device": 0, "stream": 7}})  # fmt: skip
            corr += 1
        t += dur + 5
    return {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "test GPU"}]}


def write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path


STEADY = [1000, 1010, 990, 1005, 995, 1002, 998, 1001]


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    """A base and a new trace whose gemm kernel got 150 us slower per step, with 5 new aten::item per step."""
    base = write(tmp_path / "base.json", kineto(STEADY, [300 + i % 3 for i in range(8)]))
    new = write(tmp_path / "new.json", kineto([s + 200 for s in STEADY], [450 + i % 3 for i in range(8)], [5] * 8))
    return base, new


def test_a_planted_slowdown_is_found_with_confidence(pair):
    d = diff_traces(ne.load(pair[0]), ne.load(pair[1]))
    m = d.metrics.set_index("metric")
    assert m.loc["step", "delta_ns"] == pytest.approx(200_000)
    assert m.loc["step", "confidence"] >= 0.95
    k = d.tables["kernels"].set_index("name")
    assert k.loc["gemm_kernel", "delta_ns"] == pytest.approx(150_000)
    assert k.loc["gemm_kernel", "confidence"] == 1.0
    assert k.loc["gemm_kernel", "ci_low_ns"] > 0
    ops = d.tables["ops"].set_index("name")
    assert ops.loc["cudaMemcpyAsync", "status"] == "new" and ops.loc["cudaMemcpyAsync", "new_count"] == 5
    assert d.answer[0]["label"] == "gemm_kernel" and "150.0 us per step" in d.answer[0]["text"]
    assert any("`cudaMemcpyAsync` 0 -> 5 calls (new)" in a["text"] for a in d.answer)


def test_the_same_distribution_reshuffled_is_not_a_confident_change(tmp_path):
    rng = np.random.default_rng(1)
    a = rng.normal(1000, 30, 12).round(1).tolist()
    b = rng.permutation(a).tolist()
    d = diff_traces(ne.load(write(tmp_path / "a.json", kineto(a, [300] * 12))), ne.load(write(tmp_path / "b.json", kineto(b, [300] * 12))))  # fmt: skip
    assert abs(d.metrics.set_index("metric").loc["step", "delta_ns"]) < 1
    assert not any(c.failed for c in gate(d, 0.0))
    assert d.answer == []


def test_bootstrap_confidence_follows_the_evidence():
    rng = np.random.default_rng(0)
    base = rng.normal(100, 5, (3, 10))
    new = base + np.array([[0.0], [20.0], [-20.0]])
    new[0] = rng.permutation(base[0])
    conf, low, high = bootstrap_delta(base, new)
    assert conf[0] < 0.95 and conf[1] == 1.0 and conf[2] == 1.0
    assert low[1] > 0 and high[2] < 0 and low[0] < 0 < high[0]
    conf2, _, _ = bootstrap_delta(base[:, :2], new[:, :2])
    assert np.isnan(conf2).all()  # fewer than 3 steps: not enough to say


def test_warmup_steps_are_left_out_unless_asked(tmp_path):
    one = ne.load(write(tmp_path / "w1.json", kineto([5000, *STEADY], [300] * 9)))
    two = ne.load(write(tmp_path / "w2.json", kineto([5000, 4000, *STEADY], [300] * 10)))
    d = diff_traces(one, one)
    assert d.base["num_steps"] == 8 and d.base["warmup_dropped"] == 1
    assert diff_traces(one, one, include_warmup=True).base["num_steps"] == 9
    # one warm-up step on one side, two on the other: both drop two, the same part of the run
    d = diff_traces(one, two)
    assert (d.base["warmup_dropped"], d.new["warmup_dropped"]) == (2, 2)
    assert (d.base["num_steps"], d.new["num_steps"]) == (7, 8)


def test_gate_fails_only_past_the_threshold_and_on_the_chosen_metric(pair):
    d = diff_traces(ne.load(pair[0]), ne.load(pair[1]))
    step_pct = d.metrics.set_index("metric").loc["step", "delta_pct"]
    assert step_pct == pytest.approx(20.0, abs=0.2)
    assert any(c.failed for c in gate(d, 5.0))
    assert not any(c.failed for c in gate(d, 25.0))
    assert [c.metric for c in gate(d, 5.0, ["step"])] == ["step"]
    untraced_only = gate(d, 5.0, ["untraced"])
    assert [c.metric for c in untraced_only] == ["untraced"]
    # the gemm kernel added 150 us of compute to a 1 ms step; the new copies 15 us of memcpy
    m = d.metrics.set_index("metric")
    assert m.loc["compute", "delta_pct"] == pytest.approx(15.0, abs=0.2)
    assert [c.failed for c in gate(d, 5.0, ["compute", "copy"])] == [True, False]
    assert [c.metric for c in gate(d, 5.0, ["categories"])] == d.categories
    with pytest.raises(DiffError, match="unknown metric"):
        gate(d, 5.0, ["stpe"])


def test_cli_gate_exit_codes_and_output_formats(pair, tmp_path, capsys):
    base, new = map(str, pair)
    assert main(["diff", base, new, "--fail-on-regression", "5"]) == 1
    out, err = capsys.readouterr()
    assert "What got slower" in out and "regression: step" in err
    assert main(["diff", base, new, "--fail-on-regression", "50"]) == 0
    assert main(["diff", base, base, "--fail-on-regression", "1"]) == 0
    capsys.readouterr()
    assert main(["diff", base, new, "--format", "json", "-o", str(tmp_path / "d.json"), "--fail-on-regression", "5"]) == 1  # fmt: skip
    doc = json.loads((tmp_path / "d.json").read_text())
    assert doc["gate"]["failed"] and doc["schema_version"] and doc["tables"]["kernels"][0]["name"] == "gemm_kernel"
    assert main(["diff", base, new, "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## Diff:") and "| `gemm_kernel` |" in md
    assert main(["diff", base, new, "--metric", "nope"]) == 3


def test_a_bad_input_is_one_line_exit_3_and_no_output_file(pair, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = tmp_path / "out.md"
    assert main(["diff", str(pair[0]), str(bad), "--format", "markdown", "-o", str(out)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.json" in err[0]
    assert not out.exists() and not list(tmp_path.glob(".out.md*"))
    assert main(["diff", str(pair[0]), str(tmp_path / "missing.parquet")]) == 3
    assert "missing.parquet" in capsys.readouterr().err


def test_traces_without_steps_compare_as_one_window(tmp_path):
    doc = kineto([1000], [300])
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not e["name"].startswith("ProfilerStep")]
    t = ne.load(write(tmp_path / "nostep.json", doc))
    d = diff_traces(t, t)
    assert d.base["num_steps"] == 1 and not d.base["has_steps"]
    assert any("one window" in n for n in d.notes)
    assert d.tables["kernels"].set_index("name").loc["gemm_kernel", "base_ns"] == 300_000


def test_html_page_escapes_trace_strings_and_embeds_the_view(tmp_path):
    evil = "</script><img src=x onerror=alert(1)>"
    base = kineto(STEADY, [300] * 8)
    new = kineto(STEADY, [400] * 8)
    for e in new["traceEvents"]:
        if e["name"] == "gemm_kernel":
            e["name"] = evil
    out = tmp_path / "d.html"
    code = main(["diff", str(write(tmp_path / "a.json", base)), str(write(tmp_path / "b.json", new)), "--format", "html", "-o", str(out)])  # fmt: skip
    assert code == 0
    page = out.read_text()
    assert "<img" not in page and page.count("</script>") == 1
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    data = json.loads(page.split('id="diff-data">', 1)[1].split("</script>", 1)[0])
    kernels = next(s for s in data["sections"] if s["title"].startswith("Kernels") and "slower" in s["title"])
    assert kernels["rows"][0][0] == evil and kernels["rows"][0][3:5] == ["+400.0 us", "new"]  # renamed: a new kernel


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "html"])
def test_every_format_renders_a_trace_without_steps_or_device(tmp_path, fmt):
    doc = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5}]}
    a = str(write(tmp_path / "a.json", doc))
    out = tmp_path / f"out.{fmt}"
    assert main(["diff", a, a, "--format", fmt, "-o", str(out), "--fail-on-regression", "1"]) == 0
    assert out.stat().st_size > 0


async def test_tui_view_shows_the_answer_and_a_table_per_section(pair):
    from textual.widgets import DataTable, Static, TabbedContent

    from neuron_explorer.reports.diff.view import build
    from neuron_explorer.tui.views.diff import DiffApp

    view = build(diff_traces(ne.load(pair[0]), ne.load(pair[1])))
    app = DiffApp(view)
    async with app.run_test(size=(160, 48)) as pilot:
        summary = str(app.query_one("#diff-summary", Static).render())
        assert "Step time" in summary and "gemm_kernel" in summary
        first = app.query_one("#diff-table-0", DataTable)
        assert first.row_count == len(view.sections[0].rows) and first.get_row_at(0)[0] == "step"
        await pilot.press("2")
        assert app.query_one(TabbedContent).active == "diff-tab-1"
        kernels = next(i for i, s in enumerate(view.sections) if s.title.startswith("Kernels") and "slower" in s.title)
        table = app.query_one(f"#diff-table-{kernels}", DataTable)
        assert table.get_row_at(0)[0] == "gemm_kernel" and table.get_row_at(0)[3] == "+150.0 us"
        await pilot.press("q")


def test_lines_match_across_an_edit_and_across_checkouts():
    import pandas as pd

    from neuron_explorer.analyzers.diff.lines import line_keys

    files = {
        "/ci/a/repo/model.py": ["import torch", "def step(x):", "    y = x @ x", "    return y.sum()"],
        "/ci/b/repo/model.py": ["import torch", "def step(x):", "    print(x.item())", "    y = x @ x", "    return y.sum()"],
    }  # fmt: skip
    base = pd.DataFrame({"src_file": ["/ci/a/repo/model.py"] * 2, "src_line": [3, 4], "src_func": ["step"] * 2})
    new = pd.DataFrame({"src_file": ["/ci/b/repo/model.py"] * 3, "src_line": [3, 4, 5], "src_func": ["step"] * 3})
    kb, kn = line_keys(base, new, files.get)
    assert set(kb["file_key"]) == set(kn["file_key"]) == {"model.py"}
    by_text = dict(zip(kn["text"], kn["line_key"]))
    assert dict(zip(kb["text"], kb["line_key"])) == {t: by_text[t] for t in ("y = x @ x", "return y.sum()")}
    assert by_text["print(x.item())"] not in set(kb["line_key"])
    # without the sources, lines match by number (and the moved ones cannot be told apart)
    kb2, kn2 = line_keys(base, new, None)
    assert set(kb2["line_key"]) < set(kn2["line_key"])


def test_collectives_compare_by_name_and_message_size(tmp_path):
    mb = 1 << 20
    base = write(tmp_path / "a.json", kineto(STEADY, [300] * 8, allreduce_bytes=(4 * mb,)))
    new = write(tmp_path / "b.json", kineto(STEADY, [300] * 8, allreduce_bytes=(4 * mb, 8 * mb)))
    t = diff_traces(ne.load(base), ne.load(new)).tables["collectives"].set_index(["name", "bytes"])
    assert t.loc[("allreduce", 4 * mb), "status"] == "same"
    row = t.loc[("allreduce", 8 * mb)]
    assert row["status"] == "new" and row["new_count"] == 1 and row["new_ns"] == 50_000
    assert row["label"] == "allreduce (8.0 MB)"
