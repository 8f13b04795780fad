"""The report's critical path: the data handed to the page (findings priced by replay, the
all-fixes line, the composition table, and which timeline events are outlined), checked
against layouts whose critical path is known."""

from __future__ import annotations

from neuron_explorer.analyzers import analyze
from neuron_explorer.reports.html import build_report_data
from tests.unit.graph_layout import US
from tests.unit.test_graph_whatif import blocking_copy, overlapped


def _data(layout):
    trace = layout.trace()
    analysis = analyze(trace)
    return analysis, build_report_data(trace, analysis)


def test_findings_say_how_they_were_priced_and_what_all_fixes_save():
    analysis, data = _data(blocking_copy())
    f = next(f for f in data["findings"] if f["rule_id"] == "sync_memcpy")
    assert f["cost_method"] == "replay" and f["cost_ns"] == 44 * US and "asynchronous" in f["fix_edit"]
    assert data["fixes_text"].startswith("All fixes together")
    assert data["critical_path_text"] == analysis.summary["critical_path"] != ""
    assert "the critical path is" in data["header"]["verdict"]


def test_the_composition_table_sums_to_the_step_and_the_timeline_outlines_the_path():
    _, data = _data(overlapped())
    t = data["tables"]["critical_path"]
    assert sum(t["rows"]["ns"]) == 100 * US  # one step of 100 us
    step = data["timeline"]["steps"][0]
    names = [data["strings"][c] for c in step["ev"]["name"]]
    crit = dict(zip(names, step["ev"]["crit"]))
    # B waits for the all-reduce (a stream wait), the synchronize for B: A (5..25) ends long
    # before anything waits for it
    assert crit["A"] == 0
    assert crit["B"] == 1 and crit["ncclDevKernel_AllReduce_Sum_f32_RING_LL"] == 1
    assert crit["cudaDeviceSynchronize"] == 1 and crit["aten::relu"] == 1
