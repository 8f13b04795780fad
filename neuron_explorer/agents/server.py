"""The MCP server: the tools and resources an agent uses to analyze the served traces.

``build_server`` wires the views (``agents.views``), the SQL sandbox (``agents.sql``) and the
source access control (``agents.source``) into an ``MCPServer`` of the official ``mcp`` SDK.
Tool descriptions are written for a model: what the tool returns, when to use it, the units.
Every tool is listed in ``agents.tools.TOOLS`` (what ``mcp --help`` prints; the server refuses
to start if the two differ), takes ``max_chars``, and answers once, as compact JSON text within
that budget (``agents.budget``). A user mistake (unknown trace, bad SQL, a path outside the
roots) comes back as a tool error whose one line says what to do instead; the server never
shows a traceback.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from neuron_explorer.agents import views
from neuron_explorer.agents.budget import (
    DEFAULT_MAX_CHARS,
    MAX_MAX_CHARS,
    MIN_MAX_CHARS,
    BudgetError,
    check_max_chars,
    fit,
)
from neuron_explorer.agents.catalog import TraceCatalog
from neuron_explorer.agents.docs import DOCS, DocNotFoundError, doc_text
from neuron_explorer.agents.source import SourceAccess, SourceAccessError
from neuron_explorer.agents.sql import DEFAULT_TIMEOUT_S, MAX_ROWS
from neuron_explorer.agents.sql_process import SqlSandbox
from neuron_explorer.agents.tables import describe_tables, events_table, metrics_tables
from neuron_explorer.agents.tools import TOOLS
from neuron_explorer.trace.errors import NeuronExplorerError
from neuron_explorer.version import __version__

F = TypeVar("F", bound=Callable[..., Any])
logger = logging.getLogger("neuron_explorer.agents")

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

INSTRUCTIONS = """\
Neuron Explorer serves profiler traces of PyTorch programs (GPU, Trainium, CPU) and their analysis.
Start with trace_summary (the verdict and the costliest findings), then drill down: findings for
the problems and their fixes, top_kernels / top_ops / top_source_lines for where time goes, op_perf
for how close each op shape runs to the device's peak FLOP/s and bandwidth,
step_breakdown for per-step time, source_context for the code behind a line, and schema + sql for
any question the other tools do not answer. All times are integer nanoseconds (*_ns) unless a
column says otherwise; shares are percent (*_pct). Quote numbers from the tools, not estimates."""

#: The longest error message a tool sends (its input quoted in it can be any length).
MAX_ERROR_CHARS = 1_000
#: The largest line number (src_line is an int32 column).
MAX_LINE = 2**31 - 1

BUDGET_NOTE = (
    f" The answer is compact JSON of at most max_chars characters (default {DEFAULT_MAX_CHARS:,}); when cut, "
    "`truncated` is true and `truncation` says what was cut and how to page."
)

TraceArg = Annotated[
    str | None,
    Field(description="Name of a served trace (see list_traces). May be omitted when the server serves one trace."),
]


MaxCharsArg = Annotated[
    int,
    Field(
        description=f"Most characters the answer may have ({MIN_MAX_CHARS:,}-{MAX_MAX_CHARS:,}; about 4 characters "
        "a token). A longer answer is cut and says what was cut and how to page."
    ),
]
OffsetArg = Annotated[int, Field(description="Rows to skip (for the next page: the answer's truncation.next_offset).")]


#: Seconds a tool call may take (``mcp --tool-timeout``); SQL has its own limit (``--sql-timeout``).
DEFAULT_TOOL_TIMEOUT_S = 300.0


def _answer_in_budget(name: str, fn: Callable[..., dict[str, Any]], timeout_s: float) -> Callable[..., str]:
    """``fn`` as a tool: its answer as compact JSON within ``max_chars`` (a parameter added to
    every tool), sent once as text, within ``timeout_s``; a NeuronExplorerError is the caller's
    mistake and becomes a tool error with its message, any other failure one line naming it."""
    info = TOOLS[name]
    signature = inspect.signature(fn, eval_str=True)
    passes_max_chars = "max_chars" in signature.parameters

    def answer(budget: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        result = fn(*args, max_chars=budget, **kwargs) if passes_max_chars else fn(*args, **kwargs)
        offset = kwargs.get("offset", 0) if info.pages else None
        return fit(result, budget, info.how_to_page, offset=offset, pages=info.pages)

    @functools.wraps(fn)
    def wrapper(*args: Any, max_chars: int = DEFAULT_MAX_CHARS, **kwargs: Any) -> str:
        try:
            budget = check_max_chars(max_chars)
            return _within(timeout_s, name, lambda: answer(budget, args, kwargs))
        except (NeuronExplorerError, BudgetError, ToolError) as exc:
            raise ToolError(_error_line(str(exc))) from None
        except Exception as exc:
            logger.exception("tool %s failed", name)
            raise ToolError(_error_line(f"{name} failed on this trace ({type(exc).__name__}: {exc})")) from None

    parameters = [p for p in signature.parameters.values() if p.name != "max_chars"]
    parameters.append(
        inspect.Parameter(
            "max_chars", inspect.Parameter.KEYWORD_ONLY, default=DEFAULT_MAX_CHARS, annotation=MaxCharsArg
        )
    )
    wrapper.__signature__ = signature.replace(parameters=parameters, return_annotation=str)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": str}
    return wrapper


def _within(timeout_s: float, name: str, work: Callable[[], str]) -> str:
    """``work()``, or a one-line error once ``timeout_s`` passes. The work runs on a thread of
    its own and cannot be stopped (every walk in the analyzers ends on any input): it goes on,
    and a trace's analysis, once done, serves the next call from its cache."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["answer"] = work()
        except BaseException as exc:
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"tool-{name}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise ToolError(
            f"{name} stopped: it ran past the {timeout_s:g} s tool time limit (the first call on a big trace "
            "computes its analysis; it goes on in the background: call again later, or serve a smaller trace)"
        )
    if "error" in box:
        raise box["error"]
    return box["answer"]


