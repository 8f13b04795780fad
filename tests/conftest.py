"""Shared test fixtures: paths to real traces, a converted Parquet cache, CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
DATA = TESTS / "data"
KINETO = DATA / "kineto"
#: Real trn2 device profiles (legacy neuron-profile JSON, MIT): tests/data/README.md.
TRN2 = DATA / "neuron" / "trn2_attention"
REPO = TESTS.parent
#: A rule that raises fails the test that meets it (outside tests a failing rule becomes one line
#: in the analysis and the other rules still run: analyzers/rules.run_rules). Set before any
#: import, so the CLI's subprocesses inherit it.
os.environ["NEURON_EXPLORER_STRICT_RULES"] = "1"
SHARED_FIXTURES = Path(os.environ.get("NEURON_EXPLORER_SHARED", REPO.parent / "shared")) / "fixtures"

#: The scale fixture (216k events, 3 MB): its own tests, left out of the per-trace suites.
SCALE_TRACE = KINETO / "hta/df_index_resolver.json.gz"
#: JSON files under tests/data/kineto that are no trace (Inductor's provenance map, beside its trace).
NOT_TRACES = (KINETO / "h200/compiled_provenance.json",)
#: Every Kineto trace bundled in tests/data but the scale fixture.
BUNDLED_TRACES = sorted(
    p for p in KINETO.rglob("*") if p.name.endswith((".json", ".json.gz")) and p != SCALE_TRACE and p not in NOT_TRACES
)

#: Shared fixtures (path under ../shared/fixtures) that tests/data holds a copy of, renamed only
#: (see tests/data/README.md): the suite needs no ../shared beside the checkout.
BUNDLED_COPIES: dict[str, Path] = {
    "kineto/local/example_cpu_small.json": KINETO / "local/example_cpu_small.json",
    "kineto/local/cpu_mlp_step4.json": KINETO / "local/cpu_mlp_step4.json",
    "kineto/hta/nccl_parser_config/nccl_data.json.gz": KINETO / "hta/nccl_data.json.gz",
    "kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": KINETO
    / "hta/ns_resolution_rank0.json.gz",
    "kineto/hta/mtia_inference_trace/mtia_inference_rank_0.json.gz": KINETO / "hta/mtia_inference_rank_0.json.gz",
    "kineto/hta/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz": KINETO
    / "hta/cupti_profiler_a100.json.gz",
    "kineto/hta/distributed_info_unavailable/distributed_info_not_found.json.gz": KINETO
    / "hta/distributed_info_not_found.json.gz",
    "kineto/hta/rank_non_gpu/rank_non_gpu.json.gz": KINETO / "hta/rank_non_gpu.json.gz",
    "kineto/hta/rank_unavailable/rank_not_found.json.gz": KINETO / "hta/rank_not_found.json.gz",
    "kineto/hta/trace_compare/base/base.json.gz": KINETO / "hta/trace_compare_base.json.gz",
    "kineto/hta/trace_compare/test/test.json.gz": KINETO / "hta/trace_compare_test.json.gz",
    "kineto/tracelens/b200/eager_trace.json.gz": KINETO / "tracelens/b200_eager.json.gz",
    "kineto/tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": KINETO / "tracelens/qwen_h100.json.gz",
    "kineto/tracelens/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": KINETO / "tracelens/qwen_mi300.json.gz",
    # the scale fixture: 216k events in 3 MB, copied so that a fresh clone runs every test
    "kineto/hta/df_index_resolver/df_index_resolver.json.gz": KINETO / "hta/df_index_resolver.json.gz",
}


def shared_fixture(relpath: str) -> Path:
    """A real trace by its path under ../shared/fixtures: the copy in tests/data. Every trace a
    test names is copied there (tests/data/README.md), so a fresh clone needs no ../shared; a
    name with no copy is a mistake in the test, not a reason to skip."""
    bundled = BUNDLED_COPIES.get(relpath)
    if bundled is None:
        raise KeyError(f"{relpath}: no copy in tests/data (add it to BUNDLED_COPIES with its licence)")
    return bundled


def all_shared_traces() -> list[Path]:
    """With ``$NEURON_EXPLORER_SHARED`` set (opt-in, for a fixture store beside the checkout):
    the traces there that ``BUNDLED_COPIES`` does not map. Without it none, so a fresh clone
    runs the same tests as any other checkout."""
    if not os.environ.get("NEURON_EXPLORER_SHARED"):
        return []
    root = SHARED_FIXTURES / "kineto"
    if not root.exists():
        return []
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file()
        and p.name.endswith((".json", ".json.gz"))
        and str(p.relative_to(SHARED_FIXTURES)) not in BUNDLED_COPIES
    )


@pytest.fixture(scope="session")
def big_trace_parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 216k-event V100 trace, converted once per session."""
    import neuron_explorer as ne

    src = shared_fixture("kineto/hta/df_index_resolver/df_index_resolver.json.gz")
    out = tmp_path_factory.mktemp("big") / "df_index_resolver.parquet"
    ne.load(src).write(out)
    return out


