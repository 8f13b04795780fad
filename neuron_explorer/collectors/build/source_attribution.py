"""Source attribution of normalized events: which user line, function and nn.Module each
event belongs to, and how exact that is (``src_precision``).

Rows are start-ordered with ``parent_id`` resolved (``collectors.build.normalize``). Every string
column is handled as integer codes into a small vocabulary (one entry per distinct file,
function, module path), so no per-event Python object is built; the columns are assembled as
dictionary arrays at the end.

- function level: the innermost enclosing user ``python_function`` frame (JSON traces carry
  def lines only);
- exact lines from the collector (``RawEvents.src``, in-process capture) win over that;
- backward ops take their forward op's line (``forward``), device work, runtime calls and
  memory events their launching op's (``launch``).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from neuron_explorer.collectors.build.graph_replay import GraphReplays
from neuron_explorer.collectors.build.nesting import nearest_marked_ancestor
from neuron_explorer.collectors.build.raw_events import K, _int_column
from neuron_explorer.collectors.build.source_map import UserCode, module_name, parse_python_frame
from neuron_explorer.trace.arrow import dict_parts, dictionary_from_codes, from_numpy
from neuron_explorer.trace.schema import Kind, Precision


class _Names(Protocol):
    words: list[Any]
    codes: np.ndarray


#: src_precision vocabulary; collector-given values are appended after these.
_PRECISIONS: list[Any] = [
    Precision.FUNCTION,
    Precision.LINE,
    Precision.FORWARD,
    Precision.LAUNCH,
    Precision.GENERATED,
    Precision.GRAPH_CAPTURE,
]
_FUNCTION, _LINE, _FORWARD, _LAUNCH, _GENERATED, _GRAPH_CAPTURE = range(6)


def attribute_source(
    given: dict[str, pa.Array],
    name: _Names,
    kind: np.ndarray,
    parent: np.ndarray,
    op: np.ndarray,
    fwd: np.ndarray,
    inherits_from_op: np.ndarray,
    user_code: UserCode,
    launch: np.ndarray | None = None,
    graph: GraphReplays | None = None,
) -> dict[str, pa.Array]:
    """The src_* columns (src_file, src_line, src_func, src_module, src_precision). ``graph``:
    the trace's CUDA/HIP graph replays, resolved here (``GraphReplays.resolve``) once every
    capture-time op has its line."""
    n = len(kind)
    is_py = kind == K[Kind.PYTHON]
    names = [w if w is not None else "" for w in name.words]
    name_idx = np.where(name.codes < 0, len(names), name.codes)
    names.append("")
    rows = np.arange(n, dtype=np.int64)

    # Function-level attribution from python_function frames, parsed once per distinct name.
    frames = [parse_python_frame(nm) for nm in names]
    origin = [user_code.origin(f[0]) if f is not None else "library" for f in frames]
    user_name = np.array([o == "user" for o in origin])
    user_frame = np.where(is_py & user_name[name_idx], rows, -1)
    frame_of = nearest_marked_ancestor(parent, user_frame)
    del user_frame  # (intermediates go as soon as used: tens of MB each on millions of events)
    # Work under generated code (Inductor's output, FX graph modules) with no user frame above
    # it: say so, naming the generated function, rather than leave it unattributed.
    gen_name = np.array([o == "generated" for o in origin])
    generated = np.zeros(n, bool)
    if gen_name.any():
        gen_of = nearest_marked_ancestor(parent, np.where(is_py & gen_name[name_idx], rows, -1))
        generated = (frame_of < 0) & (gen_of >= 0)
        frame_of = np.where(generated, gen_of, frame_of)
        del gen_of
    no_frame = len(names)  # a code past the per-name vocabularies: None
    fname = np.where(frame_of >= 0, name_idx[np.maximum(frame_of, 0)], no_frame)
    file_words: list[Any] = [f[0] if f else None for f in frames] + [None]
    func_words: list[Any] = [f[2] if f else None for f in frames] + [None]
    line_by_name = np.array([f[1] if f else -1 for f in frames] + [-1], dtype=np.int64)
    src_file = fname.copy()
    src_func = fname.copy()
    src_line = line_by_name[fname]
    precision = np.where(generated, _GENERATED, np.where(frame_of >= 0, _FUNCTION, -1))
    del frame_of, fname
    precision_words = list(_PRECISIONS)

    # nn.Module path: the chain of enclosing module frames, outermost first.
    mod_names = [module_name(nm) for nm in names]
    is_mod = is_py & np.array([m is not None for m in mod_names])[name_idx]
    module_words: list[Any] = []
    src_module = np.full(n, -1, np.int64)
    mod_rows = np.nonzero(is_mod)[0]
    if mod_rows.size:
        module_of = nearest_marked_ancestor(parent, np.where(is_mod, rows, -1))
        path_code: dict[int, int] = {}
        code_of_path: dict[str, int] = {}
        outer = np.where(parent[mod_rows] >= 0, module_of[np.maximum(parent[mod_rows], 0)], -1)
        mod_name_idx = name_idx[mod_rows].tolist()
        row_code = np.full(n, -1, np.int64)
        codes = []
        for r, o, ni in zip(mod_rows.tolist(), outer.tolist(), mod_name_idx):  # parents come first
            own = mod_names[ni] or ""
            path = f"{module_words[path_code[o]]}.{own}" if o >= 0 and o in path_code else own
            code = code_of_path.get(path)
            if code is None:
                code = code_of_path[path] = len(module_words)
                module_words.append(path)
            path_code[r] = code
            codes.append(code)
        row_code[mod_rows] = codes
        has = module_of >= 0
        src_module[has] = row_code[module_of[has]]
        del module_of, row_code, has
    del rows, name_idx, is_py, is_mod

    # Exact lines from the collector win over function-level attribution.
    if given:
        given_line = _int_column(given.get("src_line"), n)
        exact = given_line >= 0
        if exact.any():
            for col, (codes_, words) in (("src_file", (src_file, file_words)), ("src_func", (src_func, func_words))):
                gw, gc = dict_parts(given[col]) if col in given else ([], np.full(n, -1, np.int32))
                base = len(words)
                words.extend(gw)
                words.append(None)
                codes_[exact] = np.where(gc[exact] >= 0, gc[exact] + base, base + len(gw))
            src_line = np.where(exact, given_line, src_line)
            if "src_precision" in given:
                pw, pcodes = dict_parts(given["src_precision"])
                base = len(precision_words)
                precision_words.extend(pw)
                gp = np.where(pcodes >= 0, pcodes + base, _LINE)
            else:
                gp = np.full(n, _LINE)
            precision = np.where(exact, gp, precision)
        if "src_module" in given:
            mw, mcodes = dict_parts(given["src_module"])
            base = len(module_words)
            module_words.extend(mw)
            src_module = np.where(mcodes >= 0, mcodes + base, src_module)

    # Backward ops: the forward op's line, even when the backward ran under a user frame (the
    # `loss.backward()` line says less than the forward line being differentiated).
    has_src = src_line >= 0
    inherit_fwd = fwd >= 0
    if inherit_fwd.any():
        idx = np.nonzero(inherit_fwd)[0]
        f = fwd[idx]
        ok = has_src[f]
        idx, f = idx[ok], f[ok]
        src_file[idx], src_line[idx], src_func[idx] = src_file[f], src_line[f], src_func[f]
        src_module[idx] = np.where(src_module[f] < 0, src_module[idx], src_module[f])
        precision[idx] = _FORWARD
    # Device work, runtime calls and memory events: the launching op's line.
    has_src = src_line >= 0
    from_op = inherits_from_op & (op >= 0)
    take_op = from_op & ((kind != K[Kind.RUNTIME]) & (kind != K[Kind.MEMORY]) | ~has_src)
    take_op &= has_src[np.maximum(op, 0)]
    idx = np.nonzero(take_op)[0]
    o = op[idx]
    src_file[idx], src_line[idx], src_func[idx] = src_file[o], src_line[o], src_func[o]
    src_module[idx] = src_module[o]
    precision[idx] = _LAUNCH
    # Device work with no framework op (a CUDA graph replay, a launch outside any op): the line
    # of the runtime call that launched it, which its enclosing Python frames attribute.
    if launch is not None:
        has_src = src_line >= 0
        take_launch = inherits_from_op & ~has_src & (launch >= 0) & (kind != K[Kind.RUNTIME])
        take_launch &= has_src[np.maximum(launch, 0)]
        idx = np.nonzero(take_launch)[0]
        lr = launch[idx]
        src_file[idx], src_line[idx], src_func[idx] = src_file[lr], src_line[lr], src_func[lr]
        src_module[idx] = src_module[lr]
        precision[idx] = _LAUNCH
    if graph is not None:
        words = (file_words, src_file), (func_words, src_func), (module_words, src_module)
        _graph_capture_sources(graph, op, src_line, words, precision)

    line_mask = src_line < 0
    return {
        "src_file": dictionary_from_codes(src_file, file_words),
        "src_line": from_numpy(src_line, pa.int32(), line_mask),
        "src_func": dictionary_from_codes(src_func, func_words),
        "src_module": dictionary_from_codes(src_module, module_words),
        "src_precision": dictionary_from_codes(precision, precision_words),
    }


def donor_of(calls: np.ndarray, op: np.ndarray, has_src: np.ndarray) -> np.ndarray:
    """The row whose source a capture-time call hands on to the work replayed from it: its op
    when the op has a source (as device work inherits its launching op's), else the call."""
    o = op[calls]
    return np.where((o >= 0) & has_src[np.maximum(o, 0)], o, calls)


def _graph_capture_sources(
    graph: GraphReplays,
    op: np.ndarray,
    src_line: np.ndarray,
    words: tuple[tuple[list[Any], np.ndarray], ...],
    precision: np.ndarray,
) -> None:
    """Replayed work takes the source of the capture-time call it replays (``graph_capture``),
    in place. The candidates' sources are compared by value (a vocabulary may list a word twice)."""
    has_src = src_line >= 0
    canon = []
    for vocab, codes in words:
        first: dict[Any, int] = {}
        table = np.array([first.setdefault(w, i) for i, w in enumerate(vocab)] + [-1], np.int64)
        canon.append((table, codes))

    def key(calls: np.ndarray) -> np.ndarray:
        d = donor_of(calls, op, has_src)
        cols = [table[np.where(codes[d] >= 0, codes[d], -1)] for table, codes in canon]
        return np.stack([*cols, src_line[d]], axis=1)

    graph.resolve(key)
    d = donor_of(graph.calls, op, has_src)
    ok = has_src[d]
    idx, d = graph.rows[ok], d[ok]
    for _, codes in words:
        codes[idx] = codes[d]
    src_line[idx] = src_line[d]
    precision[idx] = _GRAPH_CAPTURE
