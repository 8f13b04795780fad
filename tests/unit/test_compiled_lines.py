"""Compiled regions to user lines (issue 30): every kernel call of an Inductor graph takes the
lines its provenance names, on real traces (an H200 training trace of tests/gpu/gpt_block.py
with its in-process provenance map, torch 2.11; a CPU trace with the TORCH_TRACE log of its run,
torch 2.13).

The expected lines are recomputed from the raw JSON by a different method than the collector's:
the k-th kernel call of a graph run (in time order, whatever its name) is the graph's k-th
handle, where the collector matches the j-th call of each kernel name to that name's j-th handle.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json
from neuron_explorer.collectors.lines.compiled_lines import apply_compiled_lines
from neuron_explorer.collectors.lines.inductor_provenance import (
    CompileMaps,
    frames_of,
    op_name_of,
    read_provenance_file,
    split_graphs,
)
from neuron_explorer.trace.errors import TraceFormatError

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto"
H200 = DATA / "h200"
CPU = DATA / "cpu_compiled"
_LINE = re.compile(r"line (\d+), in ")


def _innermost_lines(stack_traces: list[str]) -> list[int]:
    """Each stack trace's last frame's line (every frame here is user code), in order, once."""
    out: list[int] = []
    for text in stack_traces:
        line = int(_LINE.findall(text)[-1])
        if line not in out:
            out.append(line)
    return out


def _expected_by_call_order(events: list[dict], runs: list[dict], handles: list[tuple[str, list[str]]]) -> dict:
    """External id of each kernel call -> its expected lines: the k-th call in a run is the
    k-th handle (kernel names ``triton_*``/``graph_N_cpp_*`` or an extern aten op)."""
    names = {op_name_of(k) for k, _ in handles}
    expected = {}
    for run in runs:
        calls = sorted(
            (
                e
                for e in events
                if e.get("cat") == "cpu_op"
                and e.get("tid") == run["tid"]
                and run["ts"] <= e["ts"] <= run["ts"] + run["dur"]
                and re.sub(r"^graph_\d+_", "", e["name"]) in names
            ),
            key=lambda e: e["ts"],
        )
        assert [re.sub(r"^graph_\d+_", "", c["name"]) for c in calls] == [op_name_of(k) for k, _ in handles]
        for call, (_, traces) in zip(calls, handles):
            expected[call["args"]["External id"]] = _innermost_lines(traces)
    return expected


def test_every_h200_kernel_with_provenance_gets_the_lines_its_stack_traces_name() -> None:
    raw = json.loads(gzip.decompress((H200 / "compiled_train.json.gz").read_bytes()))
    prov = json.loads((H200 / "compiled_provenance.json").read_text())["kernel_stack_traces"]
    handles = [(k.rsplit(":", 1)[0], v) for k, v in sorted(prov.items(), key=lambda kv: int(kv[0].rsplit(":", 1)[1]))]
    events = raw["traceEvents"]
    # the map is the backward graph's (torch kept the lazy backward compile's): its runs
    runs = [e for e in events if e.get("name") == "CompiledFunctionBackward"]
    assert len(runs) == 3
    expected = _expected_by_call_order(events, runs, handles)
    assert len(expected) == 90  # 30 calls a run

    trace = apply_compiled_lines(
        import_kineto_json(H200 / "compiled_train.json.gz"), read_provenance_file(H200 / "compiled_provenance.json")
    )
    df = trace.to_pandas()
    kernels = df[df["kind"] == "kernel"]
    ext = kernels["external_id"]
    with_prov = kernels[ext.isin(list(expected))]
    # every device kernel those calls launched: the Triton kernels and the extern GEMMs' kernels
    assert len(with_prov) == 108
    triton = kernels[kernels["name"].astype(str).str.startswith("triton_")]
    prov_names = {k for k, _ in handles}
    assert set(with_prov["name"].astype(str)) >= (set(triton["name"].astype(str)) & prov_names)
    for row in with_prov.itertuples():
        want = expected[int(row.external_id)]
        assert [x["line"] for x in row.src_lines] == want
        assert row.src_line == want[0]
        assert row.src_precision == "compiled"
        assert str(row.src_file).endswith("tests/gpu/gpt_block.py")
    # kernels of graphs the provenance does not cover keep their own attribution
    others = kernels[~ext.isin(list(expected))]
    assert (others["src_precision"].astype(str) != "compiled").all()
    assert others["src_lines"].isna().all()
    meta = trace.metadata["compiled_lines"]
    assert meta["matched_calls"] == 90 and meta["kernel_calls"] == 30


def test_a_cpu_trace_with_its_torch_trace_log_through_convert(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    cmd = [sys.executable, "-m", "neuron_explorer", "convert", str(CPU / "trace.json.gz"), "-o", str(out)]
    done = subprocess.run([*cmd, "--provenance", str(CPU / "torch_trace.log.gz"), "-q"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import neuron_explorer as ne

    trace = ne.load(out)
    df = trace.to_pandas()
    events = json.loads(gzip.decompress((CPU / "trace.json.gz").read_bytes()))["traceEvents"]
    log = gzip.decompress((CPU / "torch_trace.log.gz").read_bytes()).decode().splitlines()
    maps = [
        json.loads(log[i + 1][1:])
        for i, line in enumerate(log)
        if '"name": "inductor_provenance_tracking_kernel_stack_traces"' in line
    ]
    assert len(maps) == 2  # the forward graph's, then the lazy backward's

    def ordered(m: dict) -> list[tuple[str, list[str]]]:
        return [(k.rsplit(":", 1)[0], v) for k, v in sorted(m.items(), key=lambda kv: int(kv[0].rsplit(":", 1)[1]))]

    forward = [e for e in events if e.get("name") == "CompiledFunction"]
    backward = [e for e in events if e.get("name") == "CompiledFunctionBackward"]
    assert len(forward) == len(backward) == 3
    expected = {
        **_expected_by_call_order(events, forward, ordered(maps[0])),
        **_expected_by_call_order(events, backward, ordered(maps[1])),
    }
    ops = df[(df["kind"] == "cpu_op") & df["external_id"].isin(list(expected))]
    assert len(ops) == len(expected) and len(ops) > 0
    assert ops["name"].astype(str).str.contains("cpp_fused").any()
    marks = {
        i: line.split("# LINE:")[1].strip()
        for i, line in enumerate((CPU / "tiny_compiled.py").read_text().splitlines(), 1)
        if "# LINE:" in line
    }
    for row in ops.itertuples():
        want = expected[int(row.external_id)]
        assert [x["line"] for x in row.src_lines] == want
        assert row.src_line == want[0] and row.src_precision == "compiled"
        assert set(want) <= set(marks)  # only the marked lines of the block's forward
    # a fused kernel named for gelu carries the line that calls gelu
    gelu = ops[ops["name"].astype(str).str.contains("cpp_fused_gelu")]
    assert len(gelu) and all(any(marks.get(x["line"]) == "hidden" for x in v) for v in gelu["src_lines"])


def test_op_names_of_kernel_calls() -> None:
    assert op_name_of("extern_kernels.mm") == "aten::mm"
    assert op_name_of("extern_kernels.addmm") == "aten::addmm"
    assert op_name_of("torch.ops.aten.convolution.default") == "aten::convolution"
    assert op_name_of("triton_poi_fused_add_0") == "triton_poi_fused_add_0"
    assert op_name_of("cpp_fused_gelu_0") == "cpp_fused_gelu_0"


def test_stack_traces_with_caret_lines_keep_their_frames() -> None:
    text = (
        '  File "/a/model.py", line 46, in forward\n    x = x + self.attention(x)\n        ^^^^^^\n'
        '  File "/a/layers.py", line 12, in attention\n    return q @ k\n'
    )
    assert frames_of(text) == (("/a/model.py", 46, "forward"), ("/a/layers.py", 12, "attention"))


def _map(*keys: str) -> dict[str, list[str]]:
    return {k: [f'  File "/m.py", line {10 + i}, in f\n'] for i, k in enumerate(keys)}


def test_each_graph_keeps_only_its_own_calls_when_torch_repeats_earlier_ones() -> None:
    # a frame compile with a backward compiled at once: the backward's map repeats the forward's;
    # lazy backward compiles: each repeats the earlier lazy ones (handles keep counting)
    graphs = split_graphs(
        [
            CompileMaps("0/0", False, [_map("cpp_a:1"), _map("cpp_a:1", "cpp_b:2")]),
            CompileMaps("1/0", False, [_map("cpp_a:1")]),
            CompileMaps("1/0", True, [_map("cpp_c:1")]),
            CompileMaps("2/0", True, [_map("cpp_c:1", "cpp_d:2")]),
        ]
    )
    got = [(g.compile_id, g.backward, [(c.kernel, c.handle) for c in g.calls]) for g in graphs]
    assert got == [
        ("0/0", False, [("cpp_a", 1)]),
        ("0/0", True, [("cpp_b", 2)]),
        ("1/0", False, [("cpp_a", 1)]),
        ("1/0", True, [("cpp_c", 1)]),
        ("2/0", True, [("cpp_d", 2)]),
    ]


def test_the_torch_trace_log_names_each_graph_with_its_compile_id() -> None:
    graphs = read_provenance_file(CPU / "torch_trace.log.gz")
    assert [(g.compile_id, g.backward) for g in graphs] == [("0/0", False), ("0/0", True)]
    assert all(c.stacks for g in graphs for c in g.calls)


@pytest.mark.parametrize("content", ["", "not json, not a log", '{"kernel_stack_traces": {}}', '["a list"]'])
def test_a_file_without_provenance_is_one_clear_error(tmp_path: Path, content: str) -> None:
    path = tmp_path / "prov.json"
    path.write_text(content)
    with pytest.raises(TraceFormatError) as err:
        read_provenance_file(path)
    assert str(path) in str(err.value)


def test_convert_with_a_bad_provenance_file_exits_3_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "prov.json"
    bad.write_text("not json, not a log")
    out = tmp_path / "t.parquet"
    cmd = [sys.executable, "-m", "neuron_explorer", "convert", str(CPU / "trace.json.gz"), "-o", str(out)]
    done = subprocess.run([*cmd, "--provenance", str(bad)], capture_output=True, text=True)
    assert done.returncode == 3
    assert done.stderr.strip().count("\n") == 0 and str(bad) in done.stderr
    assert not out.exists()
