"""End to end through the CLI: convert --device-profile, then info, analyze and report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_explorer.collectors.neuron import synth


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "neuron_explorer", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def joined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli")
    synth.write_parquet_export(d / "device", synth.SynthSpec(bottleneck="dma"))
    synth.write_framework_trace(d / "fw.json")
    r = _cli("convert", "fw.json", "--device-profile", "device", "-o", "joined.parquet", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    return d / "joined.parquet"


def test_info_shows_neuron_engine_and_dma_queues(joined: Path) -> None:
    r = _cli("info", str(joined), "--format", "json", cwd=joined.parent)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert "neuron" in info["device_types"]
    assert info["by_kind"]["kernel"] == 900 and info["by_kind"]["memcpy"] > 0


def test_analyze_diagnoses_the_planted_dma_bottleneck(joined: Path) -> None:
    r = _cli("analyze", str(joined), "--format", "json", cwd=joined.parent)
    assert r.returncode == 0, r.stderr
    rules = [f["rule_id"] for f in json.loads(r.stdout)["findings"]]
    assert "neuron_dma_bound" in rules and "neuron_engine_bottleneck" not in rules


def test_report_renders_a_joined_neuron_trace(joined: Path) -> None:
    out = joined.parent / "r.html"
    r = _cli("report", str(joined), "-o", str(out), "-q", cwd=joined.parent)
    assert r.returncode == 0, r.stderr
    assert "neuron_dma_bound" in out.read_text()


def test_convert_with_a_broken_device_profile_fails_with_one_line(tmp_path: Path) -> None:
    synth.write_framework_trace(tmp_path / "fw.json")
    synth.write_parquet_export(tmp_path / "device")
    f = tmp_path / "device" / "Instruction_1.parquet"
    f.write_bytes(f.read_bytes()[:100])
    r = _cli("convert", "fw.json", "--device-profile", "device", "-o", "j.parquet", "-q", cwd=tmp_path)
    assert r.returncode == 3
    assert "Instruction table is not readable Parquet" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "j.parquet").exists()


@pytest.mark.parametrize("source", ["joined", "export"])
async def test_tui_and_mcp_catalog_open_neuron_traces(joined: Path, source: str) -> None:
    # The TUI's data source and the agent server's catalog both read a joined trace and a raw
    # Neuron export directory (imported on the fly), and the TUI paints its overview from it.
    from neuron_explorer.agents.catalog import TraceCatalog
    from neuron_explorer.tui.app import ExplorerApp
    from neuron_explorer.tui.data import TraceSource

    path = joined if source == "joined" else joined.parent / "device"
    src = TraceSource.open(path)
    overview = src.overview()
    assert "neuron" in overview.device_types and overview.num_events > 0
    catalog = TraceCatalog.open([path])
    assert [t.trace.num_events for t in catalog] == [src.trace.num_events]
    app = ExplorerApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(100):  # the overview is computed in a worker
            if app.first_paint_s is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause()
        text = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
    assert app.first_paint_s is not None and "neuron" in text
