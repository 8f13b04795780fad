"""The CLI on the real trn2 exports (issue 42): diff and its kernel gate as a user runs them."""

from __future__ import annotations

import gzip
import json

from tests.conftest import TRN2, run_cli

BASE = TRN2 / "baseline_bf16_s1024.json.gz"
FUSED = TRN2 / "fused_bf16_s1024.json.gz"


def _layer_ns(path) -> int:  # type: ignore[no-untyped-def]
    with gzip.open(path, "rt") as f:
        rows = json.load(f)["layer_summary"]
    (row,) = [r for r in rows if r["name"] == "/sg00/Unknown"]
    return int(row["end"]) - int(row["start"])


def _slower(stdout: str) -> str:
    """The 'What got slower' block of diff's text output."""
    if "What got slower:" not in stdout:
        return ""
    return stdout.split("What got slower:", 1)[1].split("\n\n", 1)[0]


def test_a_faster_kernel_is_not_slower_and_passes_the_kernel_gate() -> None:
    base, fused = _layer_ns(BASE), _layer_ns(FUSED)
    assert fused < 0.7 * base  # 87.7 -> 51.3 us in AWS's own layer rows
    r = run_cli("diff", str(BASE), str(FUSED), "--metric", "kernel", "--fail-on-regression", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Kernel window" not in _slower(r.stdout)
    pct = 100 * (fused - base) / base
    assert f"{pct:+.1f}% of the base kernel window" in r.stdout
    assert "The kernel did not get slower" in r.stdout


def test_a_slower_kernel_fails_the_kernel_gate_and_leads_the_answer() -> None:
    base, fused = _layer_ns(FUSED), _layer_ns(BASE)
    r = run_cli("diff", str(FUSED), str(BASE), "--metric", "kernel", "--fail-on-regression", "5")
    assert r.returncode == 1, r.stdout + r.stderr
    pct = 100 * (fused - base) / base
    assert _slower(r.stdout).strip().startswith("Kernel window")
    assert f"kernel: {pct:+.1f}% of the base kernel window" in r.stderr


COMMANDS = {
    "info": [],
    "analyze": [],
    "report": ["-o", "{tmp}/r.html"],
    "metrics": ["-o", "{tmp}/m"],
    "export": ["--format", "chrome", "-o", "{tmp}/x.json"],
    "whatif": [],
    "tui": [],
    "ranks": [],
    "compare": [],
    "convert": ["-o", "{tmp}/c.parquet"],
}


def test_every_command_answers_a_folder_of_raw_captures_with_the_export_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = tmp_path / "capture"
    raw.mkdir()
    (raw / "run_vnc_0.ntff").write_bytes(b"\x00NTFF")  # only AWS's tools read these
    (raw / "model.neff").write_bytes(b"\x00NEFF")
    runs = {c: [str(raw), *(a.format(tmp=tmp_path) for a in extra)] for c, extra in COMMANDS.items()}
    runs["diff"] = [str(raw), str(raw)]
    for command, args in runs.items():
        r = run_cli(command, *args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 3, (command, r.stderr)
        assert len(lines) == 1 and "neuron-profile view -n MODEL.neff -s run_vnc_0.ntff" in lines[0], (command, lines)
        assert "Traceback" not in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capture"]  # nothing written, nothing half-written


GPU_WORDS = (
    "DataLoader",
    "tensor-core",
    "Tensor Core",
    "NCCL",
    "CUDA",
    "cuda",
    "with_stack",
    "pin_memory",
    "ProfilerStep",
)


def test_no_gpu_words_in_any_text_output_of_a_neuron_profile_alone() -> None:
    for args in (
        ["analyze", str(BASE)],
        ["analyze", str(BASE), "--format", "markdown"],
        ["info", str(BASE)],
        ["whatif", str(BASE)],
    ):
        r = run_cli(*args)
        assert r.returncode == 0, r.stderr
        found = [w for w in GPU_WORDS if w in r.stdout]
        assert not found, (args, found)
        assert "untraced" not in r.stdout.replace("untraced host", "") or args[0] == "whatif", args
    text = run_cli("analyze", str(BASE)).stdout
    assert "a framework trace beside the device profile" in text
    assert "unexplained waits" not in text


def test_info_stream_busy_is_the_union_of_a_queues_overlapping_packets() -> None:
    """16 DMA engines stand behind one trn2 queue: their packets overlap, so a stream's busy
    time is their union (by hand here), never their sum, and never above the span."""
    r = run_cli("info", str(FUSED), "--format", "json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    with gzip.open(FUSED, "rt") as f:
        doc = json.load(f)
    rows = sorted(
        (d["timestamp"], d["timestamp"] + d["duration"])
        for d in doc["dma"]
        if d["subgraph"] == "sg00" and int(d["dma_queue"]) == 0
    )
    union, reach = 0, None
    for a, b in rows:
        if reach is None or a >= reach:
            union, reach = union + b - a, b
        elif b > reach:
            union, reach = union + b - reach, b
    total = sum(b - a for a, b in rows)
    assert total > 10 * union  # they overlap: a sum would say 81 us in a 66 us profile
    busy = {s["busy_ns"] for s in info["streams"]}
    assert union in busy
    assert max(busy) <= info["span_ns"]


def test_whatif_on_a_device_profile_alone_says_what_its_graph_lacks() -> None:
    r = run_cli("whatif", str(FUSED), "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["edges"] == 0  # no edge between queues: the export pairs no semaphore signal with its wait
    assert "a Neuron device profile alone" in out["note"] and "kernel window" in out["note"]
