"""Decode the chunks of a large Kineto JSON trace in worker processes.

Turning a chunk of JSON events into columns (``chunk_decode._decode_chunk``) is ~90% of an import's
decode stage and is pure per-event Python work, so it runs in worker processes, one chunk per
request, while the main process reads, decompresses and cuts the text into chunks. A chunk's
columns come back pickled (~5 ms for a 4 MB chunk, vs ~100 ms to decode it). The main process
checks each chunk's JSON syntax before handing it out (a ``list[Raw]`` parse, ~5% of the
decode), because a chunk boundary is found by a text heuristic that is occasionally wrong
(``},{`` inside an event's args) and must be moved before the next chunk starts.

The workers are plain ``python -m neuron_explorer.collectors.kineto._decode_worker`` processes talking
over pipes, not ``multiprocessing``: its ``spawn``/``forkserver`` children re-import the
program's ``__main__`` (a user script calling ``neuron_explorer.load`` at top level would run
again), and ``fork`` of a process running other threads (a training script, Arrow's pools) can
deadlock. One thread per worker writes a chunk and reads its columns back (the pipes release
the GIL); results are taken in order.

Workers start only once a file proves large (``START_AFTER_CHUNKS`` chunks decoded in the main
process). ``NEURON_EXPLORER_WORKERS`` sets their number (0 or 1: decode in the main process);
the default is the CPUs this process may use, at most 8. If a worker cannot start or dies, its
chunks are decoded in the main process: same result.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from neuron_explorer.collectors.kineto._decode_worker import receive, send

#: Chunks decoded in the main process before workers are started (small files never pay for them).
START_AFTER_CHUNKS = 24
MAX_WORKERS = 8


def worker_count() -> int:
    """Workers to use: ``NEURON_EXPLORER_WORKERS``, else the usable CPUs (at most 8)."""
    from neuron_explorer import environment

    env = environment.workers()
    if env is not None:
        return env
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(cpus, MAX_WORKERS)


class WorkerError(RuntimeError):
    """A worker process failed (not the chunk: the chunk is then decoded in the main process)."""


class _Worker:
    #: The worker's command line (tests replace it to simulate a worker that dies).
    command = (sys.executable, "-m", "neuron_explorer.collectors.kineto._decode_worker")

    def __init__(self) -> None:
        # The worker imports this package from wherever this process found it.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        self.proc = subprocess.Popen(
            list(self.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )

    def decode(self, blob: bytes) -> Any:
        try:
            send(self.proc.stdin, blob)  # type: ignore[arg-type]
            reply = receive(self.proc.stdout)  # type: ignore[arg-type]
        except (OSError, ValueError) as exc:
            raise WorkerError(f"decode worker failed: {exc}") from None
        if reply is None:
            raise WorkerError(f"decode worker exited ({self.proc.poll()})")
        try:
            ok, value = pickle.loads(reply)
        except Exception as exc:  # a garbled reply is the worker's fault, not the chunk's
            raise WorkerError(f"decode worker sent an unreadable reply: {exc}") from None
        if not ok:
            raise value  # the chunk's own error (invalid events): the import fails as in-process
        return value

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


class ChunkDecoder:
    """Decodes chunks in order: ``add(blob)`` for each chunk, then ``results()``; ``close()``
    always (it stops the workers).

    ``decode`` is the in-process decoder (bytes -> columns); ``check`` raises
    ``msgspec.DecodeError`` for a chunk that is not valid JSON, before it is handed out.
    """

    def __init__(self, decode: Callable[[bytes], Any], check: Callable[[bytes], Any]) -> None:
        self._decode = decode
        self._check = check
        self._count = worker_count()
        self._threads: ThreadPoolExecutor | None = None
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._workers: list[_Worker] = []
        self._seen = 0
        self._off = self._count < 2  # decode every chunk here
        # in order: finished columns, or (future, blob) still being decoded by a worker
        self._items: list[Any] = []
        self._taken = 0  # items before this index were handed out by take_ready
        self._in_flight: deque[int] = deque()

    def add(self, blob: bytes) -> None:
        """Decode ``blob`` (a JSON list of events), here or in a worker."""
        self._seen += 1
        if self._off or self._seen <= START_AFTER_CHUNKS or not self._running():
            self._items.append(self._decode(blob))
            return
        self._check(blob)  # a wrong cut must fail here, while the caller can still move it
        future = self._threads.submit(self._on_worker, blob)  # type: ignore[union-attr]
        self._items.append((future, blob))
        self._in_flight.append(len(self._items) - 1)

    def throttle(self) -> None:
        """Wait for the oldest chunks while more than two per worker are in flight (bounded
        memory). A chunk's own error (invalid events) is raised here, never from ``add``, whose
        ``msgspec.DecodeError`` means "this cut is not between two events"."""
        while len(self._in_flight) > 2 * self._count:
            self._settle(self._in_flight.popleft())

    def results(self) -> list[Any]:
        """The columns of every chunk not yet taken by ``take_ready``, in order."""
        while self._in_flight:
            self._settle(self._in_flight.popleft())
        return self._items[self._taken :]

    def take_ready(self) -> list[Any]:
        """The columns of the chunks decoded so far that no earlier chunk still waits for, in
        order; each is handed out once (the decoder keeps no reference)."""
        ready = []
        while self._taken < len(self._items):
            item = self._items[self._taken]
            if isinstance(item, tuple):  # (future, blob): still in a worker
                break
            ready.append(item)
            self._items[self._taken] = None
            self._taken += 1
        return ready

    def close(self) -> None:
        # After an error chunks may still be in flight: their workers are stopped at once.
        aborting = bool(self._in_flight)
        self._off = True  # threads waiting for a worker see none left and give up
        for w in self._workers:
            if aborting:
                w.kill()
            else:
                w.close()
        if self._threads is not None:
            for i in self._in_flight:
                self._items[i][0].cancel()
            self._threads.shutdown(wait=True)
            self._threads = None

    def _on_worker(self, blob: bytes) -> Any:
        while True:
            try:
                worker = self._idle.get(timeout=0.2)
                break
            except queue.Empty:
                if self._off or self._all_dead():
                    raise WorkerError("no decode worker left") from None
        try:
            result = worker.decode(blob)
        except WorkerError:
            worker.close()  # a dead worker takes no more chunks
            raise
        except BaseException:
            self._idle.put(worker)  # the chunk's own error: the worker is fine
            raise
        self._idle.put(worker)
        return result

    def _settle(self, index: int) -> None:
        future, blob = self._items[index]
        try:
            self._items[index] = future.result()
        except WorkerError:
            self._items[index] = self._decode(blob)
        except BaseException:
            self._items[index] = None  # the import fails; no half-settled entry stays
            raise

    def _running(self) -> bool:
        """Start the workers on first use; False (decode here) when they cannot start or all died."""
        if self._threads is None:
            try:
                for _ in range(self._count):
                    w = _Worker()
                    self._workers.append(w)
                    self._idle.put(w)
            except OSError:
                self._off = True
                for w in self._workers:
                    w.close()
                return False
            self._threads = ThreadPoolExecutor(self._count, thread_name_prefix="neuron-explorer-decode")
        if self._all_dead():
            self._off = True
            return False
        return True

    def _all_dead(self) -> bool:
        return all(w.proc.poll() is not None for w in self._workers)
