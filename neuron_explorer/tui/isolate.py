"""Run the analysis of a Parquet trace in a child process, so the UI thread keeps the GIL.

pandas and numpy hold the GIL through long whole-column operations: on a 5M-event trace an
analysis thread froze the UI for up to 1.2 s at a time. A spawned child reads the trace itself
(only its path goes in) and sends back the pickled ``Analysis``, whose tables
are per op / kernel / line, small next to the events. ``cancel`` ends the child when the app
quits before it is done.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_explorer.trace.errors import AnalysisError, NeuronExplorerError

if TYPE_CHECKING:
    from neuron_explorer.analyzers import Analysis


def _child(path: str) -> tuple[str, Any]:
    try:
        from neuron_explorer.analyzers import analyze
        from neuron_explorer.trace.model import Trace

        return ("ok", analyze(Trace.read(path)))
    except NeuronExplorerError as exc:
        return ("error", str(exc))
    except Exception as exc:  # reported to the UI as an analysis failure, not lost in the child
        return ("error", f"{type(exc).__name__}: {exc}")


class AnalysisProcess:
    """One analysis in a child interpreter; ``result()`` blocks (call it from a worker thread).

    A plain ``python -m neuron_explorer.tui.isolate PATH`` child, not multiprocessing: that
    would re-run the parent's ``__main__`` (the CLI itself) in the child.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._cancelled = False

    def result(self) -> Analysis:
        with self._lock:
            if self._cancelled:
                raise AnalysisError("cancelled")
            self._process = subprocess.Popen(
                [sys.executable, "-m", "neuron_explorer.tui.isolate", str(self.path)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        out, err = self._process.communicate()
        if self._process.returncode != 0 or not out:
            last = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {self._process.returncode}"]
            raise AnalysisError(f"the analysis process failed: {last[0][:300]}", self.path)
        status, value = pickle.loads(out)  # our own child's output, never data from elsewhere
        if status != "ok":
            raise AnalysisError(str(value))
        return value

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._process is not None and self._process.poll() is None:
                self._process.terminate()


if __name__ == "__main__":
    sys.stdout.buffer.write(pickle.dumps(_child(sys.argv[1]), protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
