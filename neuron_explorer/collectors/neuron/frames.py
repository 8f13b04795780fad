"""Normalizing Neuron tables into the ``DeviceProfile`` columns, shared by both readers.

Each reader renames its format's fields to ours (see ``INSTRUCTION_FIELDS`` and friends in the
readers); these functions then fill defaults, derive engines, memory locations, spill flags
and source lines, and keep every original field as JSON text for the ``args`` column.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.collectors.build.source_map import UserCode
from neuron_explorer.collectors.neuron.activity import mark_waits
from neuron_explorer.collectors.neuron.model import DeviceProfile, canonical_engine
from neuron_explorer.trace.repairs import IGNORED

_MEMORY_TOKENS = {"SB": "SBUF", "SBUF": "SBUF", "STATEBUFFER": "SBUF", "PSUM": "PSUM", "HOST": "HOST"}
#: Memory names that say nothing about where the data is: they stay unknown (null).
_UNKNOWN_MEMORY = frozenset({"", "NAN", "NONE", "NULL", "UNKNOWN", "N/A", "NA", "-"})
_TRUE = frozenset({"yes", "y", "true", "t", "1", "1.0"})
_LOCATION = re.compile(r"^\s*\[?\s*['\"]?(?P<file>[^'\":\[\]]+?):(?P<line>\d+)")


def records_json(df: pd.DataFrame) -> np.ndarray:
    """Every row as JSON text (lossless args), in one vectorized call."""
    if not len(df):
        return np.zeros(0, dtype=object)
    text = df.to_json(orient="records", lines=True, date_format="iso", default_handler=str)
    return np.asarray(text.rstrip("\n").split("\n"), dtype=object)


def flags(series: pd.Series) -> np.ndarray:
    """Booleans from a flag column as exports write it: "yes"/"no", "true"/"false", 1/0 or bools.

    Real legacy exports write ``"yes"``/``"no"`` strings, so ``astype(bool)`` would read every
    ``"no"`` as True. Anything unrecognized (null, "", "maybe") is False.
    """
    if not len(series):
        return np.zeros(0, bool)
    if pd.api.types.is_bool_dtype(series.dtype) and not pd.api.types.is_extension_array_dtype(series.dtype):
        return series.to_numpy(bool)
    text = series.astype(object).where(series.notna(), "").astype(str).str.strip().str.lower()
    cats = text.astype("category")
    mapping = {c: c in _TRUE for c in cats.cat.categories}
    return cats.map(mapping).astype(bool).to_numpy()


def pcore_index(series: pd.Series) -> np.ndarray:
    """Physical-core numbers (LNC2: 0 or 1); anything that is not a small core number is 0."""
    v = pd.to_numeric(series, errors="coerce").to_numpy(np.float64, na_value=np.nan)
    ok = np.isfinite(v) & (v >= 0) & (v < 1024)
    return np.where(ok, v, 0).astype(np.int64)


_SUBGRAPH_CORE = r"(?:^|/)sg0*(\d{1,3})$"


def core_from_subgraph(df: pd.DataFrame) -> pd.DataFrame:
    """``pcore`` from the legacy ``subgraph`` (``sg01``) or ``fully_qualified_subgraph``
    (``/sg01``) where the records carry no core number. Measured on the real trn2 exports (two
    physical cores): their ``active_time`` rows say ``pcore_idx`` 0 for ``sg00`` and 1 for
    ``sg01``, and instruction and DMA rows carry only the subgraph; without it both cores'
    instructions share one engine queue (a Tensor queue busy 112 us in a 103 us profile)."""
    if not len(df) or "pcore" in df.columns or "pcore_idx" in df.columns:
        return df
    for col in ("subgraph", "fully_qualified_subgraph"):
        if col in df.columns:
            codes, uniques = pd.factorize(df[col].astype(object).where(df[col].notna(), "").astype(str).str.strip())
            core = pd.Series(uniques, dtype=object).str.extract(_SUBGRAPH_CORE)[0]
            num = pd.to_numeric(core, errors="coerce").to_numpy(np.float64)
            if len(uniques) and np.isfinite(num).any():
                df["pcore"] = np.where(codes >= 0, np.nan_to_num(num, nan=0.0)[np.maximum(codes, 0)], 0).astype(
                    np.int64
                )
                return df
    return df


def ensure(df: pd.DataFrame, columns: dict[str, Any]) -> pd.DataFrame:
    for name, default in columns.items():
        if name not in df.columns:
            df[name] = default
    return df


def _int64(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """int64 values (exact, even for Unix ns that float64 would round) and a validity mask."""
    if pd.api.types.is_integer_dtype(series.dtype) and not pd.api.types.is_extension_array_dtype(series.dtype):
        return series.to_numpy(np.int64), np.ones(len(series), bool)
    num = pd.to_numeric(series, errors="coerce")
    if pd.api.types.is_integer_dtype(num.dtype):  # nullable Int64
        valid = num.notna().to_numpy()
        return num.fillna(0).to_numpy(np.int64), valid
    values = num.to_numpy(np.float64, na_value=np.nan)
    valid = np.isfinite(values) & (np.abs(values) < 9.2e18)
    return np.rint(np.where(valid, values, 0)).astype(np.int64), valid


#: Times beyond +-4e18 ns (the year 2096) are not times (as ``trace.validate.MAX_TIME_NS``).
MAX_TIME_NS = 4 * 10**18


def _time_values(series: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int64 values, valid, negative) of a time column: valid where the value is a JSON number
    (not a string, boolean or null), finite and within +-``MAX_TIME_NS``; negative before
    rounding (-0.5 ns is a negative duration, not 0)."""
    values, ok = _int64(series)
    if series.dtype == object:
        # A mixed column (the export wrote a string or a boolean somewhere): only numbers count;
        # pandas would read "12" and True as numbers.
        kinds = series.map(type)
        ok = ok & kinds.isin((int, float, np.int64, np.float64)).to_numpy()
    elif pd.api.types.is_bool_dtype(series.dtype):
        ok = np.zeros(len(series), bool)
    raw = pd.to_numeric(series.where(ok, 0) if series.dtype == object else series, errors="coerce")
    raw = raw.to_numpy(np.float64, na_value=np.nan)
    # (both: the float for values past int64, the exact integer for 4e18 + 1)
    inside = ~(np.abs(raw) > MAX_TIME_NS) & (values <= MAX_TIME_NS) & (values >= -MAX_TIME_NS)
    return values, ok & inside, raw < 0


