"""The report's roofline table: the columns that fit the page, modelled rows first, figures over
a device's peak flagged (issue 28, items 5 and 8)."""

from __future__ import annotations

import neuron_explorer as ne
from neuron_explorer.analyzers import analyze
from neuron_explorer.analyzers.perf import load_spec
from neuron_explorer.reports.html.data import build_report_data
from tests.conftest import KINETO


def _op_perf(spec: str | None = None) -> dict:
    trace = ne.load(KINETO / "tracelens/b200_eager.json.gz")  # B200 with NCCL kernels (unmodelled comms)
    a = analyze(trace, device_spec=load_spec(spec) if spec else None)
    return build_report_data(trace, a)["tables"]["op_perf"]


def test_modelled_rows_come_first_and_the_table_keeps_few_columns() -> None:
    t = _op_perf()
    keys = [c["key"] for c in t["columns"]]
    assert len(keys) <= 10 and "dtypes" not in keys and "gflops" not in keys
    pct = t["rows"]["pct_of_peak"]
    first_unmodelled = next((i for i, v in enumerate(pct) if v is None), len(pct))
    assert all(v is None for v in pct[first_unmodelled:]), "an unmodelled row before a modelled one"
    assert pct[0] is not None


def test_figures_over_the_peak_are_flagged() -> None:
    t = _op_perf("L4")  # B200 kernels held against an L4: some run past its peaks
    rows = t["rows"]
    over = [i for i, v in enumerate(rows["pct_of_peak"]) if v is not None and v > 100]
    assert over, "the check needs a row over the peak"
    assert all("wrong device entry" in rows["check"][i] for i in over)
