"""One executor for independent per-rank tasks: in this process, a process pool, or Dask.

``make_executor`` picks the backend: ``serial=True`` runs the tasks one after the other here
(tests, one rank); ``dask`` is the address of a running ``dask.distributed`` scheduler;
``workers`` starts a local Dask cluster of that many single-threaded worker processes;
otherwise a ``ProcessPoolExecutor`` of the machine's cores runs them. ``Executor.map`` returns
the results in the order of the inputs whatever the backend, so a run gives the same answer
on all three. Tasks must be module-level functions whose arguments and results are small
(paths and summaries): each task writes its own large output to disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from neuron_explorer.trace.errors import NeuronExplorerError

T = TypeVar("T")
R = TypeVar("R")


class ExecutorError(NeuronExplorerError):
    """The requested executor cannot start (Dask not installed, scheduler unreachable)."""


class Executor:
    """Runs ``fn`` over items; ``kind`` is ``serial``, ``processes`` or ``dask``."""

    kind = "serial"
    workers = 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        return [fn(x) for x in items]

    def close(self) -> None:
        return None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def describe(self) -> str:
        return f"{self.kind} ({self.workers} worker{'s' if self.workers != 1 else ''})"


class PoolExecutor(Executor):
    kind = "processes"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        items = list(items)
        if len(items) <= 1 or self.workers <= 1:
            return [fn(x) for x in items]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=min(self.workers, len(items)))
        return list(self._pool.map(fn, items))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class DaskExecutor(Executor):
    """Tasks on a ``dask.distributed`` cluster: an existing one (``address``) or a local one."""

    kind = "dask"

    def __init__(self, address: str | None = None, workers: int | None = None) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ExecutorError("--dask/--workers need dask.distributed: pip install 'dask[distributed]'") from None
        self._cluster: Any = None
        try:
            if address:
                self._client = Client(address, timeout="10s")
            else:
                self._cluster = LocalCluster(
                    n_workers=workers or 1,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=40,
                )
                self._client = Client(self._cluster)
        except (OSError, TimeoutError) as exc:
            self.close()
            raise ExecutorError(f"cannot reach the Dask scheduler {address or '(local)'}: {exc}") from None
        self.workers = len(self._client.scheduler_info().get("workers", {})) or (workers or 1)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        items = list(items)
        if not items:
            return []
        futures = self._client.map(fn, items, pure=False)
        return list(self._client.gather(futures))

    def close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def make_executor(workers: int | None = None, dask: str | None = None, serial: bool = False) -> Executor:
    """The executor the command line asks for (see the module docstring)."""
    if workers is not None and workers < 1:
        raise ExecutorError(f"--workers must be at least 1, not {workers}")
    if dask:
        return DaskExecutor(address=dask)
    if workers is not None:
        return DaskExecutor(workers=workers)
    if serial:
        return Executor()
    return PoolExecutor(os.cpu_count() or 1)
