"""neuron_explorer.profile(): exact source lines, cycles, and never breaking the user's program.

Real torch.profiler captures on the CPU; user code is a module written to tmp_path (outside
site-packages, so it is "user code" by the default rules).
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import neuron_explorer as ne  # noqa: E402
from neuron_explorer.collectors.capture.torch_profiler import CaptureWarning  # noqa: E402
from neuron_explorer.trace.errors import CollectorError  # noqa: E402

USER_CODE = textwrap.dedent(
    """
    import torch


    def step(model, opt, x):
        y = model(x)
        loss = torch.nn.functional.mse_loss(y, torch.zeros(16, 4))
        loss.backward()
        opt.step()
        return loss


    def slots(a):
        return a * 2
    """
)
FWD, LOSS, BWD, OPT = 6, 7, 8, 9  # the lines of step() above
SLOT_LINE = 14  # slots()'s ``a * 2``


def _load_user_module(tmp_path: Path):
    path = tmp_path / "user_train.py"
    path.write_text(USER_CODE)
    spec = importlib.util.spec_from_file_location("user_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cap")
    user, path = _load_user_module(tmp)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 8)
    with ne.profile(output=tmp / "t.parquet") as prof:
        user.step(model, opt, x)
        user.slots(x)
    return prof, path


def _ops(trace):
    df = trace.to_pandas()
    return df[df["kind"] == "cpu_op"]


def test_profile_writes_a_readable_trace_and_keeps_torch_api(captured):
    prof, _ = captured
    assert prof.path is not None and prof.path.is_file()
    reread = ne.load(prof.path)
    assert reread.num_events == prof.trace.num_events > 0
    assert reread.metadata["collector"] == "torch_profiler"
    assert "CPU" in reread.metadata["profiler_options"]["activities"]
    # torch.profiler's own API still works on the same object
    try:
        keys = {e.key for e in prof.key_averages()}
    except UnicodeDecodeError:  # torch's own parser on a name freed mid-profile (docs/capture.md)
        pytest.skip("torch's key_averages() hit a code object freed during profiling (a torch bug)")
    assert "aten::addmm" in keys


def test_forward_ops_carry_the_exact_calling_line(captured):
    prof, path = captured
    ops = _ops(prof.trace)
    fwd = ops[ops["name"].isin(["aten::linear", "aten::addmm", "aten::t"]) & ops["fwd_id"].isna()]
    assert len(fwd) >= 3
    assert set(fwd["src_line"]) == {FWD}
    assert set(fwd["src_precision"]) == {"line"}
    assert set(fwd["src_file"].astype(str)) == {str(path)}
    assert set(fwd["src_func"].astype(str)) == {"step"}


def test_backward_ops_inherit_their_forward_line(captured):
    prof, _ = captured
    ops = _ops(prof.trace)
    addmm_bwd = ops[ops["name"].astype(str).str.contains("AddmmBackward0")]
    assert len(addmm_bwd) >= 2  # the evaluate_function wrapper and the node
    assert set(addmm_bwd["src_line"]) == {FWD}
    assert set(addmm_bwd["src_precision"]) == {"forward"}
    assert addmm_bwd["fwd_id"].notna().any()
    loss_bwd = ops[ops["name"].astype(str).str.contains("MseLossBackward0")]
    assert len(loss_bwd) and set(loss_bwd["src_line"]) == {LOSS}


def test_loss_and_optimizer_ops_map_to_their_own_lines(captured):
    prof, _ = captured
    ops = _ops(prof.trace)
    loss = ops[ops["name"] == "aten::mse_loss"]
    assert len(loss) == 1 and loss["src_line"].iloc[0] == LOSS
    df = prof.trace.to_pandas()
    opt_ann = df[df["name"].astype(str).str.startswith("Optimizer.step")]
    assert len(opt_ann) == 1
    start, end = opt_ann["start_ns"].iloc[0], opt_ann["start_ns"].iloc[0] + opt_ann["dur_ns"].iloc[0]
    under_opt = ops[(ops["start_ns"] >= start) & (ops["start_ns"] < end)]
    assert len(under_opt) >= 2 and set(under_opt["src_line"]) == {OPT}
    grad_seed = ops[ops["name"] == "aten::ones_like"]  # made by loss.backward() itself
    assert set(grad_seed["src_line"]) == {BWD}


def test_operator_slots_get_their_line_from_the_bytecode(captured):
    # ``a * 2`` makes no Python call: its line comes from slots()'s bytecode (operator_lines)
    prof, _ = captured
    ops = _ops(prof.trace)
    mul = ops[(ops["name"] == "aten::mul") & (ops["src_func"].astype(str) == "slots")]
    assert len(mul) == 1
    assert mul["src_precision"].iloc[0] == "line"
    assert mul["src_line"].iloc[0] == SLOT_LINE
    assert prof.trace.metadata["operator_lines"]["exact"] >= 1


def test_in_memory_conversion_matches_torchs_own_json_export(tmp_path, monkeypatch):
    """Event for event, with pruning of one-time Python off (it drops Python events torch exports)."""
    from neuron_explorer.collectors.kineto.kineto_json import import_kineto_json

    monkeypatch.setenv("NEURON_EXPLORER_NO_PRUNE", "1")

    model = torch.nn.Linear(8, 4)
    with ne.profile() as prof:
        model(torch.randn(4, 8)).sum().backward()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    ours = prof.trace.to_pandas()
    theirs = import_kineto_json(tmp_path / "t.json").to_pandas()
    for kind in ("cpu_op", "python", "flow"):
        a = ours[ours["kind"] == kind]
        b = theirs[theirs["kind"] == kind]
        assert sorted(a["name"].astype(str)) == sorted(b["name"].astype(str)), kind
        assert sorted(a["start_ns"]) == sorted(b["start_ns"]), kind
    a, b = ours[ours["kind"] == "cpu_op"], theirs[theirs["kind"] == "cpu_op"]
    assert sorted(a["fwd_id"].notna()) == sorted(b["fwd_id"].notna())
    assert sorted(a["input_shapes"].dropna()) == sorted(b["input_shapes"].dropna())


class _ResultsWithoutActivities:
    """torch's real results of a capture, as a torch release whose in-memory records this
    reader does not know shows them (seen on torch 2.11: no ``_ITraceActivity``)."""

    def __init__(self, results):
        self._results = results

    def trace_activities(self):
        raise AttributeError("'_ProfilerResult' object has no attribute 'trace_activities'")

    def __getattr__(self, name):
        return getattr(self._results, name)


def test_a_torch_without_the_known_records_still_gets_its_trace_through_the_json_export(tmp_path):
    from neuron_explorer.collectors.capture.capture_convert import convert_results, saved_export

    user, _ = _load_user_module(tmp_path)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.profiler.profile(with_stack=True, record_shapes=True) as prof:
        user.step(model, opt, torch.randn(16, 8))
    results = _ResultsWithoutActivities(prof.profiler.kineto_results)
    trace = convert_results(results, {"collector": "torch_profiler", "cycle": 0})
    assert "trace_activities" in trace.metadata["capture_fallback"]
    df = trace.to_pandas()
    # the same ops as torch's own export holds (torch saves a result once: the fallback's file is
    # that export), counted there by name
    import json

    exported = [
        e["name"]
        for e in json.loads(Path(saved_export(results)).read_text())["traceEvents"]
        if e.get("cat") == "cpu_op"
    ]
    assert sorted(df[df["kind"] == "cpu_op"]["name"].astype(str)) == sorted(exported)
    # exact lines all the same (the event tree's, put back on the JSON's ops: see
    # tests/unit/test_capture_fallback.py): the ops of step() point at its lines
    ops = df[(df["kind"] == "cpu_op") & df["src_file"].astype(str).str.endswith("user_train.py")]
    assert {FWD, LOSS, BWD, OPT} <= set(ops["src_line"])
    assert set(ops["src_precision"].astype(str)) <= {"line", "function", "forward"}


def test_export_chrome_trace_after_a_fallback_conversion_writes_what_torch_saved(tmp_path, monkeypatch):
    """ne.profile end to end on a torch whose records are unknown: the trace is written, and the
    user's own export_chrome_trace still works (torch itself would refuse a second save)."""
    import gzip
    import json

    from neuron_explorer.collectors.capture import capture_convert

    real = capture_convert.results_to_raw

    def unknown_records(results, *args, **kwargs):
        return real(_ResultsWithoutActivities(results), *args, **kwargs)

    monkeypatch.setattr(capture_convert, "results_to_raw", unknown_records)
    model = torch.nn.Linear(8, 4)
    with ne.profile(output=tmp_path / "t.parquet") as prof:
        model(torch.randn(4, 8)).sum().backward()
    assert prof.path is not None and "capture_fallback" in ne.load(prof.path).metadata
    prof.export_chrome_trace(str(tmp_path / "mine.json.gz"))
    with gzip.open(tmp_path / "mine.json.gz") as f:
        names = {e.get("name") for e in json.load(f)["traceEvents"]}
    assert "aten::addmm" in names


