"""TUI benchmark: time to the first painted screen, and how responsive navigation stays.

For each Parquet trace it runs, in a fresh interpreter (cold imports, like the CLI):
  open       reading the view columns (``TraceSource.open``)
  first      process start -> the Overview painted with the trace's facts
  analysis   the analysis worker, start to finish (it runs after the first paint)
  stall      the longest gap between two ticks of a 20 ms UI timer after the first paint, while
             the analysis runs and the keys below are pressed: how long the UI was ever frozen
  keys       per key: time until the screen is redrawn (and its worker, if any, finished);
             this includes Textual's tab-underline animation (about 0.3 s) that Pilot waits for
  CLI        ``neuron-explorer tui`` launched in tmux until its screen shows the trace facts
             (polled every 20 ms): what a user waits, CLI start-up included

    .venv/bin/python bench/tui.py                        # the 216k-event fixture (converted once)
    .venv/bin/python bench/tui.py /tmp/synth_5m.parquet  # any Parquet trace or run directory

The synthetic 5M-event trace: ``bench/synth.py`` writes bench/data/synth_5m.json.gz;
``neuron-explorer convert bench/data/synth_5m.json.gz -o /tmp/synth_5m.parquet`` makes its Parquet.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # before any import: the first-paint figure counts imports too

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
FIXTURE = (
    HERE.parent.parent / "shared" / "fixtures" / "kineto" / "hta" / "df_index_resolver" / "df_index_resolver.json.gz"
)
FIXTURE_PARQUET = HERE / "data" / "df_index_resolver.parquet"
SIZE = (120, 40)
#: Keys pressed in order, with what they do.
KEYS: tuple[tuple[str, str], ...] = (
    ("2", "Findings"),
    ("3", "Ops"),
    ("enter", "Ops: drill into the top op"),
    ("s", "Ops: sort"),
    ("4", "Kernels"),
    ("enter", "Kernels: drill into the top kernel"),
    ("5", "Source"),
    ("6", "Timeline: cut the first step"),
    ("right_square_bracket", "Timeline: next step"),
    ("plus", "Timeline: zoom"),
    ("1", "Overview"),
)


async def drive(path: Path) -> dict:
    from neuron_explorer.tui.app import ExplorerApp
    from neuron_explorer.tui.data import TraceSource

    t_open = time.perf_counter()
    source = TraceSource.open(path)
    open_s = time.perf_counter() - t_open
    app = ExplorerApp(source)
    app.started = T0  # first paint measured from process start
    gaps: list[tuple[float, float]] = []  # (gap, when it ended)
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        gaps.append((now - last[0], now))
        last[0] = now

    async with app.run_test(size=SIZE) as pilot:
        app.set_interval(0.02, tick)
        while app.first_paint_s is None:
            await asyncio.sleep(0.01)
        first = app.first_paint_s
        painted_at = time.perf_counter()
        await app.workers.wait_for_complete()
        await pilot.pause()
        keys = []
        for key, what in KEYS:
            t = time.perf_counter()
            await pilot.press(key)
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
            keys.append({"key": key, "what": what, "s": round(time.perf_counter() - t, 3)})
    return {
        "trace": str(path),
        "events": source.trace.num_events,
        "open_s": round(open_s, 3),
        "first_paint_s": round(first, 3),
        "analysis_s": round(app.analysis_s or float("nan"), 3),
        "max_ui_stall_s": round(max((g for g, when in gaps if when > painted_at), default=0.0), 3),
        "keys": keys,
    }


def cli_first_paint(path: Path) -> float | None:
    """Seconds from starting ``neuron-explorer tui PATH`` in tmux until the Overview's facts show."""
    import shutil
    import uuid

    if shutil.which("tmux") is None:
        return None
    sock = f"ne-bench-{uuid.uuid4().hex[:8]}"
    cmd = f"env -u COLUMNS -u LINES {sys.executable} -m neuron_explorer tui {path}; sleep 30"
    t = time.perf_counter()
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "b", "-x", "120", "-y", "40", cmd], check=True)
    try:
        while time.perf_counter() - t < 60:
            screen = subprocess.run(
                ["tmux", "-L", sock, "capture-pane", "-p", "-t", "b"], capture_output=True, text=True
            ).stdout
            if "Trace span" in screen:
                return time.perf_counter() - t
            time.sleep(0.02)
        return None
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)


def ensure_fixture_parquet() -> Path:
    if not FIXTURE_PARQUET.exists():
        import neuron_explorer as ne

        FIXTURE_PARQUET.parent.mkdir(parents=True, exist_ok=True)
        ne.load(FIXTURE).write(FIXTURE_PARQUET)
    return FIXTURE_PARQUET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, help="Parquet traces (default: the 216k-event fixture)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=3, help="runs per trace (the median is reported)")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(drive(args.traces[0]))))
        return 0
    traces = args.traces or [ensure_fixture_parquet()]
    for trace in traces:
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, "--child", str(trace)], capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stderr[-2000:], file=sys.stderr)
                return 1
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        runs.sort(key=lambda r: r["first_paint_s"])
        med = runs[len(runs) // 2]
        print(f"{trace.name}: {med['events']:,} events, median of {len(runs)} runs")
        print(f"  open (view columns)   {med['open_s']:.3f} s")
        print(
            f"  first screen painted  {med['first_paint_s']:.3f} s from process start "
            f"(all runs: {', '.join(str(r['first_paint_s']) for r in runs)})"
        )
        print(f"  analysis (worker)     {med['analysis_s']:.3f} s")
        print(f"  longest UI stall      {med['max_ui_stall_s']:.3f} s (after the first paint)")
        cli = sorted(v for v in (cli_first_paint(trace) for _ in range(args.repeat)) if v is not None)
        if cli:
            print(
                f"  CLI in tmux: screen shows the trace facts {cli[len(cli) // 2]:.3f} s after launch "
                f"(all runs: {', '.join(f'{v:.3f}' for v in cli)})"
            )
        for k in med["keys"]:
            print(f"  key {k['key']:<22} {k['s']:.3f} s  {k['what']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
