"""Snapshot tests: the main screens at 120x40 and at 80x24, compared with committed SVG screenshots.

The SVGs in ``tests/snapshots/tui/`` were drawn by the textual version recorded in
``textual-version.txt`` (SVG output changes between Textual releases, so that version is pinned
for the tests). After an intended change to a screen, redraw them with
``NE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest tests/unit/test_tui_snapshots.py`` and
review the new SVGs (open them in a browser) before committing. On a mismatch the screen that
was drawn is written next to the snapshot as ``*.actual.svg`` for comparison.
"""

from __future__ import annotations

import functools
import os
from importlib.metadata import version
from pathlib import Path

import pytest

from neuron_explorer.analyzers import Analysis, analyze
from neuron_explorer.tui.app import ExplorerApp
from neuron_explorer.tui.data import TraceSource

from .tui_trace import SOURCE_DIR, TINY_THRESHOLDS, tiny_trace

SNAPSHOTS = Path(__file__).resolve().parents[1] / "snapshots" / "tui"
UPDATE = os.environ.get("NE_UPDATE_SNAPSHOTS") == "1"
SIZE = (120, 40)


@functools.cache
def tiny_analysis() -> Analysis:
    return analyze(tiny_trace(), thresholds=TINY_THRESHOLDS)


def recorded_textual_version() -> str:
    return (SNAPSHOTS / "textual-version.txt").read_text().strip()


async def draw(keys: tuple[str, ...], size: tuple[int, int] = SIZE) -> str:
    app = ExplorerApp(
        TraceSource(tiny_trace(), name="tiny.parquet", analyzer=lambda t: tiny_analysis()),
        search_dirs=(SOURCE_DIR,),
    )
    async with app.run_test(size=size) as pilot:
        for _ in range(2):
            await pilot.pause()
            await app.workers.wait_for_complete()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        return app.export_screenshot(title="neuron-explorer tui")


SCREENS = {
    "overview": (),
    "findings": ("2",),
    "ops_drilldown": ("3", "down", "enter"),
    "kernels_sorted": ("4", "s", "down", "down", "down", "enter"),
    "source_file": ("5", "enter"),
    "timeline_zoomed": ("6", "plus", "right"),
    "help": ("question_mark",),
}
#: The same app in a small terminal: each view must stay usable at 80x24.
SMALL_SCREENS = {
    "overview_80x24": (),
    "findings_80x24": ("2",),
    "kernels_80x24": ("4",),
    "ops_drilldown_80x24": ("3", "down", "enter"),
    "ops_drilldown_lines_80x24": ("3", "down", "enter", "l"),
    "timeline_selected_80x24": ("3", "down", "enter", "c", "g"),
    "source_file_80x24": ("5", "enter"),
    "help_80x24": ("question_mark",),
    "help_end_80x24": ("question_mark", "end"),
    "roofline_80x24": ("p",),
}


@pytest.fixture(autouse=True)
def _repo_root_cwd(monkeypatch: pytest.MonkeyPatch) -> None:
    # Paths on screen are shown relative to the current directory: the same on every checkout.
    monkeypatch.chdir(SNAPSHOTS.parents[2])


@pytest.mark.parametrize("screen", [*SCREENS, *SMALL_SCREENS])
async def test_screen_matches_snapshot(screen: str) -> None:
    svg = await draw(*((SCREENS[screen],) if screen in SCREENS else (SMALL_SCREENS[screen], (80, 24))))
    path = SNAPSHOTS / f"{screen}.svg"
    if UPDATE:
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        path.write_text(svg)
        (SNAPSHOTS / "textual-version.txt").write_text(version("textual") + "\n")
        return
    assert version("textual") == recorded_textual_version(), (
        f"snapshots were drawn with textual {recorded_textual_version()}, this is {version('textual')}: "
        "install the pinned version or redraw them (NE_UPDATE_SNAPSHOTS=1) and review"
    )
    expected = path.read_text()
    if svg != expected:
        actual = path.with_suffix(".actual.svg")
        actual.write_text(svg)
        pytest.fail(f"{screen} differs from {path.name}; the screen drawn now is in {actual}")


async def test_drawing_the_same_screen_twice_gives_identical_svg() -> None:
    # Guards the snapshots themselves: nothing time- or order-dependent may reach the screen.
    assert await draw(("3", "down", "enter")) == await draw(("3", "down", "enter"))
