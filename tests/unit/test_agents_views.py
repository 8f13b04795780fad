"""What the agent tools answer, checked against the analyzers' own results on real traces."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from neuron_explorer.agents import views
from neuron_explorer.agents.catalog import ServedTrace, TraceCatalog, UnknownTraceError, trace_name
from neuron_explorer.agents.tables import describe_tables, events_table, metrics_tables
from neuron_explorer.trace.schema import COLUMNS
from tests.conftest import KINETO

GPU_TRACE = KINETO / "tracelens" / "vllm_cuda_graph_execution.json.gz"
CPU_TRACE = KINETO / "local" / "example_cpu_small.json"


@pytest.fixture(scope="module")
def catalog() -> TraceCatalog:
    return TraceCatalog.open([GPU_TRACE, CPU_TRACE])


@pytest.fixture(scope="module")
def gpu(catalog: TraceCatalog) -> ServedTrace:
    return catalog.get("vllm_cuda_graph_execution")


# ------------------------------------------------------------------------------ catalog
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("run/rank0.pt.trace.json.gz", "rank0"),
        ("a/trace.parquet", "trace"),
        ("x.json", "x"),
        ("runs/exp1", "exp1"),
    ],
)
def test_a_trace_is_named_after_its_file_without_the_trace_suffix(path: str, name: str) -> None:
    assert trace_name(Path(path)) == name


def test_two_traces_with_the_same_file_name_get_distinct_names(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "rank0.json").write_bytes(CPU_TRACE.read_bytes())

    catalog = TraceCatalog.open([tmp_path / "a" / "rank0.json", tmp_path / "b" / "rank0.json"])

    assert catalog.names == ["rank0", "rank0-2"]


def test_the_trace_argument_may_be_omitted_only_when_one_trace_is_served(catalog: TraceCatalog) -> None:
    single = TraceCatalog([catalog.get("example_cpu_small")])

    assert single.get(None).name == "example_cpu_small"
    with pytest.raises(UnknownTraceError, match="pass `trace` as one of: vllm_cuda_graph_execution, example_cpu_small"):
        catalog.get(None)
    with pytest.raises(UnknownTraceError, match="no trace named 'nope'"):
        catalog.get("nope")


def test_a_trace_is_analyzed_once_and_only_when_asked(tmp_path: Path) -> None:
    served = TraceCatalog.open([CPU_TRACE]).get(None)

    assert not served.analyzed
    first = served.analysis()
    assert served.analyzed and served.analysis() is first


# ------------------------------------------------------------------------------ views
def test_top_source_lines_are_the_analyzers_rows_in_device_time_order(gpu: ServedTrace) -> None:
    expected = gpu.analysis().source_lines.sort_values("device_ns", ascending=False, kind="stable")

    answer = views.top_source_lines(gpu, limit=3)

    assert answer["total_rows"] == len(expected)
    assert [(r["src_file"], r["src_line"], r["device_ns"]) for r in answer["rows"]] == [
        (str(f), int(line), int(ns))
        for f, line, ns in expected[["src_file", "src_line", "device_ns"]].head(3).itertuples(index=False)
    ]
    # and each row reads as every output shows it: the file's name and line, never the line cut
    for r in answer["rows"]:
        assert f"{r['src_file'].rsplit('/', 1)[-1]}:{r['src_line']}" in r["location"]
        assert (r["src_precision"] == "function") == r["location"].endswith("def, function-level)")


def test_a_lines_kernels_add_up_to_its_device_time() -> None:
    # the H100 trace has a user line with device time (the vLLM one has no user code at all)
    served = TraceCatalog.open([KINETO / "tracelens" / "qwen_h100.json.gz"]).get("qwen_h100")
    top = views.top_source_lines(served, limit=1, sort_by="device_ns")["rows"][0]
    assert top["device_ns"] > 0

    at_line = views.line_attribution(served, top["src_file"], top["src_line"], limit=10_000)

    assert at_line["source_line"]["device_ns"] == top["device_ns"]
    assert sum(k["device_ns"] for k in at_line["kernels"]) == top["device_ns"]
    assert sum(k["count"] for k in at_line["kernels"]) == top["kernel_count"]


def test_top_kernels_filter_by_category_and_sort_by_any_numeric_column(gpu: ServedTrace) -> None:
    kernels = gpu.analysis().kernels
    category = str(kernels["category"].iloc[0])

    answer = views.top_kernels(gpu, limit=500, sort_by="count", category=category)

    assert {r["category"] for r in answer["rows"]} == {category}
    counts = [r["count"] for r in answer["rows"]]
    assert counts == sorted(counts, reverse=True)
    assert answer["total_rows"] == int((kernels["category"].astype(str) == category).sum())


def test_bad_arguments_name_the_choices(gpu: ServedTrace) -> None:
    with pytest.raises(views.ToolInputError, match=r"sort by one of: .*total_ns"):
        views.top_kernels(gpu, sort_by="name")
    with pytest.raises(views.ToolInputError, match="categories here"):
        views.top_kernels(gpu, category="quantum")
    with pytest.raises(views.ToolInputError, match="min_severity must be one of info, warning, error"):
        views.findings(gpu, min_severity="fatal")
    with pytest.raises(views.ToolInputError, match="unknown rule id"):
        views.findings(gpu, rules=["no_such_rule"])
    with pytest.raises(views.ToolInputError, match="no rank 7"):
        views.step_breakdown(gpu, rank=7)
    with pytest.raises(views.ToolInputError, match="limit must be 1 or more"):
        views.top_ops(gpu, limit=0)
    with pytest.raises(views.ToolInputError, match="offset must be 0 or more"):
        views.top_kernels(gpu, offset=-1)


@pytest.mark.parametrize(
    ("tool", "trace"),
    [
        ("top_kernels", "vllm_cuda_graph_execution"),
        ("top_ops", "vllm_cuda_graph_execution"),
        ("op_perf", "vllm_cuda_graph_execution"),
        ("top_source_lines", "example_cpu_small"),  # the vLLM trace has no user source lines
    ],
)
def test_an_offset_pages_through_the_same_sorted_rows(catalog: TraceCatalog, tool: str, trace: str) -> None:
    served = catalog.get(trace)
    whole = getattr(views, tool)(served, limit=500)["rows"]
    assert len(whole) >= 2

    page = getattr(views, tool)(served, limit=1, offset=1)

    assert page["offset"] == 1 and page["rows"] == whole[1:2]


def test_a_table_with_no_rows_answers_empty_rows_not_an_error(catalog: TraceCatalog) -> None:
    cpu = catalog.get("example_cpu_small")
    assert not len(cpu.analysis().kernels)

    answer = views.top_kernels(cpu)

    assert answer["rows"] == [] and answer["total_rows"] == 0


def test_an_offset_pages_findings_and_steps(gpu: ServedTrace) -> None:
    whole = views.findings(gpu, limit=500)["findings"]
    steps = views.step_breakdown(gpu, limit=500)

    assert views.findings(gpu, limit=1, offset=1)["findings"] == whole[1:2]
    assert views.step_breakdown(gpu, limit=1, offset=1)["steps"] == steps["steps"][1:2]


def test_findings_keep_the_analyzers_order_and_filter_by_severity(gpu: ServedTrace) -> None:
    a = gpu.analysis()

    everything = views.findings(gpu, limit=500)
    errors_only = views.findings(gpu, min_severity="error", limit=500)

    assert [f["rule_id"] for f in everything["findings"]] == [f.rule_id for f in a.findings]
    assert [f["rule_id"] for f in errors_only["findings"]] == [f.rule_id for f in a.findings if f.severity == "error"]
    assert everything["skipped"] == [{"rule_id": r, "reason": why} for r, why in a.skipped]


def test_the_summary_is_the_analyzers_summary_plus_the_trace_facts(gpu: ServedTrace) -> None:
    answer = views.trace_summary(gpu)

    assert answer["summary"]["verdict"] == gpu.analysis().summary["verdict"]
    assert answer["trace_facts"]["events"] == gpu.trace.num_events


# ------------------------------------------------------------------------------ tables
def test_the_events_table_holds_every_trace_with_a_trace_column(catalog: TraceCatalog) -> None:
    table = events_table(catalog)

    assert table.column_names[0] == "trace"
    assert table.num_rows == sum(s.trace.num_events for s in catalog)
    counts = table.column("trace").to_pandas().astype(str).value_counts().to_dict()
    assert counts == {s.name: s.trace.num_events for s in catalog}


def test_every_metrics_table_has_rows_of_every_trace_that_analyzed(catalog: TraceCatalog) -> None:
    tables, errors = metrics_tables(catalog)

    assert errors == {}
    assert {"steps", "breakdown", "kernels", "ops", "source_lines", "findings"} <= set(tables)
    assert set(tables["ops"].column("trace").to_pylist()) == set(catalog.names)


def test_the_schema_describes_every_events_column_from_the_trace_contract(catalog: TraceCatalog) -> None:
    tables, _ = metrics_tables(catalog)
    tables["events"] = events_table(catalog)

    described = {t["name"]: t for t in describe_tables(tables)}

    events = described["events"]["columns"]
    assert [c["name"] for c in events] == ["trace", *(c.name for c in COLUMNS)]
    assert all(c["description"] for c in events)
    source_lines = {c["name"]: c for c in described["source_lines"]["columns"]}
    assert source_lines["device_ns"]["unit"] == "ns"
    for name, table in tables.items():
        assert [c["name"] for c in described[name]["columns"]] == [
            "trace",
            *[n for n in table.column_names if n != "trace"],
        ]


def test_a_failed_analysis_leaves_the_events_queryable_and_says_why() -> None:
    broken = ServedTrace(
        name="broken", path=Path("broken.parquet"), trace=TraceCatalog.open([CPU_TRACE]).get(None).trace
    )
    broken._analysis = None

    def fail() -> None:
        raise RuntimeError("analyzer bug")

    broken.analysis = fail  # type: ignore[method-assign]
    tables, errors = metrics_tables(TraceCatalog([broken]))

    assert tables == {}
    assert errors == {"broken": "RuntimeError: analyzer bug"}
    assert isinstance(events_table(TraceCatalog([broken])), pa.Table)


def test_a_run_directory_is_served_as_one_trace_with_every_rank(tmp_path: Path) -> None:
    import neuron_explorer as ne

    for rank in (0, 1):
        ne.load(KINETO / "hta" / f"sampled_rank-{rank}.json.gz").write(
            tmp_path / "run" / f"rank={rank}" / "trace.parquet"
        )

    served = TraceCatalog.open([tmp_path / "run"]).get(None)

    assert served.name == "run" and served.trace.ranks == [0, 1]
    assert views.step_breakdown(served, rank=1)["attribution"]
    assert {r["rank"] for r in views.step_breakdown(served)["attribution"]} == {0, 1}
