"""The live-set replay (analyzers.memory_live) and the memory_leak rule, on real captures and
real traces.

Planted workloads (tests/planted/memory_leak.py, memory_peak.py, clean.py) are profiled for real
with ``neuron_explorer.profile`` (profile_memory=True) in a subprocess; the expected bytes come
from the scripts' tensor shapes, never from the code under test. The real traces with memory
events in tests/data are checked against an independent replay of their raw JSON.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.analyzers.memory_live import at_peak_view
from neuron_explorer.analyzers.metrics.memory import NO_MEMORY_EVENTS
from neuron_explorer.trace.model import Trace
from tests.conftest import KINETO, shared_fixture
from tests.planted import memory_leak as leak_script
from tests.planted import memory_peak as peak_script

pytest.importorskip("torch")
pytestmark = [pytest.mark.torch]

ROOT = Path(__file__).resolve().parents[2]
#: the real traces in tests/data that hold [memory] events
MEMORY_TRACES = (
    "tracelens/qwen_h100.json.gz",
    "tracelens/qwen_mi300.json.gz",
    "local/cpu_mlp_step4.json",
    "local/example_cpu_small.json",
)
#: the 216k-event V100 training trace (26,770 device memory events), bundled in tests/data (conftest)
SCALE_FIXTURE = "kineto/hta/df_index_resolver/df_index_resolver.json.gz"


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Analysis]:
    """The three workloads, captured at once (independent processes)."""
    out = tmp_path_factory.mktemp("memory_live")
    runs = {"leak": ("memory_leak", 4), "peak": ("memory_peak", 4), "clean": ("clean", 6)}
    procs = {
        key: subprocess.Popen(
            [sys.executable, "-m", "tests.planted._harness", name, str(out / f"{key}.parquet"), str(steps)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for key, (name, steps) in runs.items()
    }
    result = {}
    for key, p in procs.items():
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, f"capturing {key} failed:\n{err[-2000:]}"
        result[key] = analyze(ne.load(out / f"{key}.parquet"))
    return result


def _marked_line(path: Path, marker: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if f"# {marker}" in text)


# ------------------------------------------------------------------------------ leaks
def test_planted_leak_is_found_at_its_line_with_the_bytes_the_script_keeps(captured: dict[str, Analysis]) -> None:
    a = captured["leak"]
    found = [f for f in a.findings if f.rule_id == "memory_leak"]
    assert len(found) == 1, [(f.rule_id, f.title) for f in a.findings]
    f = found[0]
    # the script keeps one relu output of BATCH x HIDDEN float32 per step
    expected = leak_script.BATCH * leak_script.HIDDEN * 4
    line = _marked_line(Path(leak_script.__file__), "PLANTED")
    top = f.source_lines[0]
    assert Path(top["file"]).name == "memory_leak.py" and top["line"] == line
    assert top["bytes_per_step"] == pytest.approx(expected, rel=0.05)
    assert f.metrics["bytes_per_step"]["value"] == pytest.approx(expected, rel=0.05)
    # judged: the steady steps but the first and the last. Which leading steps are warm-up depends
    # on this run's timings, so the test applies docs/rules.md's warm-up rule (a leading step, at
    # most two, over 1.5x the median of the steps after the first two) to the raw step events.
    steps = ne.load(a.summary["source"]).to_pandas().query("kind == 'step'").sort_values("start_ns")
    durs = steps["dur_ns"].tolist()
    assert len(durs) == leak_script.STEPS
    later = sorted(durs[2:])
    mid = len(later) // 2
    median = later[mid] if len(later) % 2 else (later[mid - 1] + later[mid]) / 2
    warm = 0
    while warm < 2 and durs[warm] > 1.5 * median:
        warm += 1
    assert f.metrics["steps"]["value"] == leak_script.STEPS - max(1, warm) - 1
    assert "list" in f.recommendation and ".item()" in f.recommendation


def test_clean_training_loop_has_no_leak(captured: dict[str, Analysis]) -> None:
    a = captured["clean"]
    assert "memory_leak" in a.rules_run
    assert "memory_leak" not in dict(a.skipped), dict(a.skipped).get("memory_leak")
    assert not [f for f in a.findings if f.rule_id == "memory_leak"]


def test_leak_threshold_is_what_decides(captured: dict[str, Analysis]) -> None:
    """The same leaking trace, with the bytes-per-step threshold above what it keeps: no finding."""
    trace = ne.load(captured["leak"].summary["source"]) if captured["leak"].summary["source"] else None
    assert trace is not None
    expected = leak_script.BATCH * leak_script.HIDDEN * 4
    a = analyze(trace, rules=["memory_leak"], thresholds={"memory_leak.min_bytes_per_step": 2 * expected})
    assert not a.findings


# ------------------------------------------------------------------------------ peaks
def test_live_set_at_the_peak_by_line_matches_the_allocations(captured: dict[str, Analysis]) -> None:
    a = captured["peak"]
    by_line = at_peak_view(a.live_memory, "line")
    path = Path(peak_script.__file__)
    got = {
        int(r.src_line): int(r.live_bytes) for r in by_line.itertuples() if r.src_file and "memory_peak" in r.src_file
    }
    for marker, (rows, cols) in peak_script.SHAPES.items():
        assert got.get(_marked_line(path, marker), 0) == pytest.approx(rows * cols * 4, rel=0.05), marker
    expected_total = sum(r * c * 4 for r, c in peak_script.SHAPES.values())
    peak = int(a.memory_at_peak.loc[a.memory_at_peak["scope"] == "trace", "peak_allocated_bytes"].iloc[0])
    assert peak == pytest.approx(expected_total, rel=0.05)
    # every step has its own peak, with the same three buffers alive
    steps = a.memory_at_peak[a.memory_at_peak["scope"] == "step"]
    assert steps["step"].nunique() == a.steps["step"].nunique() >= 3


def test_phases_of_a_training_step(captured: dict[str, Analysis]) -> None:
    """The leaking MLP: its kept activations are retained, its gradients outlive backward."""
    live = captured["leak"].live_memory
    phases = at_peak_view(live, "phase").set_index("phase")["live_bytes"]
    kept = (leak_script.STEPS) * leak_script.BATCH * leak_script.HIDDEN * 4
    assert phases["retained"] >= kept
    grad_fc1 = leak_script.HIDDEN * leak_script.IN_FEATURES * 4  # fc1.weight.grad
    assert phases["gradients"] >= grad_fc1


# ------------------------------------------------------------------------------ replay against Total Allocated
def _raw_memory_events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("name") == "[memory]" and "Bytes" in (e.get("args") or {})]


@pytest.mark.parametrize("name", [*MEMORY_TRACES, SCALE_FIXTURE])
def test_replay_agrees_with_total_allocated_on_real_traces(name: str) -> None:
    path = shared_fixture(name) if name == SCALE_FIXTURE else KINETO / name
    a = analyze(ne.load(path), rules=["memory_leak"])
    rp = a.memory_replay
    assert len(rp)
    for r in rp.itertuples():
        assert r.agrees, r.reason
        assert r.events == r.events_with_total == r.agreeing_events
    # independently: per device, the offset is the first event's Total Allocated minus its Bytes
    raw = _raw_memory_events(path)
    first: dict[tuple[int, int], dict] = {}
    for e in sorted(raw, key=lambda e: float(e["ts"])):
        first.setdefault((e["args"]["Device Type"], e["args"]["Device Id"]), e["args"])
    offsets = sorted(v["Total Allocated"] - v["Bytes"] for v in first.values())
    assert sorted(int(x) for x in rp["offset_bytes"]) == offsets


def test_live_bytes_at_the_peak_match_an_independent_replay() -> None:
    """qwen_h100: replay the raw JSON with a dict of live blocks by address, stop at the
    trace's peak event, and compare the bytes alive (allocated in the trace) with ours."""
    path = KINETO / "tracelens/qwen_h100.json.gz"
    a = analyze(ne.load(path), rules=["memory_leak"])
    raw = [e for e in _raw_memory_events(path) if e["args"]["Device Type"] == 1]
    raw.sort(key=lambda e: float(e["ts"]))
    peak_total = max(e["args"]["Total Allocated"] for e in raw)
    live: dict[int, int] = {}
    for e in raw:
        args = e["args"]
        if args["Bytes"] > 0:
            live[args["Addr"]] = args["Bytes"]
        else:
            live.pop(args["Addr"], None)
        if args["Total Allocated"] == peak_total:
            break
    t = a.memory_at_peak
    t = t[(t["scope"] == "trace") & (t["device_type"] == "cuda")]
    assert int(t["peak_allocated_bytes"].iloc[0]) == peak_total
    in_trace = int(t.loc[t["phase"] != "before_trace", "live_bytes"].sum())
    assert in_trace == sum(live.values())
    assert int(t["live_bytes"].sum()) == peak_total


