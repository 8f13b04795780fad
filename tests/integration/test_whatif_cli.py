"""``neuron-explorer whatif`` as a user runs it: a Kineto JSON and its Parquet conversion give
the same replay, edits change the projection, bad inputs are one line and exit 3."""

from __future__ import annotations

import json

import pytest

from tests.conftest import KINETO

TRACE = KINETO / "local" / "cpu_mlp_step4.json"


def test_json_output_has_the_replay_keys_and_per_step_figures(cli):
    r = cli("whatif", str(TRACE), "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for key in ("measured_ns", "replayed_ns", "baseline_error_pct", "unexplained_pct", "projected_ns", "saving_ns"):
        assert key in doc
        assert all(key in s for s in doc["steps"])
    assert abs(doc["baseline_error_pct"]) <= 2.0
    assert doc["saving_ns"] == 0 and doc["projected_ns"] == doc["replayed_ns"]  # no edit


def test_a_parquet_trace_replays_like_its_json_and_an_edit_saves_time(cli, tmp_path):
    pq = tmp_path / "t.parquet"
    assert cli("convert", str(TRACE), "-o", str(pq)).returncode == 0
    a = json.loads(cli("whatif", str(TRACE), "--format", "json", "--scale", "aten::addmm=0.5").stdout)
    b = json.loads(cli("whatif", str(pq), "--format", "json", "--scale", "aten::addmm=0.5").stdout)
    assert a["replayed_ns"] == b["replayed_ns"] and a["projected_ns"] == b["projected_ns"]
    assert 0 < a["saving_ns"] < a["replayed_ns"]
    text = cli("whatif", str(pq), "--scale", "aten::addmm=0.5").stdout
    assert "baseline replay" in text and "scale aten::addmm=0.5" in text


@pytest.mark.parametrize(
    "args",
    [
        ["/no/such/trace.json"],
        [str(TRACE), "--scale", "aten::mm"],
        [str(TRACE), "--scale", "aten::mm=-1"],
        [str(TRACE), "--remove", "("],
    ],
)
def test_bad_inputs_are_one_line_and_exit_3(cli, args):
    r = cli("whatif", *args)
    assert r.returncode == 3
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("neuron-explorer: error:")
