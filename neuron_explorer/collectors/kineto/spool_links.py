"""Steps 2 to 4 of the out-of-core build (``spooled``): sort, call tree, links and sources.

DuckDB sorts the spooled table into event order (``eid`` is the position); the call tree is
walked batch by batch (``spool_tree``); correlation, External id and flow joins, the forward-op
marks, the source lines inherited through forward op, op and launch, and the sources of work
replayed from a CUDA/HIP graph are SQL joins (DuckDB spills past its memory limit) into one link
table ``lk`` in event order. ``_Builder._trace`` then names the device types, resolves the steps
and the metadata and hands the two tables to the assembly (``spool_assembly``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neuron_explorer.collectors.build import graph_replay
from neuron_explorer.collectors.build.event_kinds import _GRAPH_FAMILY_OF, _HOST_SPAN_CODES, accelerator_type
from neuron_explorer.collectors.build.raw_events import KINDS, K
from neuron_explorer.collectors.build.source_attribution import _FORWARD, _GRAPH_CAPTURE, _LAUNCH
from neuron_explorer.collectors.build.step_tail import STEP_MARKER
from neuron_explorer.collectors.build.steps import _step_number, trailing_step
from neuron_explorer.collectors.kineto.spool_assembly import SpooledTrace, _Assembly, _Steps
from neuron_explorer.collectors.kineto.spool_store import _ACCEL, _RENAMED, _reader
from neuron_explorer.collectors.kineto.spool_tree import (
    _CPU_OP,
    _HOST_LINKED,
    _MEMORY,
    _ON_DEVICE,
    _RUNTIME,
    _STEP,
    _sql_list,
    _TreeBuilder,
    _TreeWalk,
)
from neuron_explorer.trace.arrow import to_numpy
from neuron_explorer.trace.repairs import Repairs
from neuron_explorer.trace.schema import SCHEMA_VERSION
from neuron_explorer.version import __version__

#: DuckDB's memory limit: past it, sorts and joins spill to the temporary directory.
DUCKDB_MEMORY = "384MB"
#: ... while the trace is written (two tables scanned in order).
ASSEMBLY_DUCKDB_MEMORY = "128MB"

_DEVICE_WORK = _sql_list(np.array([K[k] for k in _GRAPH_FAMILY_OF]))
#: kind code -> the work family graph_replay compares (-1: not device work)
_GRAPH_FAMILY = np.full(len(KINDS), -1, np.int8)
for _k, _fam in _GRAPH_FAMILY_OF.items():
    _GRAPH_FAMILY[K[_k]] = _fam


def _fetch(con: Any, query: str, rows: int) -> pa.Table:
    """A (small) query's whole result as one Arrow table."""
    return _reader(con, query, rows).read_all()