def event_times(
    df: pd.DataFrame,
    first_hw: float | None,
    profile: DeviceProfile,
    what: str,
    args: np.ndarray | None,
    origin: int | None = None,
    action: str = "dropped",
) -> pd.DataFrame:
    """``start_ns``/``dur_ns`` of an event table (legacy JSON records, export tables), with the
    records' JSON in ``args``; a record whose times break the rules is dropped and counted
    (docs/schema.md, "Validation", Neuron):

    - the start is a JSON number within +-4e18 ns;
    - the duration (or, without one, the end) is a JSON number within +-4e18 ns, and the
      duration is not negative.

    ``first_hw`` (``metadata.first_hw_timestamp``): a table whose every valid start is at or past
    it is on the absolute hardware clock, and is made device-relative by subtracting it;
    ``origin``, when given, is subtracted instead (decided by the caller for the whole export).
    ``action``: the repair's action (``ignored`` for rows that are not trace events, such as
    active-time intervals: they are not counted as dropped events).
    """
    if args is not None:
        df["args"] = args
    start, ok, _ = _time_values(df["start_ns"])
    none = np.zeros(len(df), bool)
    if "dur_ns" in df:
        dur, has_dur, negative = _time_values(df["dur_ns"])
        present = df["dur_ns"].notna().to_numpy()
    else:
        dur, has_dur, negative, present = np.zeros(len(df), np.int64), none, none, none
    if "end_ns" in df:
        end, has_end, _ = _time_values(df["end_ns"])
        use_end = ~present & has_end
        dur = np.where(use_end, end - start, dur)
        has_dur = has_dur | use_end
        negative = np.where(use_end, dur < 0, negative)
    bad_time = ~(ok & has_dur) | (dur > MAX_TIME_NS)  # (an end-start difference can pass it)
    negative = ~bad_time & negative
    profile.repairs.add(f"{what} with a missing, non-numeric or out-of-range time", action, int(bad_time.sum()))
    profile.repairs.add(f"{what} with a negative duration", action, int(negative.sum()))
    keep = ~(bad_time | negative)
    if origin is None:
        origin = 0
        if first_hw is not None and np.isfinite(first_hw) and first_hw > 0 and keep.any():
            origin = int(first_hw) if start[keep].min() >= first_hw else 0
    df["start_ns"] = start - np.int64(origin)
    df["dur_ns"] = dur
    if not keep.all():
        df = df.loc[keep].reset_index(drop=True)
    return df


