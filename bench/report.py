"""HTML report benchmark: generation time, page size and time to open in a real browser.

Targets (issue 5): the report of the real 216k-event trace (HTA's ``df_index_resolver``) is
generated from its Parquet in at most 5 s; the page of the synthetic 5M-event trace
(``bench/synth.py``) stays under 15 MB; a page opens in under 3 s.

Each generation runs in a fresh child process (median of ``--repeat`` runs) and times its
stages in-process: read the Parquet, ``analyze``, build the page data, render, write. Opening
is measured in headless Chromium (tests/integration/test_report_browser.py's driver) from
navigation to the page's "ready" flag, when Chromium is installed.

    .venv/bin/python bench/report.py                    # both traces, browser when present
    .venv/bin/python bench/report.py --skip-synthetic --repeat 5

Parquet conversions are cached in bench/data/; results are printed and saved in bench/results/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
REAL_TRACE = ROOT.parent / "shared" / "fixtures" / "kineto" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"
SYNTH_TRACE = DATA / "synth_5m.json.gz"
GENERATION_TARGET_S = 5.0
SIZE_TARGET_BYTES = 15_000_000
OPEN_TARGET_S = 3.0

sys.path.insert(0, str(HERE))
from _common import run_measured  # noqa: E402

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
from neuron_explorer.trace.model import Trace
from neuron_explorer.analyzers import analyze
from neuron_explorer.reports.html import build_report_data, render_html
from neuron_explorer.reports.html.render import write_html
t1 = time.perf_counter(); c1 = time.process_time()
trace = Trace.read(sys.argv[1]); t2 = time.perf_counter()
analysis = analyze(trace); t3 = time.perf_counter()
data = build_report_data(trace, analysis); t4 = time.perf_counter()
page = render_html(data); t5 = time.perf_counter()
path = write_html(page, sys.argv[2]); t6 = time.perf_counter(); c6 = time.process_time()
print(json.dumps({"generate_cpu_s": c6 - c1, "import_s": t1 - t0, "read_s": t2 - t1, "analyze_s": t3 - t2, "data_s": t4 - t3,
                  "render_s": t5 - t4, "write_s": t6 - t5, "generate_s": t6 - t1, "events": trace.num_events,
                  "bytes": path.stat().st_size, "timeline_events": sum(s["kept"] for s in data["timeline"]["steps"])}))
"""


def parquet_of(trace: Path) -> Path:
    """The trace converted to Parquet once, cached beside the benchmark data."""
    name = trace.name.removesuffix(".gz").removesuffix(".json")
    out = DATA / f"{name}.parquet"
    if not out.exists() or out.stat().st_mtime < trace.stat().st_mtime:
        import neuron_explorer as ne

        print(f"converting {trace.name} to {out} (once)...", flush=True)
        ne.load(trace).write(out)
    return out


def generate(parquet: Path, out: Path, repeat: int) -> dict[str, Any]:
    runs = [run_measured([sys.executable, "-c", PROBE, str(parquet), str(out)]) for _ in range(max(1, repeat))]
    probes = [r.json() for r in runs]
    result = {k: statistics.median(p[k] for p in probes) for k in probes[0] if k.endswith("_s")}
    result.update(events=probes[0]["events"], bytes=probes[0]["bytes"], timeline_events=probes[0]["timeline_events"])
    result["peak_rss_mb"] = max(r.peak_rss_bytes for r in runs) / 2**20
    return result


def open_in_browser(page: Path, repeat: int) -> dict[str, Any] | None:
    sys.path.insert(0, str(ROOT))
    from tests.integration.test_report_browser import Chromium, find_chromium

    binary = find_chromium()
    if binary is None:
        return None
    times, render_ms = [], []
    for _ in range(max(1, repeat)):
        browser = Chromium(binary)  # a fresh browser each time: no warm caches
        try:
            times.append(browser.open(page))
            render_ms.append(browser.evaluate("window.__neuronExplorerReport.renderMs"))
            errors = browser.console_errors()
        finally:
            browser.close()
    return {"open_s": statistics.median(times), "page_render_ms": statistics.median(render_ms), "errors": errors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-synthetic", action="store_true")
    parser.add_argument("--skip-browser", action="store_true")
    args = parser.parse_args(argv)
    DATA.mkdir(exist_ok=True)
    cases = [("df_index_resolver (216k events)", REAL_TRACE)]
    if not args.skip_synthetic:
        if not SYNTH_TRACE.exists():
            print(f"generating {SYNTH_TRACE} with bench/synth.py (once)...", flush=True)
            run_measured([sys.executable, str(HERE / "synth.py"), "-o", str(SYNTH_TRACE)])
        cases.append(("synthetic (5M events)", SYNTH_TRACE))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, trace in cases:
            if not trace.exists():
                print(f"{label}: {trace} not found, skipped")
                continue
            page = Path(tmp) / f"{trace.name}.html"
            r = generate(parquet_of(trace), page, args.repeat)
            if not args.skip_browser:
                r["browser"] = open_in_browser(page, args.repeat)
            results[label] = r
            _print(label, r, generation_target=trace == REAL_TRACE)
    out = HERE / "results" / f"report-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"saved {out}")
    return 0


def _print(label: str, r: dict[str, Any], generation_target: bool) -> None:
    ok = lambda good: "ok" if good else "OVER TARGET"  # noqa: E731
    print(f"\n{label}: {r['events']:,} events")
    target = f"target <= {GENERATION_TARGET_S:.0f} s: {ok(r['generate_s'] <= GENERATION_TARGET_S)}; "
    print(
        f"  generate from Parquet  {r['generate_s']:6.2f} s   ({target if generation_target else ''}"
        f"CPU time {r['generate_cpu_s']:.2f} s)"
    )
    print(
        f"    read {r['read_s']:.2f} s, analyze {r['analyze_s']:.2f} s, page data {r['data_s']:.2f} s, "
        f"render {r['render_s']:.2f} s, write {r['write_s']:.2f} s; python imports {r['import_s']:.2f} s; "
        f"peak RSS {r['peak_rss_mb']:.0f} MiB"
    )
    print(
        f"  page size              {r['bytes'] / 1e6:6.2f} MB  (target < 15 MB: {ok(r['bytes'] < SIZE_TARGET_BYTES)}); "
        f"{r['timeline_events']:,} timeline events"
    )
    b = r.get("browser")
    if b:
        print(
            f"  open in Chromium       {b['open_s']:6.2f} s   (target < {OPEN_TARGET_S:.0f} s: "
            f"{ok(b['open_s'] < OPEN_TARGET_S)}); page script {b['page_render_ms']:.0f} ms; "
            f"console errors: {len(b['errors'])}"
        )
    elif "browser" in r:
        print("  open in Chromium       skipped: no Chromium (apt-get install -y chromium)")


if __name__ == "__main__":
    sys.exit(main())
