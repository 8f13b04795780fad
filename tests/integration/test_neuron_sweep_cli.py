"""compare / diff / analyze / info on Neuron profiles through the real CLI (subprocess)."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from neuron_explorer.collectors.neuron.synth.matmul import MatmulSpec, write_matmul_json
from tests.conftest import help_examples, neuron_kernel_from_rows

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "neuron_explorer", *args], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, dict]]:
    d = tmp_path_factory.mktemp("sweep")
    docs = {n: write_matmul_json(d / f"matmul_M128_K128_N{n}.json", MatmulSpec(n=n)) for n in (1024, 136, 512)}
    (d / "kernel_info.json").write_text(json.dumps({"kernels": [{"name": "mm"}], "summary": {"total_time": 1}}))
    return d, docs


def _kernel(doc: dict) -> int:
    start, end = neuron_kernel_from_rows(doc)
    return end - start


def test_compare_a_directory_gives_one_row_per_profile_sorted(sweep, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d, docs = sweep
    r = cli("compare", str(d), "--format", "json", "--sort", "n")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["n"] for row in rows] == [136, 512, 1024]
    assert "kernel_info.json" in r.stderr and "skipped" in r.stderr  # one line, not a row
    for row in rows:
        doc = docs[row["n"]]
        s = doc["summary"][0]
        assert row["kernel_time_ns"] == _kernel(doc)
        assert row["dma_transfer_total_bytes"] == sum(x["transfer_size"] for x in doc["dma"] if x["aggregated"] == "no")
        assert row["total_time_ns"] == round(s["total_time"] * 1e9)
        assert row["tensor_engine_instruction_count"] == s["tensor_engine_instruction_count"]
        assert row["hbm_read_bytes"] == s["hbm_read_bytes"] and row["hardware_flops"] == s["hardware_flops"]
        assert row["mfu_estimated_pct"] == pytest.approx(100 * s["mfu_estimated_percent"])
        assert row["static_dma_size"] == s["static_dma_size"]
        assert row["pe_tiles"] == math.ceil(128 / 128) * math.ceil(128 / 128) * math.ceil(row["n"] / 512)
    r = cli("compare", str(d), "--format", "parquet", "-o", str(tmp_path / "s.parquet"), "--sort=-kernel_time_ns")
    assert r.returncode == 0, r.stderr
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert df["n"].tolist() == [1024, 512, 136]
    r = cli("compare", str(d), "--format", "csv", "--html", str(tmp_path / "s.html"))
    assert r.returncode == 0 and len(pd.read_csv(io.StringIO(r.stdout))) == 3
    page = (tmp_path / "s.html").read_text()
    assert "<svg" in page and page.count("<circle") == 3
    r = cli("compare", str(d))
    assert r.returncode == 0 and "matmul_M128_K128_N136.json" in r.stdout
    r = cli("compare", str(d), "--sort", "nope")
    errors = [x for x in r.stderr.strip().splitlines() if "error" in x]
    assert r.returncode != 0 and len(errors) == 1 and "no such column" in errors[0]


def test_compare_takes_gpu_traces_too(sweep, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from neuron_explorer.collectors.neuron.synth import SynthSpec, write_framework_trace

    d, _ = sweep
    fw = tmp_path / "fw.pt.trace.json"
    write_framework_trace(fw, SynthSpec())
    r = cli("compare", str(d / "matmul_M128_K128_N136.json"), str(fw), "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [row["kind"] == "neuron" for row in rows] == [True, False]
    assert rows[1]["span_ns"] > 0


def test_diff_of_a_small_and_a_large_matmul_reports_the_kernel_growth(sweep) -> None:  # type: ignore[no-untyped-def]
    d, docs = sweep
    small, large = d / "matmul_M128_K128_N136.json", d / "matmul_M128_K128_N1024.json"
    r = cli("diff", str(small), str(large), "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rows = {m["metric"]: m for m in out["metrics"]}
    kb, kn = _kernel(docs[136]), _kernel(docs[1024])
    assert rows["kernel"]["base_ns"] == kb and rows["kernel"]["new_ns"] == kn
    assert rows["kernel"]["delta_pct"] == pytest.approx(100 * (kn - kb) / kb)
    summary = {m["metric"]: m for m in out["neuron"]["summary"]}
    bytes_of = {n: sum(x["transfer_size"] for x in docs[n]["dma"] if x["aggregated"] == "no") for n in (136, 1024)}
    assert summary["DMA bytes"]["base"] == bytes_of[136] and summary["DMA bytes"]["new"] == bytes_of[1024]
    assert out["answer"][0]["text"].startswith("Kernel window")
    assert any(o["metric"].startswith("model/linear / dot") for o in out["neuron"]["operators"])
    # The step (span) barely moves; the gate still trips on the kernel.
    assert abs(rows["step"]["delta_pct"]) < 5
    gate = cli("diff", str(small), str(large), "--fail-on-regression", "5")
    assert gate.returncode == 1 and "kernel" in gate.stderr
    text = cli("diff", str(small), str(large))
    assert "Kernel window" in text.stdout and "DMA qPoolIO0" in text.stdout and "DMA queue 14" in text.stdout


def test_analyze_and_info_refuse_in_one_line(sweep, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d, _ = sweep
    r = cli("analyze", str(d))
    assert r.returncode == 3 and "separate device profiles" in r.stderr and f"neuron-explorer compare {d}" in r.stderr
    assert len([x for x in r.stderr.splitlines() if "error" in x]) == 1
    r = cli("info", str(d / "kernel_info.json"))
    assert r.returncode == 3 and "kernel_info.json" in r.stderr
    ntff = tmp_path / "x_vnc_0.ntff"
    ntff.write_bytes(b"\x00")
    r = cli("info", str(ntff))
    assert r.returncode == 3 and "neuron-profile view" in r.stderr and "--output-format json" in r.stderr


def test_info_and_analyze_show_the_kernel_and_engine_table(sweep, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    d, docs = sweep
    f = d / "matmul_M128_K128_N512.json"
    r = cli("info", str(f))
    assert r.returncode == 0, r.stderr
    assert "engines alone active" in r.stdout and "engines plus DMA active" in r.stdout
    assert "kernel" in r.stdout and "DMA qSyncIO0" in r.stdout and "Tensor" in r.stdout
    r = cli("analyze", str(f))
    assert r.returncode == 0, r.stderr
    assert "nan / nan" not in r.stdout and "nan" not in r.stdout.split("Operator Table")[-1].split("\n\n")[0]
    advice = r.stdout.split("rules did not apply")[0]  # (the list of skipped rules names what they lack)
    for cuda in ("pin_memory", "DataLoader", "non_blocking", "with_stack", "CUDA"):
        assert cuda not in advice
    m = tmp_path / "m"
    r = cli("metrics", str(f), "-o", str(m))
    assert r.returncode == 0, r.stderr
    engines = pd.read_parquet(m / "neuron_engines.parquet")
    summary = pd.read_parquet(m / "neuron_summary.parquet")
    assert {"Tensor", "Vector", "Scalar", "GpSimd", "Sync", "qSyncIO0"} <= set(engines["unit"])
    assert int(summary["kernel_time_ns"].iloc[0]) == _kernel(docs[512])
    fields = pd.read_parquet(m / "fields.parquet")
    assert set(fields.loc[fields["table"] == "neuron_summary", "field"]) == set(summary.columns)


def test_every_compare_example_in_its_help_runs(tmp_path: Path) -> None:
    """Each example line of ``compare --help``, run as printed, in a folder holding what it names."""
    from tests.conftest import KINETO

    sweep = tmp_path / "sweep"
    sweep.mkdir()
    for n in (1000, 136, 1008):  # lexicographic order would put 1000 and 1008 before 136
        write_matmul_json(sweep / f"matmul_{128}x{128}x{n}.json", MatmulSpec(n=n))
    write_matmul_json(tmp_path / "a.json", MatmulSpec(n=256))
    write_matmul_json(tmp_path / "b.json", MatmulSpec(n=768))
    (tmp_path / "gpu.pt.trace.json").write_bytes(
        __import__("gzip").decompress((KINETO / "h200" / "gemm_shapes.json.gz").read_bytes())
    )
    examples = [x[2:] for x in help_examples("compare") if x[:2] == ["neuron-explorer", "compare"]]
    assert len(examples) >= 4
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    for args in examples:
        r = subprocess.run(
            [sys.executable, "-m", "neuron_explorer", "compare", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            cwd=tmp_path,
        )
        assert r.returncode == 0, f"compare {' '.join(args)}: {r.stderr}"
    # The sweep sorted by n is in numeric order, with m/k/n parsed from "128x128xN".
    r = subprocess.run(
        [sys.executable, "-m", "neuron_explorer", "compare", "sweep/", "--sort", "n", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    rows = json.loads(r.stdout)
    assert [(row["m"], row["k"], row["n"]) for row in rows] == [(128, 128, 136), (128, 128, 1000), (128, 128, 1008)]
    assert {row["dtype"] for row in rows} == {"fp16"}  # from the MATMULs' operands: the names do not say
    assert (tmp_path / "sweep.csv").read_text().count("\n") == 4
    assert len(pd.read_parquet(tmp_path / "sweep.parquet")) == 3
    page = (tmp_path / "sweep.html").read_text()
    assert "m*k*n" in page  # the chart's X axis is the parsed size, not the row order


def test_the_real_trn2_sweep_parses_sequence_and_dtype_and_orders_numerically() -> None:
    from tests.conftest import TRN2

    r = cli("compare", str(TRN2), "--format", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    names = [Path(row["file"]).name for row in rows]
    # Numeric by sequence length, then dtype, then the name: never 1024 before 512.
    assert [row["seq"] for row in rows] == [512] * 4 + [1024] * 4
    for row, name in zip(rows, names):
        assert row["dtype"] == name.split("_")[1]  # baseline_bf16_s512 -> bf16
    bad = cli("compare", str(TRN2), "--sort", "seqq")
    assert bad.returncode == 3 and "did you mean seq" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and len(bad.stderr) < 300
