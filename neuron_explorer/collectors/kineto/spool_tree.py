"""The call tree of spooled events, walked in thread order one batch at a time.

``_TreeWalk`` carries the open stack of the current thread between batches, so a batch with that
chain in front gets the answers the whole thread would (parents by ``nesting.enclosing_spans``,
marks by ``nesting.nearest_marked_ancestor``). ``_TreeBuilder`` runs it over the sorted events:
the parent, the enclosing op, the user or generated frame and the nn.Module path of every host
event, into the ``tree`` table the links join.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neuron_explorer.collectors.build.event_kinds import (
    _HOST_CHILD_CODES,
    _HOST_LINKED_CODES,
    _HOST_SPAN_CODES,
    _ON_DEVICE_CODES,
)
from neuron_explorer.collectors.build.nesting import enclosing_spans, nearest_marked_ancestor
from neuron_explorer.collectors.build.raw_events import K
from neuron_explorer.collectors.build.source_attribution import _FUNCTION, _GENERATED
from neuron_explorer.collectors.build.source_map import UserCode, module_name, parse_python_frame
from neuron_explorer.collectors.kineto.spool_store import SpoolStore, _reader
from neuron_explorer.trace.arrow import to_numpy
from neuron_explorer.trace.schema import Kind


class _TreeWalk:
    """The call tree of host events streamed in thread order (pid, tid, event_id), batch by
    batch, carrying the open stack of the current thread between batches.

    ``marks``: per batch, arrays of values >= 0 where a row is marked; ``step`` resolves, per
    mark, the value of the nearest marked row among each row and its ancestors (-1: none).
    The context in front of a batch is the previous batch's open stack with its resolved
    marks (``ctx``); a caller can keep more per-row values there (``ctx[key]``, set after
    ``step`` for the positions ``chain``).
    """

    def __init__(self) -> None:
        self.ctx: dict[str, np.ndarray] | None = None

    def step(
        self,
        pid: np.ndarray,
        tid: np.ndarray,
        eid: np.ndarray,
        start: np.ndarray,
        end: np.ndarray,
        span: np.ndarray,
        marks: list[np.ndarray],
    ) -> tuple[int, dict[str, np.ndarray] | None, np.ndarray, np.ndarray, list[np.ndarray], np.ndarray]:
        """(m, the context used, local parent positions, parent event ids, resolved marks,
        the positions of the next context); the arrays cover context + batch, the ``m``
        context rows first."""
        ctx = self.ctx
        if ctx is not None and (
            len(pid) == 0 or len(ctx["eid"]) == 0 or ctx["pid"][0] != pid[0] or ctx["tid"][0] != tid[0]
        ):
            ctx = None
        m = 0 if ctx is None else len(ctx["eid"])
        if m:
            assert ctx is not None
            pid, tid, eid = (np.concatenate([ctx[k], v]) for k, v in (("pid", pid), ("tid", tid), ("eid", eid)))
            start, end = np.concatenate([ctx["start"], start]), np.concatenate([ctx["end"], end])
            span = np.concatenate([ctx["span"], span])
            marks = [np.concatenate([ctx[f"mark{i}"], mk]) for i, mk in enumerate(marks)]
        new_group = np.ones(len(pid), bool)
        new_group[1:] = (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])
        local = enclosing_spans(start, end, span, new_group)
        resolved = [nearest_marked_ancestor(local, mk) for mk in marks]
        parent = np.where(local >= 0, eid[np.maximum(local, 0)], -1)
        # The open stack after the last row: the chain of its parents (itself first when a
        # span). Every other row before it ended at or before a later start, so it can
        # enclose nothing that follows (see ``nesting``).
        chain: list[int] = []
        if len(pid):
            r = len(pid) - 1 if span[-1] else int(local[-1])
            while r >= 0:
                chain.append(r)
                r = int(local[r])
        rows = np.array(chain[::-1], np.int64)
        self.ctx = {
            "pid": pid[rows],
            "tid": tid[rows],
            "eid": eid[rows],
            "start": start[rows],
            "end": end[rows],
            "span": span[rows],
            **{f"mark{i}": res[rows] for i, res in enumerate(resolved)},
        }
        return m, ctx, local, parent, resolved, rows


# ----------------------------------------------------------------------------- kind codes in SQL
def _sql_list(codes: Any) -> str:
    """Kind codes as a SQL ``IN`` list."""
    return ", ".join(str(int(c)) for c in codes)


_HOST_CHILD = _sql_list(_HOST_CHILD_CODES)
_ON_DEVICE = _sql_list(_ON_DEVICE_CODES)
_CPU_OP, _RUNTIME, _MEMORY = int(K[Kind.CPU_OP]), int(K[Kind.RUNTIME]), int(K[Kind.MEMORY])
_PYTHON, _STEP = int(K[Kind.PYTHON]), int(K[Kind.STEP])
_HOST_LINKED = _sql_list(_HOST_LINKED_CODES)


class _TreeBuilder:
    """The out-of-core build's statements on the spool's database (``sql``, ``scalar``), the
    per-name frame tables and the call tree of the sorted events (table ``tree``); ``_Builder``
    (``spool_links``) goes on from there with the links."""

    def __init__(
        self,
        spool: SpoolStore,
        metadata: dict[str, Any],
        user_code: UserCode,
        phase: Callable[[str], None] | None,
        batch: int,
    ) -> None:
        self.phase = phase or (lambda text: None)
        self.spool = spool
        self.con = spool.con
        self.metadata = metadata
        self.user_code = user_code
        self.issues = dict(spool.issues)
        self.batch = batch  # events per batch read back (``spooled.BATCH_EVENTS``)

    def sql(self, query: str, ordered: bool = False) -> None:
        """Run a statement; ``ordered``: the table it makes keeps the order of its ORDER BY
        (DuckDB's insertion order, otherwise off: joins and sorts spill more freely)."""
        if ordered:
            self.con.execute("SET preserve_insertion_order = true").fetchall()
        try:
            self.con.execute(query).fetchall()  # (DuckDB wants every result finished)
        finally:
            if ordered:
                self.con.execute("SET preserve_insertion_order = false").fetchall()

    def scalar(self, query: str) -> Any:
        rows = self.con.execute(query).fetchall()
        return rows[0][0] if rows else None

    def _frames(self) -> None:
        """Per distinct name: the python frame it names (file, line, function), its origin and
        nn.Module (``source_attribution``'s per-name tables)."""
        names = [w if w is not None else "" for w in self.spool.name.words]
        frames = [parse_python_frame(nm) for nm in names]
        origin = [self.user_code.origin(f[0]) if f is not None else "library" for f in frames]
        self.frames = frames
        self.user_name = np.array([o == "user" for o in origin] + [False])
        self.gen_name = np.array([o == "generated" for o in origin] + [False])
        self.mod_names = [module_name(nm) for nm in names]
        self.is_mod_name = np.array([m is not None for m in self.mod_names] + [False])
        self.line_by_name = np.array([f[1] if f else -1 for f in frames] + [-1], np.int64)
        self.module_words: list[str] = []

    # --------------------------------------------------------------------- call tree
    def _thread_rows(self, extra: str = "", join: str = "") -> Iterator[pa.RecordBatch]:
        query = (
            f"SELECT ev.eid, ev.pid, ev.tid, ev.start, ev.dur, ev.kind, ev.name{extra} FROM ev {join} "
            f"WHERE ev.kind IN ({_HOST_CHILD}) ORDER BY ev.pid, ev.tid, ev.eid"
        )
        yield from _reader(self.con, query, self.batch)

    def _tree(self) -> None:
        """parent_id, the enclosing op (exclusive), the frame attribution and module path of
        every host event, into table ``tree``."""
        walk = _TreeWalk()
        code_of_path: dict[str, int] = {}
        out_path = self.spool.dir / "tree.parquet"
        schema = pa.schema(
            [(c, pa.int64()) for c in ("eid", "parent", "op_excl", "sname", "sline", "smod")] + [("sprec", pa.int8())]
        )
        nm = len(self.spool.name.words)
        with pq.ParquetWriter(out_path, schema, compression="lz4") as writer:
            for batch in self._thread_rows():
                c = {k: to_numpy(batch.column(k)) for k in batch.schema.names}
                kind, name = c["kind"], np.where(c["name"] < 0, nm, c["name"]).astype(np.int64)
                is_py = kind == _PYTHON
                span = np.isin(kind, _HOST_SPAN_CODES) & (c["dur"] > 0)
                marks = [
                    np.where(kind == _CPU_OP, c["eid"], -1),
                    np.where(is_py & self.user_name[name], name, -1),
                    np.where(is_py & self.gen_name[name], name, -1),
                ]
                m, ctx, local, parent, (op_incl, frame, gen), chain = walk.step(
                    c["pid"], c["tid"], c["eid"], c["start"], c["start"] + c["dur"], span, marks
                )
                is_mod = is_py & self.is_mod_name[name]
                prev_mod = ctx["mod"] if ctx is not None else np.zeros(0, np.int64)
                module = self._modules(local, m, prev_mod, is_mod, name, code_of_path)
                assert walk.ctx is not None
                walk.ctx["mod"] = module[chain]
                # the enclosing op, exclusive: the parent's inclusive one
                op_excl = np.where(local >= 0, op_incl[np.maximum(local, 0)], -1)[m:]
                frame, gen = frame[m:], gen[m:]
                generated = (frame < 0) & (gen >= 0)
                sname = np.where(generated, gen, frame)
                sprec = np.where(generated, _GENERATED, np.where(frame >= 0, _FUNCTION, -1))
                sline = self.line_by_name[np.where(sname >= 0, sname, nm)]
                columns = [c["eid"], parent[m:], op_excl, sname, sline, module[m:], sprec.astype(np.int8)]
                writer.write_table(pa.table(columns, schema=schema))
        self.sql(f"CREATE TABLE tree AS SELECT * FROM read_parquet('{out_path}')")
        out_path.unlink()

    def _modules(
        self,
        local: np.ndarray,
        m: int,
        prev_mod: np.ndarray,
        is_mod: np.ndarray,
        name: np.ndarray,
        code_of_path: dict[str, int],
    ) -> np.ndarray:
        """The nn.Module path code of each row, context rows first: the path of the nearest
        module frame at or above it, built as ``source_attribution`` builds it (the outer
        module's path, a dot, the frame's own name). A context row stands for the module it
        resolved to."""
        total = m + len(is_mod)
        marked = np.concatenate([np.where(prev_mod >= 0, np.arange(m), -1), np.where(is_mod, np.arange(m, total), -1)])
        module_of = nearest_marked_ancestor(local, marked)
        code = np.full(total, -1, np.int64)
        code[:m] = prev_mod
        words = self.module_words
        for r in (np.nonzero(is_mod)[0] + m).tolist():  # parents come first
            p = int(local[r])
            o = int(module_of[p]) if p >= 0 else -1
            own = self.mod_names[int(name[r - m])] or ""
            path = f"{words[code[o]]}.{own}" if o >= 0 and code[o] >= 0 else own
            k = code_of_path.get(path)
            if k is None:
                k = code_of_path[path] = len(words)
                words.append(path)
            code[r] = k
        return np.where(module_of >= 0, code[np.maximum(module_of, 0)], -1)