def _error_line(message: str) -> str:
    """An error as one line of bounded size: messages quote the caller's input, which may be huge."""
    line = " ".join(message.split())
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 20] + "...[message cut]"


class _Server(MCPServer):
    """The SDK's server, whose every tool error is one line of at most ``MAX_ERROR_CHARS``:
    argument validation included (pydantic's message quotes the input and a URL per error:
    ``rules=[1]*10000`` answered 1.75M characters in 30,001 lines)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(_validation_line(name, cause)) from None
            text = str(exc)
            if isinstance(exc, UnexpectedToolError):
                text = f"{text} (an unexpected failure; the server's stderr has the details)"
            raise ToolError(_error_line(text)) from None


def _validation_line(name: str, error: ValidationError) -> str:
    """Which arguments of ``name`` were wrong and why, in one bounded line (no values, no URLs)."""
    problems = error.errors(include_url=False, include_input=False)
    shown = []
    for problem in problems[:3]:
        where = ".".join(str(part) for part in problem.get("loc", ()))[:80] or "arguments"
        shown.append(f"{where}: {' '.join(str(problem.get('msg', 'invalid')).split())[:160]}")
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return _error_line(
        f"bad arguments for {name}: {'; '.join(shown)}{more}. The tool's input schema (tools/list) says what each takes."
    )


class _SqlState:
    """The SQL sandbox, built on the first ``sql``/``schema`` call (it needs every trace analyzed)."""

    def __init__(self, catalog: TraceCatalog, timeout_s: float) -> None:
        self.catalog = catalog
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._sandbox: SqlSandbox | None = None
        self.tables: dict[str, Any] = {}
        self.analysis_errors: dict[str, str] = {}

    def sandbox(self) -> SqlSandbox:
        with self._lock:
            if self._sandbox is None:
                tables = {"events": events_table(self.catalog)}
                metrics, self.analysis_errors = metrics_tables(self.catalog)
                tables.update(metrics)
                self.tables = tables
                self._sandbox = SqlSandbox(tables, timeout_s=self.timeout_s)
            return self._sandbox


def build_server(
    catalog: TraceCatalog,
    source_roots: Sequence[str | Path] | None = None,
    sql_timeout_s: float = DEFAULT_TIMEOUT_S,
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S,
) -> MCPServer:
    """An MCP server over the traces of ``catalog``; source code only from ``source_roots``;
    each tool call answers within ``tool_timeout_s`` (``sql`` within its own limit)."""
    server: MCPServer = _Server("neuron-explorer", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    sources = SourceAccess(source_roots or [])
    sql_state = _SqlState(catalog, sql_timeout_s)

    registered: list[str] = []

    def tool(title: str = "", note: str = "") -> Callable[[F], F]:
        def register(fn: F) -> F:
            name = fn.__name__
            if name not in TOOLS:
                raise RuntimeError(f"tool {name} is not in agents.tools.TOOLS (the registry --help lists)")
            # One paragraph: models read the description as prose, not as an indented docstring.
            description = " ".join(inspect.cleandoc(fn.__doc__ or "").split()) + note + BUDGET_NOTE
            # (sql: its own limit, the worker's start and the tables' build on the first call)
            limit = max(tool_timeout_s, 2 * sql_timeout_s + 30) if name in ("sql", "schema") else tool_timeout_s
            server.add_tool(
                _answer_in_budget(name, fn, limit),
                name=name,
                title=TOOLS[name].title,
                description=description,
                annotations=READ_ONLY,
                # One copy of each answer: compact JSON text, which every client passes to its model.
                structured_output=False,
            )
            registered.append(name)
            return fn

        return register

    @tool()
    def list_traces() -> dict[str, Any]:
        """List the traces this server serves. Returns, per trace: name (pass it as `trace` to the
        other tools), path, events (row count), ranks, world_size, device_types (cpu, cuda, hip,
        neuron, ...), collector, and analyzed (whether the analysis is already computed). Also
        returns the source roots source_context may read. Call it first when you do not know the
        trace names."""
        return {"traces": catalog.describe(), "source_roots": sources.roots}

    @tool()
    def trace_summary(trace: TraceArg = None) -> dict[str, Any]:
        """Start here. The analyzers' verdict for one trace (one sentence: what bounds the run and
        the top issue), its summary (wall_ns: the span of the steps, num_steps, step_p50_ns, ranks,
        devices, torch_version, and the share of the profiled time, every step window summed, in
        each attribution category as *_pct percent:
        one_time, compute, communication, copy, host_blocked, device_wait, data_loading, host_launch,
        host_python, untraced), step statistics, the three costliest findings
        (rule_id, severity, title, cost_ns), the memory summary, and the trace's facts (events by
        kind, devices and streams, steps, how many events carry source lines, link coverage).
        Times are integer nanoseconds. The first call on a trace computes its analysis (about a
        second per 200k events); later calls are instant."""
        return views.trace_summary(catalog.get(trace))

    @tool()
    def findings(
        trace: TraceArg = None,
        min_severity: Annotated[str, Field(description="Lowest severity to return: info, warning or error.")] = "info",
        rules: Annotated[
            list[str] | None, Field(description="Only these rule ids (e.g. ['device_idle']); all when omitted.")
        ] = None,
        limit: Annotated[int, Field(description="Most findings to return (1-500).")] = 20,
        offset: OffsetArg = 0,
    ) -> dict[str, Any]:
        """The problems the rules found in a trace, most costly first. Each finding has rule_id,
        severity (info|warning|error), title, message, metrics (name -> {value, unit}), threshold
        (the limit the rule used), cost_ns (estimated time lost, ns; the ranking key),
        time_ranges ([start_ns, end_ns], absolute ns), event_ids (event_id values of the `events`
        table, for sql), source_lines ({file, line, func, value, unit}: the responsible user code
        and what it holds there; ns too for durations) and a concrete recommendation. `skipped` lists rules that could not run and what they need
        ("skipped: needs kernel events"). Rule meanings and thresholds: resource
        neuron-explorer://docs/rules.md."""
        return views.findings(catalog.get(trace), min_severity, rules, limit, offset)

    @tool()
    def top_kernels(
        trace: TraceArg = None,
        limit: Annotated[int, Field(description="Most rows to return (1-500).")] = 20,
        sort_by: Annotated[str, Field(description="Numeric column to sort by, descending.")] = "total_ns",
        category: Annotated[
            str | None,
            Field(
                description="Only this category: gemm, attention, conv, elementwise, reduction, communication, memory, other."
            ),
        ] = None,
        offset: OffsetArg = 0,
    ) -> dict[str, Any]:
        """Device work (kernels, collectives, memcpy, memset) aggregated by kernel name: name,
        category (gemm, attention, conv, elementwise, reduction, communication, memory, other),
        device_type, count, total_ns, mean_ns, min_ns, max_ns (ns) and pct (percent of all device
        time), plus the totals per category. Use it to see where device time goes and whether
        GEMMs or small elementwise kernels dominate. total_rows says how many kernel names exist."""
        return views.top_kernels(catalog.get(trace), limit, sort_by, category, offset)

    @tool()
    def top_ops(
        trace: TraceArg = None,
        limit: Annotated[int, Field(description="Most rows to return (1-500).")] = 20,
        sort_by: Annotated[
            str, Field(description="device_ns (device cost), host_self_ns (CPU overhead), host_total_ns or count.")
        ] = "device_ns",
        offset: OffsetArg = 0,
    ) -> dict[str, Any]:
        """Framework operators (aten::mm, aten::copy_, custom ops) aggregated by name: count,
        host_total_ns (inclusive host time), host_self_ns (host time minus child ops),
        device_ns (device time of the kernels the op launched) and kernel_count. Sort by
        device_ns to find the ops that cost device time, by host_self_ns for host overhead."""
        return views.top_ops(catalog.get(trace), limit, sort_by, offset)

    @tool()
    def op_perf(
        trace: TraceArg = None,
        limit: Annotated[int, Field(description="Most rows to return (1-500).")] = 20,
        sort_by: Annotated[
            str, Field(description="kernel_time_us, pct_of_peak, tflops_per_s, tb_per_s, gflops or count.")
        ] = "kernel_time_us",
        category: Annotated[
            str | None,
            Field(
                description="Only this category: gemm, attention, conv, elementwise, reduction, norm, communication, other."
            ),
        ] = None,
        offset: OffsetArg = 0,
    ) -> dict[str, Any]:
        """How close each op shape runs to what the device can do: one row per op group (name,
        shapes, dtypes as JSON) with count, kernel_time_us (summed, microseconds), gflops and
        data_moved_mb (per call; MiB), achieved tflops_per_s and tb_per_s, flops_per_byte, bound
        (compute or memory) and pct_of_peak (percent of that roof), src_file/src_line. Also the
        device time per op category with modelled_pct (share covered by the models) and
        perf_summary (the device spec used: peaks per dtype, bandwidth, its source). Needs a
        trace recorded with record_shapes=True; rows without a model have null gflops."""
        return views.op_perf(catalog.get(trace), limit, sort_by, category, offset)

    @tool()
    def top_source_lines(
        trace: TraceArg = None,
        limit: Annotated[int, Field(description="Most rows to return (1-500).")] = 20,
        sort_by: Annotated[
            str, Field(description="device_ns, host_ns, kernel_count, alloc_bytes or event_count.")
        ] = "device_ns",
        file_contains: Annotated[
            str | None, Field(description="Only lines whose src_file contains this text (e.g. 'train.py').")
        ] = None,
        offset: OffsetArg = 0,
    ) -> dict[str, Any]:
        """Which line of the user's code costs the most: one row per source line (src_file,
        src_line) with src_func, src_precision (line = the exact calling line; function = only the
        function is known and src_line is its def line; launch / forward = inherited from the
        launching op / the forward op), host_ns, device_ns (device time of the kernels launched
        from it, ns), kernel_count, alloc_bytes and event_count. Follow up with
        source_context(file, line) for the code and the kernels and ops behind a line."""
        return views.top_source_lines(catalog.get(trace), limit, sort_by, file_contains, offset)

    @tool()
    def memory_at_peak(
        trace: TraceArg = None,
        by: Annotated[str, Field(description="Sum the live blocks by line, op, module or phase.")] = "line",
        step: Annotated[int | None, Field(description="That step's peak; the trace's peak when omitted.")] = None,
        limit: Annotated[int, Field(description="Most rows to return (1-500).")] = 20,
    ) -> dict[str, Any]:
        """What is alive at the memory peak and who made it: the allocations alive when the
        allocated total peaked (per rank and device), summed by source line (src_file,
        src_line, src_func), op, nn.Module path or phase (before_trace, before_first_step,
        activations saved for backward, gradients, optimizer_state, temporaries, retained =
        outlives its step), with live_bytes, blocks and pct_of_peak. `replay` says whether the
        allocation/free replay agrees with the trace's Total Allocated at every event (and the
        offset allocated before the trace). Needs profile_memory=True (record --memory)."""
        return views.memory_at_peak(catalog.get(trace), by, step, limit)

    @tool()
    def step_breakdown(
        trace: TraceArg = None,
        rank: Annotated[int | None, Field(description="Only this distributed rank; all when omitted.")] = None,
        limit: Annotated[int, Field(description="Most rows of each table to return (1-500).")] = 50,
        offset: OffsetArg = 0,
    ) -> dict[str, Any]:
        """Step time and where it goes. `steps`: one row per rank and profiler step (start_ns,
        dur_ns, is_warmup, is_outlier, ...); `step_stats`: mean, p50, p95 and outliers;
        `attribution`: per rank, step and device, wall_ns split into exclusive categories by
        priority (`categories` names them in order), *_ns and *_pct; they sum to wall_ns and the
        verdict and findings' costs come from them. Use it for step variance, stragglers, warm-up."""
        return views.step_breakdown(catalog.get(trace), rank, limit, offset)

    @tool()
    def critical_path(
        trace: TraceArg = None,
        rank: Annotated[int | None, Field(description="Only this rank's steps; all when omitted.")] = None,
        step: Annotated[int | None, Field(description="Only this step (-1: the whole trace without steps).")] = None,
        limit: Annotated[int, Field(description="Most rows to return (1-500).")] = 20,
        offset: OffsetArg = 0,
    ) -> dict[str, Any]:
        """What sets each step's time: the chain of events and waits through the run's dependency
        graph (host threads, launches, streams, syncs, cross-stream events, collectives across
        ranks) that ends the step. `summary` says what the path is made of in one clause;
        `by_category` sums it per category (compute, communication, copy, host_blocked,
        host_launch, host_python, data_loading, untraced, launch_latency, unexplained, one_time) with ns
        and pct; `rows` (heaviest first) are the pieces per rank, step, category, op, kernel,
        src_file, src_line and on_rank (the rank whose event it is: another rank where the path
        crosses at a collective), with ns; a step's rows sum to its wall time. `fixes`: what the
        findings' fixes save replayed all together (all_fixes_ns), against the sum of their
        replayed savings alone; each finding's own saving is its cost_ns with cost_method
        "replay" (findings tool). Ask "what if" with the CLI: neuron-explorer whatif."""
        return views.critical_path(catalog.get(trace), rank, step, limit, offset)

    @tool()
    def diff(
        base: Annotated[str, Field(description="The served trace to compare against (see list_traces).")],
        new: Annotated[str, Field(description="The served trace to compare.")],
        limit: Annotated[int, Field(description="Most rows of each table to return (1-500).")] = 10,
        fail_on_regression_pct: Annotated[
            float | None,
            Field(description="Also run the CI gate: fail when a metric regressed by more than this % of step time."),
        ] = None,
        metrics: Annotated[
            list[str] | None,
            Field(description="What the gate checks: step, a category (compute, idle, ...), categories or all."),
        ] = None,
    ) -> dict[str, Any]:
        """Compare two traces per step. `answer`: the biggest confident regressions as sentences
        naming the op or kernel, its calls per step before -> after and the source line it came
        from. `metrics`: step time and each step-time attribution category per step (base_ns,
        new_ns, delta_ns, delta_pct = % of the base step time, confidence = bootstrap share of
        resamples agreeing on the sign, ci_low_ns/ci_high_ns = 95% interval; NaN when a side has
        fewer than 3 steps). `tables`: ops, kernels, source_lines, collectives, op_shapes,
        kernel_shapes, each row with base/new count and ns per step, delta_ns, status (new, gone,
        changed, same), confidence and `line`. Method: resource neuron-explorer://docs/diff.md."""
        from neuron_explorer.agents.diff_view import diff_answer

        return diff_answer(catalog.get(base), catalog.get(new), sources, limit, fail_on_regression_pct, metrics)

    @tool()
    def source_context(
        file: Annotated[str, Field(description="The file as the trace records it (src_file), or an absolute path.")],
        line: Annotated[int, Field(description="The line number (src_line), 1-based.")],
        context: Annotated[int, Field(description="Lines to show before and after (0-200).")] = 10,
        trace: TraceArg = None,
    ) -> dict[str, Any]:
        """The code around file:line and what the trace attributes to that line: `source_line`
        (its row of top_source_lines: host_ns, device_ns, kernel_count, ...), `kernels` (device
        work launched from the line, by name, with count and device_ns), `ops` (framework ops
        called there, with host_ns) and `findings` that cite the line. The code is read only from
        the server's source roots (see list_traces); for a file outside them, or not on this
        machine, `code` is null and `code_error` says why, and the attribution is still given."""
        if not 1 <= line <= MAX_LINE:
            raise ToolError(f"line must be between 1 and {MAX_LINE:,}, not {line}")
        served = catalog.get(trace)
        answer: dict[str, Any] = {"file": file, "line": line}
        try:
            answer["code"] = sources.context(file, line, context)
            answer["code_error"] = None
        except SourceAccessError as exc:
            answer["code"], answer["code_error"] = None, str(exc)
        try:
            attribution = views.line_attribution(served, file, line)
        except NeuronExplorerError as exc:
            attribution = None
            answer["attribution_error"] = str(exc)
        answer["attribution"] = attribution
        known = attribution is not None and (attribution["source_line"] or attribution["kernels"] or attribution["ops"])
        if answer["code"] is None and not known:
            # Neither code nor cost: nothing to show, so say plainly why rather than return an empty answer.
            raise ToolError(f"{answer['code_error']}; and trace {served.name!r} attributes no event to {file}:{line}")
        return answer

    @tool()
    def schema(
        table: Annotated[str | None, Field(description="Only this table (e.g. 'events'); all when omitted.")] = None,
    ) -> dict[str, Any]:
        """The tables the `sql` tool can query: what one row of each is, its row count and its
        column names; with `table`, every column's type, unit and meaning too. `events` is the
        trace itself (one row per event: kind, name, start_ns, dur_ns, device, stream, src_file,
        src_line, links such as launch_id and op_id, ...); the metrics tables (steps, breakdown,
        idle, kernels, ops, source_lines, findings, ...) are the analyzers' results. Every table
        starts with a `trace` column naming the served trace. Call it before writing SQL."""
        sql_state.sandbox()
        if table and table not in sql_state.tables:
            raise ToolError(f"no table {table!r}; tables: {', '.join(sql_state.tables)}")
        described = describe_tables(sql_state.tables, [table] if table else None)
        if not table:  # the overview: names only, so every table fits one answer; details per table
            described = [{**t, "columns": [c["name"] for c in t["columns"]]} for t in described]
        return {
            "tables": described,
            "analysis_errors": sql_state.analysis_errors,
            "notes": [
                "Times are integer nanoseconds (start_ns is absolute, since the Unix epoch); *_pct are percent 0-100.",
                "String columns (kind, name, src_file, ...) compare as text: WHERE kind = 'kernel'.",
                "Device work is kind IN ('kernel', 'collective', 'memcpy', 'memset'); host ops are kind = 'cpu_op'.",
                "Join device work to its op with events.op_id = ops.event_id (same trace and rank).",
            ],
        }

    @tool(note=f" Time limit: {sql_timeout_s:g} s per query.")
    def sql(
        query: Annotated[str, Field(description="One DuckDB SELECT statement over the tables listed by `schema`.")],
        max_rows: Annotated[int, Field(description=f"Most rows to return (1-{MAX_ROWS}).")] = MAX_ROWS,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> dict[str, Any]:
        """Run one read-only SQL SELECT (DuckDB dialect) over the served traces: the `events`
        table and the metrics tables (call `schema` first for their columns, units and meanings).
        Returns columns, their types, rows (as lists) and row_count. At most max_rows rows
        (5,000) and max_chars characters come back, whichever is reached first; then truncated
        is true and message says how to page (LIMIT n OFFSET m). Aggregate (GROUP BY with
        SUM/COUNT, ORDER BY ... LIMIT n) rather than read raw events. Floats are rounded to 4
        significant digits; integers are exact. Queries run under a time limit. Only one SELECT
        (WITH, VALUES, DESCRIBE, SUMMARIZE) over the served tables is accepted: EXPLAIN, writes,
        ATTACH, COPY, INSTALL/LOAD, SET, PRAGMA, file access (read_csv, glob, ...) and functions
        that read the server's settings are refused. Example: SELECT name, sum(dur_ns) AS
        total_ns FROM events WHERE kind = 'kernel' GROUP BY name ORDER BY total_ns DESC LIMIT 10."""
        return sql_state.sandbox().query(query, max_rows, max_chars)

    for doc, title in DOCS.items():
        _add_doc_resource(server, doc, title)
    if registered != list(TOOLS):
        raise RuntimeError(f"the server's tools {registered} differ from agents.tools.TOOLS {list(TOOLS)}")
    return server


def _add_doc_resource(server: MCPServer, name: str, title: str) -> None:
    @server.resource(f"neuron-explorer://docs/{name}", name=name, title=title, mime_type="text/markdown")
    def read_doc() -> str:
        try:
            return doc_text(name)
        except DocNotFoundError as exc:
            raise ResourceError(str(exc)) from None
