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
REPO = TESTS.parent
SHARED_FIXTURES = Path(os.environ.get("NEURON_EXPLORER_SHARED", REPO.parent / "shared")) / "fixtures"

#: Every Kineto trace bundled in tests/data.
BUNDLED_TRACES = sorted(p for p in KINETO.rglob("*") if p.name.endswith((".json", ".json.gz")))


def shared_fixture(relpath: str) -> Path:
    """A trace from ../shared/fixtures (large real traces not copied into the repo)."""
    path = SHARED_FIXTURES / relpath
    if not path.exists():
        pytest.skip(f"shared fixture not available: {path}")
    return path


def all_shared_traces() -> list[Path]:
    root = SHARED_FIXTURES / "kineto"
    if not root.exists():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz")))


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
