"""Where a spool keeps its events: a temporary directory and a DuckDB database in it.

The directory is named ``SPOOL_PREFIX...`` and holds the owning process's id (``OWNER_FILE``);
ones left by a process that is gone are removed when the next spool is made. DuckDB's and the
file system's errors become one line naming the directory (``SpoolError``). ``SpoolStore``
holds the directory, the database and the vocabularies of the spooled string columns;
``_reader`` streams a query's result back as Arrow batches.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from neuron_explorer.trace.arrow import dict_parts
from neuron_explorer.trace.atomic import forget_temporary, process_alive, register_temporary
from neuron_explorer.trace.errors import NeuronExplorerError

#: DuckDB's memory limit while chunks are spooled (the decoded chunks and a batch in flight share
#: the process); the build raises it (``spool_links.DUCKDB_MEMORY``).
SPOOL_DUCKDB_MEMORY = "160MB"

#: Spool directories are named ``SPOOL_PREFIX...`` and hold the owning process's id in ``OWNER_FILE``.
SPOOL_PREFIX = "neuron-explorer-spool-"
OWNER_FILE = "owner.pid"


def remove_stale_spools(parent: Path) -> list[Path]:
    """Remove the spool directories in ``parent`` whose process is gone: one killed by a signal
    (SIGTERM, SIGHUP when its terminal closed, the OOM killer) could not remove its own, which
    can hold gigabytes. A directory without an owner file, or whose owner runs, is kept."""
    removed = []
    for d in parent.glob(SPOOL_PREFIX + "*"):
        try:
            pid = int((d / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if process_alive(pid):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def _remove_spool(directory: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    forget_temporary(directory)


class SpoolError(NeuronExplorerError):
    """The out-of-core build could not use its temporary directory (full disk, no access)."""


@contextlib.contextmanager
def _spool_errors(directory: Path | str | None) -> Iterator[None]:
    """DuckDB's and the file system's errors as one line naming the spool directory."""
    import duckdb

    try:
        yield
    except (duckdb.Error, OSError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        where = directory or tempfile.gettempdir()
        raise SpoolError(
            f"the out-of-core build of a large trace failed in its temporary directory ({first}); "
            "point NEURON_EXPLORER_SPOOL_DIR at a writable directory with free space",
            where,
        ) from None


class _Vocab:
    """Distinct strings of one column across all batches, and each one's code."""

    def __init__(self) -> None:
        self.words: list[Any] = []
        self._code: dict[Any, int] = {}

    def code(self, word: Any) -> int:
        c = self._code.get(word)
        if c is None:
            c = self._code[word] = len(self.words)
            self.words.append(word)
        return c

    def codes(self, arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
        words, codes = dict_parts(arr)
        table = np.empty(len(words) + 1, np.int32)
        for i, w in enumerate(words):
            table[i] = self.code(w)
        table[-1] = -1
        return table[codes] if len(codes) else np.zeros(0, np.int32)


#: Device types of events, spooled as tokens into ``_DTYPE_WORDS``-like vocabularies: the
#: accelerator is only known once every category and runtime name has been seen.
_ACCEL = "\x00accel"
#: Memory events on these c10 device types take the accelerator's name (see ``_classify``).
_RENAMED = "\x00renamed:"


class SpoolStore:
    """A spool's directory (owned by this process, removed with it), its DuckDB database and
    the vocabularies its string columns are coded into; ``spooled.Spool`` fills them, the build
    and the ``SpooledTrace`` read them."""

    def __init__(self, directory: str | Path | None = None) -> None:
        import duckdb  # (a declared dependency; only large imports pay for importing it)

        from neuron_explorer import environment

        parent = directory or environment.spool_dir()
        with _spool_errors(parent):
            remove_stale_spools(Path(parent or tempfile.gettempdir()))
            self.dir = Path(tempfile.mkdtemp(prefix=SPOOL_PREFIX, dir=parent))
            (self.dir / OWNER_FILE).write_text(str(os.getpid()))
        register_temporary(self.dir)  # (removed if a signal ends the process: cli.signals)
        self._finalizer = weakref.finalize(self, _remove_spool, str(self.dir))
        with _spool_errors(self.dir):
            self.con = self._connect(duckdb, self.dir)
        self.ph, self.cat, self.name, self.dtype = _Vocab(), _Vocab(), _Vocab(), _Vocab()
        self.runtime_names: set[int] = set()
        self.n = 0
        self.issues: dict[tuple[str, str], int] = {}

    @staticmethod
    def _connect(duckdb: Any, directory: Path) -> Any:
        return duckdb.connect(
            str(directory / "spool.duckdb"),
            config={
                "memory_limit": SPOOL_DUCKDB_MEMORY,
                "threads": max(1, min(os.cpu_count() or 1, 4)),
                "temp_directory": str(directory / "tmp"),
                # (only the two tables kept in event order need it: ``_Builder.sql(ordered=True)``)
                "preserve_insertion_order": False,
            },
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.con.close()
        self._finalizer()


def _reader(con: Any, query: str, rows: int) -> pa.RecordBatchReader:
    """A query's result streamed as Arrow batches of ``rows`` rows (DuckDB 1.x and 2.x)."""
    rel = con.sql(query)
    if hasattr(rel, "to_arrow_reader"):
        return rel.to_arrow_reader(rows)
    return rel.fetch_record_batch(rows)  # pragma: no cover - DuckDB < 1.4