def times(df: pd.DataFrame, origin: int) -> pd.DataFrame:
    """``start_ns``/``dur_ns`` (int64, start relative to ``origin``) from whichever of start,
    end and duration the table has."""
    start, ok = _int64(df["start_ns"])
    bad = int((~ok & df["start_ns"].notna().to_numpy()).sum())
    if bad:
        # A timestamp that is not a number (a dict, a word): the file is not what it says.
        raise ValueError(f"{bad:,} start timestamp(s) are not numbers")
    dur, has_dur = _int64(df["dur_ns"]) if "dur_ns" in df else (np.zeros(len(df), np.int64), np.zeros(len(df), bool))
    if "end_ns" in df:
        end, has_end = _int64(df["end_ns"])
        dur = np.where(has_dur, dur, np.where(has_end, end - start, 0))
    df["start_ns"] = start - np.int64(origin)
    df["dur_ns"] = np.maximum(dur, 0)
    return df


def active_intervals(df: pd.DataFrame, profile: DeviceProfile, origin: int) -> pd.DataFrame:
    """Active-time rows as ``engine`` (canonical), ``pcore``, ``start_ns``, ``dur_ns``."""
    if not len(df) or "start_ts" not in df or not ({"end_ts", "duration_ns"} & set(df.columns)):
        if len(df):
            profile.warn(
                "active-time table lacks start_ts and end_ts/duration_ns: engine active time from instructions"
            )
        return pd.DataFrame(columns=["engine", "pcore", "start_ns", "dur_ns"])
    out = df.rename(columns={"start_ts": "start_ns", "end_ts": "end_ns", "duration_ns": "dur_ns"})
    out = event_times(out.copy(), None, profile, "active_time records", None, origin, IGNORED)
    engine = out["engine"] if "engine" in out else pd.Series(None, index=out.index)
    cats = engine.astype(object).where(engine.notna(), "").astype(str).astype("category")
    out["engine"] = cats.map({c: canonical_engine(c) for c in cats.cat.categories}).astype(object)
    pcore = out["pcore_idx"] if "pcore_idx" in out else pd.Series(0, index=out.index)
    out["pcore"] = pd.to_numeric(pcore, errors="coerce").fillna(0).astype(np.int64)
    return out.loc[out["engine"].notna(), ["engine", "pcore", "start_ns", "dur_ns"]].reset_index(drop=True)


def finish_instructions(df: pd.DataFrame, profile: DeviceProfile, active: pd.DataFrame | None = None) -> pd.DataFrame:
    """Instructions with canonical engines, source lines and ``is_wait`` (see ``activity``)."""

    df = ensure(
        df,
        {
            "engine": None,
            "track": None,
            "pcore": 0,
            "opcode": "",
            "operands": None,
            "hlo_name": None,
            "layer": None,
            "inst_id": -1,
            "pc": -1,
            "bir_id": None,
            "raw_flops": np.nan,
            "adjusted_flops": np.nan,
            "flops_transpose": np.nan,
            "instruction_type": None,
            "src_file": None,
            "src_line": -1,
            "src_func": None,
            "source_location": None,
        },
    )
    engine_src = df["engine"].where(df["engine"].notna(), df["track"])
    cats = engine_src.astype("category")
    mapping = {c: canonical_engine(c) for c in cats.cat.categories}
    df["engine"] = cats.map(mapping).astype(object)
    unknown = sorted({str(c) for c, m in mapping.items() if m is None})
    if unknown:
        profile.warn(f"instructions on unknown engines {unknown} are kept on the Sync queue")
        df["engine"] = df["engine"].where(df["engine"].notna(), "Sync")
    df["engine"] = df["engine"].fillna("Sync")
    df["pcore"] = pcore_index(df["pcore"])
    itype = df["instruction_type"].astype(str).str.upper()
    ft = pd.to_numeric(df["flops_transpose"], errors="coerce")
    df["is_transpose"] = itype.str.contains("TRANSPOSE", na=False) | (ft.fillna(0) > 0)
    df["opcode"] = df["opcode"].fillna("").astype(str)
    # A source location string ("file.py:42") is the fallback when no StackFrame resolved.
    need = (pd.to_numeric(df["src_line"], errors="coerce").fillna(-1) < 0) & df["source_location"].notna()
    if need.any():
        parsed = df.loc[need, "source_location"].astype(str).str.extract(_LOCATION)
        number = pd.to_numeric(parsed["line"], errors="coerce")
        ok = number.notna() & (number < 2**31)  # (a line number past int32 is not a line)
        idx = parsed.index[ok]
        df.loc[idx, "src_file"] = parsed.loc[ok, "file"].str.strip()
        df.loc[idx, "src_line"] = parsed.loc[ok, "line"].astype(int)
    df["src_line"] = pd.to_numeric(df["src_line"], errors="coerce").fillna(-1).astype(np.int64)
    df["is_wait"], lines_up = mark_waits(df, active if active is not None else pd.DataFrame())
    if not lines_up:
        profile.warn(
            "the active-time table does not line up with the instructions (another clock?): engine active "
            "time is taken from the instructions, semaphore waits excluded by opcode"
        )
        profile.active = pd.DataFrame()
    return df