def test_each_schedule_cycle_is_its_own_file_and_the_users_handler_still_runs(tmp_path):
    model = torch.nn.Linear(8, 4)
    seen: list[int] = []
    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2)
    # torch warns once per process that each cycle starts cleared: forget that it did, so the
    # check below sees whether our capture lets it through
    import torch.profiler.profiler as torch_profiler_module

    shown = getattr(torch_profiler_module, "_WARNINGS_SHOWN", set())
    for message in [m for m in shown if "clears events" in m]:
        shown.discard(message)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ne.profile(
            output=tmp_path / "run.parquet", schedule=sched, on_trace_ready=lambda p: seen.append(p.step_num)
        ) as prof:
            for _ in range(9):
                model(torch.randn(4, 8)).sum().backward()
                prof.step()
    assert seen == [4, 8]
    # a trace per cycle is what we want: torch's "clears events at the end of each cycle" is noise
    assert not [w for w in caught if "clears events" in str(w.message)]
    assert prof.paths == [tmp_path / "run.parquet", tmp_path / "run.cycle1.parquet"]
    for cycle, path in enumerate(prof.paths):
        t = ne.load(path)
        assert t.metadata["cycle"] == cycle
        assert set(t.to_pandas()["cycle"]) == {cycle}
        steps = sorted(t.steps()["step"])
        assert steps == ([2, 3] if cycle == 0 else [6, 7])


