"""Malformed neuron-profile JSON: a typed one-line error or a sane trace, never a crash.

A bounded property test (about 200 examples, seconds in CI): start from a small valid export and
mutate it the ways broken files are broken (a value of the wrong type, a missing field, a table
that is not a list, truncation). The importer must either import it, with no negative
durations and no negative FLOPs, or raise ``NeuronExplorerError`` naming the file.
"""

from __future__ import annotations

import copy
import json
import tempfile
import warnings
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_explorer.collectors.neuron import import_neuron_profile, synth
from neuron_explorer.trace.errors import NeuronExplorerError


@cache
def _base() -> dict[str, Any]:
    spec = synth.SynthSpec(executions=2, instructions_per_engine=3, transfers_per_queue=2, packets_per_transfer=2)
    with tempfile.TemporaryDirectory() as d:
        return synth.write_legacy_json(Path(d) / "p.json", spec)["document"]


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["yes", "no", "true", "false", "unknown", "", "EVENT_SEMAPHORE", "Q0-E1"]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    doc = copy.deepcopy(_base())
    for _ in range(draw(st.integers(1, 4))):
        key = draw(st.sampled_from(sorted(doc)))
        how = draw(st.sampled_from(["field", "drop_field", "table", "drop_table", "record"]))
        table = doc.get(key)
        if how == "table":
            doc[key] = draw(_values)
        elif how == "drop_table":
            doc.pop(key, None)
        elif isinstance(table, list) and table:
            i = draw(st.integers(0, len(table) - 1))
            rec = table[i]
            if how == "record" or not isinstance(rec, dict) or not rec:
                table[i] = draw(_values)
            else:
                field = draw(st.sampled_from(sorted(rec)))
                if how == "drop_field":
                    del rec[field]
                else:
                    rec[field] = draw(_values)
    data = json.dumps(doc, allow_nan=True).encode()
    if draw(st.booleans()) and draw(st.booleans()):  # a quarter of the files are cut short
        data = data[: draw(st.integers(0, len(data)))]
    return data


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(mutated())
def test_malformed_legacy_json_imports_or_fails_with_one_typed_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "profile.json"
        path.write_bytes(data)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trace = import_neuron_profile(path)
        except NeuronExplorerError as exc:
            text = str(exc)
            assert "\n" not in text and str(path) in text
            return
    df = trace.to_pandas(columns=["dur_ns", "flops"])
    assert (df["dur_ns"] >= 0).all()
    assert not (df["flops"].dropna() < 0).any()