class _Builder(_TreeBuilder):
    """The out-of-core build on a complete spool: sort, call tree (``_TreeBuilder``), links,
    inherited source lines, graph replays, then the ``SpooledTrace`` (module docstring)."""

    def build(self) -> SpooledTrace:
        from neuron_explorer.collectors.kineto import kineto_checks as checks

        self.sql(f"SET memory_limit = '{DUCKDB_MEMORY}'")
        base = self.metadata.get("base_time_ns")
        base = int(base) if isinstance(base, int) else 0
        keep = f"WHERE abs(start_rel + {base}) <= {checks.MAX_TIME_NS}" if base else ""
        self.phase(f"sorting {self.spool.n:,} events on disk")
        # event order: start, the longer (enclosing) event first, then input order
        # (one sort of the whole rows; with insertion order preserved the table keeps it, and
        # a row's position is its event id: ``eid`` is DuckDB's rowid. The assembly checks
        # that the rows it writes come in this order.)
        self.sql(
            f"CREATE TABLE evt AS SELECT start_rel + {base} AS start, * EXCLUDE (start_rel) FROM raw {keep} "
            f"ORDER BY start, dur DESC, row",
            ordered=True,
        )
        self.sql("DROP TABLE raw")
        self.sql("CREATE VIEW ev AS SELECT rowid AS eid, * FROM evt")
        self.sql("CHECKPOINT")
        n = self.scalar("SELECT count(*) FROM ev")
        self.n = n
        self._frames()
        self.phase("call tree")
        self._tree()
        self.phase("links and source lines")
        self._links()
        return self._trace()

    # --------------------------------------------------------------------- links
    def _links(self) -> None:
        sql = self.sql
        # Device work without a correlation arg takes it from its ac2g flow's 'f' end, the
        # runtime call from its 's' end (old traces; as ``build_trace``).
        fix = self.scalar(
            f"SELECT (SELECT count(*) FROM ev WHERE ac2g) > 0 AND "
            f"(SELECT count(*) FROM ev WHERE kind IN ({_ON_DEVICE}) AND corr < 0) > 0"
        )
        if fix:
            sql(
                f"""CREATE TABLE corr_fix AS
                WITH dev AS (SELECT pid, tid, start, min(eid) AS target FROM ev WHERE kind IN ({_ON_DEVICE})
                             GROUP BY pid, tid, start),
                run AS (SELECT pid, tid, start, min(eid) AS target FROM ev WHERE kind = {_RUNTIME}
                        GROUP BY pid, tid, start)
                SELECT c.target AS eid, arg_max(f.flow, f.eid) AS corr
                FROM ev f JOIN dev c ON f.pid = c.pid AND f.tid = c.tid AND f.start = c.start
                WHERE f.ac2g AND NOT f.is_s GROUP BY c.target
                UNION ALL
                SELECT c.target AS eid, arg_max(f.flow, f.eid) AS corr
                FROM ev f JOIN run c ON f.pid = c.pid AND f.tid = c.tid AND f.start = c.start
                WHERE f.ac2g AND f.is_s GROUP BY c.target"""
            )
            corr = "CASE WHEN ev.corr < 0 AND cf.eid IS NOT NULL THEN cf.corr ELSE ev.corr END"
            corr_join = "LEFT JOIN corr_fix cf ON cf.eid = ev.eid"
        else:
            corr, corr_join = "ev.corr", ""
        sql(f"CREATE TABLE ox AS SELECT ext, max(eid) AS op FROM ev WHERE kind = {_CPU_OP} AND ext >= 0 GROUP BY ext")
        sql(
            f"""CREATE TABLE l1 AS
            SELECT ev.eid, ev.kind, ev.start, {corr} AS corr, ev.kind IN ({_ON_DEVICE}) AS on_device,
                   coalesce(t.parent, -1) AS parent,
                   CASE WHEN ev.kind IN ({_HOST_LINKED}) THEN coalesce(ox.op, t.op_excl, -1) ELSE -1 END AS op_h,
                   coalesce(ox.op, -1) AS op_ext,
                   coalesce(t.sname, -1) AS sname, coalesce(t.sline, -1) AS sline,
                   coalesce(t.smod, -1) AS smod, coalesce(t.sprec, -1) AS sprec
            FROM ev {corr_join}
            LEFT JOIN tree t ON t.eid = ev.eid
            LEFT JOIN ox ON ox.ext = ev.ext"""
        )
        sql(
            f"CREATE TABLE rt AS SELECT corr, max(eid) AS launch FROM l1 WHERE kind = {_RUNTIME} AND corr >= 0 GROUP BY corr"
        )
        sql(
            """CREATE TABLE l2 AS
            SELECT l1.*, CASE WHEN l1.on_device AND l1.corr >= 0 THEN coalesce(rt.launch, -1) ELSE -1 END AS launch
            FROM l1 LEFT JOIN rt ON rt.corr = l1.corr"""
        )
        sql("DROP TABLE l1")
        sql(
            f"""CREATE TABLE l3 AS
            SELECT l2.* EXCLUDE (op_h, op_ext),
                   CASE WHEN NOT l2.on_device THEN l2.op_h
                        WHEN l2.launch >= 0 AND lr.op_h >= 0 THEN lr.op_h
                        ELSE l2.op_ext END AS op,
                   coalesce(lr.start, 0) AS launch_start
            FROM l2 LEFT JOIN (SELECT eid, op_h, start FROM l2 WHERE kind = {_RUNTIME}) lr ON lr.eid = l2.launch"""
        )
        sql("DROP TABLE l2")
        self._forward()
        sql(
            f"""CREATE TABLE l4 AS
            SELECT l3.*, coalesce(fw.fwd, -1) AS fwd, coalesce(o.start, 0) AS op_start
            FROM l3 LEFT JOIN fw ON fw.eid = l3.eid
            LEFT JOIN (SELECT eid, start FROM l3 WHERE kind = {_CPU_OP}) o ON o.eid = l3.op"""
        )
        sql("DROP TABLE l3")
        self._sources()

    def _forward(self) -> None:
        """``fwd``: the forward op of each backward op (fwdbwd flows, through the autograd
        wrapper, down to the ops nested in a backward node), into table ``fw``."""
        sql = self.sql
        if not self.scalar("SELECT count(*) FROM ev WHERE fb"):
            sql("CREATE TABLE fw (eid BIGINT, fwd BIGINT)")
            return
        sql(
            f"""CREATE TABLE fm AS
            WITH cand AS (SELECT pid, tid, start, min(eid) AS target FROM ev WHERE kind = {_CPU_OP} GROUP BY pid, tid, start),
            s AS (SELECT e.eid, e.flow, c.target AS s_op FROM ev e
                  JOIN cand c ON e.pid = c.pid AND e.tid = c.tid AND e.start = c.start WHERE e.fb AND e.is_s),
            f AS (SELECT e.eid, e.flow, c.target AS f_op FROM ev e
                  JOIN cand c ON e.pid = c.pid AND e.tid = c.tid AND e.start = c.start WHERE e.fb AND e.is_f),
            of AS (SELECT flow, arg_max(s_op, eid) AS fwd FROM s WHERE flow >= 0 GROUP BY flow)
            SELECT f.eid AS feid, f.f_op, of.fwd FROM f JOIN of ON of.flow = f.flow"""
        )
        sql(
            """CREATE TABLE marks AS
            WITH direct AS (SELECT f_op AS eid, arg_max(fwd, feid) AS mark FROM fm GROUP BY f_op),
            wrap AS (SELECT t.parent AS eid, arg_max(fm.fwd, fm.feid) AS mark FROM fm
                     JOIN tree t ON t.eid = fm.f_op JOIN ev w ON w.eid = t.parent
                     WHERE t.parent >= 0 AND w.evaluate GROUP BY t.parent)
            SELECT coalesce(w.eid, d.eid) AS eid, coalesce(w.mark, d.mark) AS mark
            FROM direct d FULL OUTER JOIN wrap w ON w.eid = d.eid"""
        )
        walk = _TreeWalk()
        out_path = self.spool.dir / "fwd.parquet"
        schema = pa.schema([("eid", pa.int64()), ("fwd", pa.int64())])
        with pq.ParquetWriter(out_path, schema, compression="lz4") as writer:
            for batch in self._thread_rows(", coalesce(mk.mark, -1) AS mark", "LEFT JOIN marks mk ON mk.eid = ev.eid"):
                c = {k: to_numpy(batch.column(k)) for k in batch.schema.names}
                span = np.isin(c["kind"], _HOST_SPAN_CODES) & (c["dur"] > 0)
                m, _, _, _, (fwd,), _ = walk.step(
                    c["pid"], c["tid"], c["eid"], c["start"], c["start"] + c["dur"], span, [c["mark"]]
                )
                fwd = fwd[m:]
                keep = (c["kind"] == _CPU_OP) & (fwd >= 0)
                writer.write_table(pa.table([c["eid"][keep], fwd[keep]], schema=schema))
        self.sql(f"CREATE TABLE fw AS SELECT * FROM read_parquet('{out_path}')")
        out_path.unlink()

    def _sources(self) -> None:
        """The inherited source lines (``source_attribution``): backward ops take their
        forward op's, device work, runtime calls and memory events their op's, device work
        without one its launch's; into table ``lk``, in event order."""
        sql = self.sql
        sql(
            f"""CREATE TABLE s1 AS
            SELECT l4.* EXCLUDE (sname, sline, smod, sprec),
              CASE WHEN f.sline >= 0 THEN f.sname ELSE l4.sname END AS sname,
              CASE WHEN f.sline >= 0 THEN f.sline ELSE l4.sline END AS sline,
              CASE WHEN f.sline >= 0 AND f.smod >= 0 THEN f.smod ELSE l4.smod END AS smod,
              CASE WHEN f.sline >= 0 THEN {_FORWARD} ELSE l4.sprec END AS sprec
            FROM l4 LEFT JOIN (SELECT eid, sname, sline, smod FROM l4 WHERE kind = {_CPU_OP} AND sline >= 0) f
              ON f.eid = l4.fwd"""
        )
        sql("DROP TABLE l4")
        inherits = f"(s.on_device OR s.kind = {_RUNTIME} OR s.kind = {_MEMORY})"
        take_op = (
            f"({inherits} AND s.op >= 0 AND ((s.kind <> {_RUNTIME} AND s.kind <> {_MEMORY}) OR s.sline < 0) "
            f"AND o.sline >= 0)"
        )
        sql(
            f"""CREATE TABLE s2 AS
            SELECT s.* EXCLUDE (sname, sline, smod, sprec),
              CASE WHEN {take_op} THEN o.sname ELSE s.sname END AS sname,
              CASE WHEN {take_op} THEN o.sline ELSE s.sline END AS sline,
              CASE WHEN {take_op} THEN o.smod ELSE s.smod END AS smod,
              CASE WHEN {take_op} THEN {_LAUNCH} ELSE s.sprec END AS sprec
            FROM s1 s LEFT JOIN (SELECT eid, sname, sline, smod FROM s1 WHERE kind = {_CPU_OP} AND sline >= 0) o
              ON o.eid = s.op"""
        )
        sql("DROP TABLE s1")
        self._graph_capture()
        take_launch = f"({inherits} AND s.sline < 0 AND s.launch >= 0 AND s.kind <> {_RUNTIME} AND o.sline >= 0)"
        graph = "g.src"
        sql(
            f"""CREATE TABLE lk AS
            SELECT s.eid AS lk_eid, s.corr AS lk_corr, s.parent, s.launch, s.op, s.fwd, s.launch_start, s.op_start,
              CASE WHEN {graph} THEN g.sname WHEN {take_launch} THEN o.sname ELSE s.sname END AS sname,
              CASE WHEN {graph} THEN g.sline WHEN {take_launch} THEN o.sline ELSE s.sline END AS sline,
              CASE WHEN {graph} THEN g.smod WHEN {take_launch} THEN o.smod ELSE s.smod END AS smod,
              CASE WHEN {graph} THEN {_GRAPH_CAPTURE} WHEN {take_launch} THEN {_LAUNCH} ELSE s.sprec END AS sprec,
              coalesce(g.cop, -1) AS capture_op
            FROM s2 s LEFT JOIN (SELECT eid, sname, sline, smod FROM s2 WHERE kind = {_RUNTIME} AND sline >= 0) o
              ON o.eid = s.launch
            LEFT JOIN gr g ON g.eid = s.eid ORDER BY s.eid""",
            ordered=True,
        )
        sql("DROP TABLE s2")
        for table in ("tree", "rt", "ox", "fw", "fm", "marks", "corr_fix", "gr"):
            sql(f"DROP TABLE IF EXISTS {table}")
        sql("CHECKPOINT")
        # the assembly reads both tables in their stored (event) order, streaming: it needs
        # little of DuckDB's memory, which goes to the rows being assembled instead
        sql("SET preserve_insertion_order = true")
        sql(f"SET memory_limit = '{ASSEMBLY_DUCKDB_MEMORY}'")

    def _graph_capture(self) -> None:
        """Work replayed from a CUDA/HIP graph and the source of its capture-time call
        (``collectors.build.graph_replay``, as ``build_trace`` resolves it), into table ``gr``. Only
        the graph-related runtime calls and the work of graph launches are read out of DuckDB."""
        self.graph_meta: dict[str, Any] | None = None
        empty = pa.table(
            {c: pa.array([], pa.int64()) for c in ("eid", "cop", "sname", "sline", "smod")}
            | {"src": pa.array([], pa.bool_())}
        )
        runtime = np.array(sorted(self.spool.runtime_names), np.int64)
        role_w, family_w = graph_replay.runtime_roles(self.spool.name.words, runtime)
        codes = np.nonzero(role_w[:-1] != graph_replay.NONE)[0].tolist()
        plan = None
        if codes:
            calls = _fetch(
                self.con,
                f"""SELECT s.eid, ev.name, ev.pid, ev.tid, s.start, CAST(r.launch IS NOT NULL AS INTEGER) AS ran, s.op
                FROM s2 s JOIN ev ON ev.eid = s.eid
                LEFT JOIN (SELECT DISTINCT launch FROM s2 WHERE launch >= 0) r ON r.launch = s.eid
                WHERE s.kind = {_RUNTIME} AND ev.name IN ({", ".join(map(str, codes))}) ORDER BY s.eid""",
                self.batch,
            )
            c = {k: to_numpy(calls.column(k)) for k in calls.column_names}
            name = c["name"].astype(np.int64)
            role = role_w[name]
            launches = c["eid"][role == graph_replay.GRAPH_LAUNCH]
            self.con.register("graph_launch_rows", pa.table({"eid": pa.array(launches, pa.int64())}))
            dev = _fetch(
                self.con,
                f"""SELECT s.eid, s.launch, s.kind, s.start, coalesce(ev.graph_id, -1) AS graph_id
                FROM s2 s JOIN ev ON ev.eid = s.eid
                WHERE s.kind IN ({_DEVICE_WORK}) AND s.launch IN (SELECT eid FROM graph_launch_rows) ORDER BY s.eid""",
                self.batch,
            )
            self.con.unregister("graph_launch_rows")
            d = {k: to_numpy(dev.column(k)) for k in dev.column_names}
            plan = graph_replay.plan_replays(
                c["eid"],
                role,
                family_w[name],
                c["pid"],
                c["tid"],
                c["start"],
                c["ran"].astype(bool),
                d["eid"],
                d["launch"],
                _GRAPH_FAMILY[d["kind"].astype(np.int64)],
                d["start"],
                d["graph_id"],
            )
        if plan is None:
            self.con.register("gr_rows", empty)
        else:
            self.con.register("gr_rows", self._graph_sources(plan, c["eid"], c["op"]))
            self.graph_meta = plan.metadata
        self.sql("CREATE TABLE gr AS SELECT * FROM gr_rows")
        self.con.unregister("gr_rows")

    def _graph_sources(self, plan: graph_replay.GraphReplays, call_eid: np.ndarray, call_op: np.ndarray) -> pa.Table:
        """Resolve ``plan`` with the capture calls' sources; the ``gr`` rows."""
        wanted = np.unique(np.concatenate([np.zeros(0, np.int64), *plan.captures]))
        op = call_op[np.searchsorted(call_eid, wanted)] if wanted.size else np.zeros(0, np.int64)
        rows = np.unique(np.concatenate([wanted, op[op >= 0]]))
        self.con.register("graph_src_rows", pa.table({"eid": pa.array(rows, pa.int64())}))
        got = _fetch(
            self.con,
            "SELECT eid, sname, sline, smod FROM s2 WHERE eid IN (SELECT eid FROM graph_src_rows) ORDER BY eid",
            self.batch,
        )
        self.con.unregister("graph_src_rows")
        src = {k: to_numpy(got.column(k)) for k in got.column_names}
        files, funcs = ({}, {})  # names whose frames share a file (function) compare equal
        nm = len(self.frames)
        file_of = np.array([files.setdefault(f[0] if f else None, len(files)) for f in self.frames] + [-1], np.int64)
        func_of = np.array([funcs.setdefault(f[2] if f else None, len(funcs)) for f in self.frames] + [-1], np.int64)

        def at(eids: np.ndarray) -> np.ndarray:
            return np.searchsorted(src["eid"], eids)

        def donor(calls: np.ndarray) -> np.ndarray:
            o = call_op[np.searchsorted(call_eid, calls)]
            has = (o >= 0) & (src["sline"][at(np.maximum(o, 0))] >= 0) if src["eid"].size else o < -1
            return at(np.where(has, o, calls))

        def key(calls: np.ndarray) -> np.ndarray:
            d = donor(calls)
            sname = np.where(src["sname"][d] >= 0, src["sname"][d], nm)
            return np.stack([file_of[sname], src["sline"][d], func_of[sname], src["smod"][d]], axis=1)

        plan.resolve(key)
        d = donor(plan.calls)
        cop = call_op[np.searchsorted(call_eid, plan.calls)]
        return pa.table(
            {
                "eid": pa.array(plan.rows, pa.int64()),
                "cop": pa.array(cop, pa.int64()),
                "sname": pa.array(src["sname"][d], pa.int64()),
                "sline": pa.array(src["sline"][d], pa.int64()),
                "smod": pa.array(src["smod"][d], pa.int64()),
                "src": pa.array(src["sline"][d] >= 0, pa.bool_()),
            }
        )

    # --------------------------------------------------------------------- assembly
    def _trace(self) -> SpooledTrace:
        spool = self.spool
        metadata = self.metadata
        cats = [c if c is not None else "" for c in spool.cat.words]
        runtime = {spool.name.words[i] or "" for i in spool.runtime_names if i >= 0}
        accel = accelerator_type(cats, metadata, runtime)
        dtypes = []
        for token in spool.dtype.words:
            if token == _ACCEL:
                dtypes.append(accel)
            elif token.startswith(_RENAMED):
                dev_name = token[len(_RENAMED) :]
                dtypes.append(accel if accel not in ("cpu",) else dev_name)
            else:
                dtypes.append(token)
        used = [int(c) for (c,) in self.con.execute("SELECT DISTINCT dtype FROM ev").fetchall()]
        # steps: the few ProfilerStep spans, in event order (the trailing partial one demoted)
        rows = self.con.execute(f"SELECT eid, name, start, dur FROM ev WHERE kind = {_STEP} ORDER BY eid").fetchall()
        step_eid = np.array([r[0] for r in rows], np.int64)
        step_names = [spool.name.words[r[1]] for r in rows]
        step_start = np.array([r[2] for r in rows], np.int64)
        step_dur = np.array([r[3] for r in rows], np.int64)
        markers = np.zeros(0, np.int64)
        marker_codes = [i for i, w in enumerate(spool.name.words) if w is not None and STEP_MARKER.match(w)]
        if step_eid.size >= 2 and marker_codes:
            found = self.con.execute(
                f"SELECT start FROM ev WHERE name IN ({', '.join(map(str, marker_codes))}) ORDER BY eid"
            ).fetchall()
            markers = np.array([r[0] for r in found], np.int64)
        tail, dropped_steps = trailing_step(step_names, step_start, step_dur, markers)
        demoted = step_eid[tail]
        kept = ~tail
        steps = _Steps(
            step_eid[kept],
            step_start[kept],
            step_dur[kept],
            np.array([_step_number(nm) for nm, k in zip(step_names, kept) if k], np.int64),
        )
        rank = int(metadata.get("rank", 0) or 0)
        meta = dict(metadata)
        meta.setdefault("collector_version", __version__)
        meta["schema_version"] = SCHEMA_VERSION
        meta["device_types"] = sorted({dtypes[c] for c in used}) if self.n else []
        if dropped_steps:
            meta["dropped_steps"] = [{"rank": rank, **d} for d in dropped_steps]
        if self.graph_meta is not None:
            meta["graph_replay"] = self.graph_meta
        assembly = _Assembly(spool, dtypes, steps, demoted, rank, list(self.module_words), self.frames, self.batch)
        issues = dict(self.issues)
        if (steps.numbers > 2**31 - 1).any():  # nulled and counted, as the in-memory build does
            for _ in assembly.tables(self.con, steps_only=True):
                pass
            for key, count in assembly.issues.items():
                issues[key] = issues.get(key, 0) + count
            assembly.issues.clear()
        repairs = Repairs()
        repairs.merge(issues)
        repairs.record(meta)
        return SpooledTrace(spool, assembly, self.n, meta)