def test_decorator_profiles_each_call(tmp_path):
    prof = ne.profile(output=tmp_path / "dec.parquet")

    @prof
    def work(n):
        return torch.ones(n).sum().item()

    assert work(3) == 3.0
    assert prof.path == tmp_path / "dec.parquet" and prof.path.is_file()


def test_a_profiler_already_running_is_reported_and_the_code_still_runs():
    ran = False
    with torch.profiler.profile() as outer:
        with pytest.warns(CaptureWarning, match="already recording"), ne.profile() as inner:
            ran = bool(torch.ones(2).sum() == 2)
        assert inner.trace is None and inner.errors
    assert ran
    assert len(outer.key_averages()) > 0  # the outer profiler was left alone

    with torch.profiler.profile(), pytest.raises(CollectorError, match="already recording"):  # noqa: SIM117 - the order of checks reads clearer nested
        with ne.profile(on_error="raise"):
            pass


def test_a_profiler_started_inside_is_reported_not_silently_empty():
    with pytest.warns(CaptureWarning, match="recorded no events|already recording"), ne.profile() as prof:  # noqa: SIM117 - the order of checks reads clearer nested
        with torch.profiler.profile():
            torch.ones(3).sum()
    assert prof.errors
    assert prof.trace is None or prof.trace.num_events > 0


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_write_failure_is_reported_without_hiding_the_users_exception(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        try:
            (ro / "probe").touch()
            pytest.skip("running as a user who ignores directory permissions (root)")
        except PermissionError:
            pass
        with (
            pytest.warns(CaptureWarning, match="cannot write the trace"),
            pytest.raises(ValueError, match="user bug") as info,
            ne.profile(output=ro / "t.parquet"),
        ):
            torch.ones(2).sum()
            raise ValueError("user bug")
        assert any("cannot write the trace" in n for n in getattr(info.value, "__notes__", []))
        assert not list(ro.iterdir())

        # no exception of the user's: on_error="raise" makes it an error
        with pytest.raises(CollectorError, match="cannot write the trace"):  # noqa: SIM117 - the order of checks reads clearer nested
            with ne.profile(output=ro / "t.parquet", on_error="raise"):
                torch.ones(2).sum()
    finally:
        ro.chmod(0o700)


def test_users_exception_still_gets_its_trace(tmp_path):
    with pytest.raises(KeyError), ne.profile(output=tmp_path / "t.parquet") as prof:
        torch.ones(4).sum()
        raise KeyError("x")
    assert prof.path.is_file()
    assert (ne.load(prof.path).to_pandas()["name"] == "aten::sum").any()


def test_write_failure_when_the_output_cannot_be_created_is_reported(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the output directory should be")
    with pytest.warns(CaptureWarning, match="cannot write the trace"):  # noqa: SIM117 - the order of checks reads clearer nested
        with ne.profile(output=blocker / "t.parquet") as prof:
            torch.ones(2).sum()
    assert prof.path is None and prof.trace is not None  # the capture itself is kept in memory
    assert blocker.read_text().startswith("a file")


THREADED_SCRIPT = """
import threading, time, torch
stop = False
def background():
    while not stop:
        time.sleep(0.001)
threading.Thread(target=background, daemon=True).start()
import neuron_explorer as ne
x = torch.randn(64, 64)
with ne.profile(output="threads.parquet") as prof:
    for _ in range(3):
        y = x @ x
        prof.step()
stop = True
print(prof.path)
"""


def test_a_thread_started_before_profiling_does_not_lose_the_capture(tmp_path):
    """torch gives the Python events of a thread that was running before the profiler started
    the thread id 2**64 - 1; the conversion used to raise OverflowError on it and the whole
    cycle was lost (a CaptureWarning, no trace) for any program with such a thread."""
    import subprocess

    (tmp_path / "threaded.py").write_text(THREADED_SCRIPT)
    r = subprocess.run(
        [sys.executable, "threaded.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0 and "converting the profile failed" not in r.stderr, r.stderr[-2000:]
    assert r.stdout.strip().endswith("threads.parquet")
    df = ne.load(tmp_path / "threads.parquet").to_pandas()
    assert (df["name"] == "aten::mm").sum() == 3
