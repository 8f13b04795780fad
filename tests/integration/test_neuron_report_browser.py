"""The HTML report of a Neuron device profile shows the kernel window and the per-engine table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_explorer.collectors.neuron.synth.matmul import MatmulSpec, write_matmul_json
from tests.conftest import KINETO, neuron_queue_names
from tests.integration.test_report_browser import Chromium, assert_page_is_clean, find_chromium, write_report


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium found: install it (Debian: apt-get install -y chromium) or set $CHROMIUM")
    chromium = Chromium(binary)
    yield chromium
    chromium.close()


def test_neuron_report_shows_the_kernel_window_and_each_engine(browser: Chromium, tmp_path: Path) -> None:
    # Given the report of one matmul profile written to the real conventions
    doc = write_matmul_json(tmp_path / "mm.json", MatmulSpec(n=512))
    browser.open(write_report(tmp_path / "mm.json", tmp_path / "mm.html"))
    # Then the NeuronCore section shows one summary row and a row per engine and DMA queue
    section = "document.getElementById('neuron')"
    assert browser.evaluate(f"{section}.hidden") is False
    assert browser.evaluate(f"{section}.querySelectorAll('[data-table=neuron_summary] tbody tr').length") == 1
    queues = neuron_queue_names(doc)
    rows = f"{section}.querySelectorAll('[data-table=neuron_engines] tbody tr')"
    assert browser.evaluate(f"{rows}.length") == 5 + len(queues)
    cells = browser.evaluate(
        f"[...{section}.querySelectorAll('[data-table=neuron_engines] tbody td')].map(t => t.textContent)"
    )
    assert {"Tensor", "Vector", "Scalar", "GpSimd", "Sync"} <= set(cells) and queues <= set(cells)
    # And the Operator Table: one row per (layer, HLO op) of the non-wait instructions, by hand.
    ops = {(r["layer"] or "", r["hlo_name"] or "") for r in doc["instruction"] if r["opcode"] != "EVENT_SEMAPHORE"}
    op_rows = f"{section}.querySelectorAll('[data-table=neuron_operators] tbody tr')"
    assert browser.evaluate(f"{op_rows}.length") == len(ops)
    op_cells = browser.evaluate(
        f"[...{section}.querySelectorAll('[data-table=neuron_operators] tbody td')].map(t => t.textContent)"
    )
    assert "model/linear" in op_cells and "dot" in op_cells
    # A device profile alone: the page speaks of NeuronCores, not of a GPU run's host side.
    text = browser.evaluate("document.body.innerText")
    found = [
        w
        for w in ("DataLoader", "tensor-core", "NCCL", "CUDA", "with_stack", "pin_memory", "ProfilerStep")
        if w in text
    ]
    assert not found, found
    assert "a device profile alone" in text
    assert_page_is_clean(browser)
    # And a GPU/CPU trace's report has no such section
    browser.open(write_report(KINETO / "local" / "example_cpu_small.json", tmp_path / "cpu.html"))
    assert browser.evaluate(f"{section} === null") is True