def memory_location(values: pd.Series) -> pd.Series:
    """``[["WEIGHT"]]``, ``["SB"]``, ``"[SB]"`` -> HBM / SBUF / PSUM / HOST (device DRAM is HBM)."""
    # Few distinct spellings among many rows: normalize each distinct one once.
    codes, uniques = pd.factorize(values.astype(object).where(values.notna(), "").astype(str))
    tokens = (
        pd.Series(uniques, dtype=object).str.upper().str.replace(r"[\[\]'\"\s]", "", regex=True).str.split(",").str[0]
    )
    mapped = np.array(
        [None if t in _UNKNOWN_MEMORY else _MEMORY_TOKENS.get(t, "HBM") for t in tokens.tolist()] + [None], dtype=object
    )
    return pd.Series(mapped[codes], index=values.index, dtype=object)


def finish_ccops(df: pd.DataFrame) -> pd.DataFrame:
    df = ensure(
        df,
        {
            "operation": "collective",
            "algorithm": None,
            "stream": 0,
            "bytes": np.nan,
            "input_size": np.nan,
            "output_size": np.nan,
        },
    )
    size = np.fmax(pd.to_numeric(df["input_size"], errors="coerce"), pd.to_numeric(df["output_size"], errors="coerce"))
    df["bytes"] = pd.to_numeric(df["bytes"], errors="coerce").where(lambda s: s.notna(), size)
    df["stream"] = pd.to_numeric(df["stream"], errors="coerce").fillna(0).astype(np.int64)
    df["operation"] = df["operation"].fillna("collective").astype(str)
    return df


def resolve_stack_frames(
    frame_ids: pd.Series,
    frames: pd.DataFrame,
    locations: pd.DataFrame,
    files: pd.DataFrame,
    functions: pd.DataFrame,
    user_code: UserCode | None = None,
) -> pd.DataFrame:
    """src_file / src_line / src_func of each instruction from its ``stack_frame_ids``.

    The first id listed is taken as the instruction's call stack leaf (fused instructions list
    several; we keep the first). From the leaf we walk ``parent_frame_id`` up to the first frame
    in user code, so the line is the user's, not torch's; without a user frame, the leaf.
    """
    user_code = user_code or UserCode.default()
    first = frame_ids.astype(str).str.extract(r"(\d+)")[0]
    fr = pd.DataFrame(
        {
            "id": frames["id"].astype(str),
            "parent": frames["parent_frame_id"].astype(str),
            "file_location_id": frames["file_location_id"].astype(str),
        }
    )
    fname = dict(zip(files["id"].astype(str), files["name"].astype(str)))
    func = dict(zip(functions["id"].astype(str), functions["name"].astype(str)))
    loc = pd.DataFrame(
        {
            "file_location_id": locations["id"].astype(str),
            "file": locations["file_name_id"].astype(str).map(fname),
            "func": locations["function_name_id"].astype(str).map(func),
            "line_number": pd.to_numeric(locations["line_number"], errors="coerce"),
        }
    )
    fr = fr.merge(loc, on="file_location_id", how="left")
    # Frame tables are small (distinct frames, not events): one pass per frame is cheap.
    info = {r.id: (r.file, r.line_number, r.func, r.parent) for r in fr.itertuples(index=False)}
    chosen: dict[str, tuple[Any, Any, Any]] = {}
    for fid in first.dropna().unique():
        cur, hops, pick = fid, 0, None
        while cur in info and hops < 256:
            f, line, fn, parent = info[cur]
            if pick is None:
                pick = (f, line, fn)
            if isinstance(f, str) and user_code.is_user(f):
                pick = (f, line, fn)
                break
            cur, hops = parent, hops + 1
        if pick is not None:
            chosen[fid] = pick
    table = pd.DataFrame.from_dict(chosen, orient="index", columns=["src_file", "src_line", "src_func"])
    out = table.reindex(first.to_numpy())
    out.index = frame_ids.index
    out["src_line"] = pd.to_numeric(out["src_line"], errors="coerce").fillna(-1).astype(np.int64)
    return out
