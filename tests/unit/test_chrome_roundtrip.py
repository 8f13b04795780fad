"""``export --format chrome`` then import gives the same table, column by column, for every
kind of trace we have: real Kineto fixtures, a capture with exact source lines, a Neuron
import, and inputs with odd phases, instants with a duration and every form of ``args``."""

from __future__ import annotations

import importlib.util
import json
import textwrap
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

import neuron_explorer as ne
from neuron_explorer.reports.chrome_trace import write_chrome_trace
from neuron_explorer.trace import Trace
from tests._fuzz import _parse_json
from tests.conftest import BUNDLED_TRACES

FUZZ_KINETO = Path(__file__).resolve().parent.parent / "data" / "fuzz" / "kineto"


def _plain(col: pa.ChunkedArray) -> pa.ChunkedArray:
    return col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col


def assert_same_table(trace: Trace, again: Trace) -> None:
    """Every column equal, value by value (dictionary columns compared by their values)."""
    assert again.events.column_names == trace.events.column_names
    assert again.num_events == trace.num_events
    differ = [c for c in trace.events.column_names if not _plain(trace.events[c]).equals(_plain(again.events[c]))]
    assert differ == []


def _round_trip(trace: Trace, tmp_path: Path, name: str = "exported.json.gz") -> Trace:
    out = write_chrome_trace(trace, tmp_path / name)
    _parse_json(_text(out).encode())  # valid JSON (however deep)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ne.load(out)


def _text(path: Path) -> str:
    import gzip

    raw = path.read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()


#: regression inputs the importer rejects (the rest import, repaired, and must round-trip)
REJECTED = ("bad_deflate_block.json.gz", "every_event_invalid.json", "deep_args_truncated_neuron_probe.json")
FIXTURES = BUNDLED_TRACES + sorted(p for p in FUZZ_KINETO.iterdir() if p.name not in REJECTED)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_every_fixture_comes_back_column_for_column(path: Path, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = ne.load(path)
    assert_same_table(trace, _round_trip(trace, tmp_path))


def test_an_instant_with_a_duration_and_a_phase_with_a_quote_survive(tmp_path: Path) -> None:
    trace = ne.load(FUZZ_KINETO / "instant_with_duration_ph_quote.json")
    assert 'i"' in trace.events["ph"].to_pylist()
    out = write_chrome_trace(trace, tmp_path / "t.json")
    doc = json.loads(out.read_text())
    odd = [e for e in doc["traceEvents"] if e["ph"] == 'i"']
    assert odd and odd[0]["dur"] == 3
    assert_same_table(trace, ne.load(out))


def test_every_form_of_args_is_restored_byte_for_byte_under_carried_columns(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5, **extra}
        for i, extra in enumerate(
            [{}, {"args": {}}, {"args": {"a": 1}}, {"args": [1, 2]}, {"args": "text"}, {"args": None}]
        )
    ]
    src = tmp_path / "forms.json"
    # hand-written spacing: `{ }` and a newline after `{` must come back as written
    text = json.dumps({"traceEvents": events}).replace('"args": {}', '"args": { }').replace('{"a": 1}', '{\n "a": 1}')
    src.write_text(text)
    trace = ne.load(src)
    n = trace.num_events
    table = trace.events
    for name, values in (("src_file", pa.array(["u.py"] * n)), ("src_line", pa.array(range(13, 13 + n), pa.int32()))):
        i = table.column_names.index(name)
        table = table.set_column(i, name, values.cast(table.schema.field(name).type))
    marked = Trace(table, trace.metadata)
    again = _round_trip(marked, tmp_path, "forms.out.json")
    assert again.events["args"].to_pylist() == trace.events["args"].to_pylist()
    assert again.events["src_line"].to_pylist() == list(range(13, 13 + n))
    assert_same_table(marked, again)


def test_a_neuron_import_comes_back_column_for_column(tmp_path: Path) -> None:
    from neuron_explorer.collectors.neuron import import_neuron_profile
    from neuron_explorer.collectors.neuron.synth import SynthSpec, write_parquet_export

    write_parquet_export(tmp_path / "prof", SynthSpec(executions=1, instructions_per_engine=10, transfers_per_queue=5))
    trace = import_neuron_profile(tmp_path / "prof")
    assert_same_table(trace, _round_trip(trace, tmp_path))


_USER_CODE = textwrap.dedent(
    """
    import torch


    def step(model, opt, x):
        y = model(x)
        loss = torch.nn.functional.mse_loss(y, torch.zeros(16, 4))
        loss.backward()
        opt.step()
        return loss
    """
)


def test_a_capture_keeps_its_exact_lines_and_perfetto_sees_them(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    path = tmp_path / "user_train.py"
    path.write_text(_USER_CODE)
    spec = importlib.util.spec_from_file_location("user_train_roundtrip", path)
    user = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(user)  # type: ignore[union-attr]
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with ne.profile(output=tmp_path / "t.parquet"):
        user.step(model, opt, torch.randn(16, 8))
    trace = ne.load(tmp_path / "t.parquet")
    lines = set(trace.events["src_line"].to_pylist())
    assert {6, 7, 8, 9} <= lines and "line" in trace.events["src_precision"].to_pylist()
    again = _round_trip(trace, tmp_path, "t.json")
    assert_same_table(trace, again)
    doc = json.loads((tmp_path / "t.json").read_text())
    carried = [e["args"]["neuron_explorer"] for e in doc["traceEvents"] if "neuron_explorer" in e.get("args", {})]
    assert {c.get("src_line") for c in carried if c.get("src_file") == str(path)} >= {6, 7, 8, 9}