def test_replay_says_where_and_why_when_an_event_is_missing(tmp_path: Path) -> None:
    """Take one free out of a real trace (it becomes a plain instant): from there on the replay
    cannot agree with Total Allocated, and the check names the event and the reason."""
    trace = ne.load(KINETO / "tracelens/qwen_h100.json.gz")
    ev = trace.events
    kind = pc.cast(ev["kind"], pa.string())
    is_mem = pc.equal(kind, "memory").to_numpy(zero_copy_only=False)
    b = ev["bytes"].to_numpy(zero_copy_only=False)
    dt = pc.cast(ev["device_type"], pa.string()).to_numpy(zero_copy_only=False)
    victims = [i for i in range(len(b)) if is_mem[i] and dt[i] == "cuda" and b[i] < 0]
    victim = victims[len(victims) // 2]
    kinds = kind.to_pylist()
    kinds[victim] = "instant"
    broken = Trace(
        ev.set_column(ev.schema.get_field_index("kind"), "kind", pa.array(kinds).dictionary_encode()),
        dict(trace.metadata),
    )
    out = tmp_path / "broken.parquet"
    broken.write(out)
    a = analyze(ne.load(out), rules=["memory_leak"])
    r = a.memory_replay[a.memory_replay["device_type"] == "cuda"].iloc[0]
    assert not r["agrees"]
    following = next(i for i in range(victim + 1, len(b)) if is_mem[i] and dt[i] == "cuda")
    assert r["first_mismatch_event_id"] == following
    assert r["max_diff_bytes"] == -b[victim]
    assert "no allocation or free in the trace explains" in r["reason"]


# ------------------------------------------------------------------------------ no memory events
def test_trace_without_memory_events_says_how_to_record_them() -> None:
    a = analyze(ne.load(KINETO / "hta/alexnet_a100.json.gz"), rules=["memory"])
    assert a.memory_summary["missing"] == NO_MEMORY_EVENTS
    skipped = dict(a.skipped)
    for rid in ("memory_leak", "memory_capacity", "memory_fragmentation", "alloc_churn"):
        assert "record --memory" in skipped[rid] and "profile_memory=True" in skipped[rid], rid
    assert a.memory_at_peak.empty and a.memory_live.empty


def test_memory_tables_are_in_the_json(captured: dict[str, Analysis]) -> None:
    doc = captured["leak"].to_dict()
    tables = doc["tables"]
    assert tables["memory_at_peak"] and tables["memory_at_peak"][0]["scope"] == "trace"
    assert {r["step"] for r in tables["memory_live"]} == set(range(1, leak_script.STEPS + 1))
    assert tables["memory_replay"][0]["agrees"] is True
    json.dumps(doc)  # JSON-able


# ------------------------------------------------------------------------------ agents
def test_agents_get_the_live_set_at_the_peak_and_the_metrics_tables() -> None:
    from neuron_explorer.agents import views
    from neuron_explorer.agents.catalog import TraceCatalog
    from neuron_explorer.agents.tables import METRICS_TABLES, metrics_tables

    catalog = TraceCatalog.open([KINETO / "tracelens/qwen_h100.json.gz", KINETO / "hta/alexnet_a100.json.gz"])
    answer = views.memory_at_peak(catalog.get("qwen_h100"), by="phase")
    cuda = [r for r in answer["rows"] if r["device_type"] == "cuda"]
    peak = next(p for p in answer["peaks"] if p["device_type"] == "cuda")["peak_allocated_bytes"]
    assert sum(r["live_bytes"] for r in cuda) == peak
    assert {r["phase"] for r in cuda} >= {"before_trace", "temporaries"}
    assert all(r["agrees"] for r in answer["replay"])
    missing = views.memory_at_peak(catalog.get("alexnet_a100"))
    assert missing["rows"] == [] and "record --memory" in missing["missing"]
    tables, errors = metrics_tables(catalog)
    assert not errors
    for name in ("memory_at_peak", "memory_live", "memory_replay", "memory_fragmentation"):
        assert name in tables and name in METRICS_TABLES
    assert tables["memory_replay"].num_rows == 2  # qwen_h100's cpu and cuda:0


# ------------------------------------------------------------------------------ fragmentation
def _with_driver_call(path: Path, call: str, out: Path) -> Path:
    """The real trace with one runtime call inside its step renamed to a driver allocation."""
    trace = ne.load(path)
    ev = trace.events
    kinds = pc.cast(ev["kind"], pa.string()).to_pylist()
    steps = ev["step"].to_pylist()
    names = pc.cast(ev["name"], pa.string()).to_pylist()
    victim = next(i for i, (k, s) in enumerate(zip(kinds, steps)) if k == "runtime" and s is not None and s >= 0)
    names[victim] = call
    column = pa.array(names).dictionary_encode()
    Trace(ev.set_column(ev.schema.get_field_index("name"), "name", column), dict(trace.metadata)).write(out)
    return out


def test_a_reserved_gap_alone_is_not_fragmentation() -> None:
    """qwen_h100 holds 1.6 GB reserved but free (62%), with a flat reservation and no driver
    calls in its step: a cache being reused, no finding."""
    a = analyze(ne.load(KINETO / "tracelens/qwen_h100.json.gz"), rules=["memory_fragmentation"])
    fr = a.memory_fragmentation.iloc[0]
    assert fr["reserved_gap_at_peak_bytes"] == fr["peak_reserved_bytes"] - fr["allocated_at_reserved_peak_bytes"]
    assert fr["reserved_gap_at_peak_bytes"] > 1 << 30 and fr["reserved_growth_steady_bytes"] == 0
    assert "memory_fragmentation" not in dict(a.skipped) and not a.findings


@pytest.mark.parametrize(
    ("name", "call", "advice"),
    [("tracelens/qwen_h100.json.gz", "cudaMalloc", True), ("tracelens/qwen_mi300.json.gz", "hipMalloc", False)],
)
def test_gap_with_driver_allocations_in_a_step_is_fragmentation(
    tmp_path: Path, name: str, call: str, advice: bool
) -> None:
    path = _with_driver_call(KINETO / name, call, tmp_path / "t.parquet")
    a = analyze(ne.load(path), rules=["memory_fragmentation"])
    assert len(a.findings) == 1
    f = a.findings[0]
    assert f.metrics["driver_allocs"]["value"] == 1
    fr = a.memory_fragmentation.iloc[0]
    assert f.metrics["gap_bytes"]["value"] == fr["reserved_gap_at_peak_bytes"]
    # expandable_segments is CUDA's allocator setting: advised on the H100, not on the MI300
    assert ("expandable_segments:True" in f.recommendation) is advice


# ------------------------------------------------------------------------------ report
def test_report_stacks_live_memory_by_phase_and_lists_the_peak() -> None:
    from neuron_explorer.reports.html import build_report_data

    trace = ne.load(KINETO / "tracelens/qwen_h100.json.gz")
    a = analyze(trace)
    data = build_report_data(trace, a)
    fig = data["figures"]["memory_phases"]
    peak = a.memory_at_peak[(a.memory_at_peak["scope"] == "trace") & (a.memory_at_peak["device_type"] == "cuda")]
    peak_bytes = int(peak["peak_allocated_bytes"].iloc[0])
    # the stack at the highest point is the peak (GiB, rounded to 3 decimals per phase)
    totals = [sum(vals) for vals in zip(*(trace_["y"] for trace_ in fig["data"]))]
    assert max(totals) == pytest.approx(peak_bytes / 2**30, abs=0.01)
    assert {t["name"] for t in fig["data"]} == {"before trace", "temporaries"}
    t0 = int(a.memory["start_ns"][a.memory["device_type"] == "cuda"].min())
    assert fig["layout"]["shapes"][0]["x0"] == pytest.approx((int(peak["peak_ns"].iloc[0]) - t0) / 1e6)
    table = data["tables"]["memory_at_peak"]
    assert table["total_rows"] == int((a.memory_at_peak["scope"] == "trace").sum())
    assert table["rows"]["live_bytes"][0] == int(peak["live_bytes"].max())


# ------------------------------------------------------------------------------ TUI
async def test_tui_overview_shows_the_peak_and_the_lines_holding_it() -> None:
    from neuron_explorer.tui.app import ExplorerApp
    from neuron_explorer.tui.data import TraceSource

    trace = ne.load(KINETO / "local/cpu_mlp_step4.json")
    a = analyze(trace)
    app = ExplorerApp(TraceSource(trace, name="cpu_mlp_step4", analyzer=lambda t: a))
    async with app.run_test(size=(160, 60)) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        panel = app.query_one("#overview-memory")
        assert panel.display
        # the composited screen as plain text: what a user reads in the terminal
        text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
    top = at_peak_view(a.live_memory, "line").iloc[0]
    assert f"{top['src_file']}:{top['src_line']}" in text
    from neuron_explorer.trace.units import format_quantity

    peak = int(a.memory_at_peak["peak_allocated_bytes"].max())
    assert "gradients" in text and f"peak {format_quantity(peak, 'bytes')}" in text


# ------------------------------------------------------------------------------ the user's path
LEAKY_SCRIPT = """\
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 128), torch.randint(0, 4, (64,))
history = []
for _ in range(8):
    out = model(x)
    history.append(torch.mul(out, 1.0))  # LEAK: 64 x 4 float32 per step, kept with its graph
    loss = torch.nn.functional.cross_entropy(out, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
"""


def test_record_memory_then_analyze_names_the_leaking_line(tmp_path: Path) -> None:
    """What a user runs: ``record --memory script.py`` then ``analyze --format json``; the
    threshold is lowered to the script's small per-step size (64 x 4 float32 = 1 KiB)."""
    script = tmp_path / "train.py"
    script.write_text(LEAKY_SCRIPT)
    out = tmp_path / "train.parquet"
    run = [sys.executable, "-m", "neuron_explorer"]
    rec = subprocess.run(
        [*run, "record", "--memory", "-o", str(out), str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert rec.returncode == 0, rec.stderr[-2000:]
    ana = subprocess.run(
        [*run, "analyze", str(out), "--format", "json", "--threshold", "memory_leak.min_bytes_per_step=512"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert ana.returncode in (0, 1), ana.stderr[-2000:]
    doc = json.loads(ana.stdout)
    leaks = [f for f in doc["findings"] if f["rule_id"] == "memory_leak"]
    assert leaks, [f["rule_id"] for f in doc["findings"]]
    line = next(i for i, t in enumerate(LEAKY_SCRIPT.splitlines(), 1) if "# LEAK" in t)
    top = leaks[0]["source_lines"][0]
    assert Path(top["file"]).name == "train.py" and top["line"] == line
    # the kept output, plus the 8-byte wrapped scalar its graph (MulBackward0) keeps with it
    assert top["bytes_per_step"] == pytest.approx(64 * 4 * 4, rel=0.05)


# ------------------------------------------------------------------------------ capacity
def test_capacity_names_the_lines_alive_at_the_peak_and_advises_for_the_run_traced() -> None:
    """qwen_h100 is inference (no backward pass): the finding names the line holding the most at
    the peak with its live bytes, and gives no training advice; its reserved-but-free gap has a
    flat reservation, so no expandable_segments either."""
    a = analyze(
        ne.load(KINETO / "tracelens/qwen_h100.json.gz"),
        rules=["memory_capacity"],
        thresholds={"memory_capacity.max_peak_pct": 1},
    )
    (f,) = a.findings
    by_line = at_peak_view(a.live_memory, "line")
    top = by_line[(by_line["device_type"] == "cuda") & by_line["src_file"].notna()].iloc[0]
    assert (f.source_lines[0]["line"], f.source_lines[0]["value"]) == (int(top["src_line"]), int(top["live_bytes"]))
    assert "checkpoint" not in f.recommendation and "gradient accumulation" not in f.recommendation
    assert "inference_mode" in f.recommendation
    assert "expandable_segments" not in f.recommendation
    assert "Alive at the peak: temporaries" in f.message


def test_capacity_on_a_training_trace_advises_checkpointing() -> None:
    path = shared_fixture(SCALE_FIXTURE)
    a = analyze(ne.load(path), rules=["memory_capacity"], thresholds={"memory_capacity.max_peak_pct": 1})
    (f,) = a.findings
    assert "torch.utils.checkpoint.checkpoint(" in f.recommendation and "use_reentrant=False" in f.recommendation
    phases = at_peak_view(a.live_memory, "phase")
    act = int(phases.loc[(phases["phase"] == "activations") & (phases["device_type"] == "cuda"), "live_bytes"].iloc[0])
    assert act > 0
    from neuron_explorer.trace.units import format_quantity

    assert f"activations {format_quantity(act, 'bytes')}" in f.message