def run_cli(
    *args: str, cwd: Path | None = None, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``neuron-explorer`` as a user would (a new process), capturing its output."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("COLUMNS", "120")
    return subprocess.run(
        [sys.executable, "-m", "neuron_explorer", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )


@pytest.fixture
def cli():
    return run_cli


#: The modules ``scripts/test --quick`` runs (``-m quick``): one or two per layer (the trace
#: model, import, analyzers and rules, diff, every renderer, the CLI as a user runs it, TUI
#: and agents), chosen to finish in under 3 minutes on two cores (measured: 2 min 18 s at a load
#: average of 4 on the shared 2-core VM); their slow-marked tests stay out.
QUICK_MODULES = frozenset(
    {
        "test_trace_model",
        "test_nesting",
        "test_analyzers_intervals",
        "test_stepless_wording",
        "test_severity_by_cost",
        "test_diff",
        "test_fit",
        "test_warmup_rule",
        "test_kernel_names",
        "test_source_locations",
        "test_report_escaping",
        "test_agents_sql",
        "test_tui_data",
        "test_cli_trace_commands",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        name = module.__name__.rsplit(".", 1)[-1] if module is not None else ""
        if name in QUICK_MODULES and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.quick)


def neuron_kernel_from_rows(doc: dict) -> tuple[int, int]:
    """The kernel window of a legacy neuron-profile JSON document, by hand: the end of the
    longest stretch in which nothing but EVENT_SEMAPHORE waits run, to the end of the last work
    row (an instruction that is not a wait, or a DMA row). Plain Python, for the tests: walk the
    work intervals in start order and keep the widest gap between them."""
    work = [
        (r["timestamp"], r["timestamp"] + r["duration"]) for r in doc["instruction"] if r["opcode"] != "EVENT_SEMAPHORE"
    ]
    work += [(r["timestamp"], r["timestamp"] + r["duration"]) for r in doc["dma"]]
    work.sort()
    best, start, reach = 0, work[0][0], work[0][1]
    for a, b in work[1:]:
        if a - reach > best:
            best, start = a - reach, a
        reach = max(reach, b)
    return start, reach


def neuron_queue_names(doc: dict) -> set[str]:
    """The DMA queue names a legacy document's packet rows resolve to, by hand: the
    ``dma_queues_info`` name where the row's queue index names one queue, else ``queue N``."""
    names: dict[int, set[str]] = {}
    for q in doc.get("dma_queues_info") or []:
        names.setdefault(q["q_idx"], set()).add(q["q_name"])
    out = set()
    for r in doc["dma"]:
        found = names.get(int(r["dma_queue"]), set())
        out.add(next(iter(found)) if len(found) == 1 else f"queue {r['dma_queue']}")
    return out


def help_examples(command: str) -> list[list[str]]:
    """The example command lines of ``neuron-explorer COMMAND --help``, each as its argv
    (continuation lines joined, comments dropped); empty when the help has no examples."""
    import shlex

    text = run_cli(command, "--help").stdout
    if "Examples:" not in text:
        return []
    block = text.split("Examples:", 1)[1].split("\n\n", 1)[0]
    out, cur = [], ""
    for raw in block.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cur = f"{cur} {line}".strip()
        if cur.endswith("\\"):
            cur = cur[:-1]
            continue
        out.append(shlex.split(cur, comments=True))
        cur = ""
    return out
