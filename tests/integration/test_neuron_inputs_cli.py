"""Every command takes every Neuron input form, refuses bad ones in one line, and lives beside
AWS's own ``neuron-explorer`` (issue 14)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from neuron_explorer.cli import main
from neuron_explorer.collectors.neuron import synth

FORMS = ("legacy", "legacy_gz", "summary", "export", "several")


def _warnings(form: str) -> list[str]:
    """What the file itself warns (a summary-json file carries only the summary)."""
    return [] if form in ("summary", "export") else list(synth.SynthSpec().file_warnings)


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "neuron_explorer", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("forms")
    spec = synth.SynthSpec(executions=2, instructions_per_engine=20, transfers_per_queue=10)
    truth = synth.write_legacy_json(d / "legacy.json", spec)
    synth.write_legacy_json(d / "legacy.json.gz", spec, gz=True)
    (d / "summary.json").write_text(json.dumps(truth["summary"]))
    synth.write_parquet_export(d / "export", spec)
    several = d / "several"
    several.mkdir()
    synth.write_legacy_json(several / "nc0.json", spec)
    doc = json.loads((several / "nc0.json").read_text())
    doc["summary"][0]["nc_idx"] = 1
    (several / "nc1.json").write_text(json.dumps(doc))
    return {
        "legacy": d / "legacy.json",
        "legacy_gz": d / "legacy.json.gz",
        "summary": d / "summary.json",
        "export": d / "export",
        "several": several,
    }


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("form", FORMS)
def test_info_and_analyze_take_every_neuron_form(form: str, inputs, capsys) -> None:
    rc, out, err = _run(capsys, "info", str(inputs[form]), "--format", "json")
    assert rc == 0, err
    info = json.loads(out)
    assert info["neuron"], "a NeuronCore overview"
    assert info["profile_warnings"] == _warnings(form) * (2 if form == "several" else 1)
    assert all(d["metrics_only"] == (form == "summary") for d in info["neuron"])
    expected_cores = 2 if form == "several" else 1
    assert len(info["neuron"]) == expected_cores
    rc, out, err = _run(capsys, "analyze", str(inputs[form]), "--format", "json")
    assert rc == 0, err
    summary = json.loads(out)["summary"]
    assert summary["verdict"].startswith("NeuronCore")
    assert summary["profile_warnings"] == info["profile_warnings"]


@pytest.mark.parametrize("form", FORMS)
def test_convert_and_report_take_every_neuron_form(form: str, inputs, tmp_path: Path, capsys) -> None:
    out = tmp_path / "t.parquet"
    rc, _, err = _run(capsys, "convert", str(inputs[form]), "-o", str(out), "-q")
    assert rc == 0, err
    from neuron_explorer.trace import Trace

    trace = Trace.read(out)
    assert trace.metadata["neuron"]["devices"]
    assert (trace.num_events == 0) == (form == "summary")
    html = tmp_path / "r.html"
    rc, _, err = _run(capsys, "report", str(inputs[form]), "-o", str(html), "-q")
    assert rc == 0, err
    assert ("Missing DGE notifications" in html.read_text()) == bool(_warnings(form))


@pytest.mark.parametrize("form", FORMS)
def test_tui_source_and_mcp_catalog_take_every_neuron_form(form: str, inputs) -> None:
    from neuron_explorer.agents.catalog import TraceCatalog
    from neuron_explorer.agents.views import trace_summary
    from neuron_explorer.tui.data import TraceSource

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = TraceSource.open(inputs[form])
        (served,) = TraceCatalog.open([inputs[form]])
    assert src.trace.metadata["neuron"]["devices"]
    summary = trace_summary(served)["summary"]
    assert summary["profile_warnings"] == _warnings(form) * (2 if form == "several" else 1)


def test_summary_json_says_metrics_only(inputs, capsys) -> None:
    rc, out, _ = _run(capsys, "info", str(inputs["summary"]))
    assert rc == 0 and "metrics only" in out
    rc, out, _ = _run(capsys, "analyze", str(inputs["summary"]))
    assert rc == 0 and "Metrics only" in out


def _bad_inputs(d: Path) -> dict[str, Path]:
    good = json.dumps(synth.write_legacy_json(d / "good.json")["document"])
    (d / "truncated.json").write_text(good[: len(good) // 2])
    doc = json.loads(good)
    doc["metadata"] = ["not a record"]  # (a bad time only drops its record: test_input_validation.py)
    (d / "wrong_type.json").write_text(json.dumps(doc))
    doc = json.loads(good)
    doc["dma"] = "not a list"
    (d / "wrong_table.json").write_text(json.dumps(doc))
    doc = json.loads(good)
    for r in doc["instruction"]:
        del r["timestamp"]
    (d / "missing_field.json").write_text(json.dumps(doc))
    (d / "truncated.json.gz").write_bytes(gzip.compress(good.encode())[:400])
    (d / "raw").mkdir()
    (d / "raw" / "profile.ntff").write_bytes(b"\x00" * 16)
    return {p.name: p for p in d.iterdir() if p.name != "good.json"}


@pytest.mark.parametrize("command", ["convert", "info", "analyze", "report", "tui", "mcp"])
def test_bad_neuron_inputs_get_one_line_exit_3_and_no_output(command: str, tmp_path: Path, capsys) -> None:
    bad = _bad_inputs(tmp_path)
    for name, path in bad.items():
        out = tmp_path / f"out-{command}-{name}"
        args = [command, str(path)] + (["-o", str(out)] if command in ("convert", "analyze", "report") else [])
        rc, stdout, stderr = _run(capsys, *args)
        assert rc == 3, (name, stdout, stderr)
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("neuron-explorer: error:"), (name, stderr)
        assert str(path.name) in lines[0] and not stdout.strip()
        assert not out.exists()


def test_a_bad_neuron_input_through_the_real_process_prints_no_traceback(tmp_path: Path) -> None:
    path = _bad_inputs(tmp_path)["wrong_type.json"]
    r = _cli("analyze", str(path), "-o", str(tmp_path / "a.txt"), cwd=tmp_path)
    assert r.returncode == 3 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "a.txt").exists()


# ------------------------------------------------------------------ beside AWS's neuron-explorer
@pytest.fixture()
def fake_aws(tmp_path: Path) -> Path:
    """An executable standing in for /opt/aws/neuron/bin/neuron-explorer: records its argv."""
    exe = tmp_path / "aws-neuron-explorer"
    exe.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / "argv.txt"}\necho "AWS answered"\nexit 7\n')
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize(
    "argv",
    [
        ["view", "-n", "file.neff", "-s", "profile with space.ntff", "--output-format", "json"],
        ["capture", "-n", "model.neff"],
        ["inspect", "-o", "out"],
        ["--show-profile-schema"],
    ],
)
def test_aws_commands_are_handed_to_aws_binary_unchanged(argv: list[str], fake_aws: Path) -> None:
    r = _cli(*argv, cwd=fake_aws.parent, env={"NEURON_EXPLORER_AWS_CLI": str(fake_aws)})
    assert r.returncode == 7 and r.stdout.strip() == "AWS answered"
    assert (fake_aws.parent / "argv.txt").read_text().splitlines() == argv


def test_aws_commands_without_aws_tool_say_where_they_belong(tmp_path: Path) -> None:
    r = _cli("view", "-d", "out", cwd=tmp_path, env={"NEURON_EXPLORER_AWS_CLI": str(tmp_path / "absent")})
    assert r.returncode == 2 and not r.stdout
    (line,) = r.stderr.strip().splitlines()
    assert "aws-neuronx-tools" in line and "/opt/aws/neuron/bin/neuron-explorer" in line


def test_our_commands_are_never_handed_off(fake_aws: Path, inputs) -> None:
    r = _cli("info", str(inputs["legacy"]), cwd=fake_aws.parent, env={"NEURON_EXPLORER_AWS_CLI": str(fake_aws)})
    assert r.returncode == 0 and "AWS answered" not in r.stdout


def test_version_says_which_tool_answered(fake_aws: Path, tmp_path: Path) -> None:
    r = _cli("--version", cwd=tmp_path, env={"NEURON_EXPLORER_AWS_CLI": str(fake_aws)})
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and "PyTorch profiler" in text and f"installed at {fake_aws}" in text
    r = _cli("--version", cwd=tmp_path, env={"NEURON_EXPLORER_AWS_CLI": str(tmp_path / "absent")})
    assert "not installed" in " ".join(r.stdout.split())


def test_metrics_exports_the_operator_table(inputs, tmp_path: Path, capsys) -> None:
    import pyarrow.parquet as pq

    rc, _, err = _run(capsys, "metrics", str(inputs["legacy"]), "-o", str(tmp_path / "m"))
    assert rc == 0, err
    ops = pq.read_table(tmp_path / "m" / "neuron_operators.parquet").to_pandas()
    doc = json.loads(inputs["legacy"].read_text())
    work = [r for r in doc["instruction"] if r["opcode"] != synth.WAIT_OPCODE]
    assert int(ops["device_ns"].sum()) == sum(r["duration"] for r in work)
    assert set(zip(ops["layer"], ops["hlo_name"])) == {(r["layer"], r["hlo_name"]) for r in work}
    fields = pq.read_table(tmp_path / "m" / "fields.parquet").to_pandas()
    assert set(fields.loc[fields["table"] == "neuron_operators", "field"]) == set(ops.columns)


async def test_tui_overview_shows_the_profiles_own_warning(inputs) -> None:
    from neuron_explorer.tui.app import ExplorerApp
    from neuron_explorer.tui.data import TraceSource

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = ExplorerApp(TraceSource.open(inputs["legacy"]))
        async with app.run_test(size=(160, 50)) as pilot:
            text = ""
            for _ in range(200):  # the analysis is computed in a worker
                await pilot.pause(0.05)
                text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
                if "itself warns" in text:
                    break
    assert "The profile itself warns: Missing DGE notifications" in text
    # The verdict is read over the kernel window (issue 27): "NeuronCore 0 kernel ... : mostly ..."
    assert "NeuronCore 0 kernel" in text and "mostly" in text
    # and the overview lists each engine and DMA queue (issue 27)
    assert "NeuronCore engines and DMA queues" in text and "Tensor" in text and "DMA qSyncIO0" in text


def test_a_misconfigured_aws_path_pointing_back_at_us_does_not_loop(tmp_path: Path) -> None:
    loop = tmp_path / "ours"
    loop.write_text(f'#!/bin/sh\nexec {sys.executable} -W ignore -m neuron_explorer "$@"\n')
    loop.chmod(0o755)
    r = _cli("view", "-d", "x", cwd=tmp_path, env={"NEURON_EXPLORER_AWS_CLI": str(loop)})
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "handed 'view' back" in line


def test_aws_words_after_one_of_our_commands_stay_ours() -> None:
    from neuron_explorer.cli import COMMANDS
    from neuron_explorer.cli.aws import aws_command

    assert aws_command(["record", "train.py", "--show-profile-schema"], tuple(COMMANDS)) is None
    assert aws_command(["info", "view"], tuple(COMMANDS)) is None
    assert aws_command(["--show-profile-schema"], tuple(COMMANDS)) == "--show-profile-schema"
    assert aws_command(["view", "-d", "x"], tuple(COMMANDS)) == "view"
