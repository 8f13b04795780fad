"""The HTML report opened in a real headless Chromium, driven over the DevTools protocol.

Chromium is started with ``--remote-debugging-pipe``: the protocol runs over two pipes (fds 3
and 4 in the browser), so no port, websocket library or driver binary is needed. Each test
loads a report from a file URL and checks what a user would see: no console errors, no network
requests, every figure drawn with data, a screenshot, and no script from the trace running.

Chromium is found as $CHROMIUM, or chromium / chromium-browser / google-chrome on PATH; without
it these tests skip and say how to install it (Debian: ``apt-get install -y chromium``).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KINETO, run_cli
from tests.unit.test_report_escaping import IMG_PAYLOAD, SCRIPT_PAYLOAD, poisoned_trace

pytestmark = pytest.mark.browser

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
)
#: URL schemes that stay inside the file: anything else is a network request.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
XSS_FLAG = "__neuronExplorerXss"


def find_chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome", "chrome"):
        if candidate and (path := shutil.which(candidate)):
            return path
    return None


class Chromium:
    """A headless Chromium and one page, spoken to over the DevTools pipe (JSON + NUL per message)."""

    def __init__(self, binary: str, width: int = 1400, height: int = 1000) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="ne-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_pipes() -> None:  # in the child: the protocol expects fd 3 (in) and fd 4 (out)
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self.proc = subprocess.Popen(
            [
                binary,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={self.profile.name}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_pipes,
            close_fds=False,  # our other fds are non-inheritable (PEP 446); 3 and 4 must survive exec
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None
        targets = self.send("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        target_id = page["targetId"] if page else self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target_id, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    # ---------------------------------------------------------------------------- protocol
    def send(self, method: str, timeout: float = 60, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._on_event(reply)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self.proc.poll()})")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _on_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event["method"] == "Page.javascriptDialogOpening":  # never leave a dialog blocking the page
            self.send("Page.handleJavaScriptDialog", accept=True)

    def pump(self, seconds: float) -> None:
        """Process events for a while (requests and logs that arrive after load)."""
        deadline = time.monotonic() + seconds
        with contextlib.suppress(TimeoutError):
            while time.monotonic() < deadline:
                self._on_event(self._read(deadline))

    # ---------------------------------------------------------------------------- page
    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(
        self,
        path: Path,
        ready: str = "window.__neuronExplorerReport && window.__neuronExplorerReport.ready",
        timeout: float = 60,
    ) -> float:
        """Navigate to ``path`` and wait until ``ready`` is true; returns the seconds it took."""
        self.events.clear()
        started = time.monotonic()
        self.send("Page.navigate", url=path.resolve().as_uri())
        while not self.evaluate(f"Boolean({ready})"):
            if time.monotonic() - started > timeout:
                raise TimeoutError(f"{path.name} not ready after {timeout} s")
            self.pump(0.05)
        return time.monotonic() - started

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params.update(
                captureBeyondViewport=True,
                clip={"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 16000), "scale": 1},
            )
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", **params)["data"]))
        return path

    def console_errors(self) -> list[str]:
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(json.dumps(p.get("exceptionDetails", {}))[:500])
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"{p['entry'].get('source')}: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def network_requests(self) -> list[str]:
        return [u for u in self.requests() if not u.startswith(LOCAL_SCHEMES)]

    def dialogs(self) -> list[str]:
        return [e["params"].get("message", "") for e in self.events if e["method"] == "Page.javascriptDialogOpening"]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.send("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.profile.cleanup()


#: Per figure: traces, data points handed to Plotly and SVG marks Plotly drew.
FIGURES_JS = """
Array.from(document.querySelectorAll('[data-figure]')).map(function (gd) {
  var data = gd.data || [];
  return {name: gd.dataset.figure, traces: data.length,
          points: data.reduce(function (n, t) { return n + ((t.x && t.x.length) || 0); }, 0),
          marks: gd.querySelectorAll('.trace .point, .trace path.js-line, .scatterlayer .js-line').length};
})
"""
EMPTY_FIGURES_JS = "Array.from(document.querySelectorAll('[data-empty-figure]')).map(e => e.dataset.emptyFigure)"


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    binary = find_chromium()
    if binary is None:
        pytest.skip("no Chromium found: install it (Debian: apt-get install -y chromium) or set $CHROMIUM")
    chromium = Chromium(binary)
    yield chromium
    chromium.close()


def write_report(trace: Path, out: Path, *extra: str) -> Path:
    result = run_cli("report", str(trace), "-o", str(out), "--quiet", *extra)
    assert result.returncode == 0, result.stderr
    return out


def assert_page_is_clean(browser: Chromium) -> None:
    browser.pump(0.5)  # late requests (fonts, images) and errors surface after the ready flag
    assert browser.console_errors() == []
    assert browser.network_requests() == []
    assert browser.dialogs() == []


def test_small_cpu_report_renders_every_figure_offline(browser: Chromium, tmp_path: Path) -> None:
    # Given a report of a small CPU trace recorded with stacks and memory
    page = write_report(KINETO / "local" / "example_cpu_small.json", tmp_path / "small.html")
    # When Chromium opens it from a file URL
    seconds = browser.open(page)
    # Then it loads without errors or network, and each figure is either drawn with data or
    # replaced by a sentence saying why there is none
    assert_page_is_clean(browser)
    figures = browser.evaluate(FIGURES_JS)
    assert figures, "no figure on the page"
    for fig in figures:
        assert fig["traces"] > 0 and fig["points"] > 0 and fig["marks"] > 0, fig
    drawn = {f["name"] for f in figures} | set(browser.evaluate(EMPTY_FIGURES_JS))
    assert drawn == {
        "breakdown", "timeline", "kernels", "ops", "lines", "memory", "memory_phases", "roofline", "op_categories"
    }  # fmt: skip
    assert {"breakdown", "timeline", "ops", "memory", "memory_phases"} <= {f["name"] for f in figures}
    assert seconds < 10
    shot = browser.screenshot(tmp_path / "small.png")
    assert shot.stat().st_size > 20_000


@pytest.mark.slow
def test_largest_fixture_report_opens_fast_with_a_downsampled_timeline(
    browser: Chromium, big_trace_parquet: Path, tmp_path: Path
) -> None:
    # Given the report of the 216k-event V100 trace
    page = write_report(big_trace_parquet, tmp_path / "big.html")
    assert page.stat().st_size < 15e6
    # When Chromium opens it
    seconds = browser.open(page)
    # Then every figure has data, the page is clean, it says the timeline is downsampled,
    # and it is interactive within the budget (3 s on a desktop; generous here for shared CI)
    assert_page_is_clean(browser)
    figures = {f["name"]: f for f in browser.evaluate(FIGURES_JS)}
    assert set(figures) == {"breakdown", "timeline", "kernels", "ops", "memory", "memory_phases", "op_categories"}
    for fig in figures.values():
        assert fig["points"] > 0 and fig["marks"] > 0, fig
    assert "downsampled" in browser.evaluate("document.getElementById('notes').textContent")
    render_ms = browser.evaluate("window.__neuronExplorerReport.renderMs")
    print(f"\nbig report: {page.stat().st_size / 1e6:.1f} MB, ready in {seconds:.2f} s, render {render_ms:.0f} ms")
    assert seconds < 15
    # And choosing another step redraws the timeline with that step's lanes
    browser.evaluate("var s=document.getElementById('step-select'); s.value='0'; s.dispatchEvent(new Event('change'))")
    assert browser.evaluate("document.querySelector('[data-figure=timeline]').data.length") > 0
    browser.screenshot(tmp_path / "big.png")
    assert browser.console_errors() == []


def test_two_rank_run_shows_the_ranks_section(browser: Chromium, tmp_path: Path) -> None:
    # Given a report of a two-rank run directory (the real sampled ranks) and of one rank alone
    run = tmp_path / "run"
    run.mkdir()
    for name in ("sampled_rank-0.json.gz", "sampled_rank-1.json.gz"):
        shutil.copy(KINETO / "hta" / name, run / name)
    page = write_report(run, tmp_path / "ranks.html")
    browser.open(page)
    # Then the Ranks section is shown with a row per rank and the matched collectives
    section = "document.getElementById('ranks')"
    assert browser.evaluate(f"{section}.hidden") is False
    assert browser.evaluate(f"{section}.querySelectorAll('[data-table=ranks] tbody tr').length") == 2
    assert browser.evaluate(f"{section}.querySelectorAll('[data-table=collectives] tbody tr').length") == 10
    # with the algorithm and protocol of their kernels (ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t)
    cells = f"[...{section}.querySelectorAll('[data-table=collectives] tbody tr td')].map(td => td.textContent)"
    assert browser.evaluate(f"{cells}.filter(t => t === 'RING').length") == 10
    assert browser.evaluate(f"{cells}.filter(t => t === 'SIMPLE').length") == 10
    # these kernels record no message size: no bandwidth-by-size table, nor its caption
    assert browser.evaluate(f"{section}.querySelector('[data-table=collective_sizes]') === null") is True
    assert browser.evaluate("document.getElementById('collective-sizes-caption') === null") is True
    assert_page_is_clean(browser)
    # And a single rank's report has no such section
    browser.open(write_report(KINETO / "hta" / "sampled_rank-0.json.gz", tmp_path / "one.html"))
    assert browser.evaluate(f"{section} === null") is True


def test_bandwidth_by_size_table_of_a_run_with_message_sizes(browser: Chromium, tmp_path: Path) -> None:
    # Given a synthetic 4-rank DDP run whose all-reduce kernels record their message sizes
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import synth_ranks

    synth_ranks.write_run(tmp_path / "run", 4, slow_rank=2, seed=3)
    browser.open(write_report(tmp_path / "run", tmp_path / "run.html"))
    # Then the Ranks section ends with one bandwidth row per collective, algorithm, protocol and size
    rows = "document.querySelectorAll('[data-table=collective_sizes] tbody tr')"
    assert browser.evaluate(f"{rows}.length") == 1
    cells = browser.evaluate(f"[...{rows}[0].querySelectorAll('td')].map(td => td.textContent)")
    assert cells[:3] == ["allreduce", "RING", "LL"]
    assert cells[4] == "12"  # 3 steps x 4 gradient buckets, each matched on the 4 ranks
    assert browser.evaluate("document.getElementById('collective-sizes-caption') !== null") is True
    assert_page_is_clean(browser)


def test_dark_system_theme_darkens_page_and_figures(browser: Chromium, tmp_path: Path) -> None:
    # Given a report and a system that prefers dark colors
    page = write_report(KINETO / "hta" / "sampled_rank-0.json.gz", tmp_path / "dark.html")
    browser.send("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "dark"}])
    try:
        browser.open(page)
        # Then the page background is dark and Plotly's text uses the light foreground
        bg = browser.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        font = browser.evaluate("document.querySelector('[data-figure=breakdown]').layout.font.color")
        browser.screenshot(tmp_path / "dark.png", full_page=False)
    finally:
        browser.send("Emulation.setEmulatedMedia", features=[{"name": "prefers-color-scheme", "value": "light"}])
    assert bg == "rgb(13, 17, 23)"
    assert font == "#e6edf3"
    assert_page_is_clean(browser)


def test_script_and_markup_in_trace_strings_never_run(browser: Chromium, tmp_path: Path) -> None:
    # Given a trace whose kernel and op names, file paths, functions, modules, args and
    # metadata carry </script><script>, <img onerror> and <!-- payloads that set a global flag
    trace = poisoned_trace(tmp_path / "poisoned.parquet")
    page = write_report(trace, tmp_path / "poisoned.html", "--title", SCRIPT_PAYLOAD)
    # When the page loads and the user hovers a kernel bar and a timeline bar
    browser.open(page)
    hovered = browser.evaluate(
        """(function () {
             var out = [];
             ['kernels', 'timeline', 'lines'].forEach(function (name) {
               var gd = document.querySelector('[data-figure=' + name + ']');
               Plotly.Fx.hover(gd, [{curveNumber: 0, pointNumber: 0}]);
               out.push(gd.querySelector('.hoverlayer').textContent);
             });
             return out;
           })()"""
    )
    # and clicks each timeline event, which writes its name, source, module and args below the chart
    details = browser.evaluate(
        """(function () {
             var d = JSON.parse(document.getElementById('report-data').textContent), out = '';
             var n = d.timeline.steps.length ? d.timeline.steps[d.timeline.steps.length - 1].ev.row.length : 0;
             for (var j = 0; j < Math.min(n, 40); j++) {
               window.__neuronExplorerTimeline.select(j);
               out += document.getElementById('timeline-details').textContent;
             }
             return out;
           })()"""
    )
    browser.pump(0.5)
    assert SCRIPT_PAYLOAD in details and IMG_PAYLOAD in details
    # Then no payload ran: the flag is unset, no dialog opened, no <img> or extra <script>
    # exists and nothing was fetched (the <img src=x> would request .../x)
    assert browser.evaluate(f"typeof window.{XSS_FLAG}") == "undefined"
    assert browser.dialogs() == []
    assert browser.evaluate("document.images.length") == 0
    assert browser.evaluate("document.scripts.length") == 3
    assert [u for u in browser.requests() if not u.endswith("poisoned.html")] == []
    assert browser.console_errors() == []
    # And the payloads are shown as text, where the user can read them
    text = browser.evaluate("document.body.textContent")
    assert SCRIPT_PAYLOAD in text and IMG_PAYLOAD in text
    assert browser.evaluate("document.title").startswith(SCRIPT_PAYLOAD)
    assert all(hover for hover in hovered)
    assert any("<img src=x" in hover for hover in hovered)
    browser.screenshot(tmp_path / "poisoned.png", full_page=False)
