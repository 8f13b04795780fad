"""trace.line_coverage: op time and device time by source precision, and how much of it has an
exact line once inherited lines are followed to their origin. Checked on a real CPU capture and
on a real H200 capture, against figures recomputed here by another method (pandas merges on
event ids, one link at a time)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import neuron_explorer as ne
from neuron_explorer.trace.line_coverage import coverage_text, line_coverage
from neuron_explorer.trace.summary import describe

DATA = Path(__file__).resolve().parents[1] / "data"
H200_EAGER = DATA / "kineto" / "h200" / "recorded_eager.parquet"


def _frame(trace) -> pd.DataFrame:
    df = trace.to_pandas(
        columns=["rank", "event_id", "kind", "dur_ns", "parent_id", "fwd_id", "op_id", "src_file", "src_precision"]
    )
    for col in ("kind", "src_file", "src_precision"):
        df[col] = ["None" if v is None or v != v else str(v) for v in df[col].astype(object)]
    df["src_precision"] = df["src_precision"].replace("None", "none")
    return df


def _expected(df: pd.DataFrame) -> dict:
    """The same figures, by joins: each link followed by a merge on (rank, event_id)."""
    by_id = df.set_index(["rank", "event_id"])

    def prec_of(col: str, rows: pd.DataFrame) -> pd.Series:
        keys = list(zip(rows["rank"], rows[col].fillna(-1).astype("int64")))
        return pd.Series([by_id["src_precision"].get(k, "none") for k in keys], index=rows.index)

    def origin(rows: pd.DataFrame) -> pd.Series:
        out = rows["src_precision"].copy()
        launched = out == "launch"
        if launched.any():
            ops = rows[launched]
            keys = list(zip(ops["rank"], ops["op_id"].fillna(-1).astype("int64")))
            op_rows = by_id.reindex(keys).reset_index()
            op_rows.index = ops.index
            out[launched] = origin(op_rows.assign(rank=ops["rank"].to_numpy()))
        fwd = out == "forward"
        if fwd.any():
            out[fwd] = prec_of("fwd_id", rows[fwd])
        return out

    parent_kind = df.merge(
        df[["rank", "event_id", "kind"]].rename(columns={"event_id": "parent_id", "kind": "parent_kind"}),
        on=["rank", "parent_id"],
        how="left",
    )["parent_kind"].to_numpy()
    top = df[(df["kind"] == "cpu_op") & (parent_kind != "cpu_op")]
    dev = df[df["kind"].isin(["kernel", "memcpy", "memset", "collective"])]
    out = {}
    for name, rows in (("op", top), ("device", dev)):
        total = rows["dur_ns"].clip(lower=0).sum()
        out[f"{name}_time_ns"] = int(total)
        if total:
            out[f"{name}_by_precision_pct"] = (
                (rows.groupby("src_precision")["dur_ns"].sum() / total * 100).round(2).to_dict()
            )
            out[f"{name}_exact_pct"] = round(100 * rows.loc[origin(rows) == "line", "dur_ns"].sum() / total, 2)
    user = top[top["src_file"] != "None"]
    out["op_user_exact_pct"] = round(100 * user.loc[origin(user) == "line", "dur_ns"].sum() / user["dur_ns"].sum(), 2)
    return out


@pytest.fixture(scope="module")
def cpu_capture(tmp_path_factory):
    torch = pytest.importorskip("torch")

    def attention(q, k, v):
        return ((q @ k.transpose(0, 1)) * 0.5).softmax(-1) @ v

    torch.manual_seed(0)
    w = torch.randn(32, 32, requires_grad=True)
    x = torch.randn(64, 32)
    with ne.profile(on_error="raise") as prof:
        for _ in range(3):
            h = x @ w
            attention(h, h, h).sum().backward()
    return prof.trace


def test_op_time_shares_match_a_recomputation_by_joins(cpu_capture):
    got = line_coverage(cpu_capture)
    want = _expected(_frame(cpu_capture))
    assert got["op_time_ns"] == want["op_time_ns"] > 0
    assert got["op_by_precision_pct"] == pytest.approx(want["op_by_precision_pct"], abs=0.011)
    assert got["op_exact_pct"] == pytest.approx(want["op_exact_pct"], abs=0.011)
    assert got["op_user_exact_pct"] == pytest.approx(want["op_user_exact_pct"], abs=0.011)
    # operator syntax and its backward ops are exact here: most op time is
    assert got["op_exact_pct"] > 90 and {"line", "forward"} <= set(got["op_by_precision_pct"])
    assert got["device_time_ns"] == 0 and got["device_exact_pct"] is None


def test_device_time_follows_the_launching_op_to_its_origin_on_a_real_h200_capture():
    trace = ne.load(H200_EAGER)
    got = line_coverage(trace)
    want = _expected(_frame(trace))
    assert got["device_time_ns"] == want["device_time_ns"] > 0
    assert got["device_by_precision_pct"] == pytest.approx(want["device_by_precision_pct"], abs=0.011)
    assert got["device_exact_pct"] == pytest.approx(want["device_exact_pct"], abs=0.011)
    assert got["op_by_precision_pct"] == pytest.approx(want["op_by_precision_pct"], abs=0.011)
    # (recorded through torch 2.11's JSON fallback: function-level lines only, so nothing is exact)
    assert got["device_by_precision_pct"] == {"launch": 100.0} and got["device_exact_pct"] == 0.0


def test_info_the_report_and_the_tui_show_the_same_figures(cpu_capture):
    from neuron_explorer.analyzers import analyze
    from neuron_explorer.reports.html.data import build_report_data

    cov = line_coverage(cpu_capture)
    assert describe(cpu_capture)["source"]["time"] == cov
    analysis = analyze(cpu_capture)
    assert analysis.summary["line_coverage"] == cov
    assert build_report_data(cpu_capture, analysis)["header"]["line_coverage"] == coverage_text(cov)
    text = coverage_text(cov)
    assert text.startswith(f"op time {cov['op_exact_pct']:.1f}% at an exact line (")
    assert coverage_text(cov, short=True) == f"{cov['op_exact_pct']:.1f}% of op time at an exact line"
    assert coverage_text(line_coverage(ne.load(H200_EAGER)), short=True).endswith(
        "% of op time, 0.0% of device time at an exact line"
    )


def test_two_ranks_of_one_capture_give_its_shares_and_twice_its_time(cpu_capture):
    # (event ids repeat across ranks: links are looked up per rank, not by row number)
    import numpy as np
    import pyarrow as pa

    from neuron_explorer.trace.model import Trace

    e = cpu_capture.events
    rank1 = e.set_column(
        e.column_names.index("rank"), "rank", pa.array(np.ones(e.num_rows, e["rank"].type.to_pandas_dtype()))
    )
    both = Trace(pa.concat_tables([e, rank1.cast(e.schema)]), dict(cpu_capture.metadata))
    one, two = line_coverage(cpu_capture), line_coverage(both)
    assert two["op_time_ns"] == 2 * one["op_time_ns"] and two["op_by_precision_pct"] == one["op_by_precision_pct"]
    assert two["op_exact_pct"] == one["op_exact_pct"] and two["op_user_exact_pct"] == one["op_user_exact_pct"]
    want = _expected(_frame(both))
    assert two["op_exact_pct"] == pytest.approx(want["op_exact_pct"], abs=0.011)


def test_graph_replayed_work_is_exact_when_its_capture_op_is() -> None:
    """Replayed kernels (``graph_capture``) count as exact through ``capture_op_id`` when the op
    that captured them has an exact line, and not when it has only its function."""
    import pyarrow as pa

    from neuron_explorer.trace.model import Trace

    def trace(capture_precision: str) -> Trace:
        return Trace(
            pa.table(
                {
                    "rank": pa.array([0, 0, 0], pa.int32()),
                    "event_id": pa.array([0, 1, 2], pa.int64()),
                    "kind": ["cpu_op", "kernel", "kernel"],
                    "dur_ns": pa.array([10, 30, 10], pa.int64()),
                    "parent_id": pa.array([None, None, None], pa.int64()),
                    "fwd_id": pa.array([None, None, None], pa.int64()),
                    "op_id": pa.array([None, None, 0], pa.int64()),
                    "capture_op_id": pa.array([None, 0, None], pa.int64()),
                    "src_file": ["a.py", "a.py", "a.py"],
                    "src_precision": [capture_precision, "graph_capture", "launch"],
                }
            )
        )

    exact = line_coverage(trace("line"))
    assert exact["device_time_ns"] == 40 and exact["device_exact_pct"] == 100.0
    assert exact["device_by_precision_pct"] == {"graph_capture": 75.0, "launch": 25.0}
    assert line_coverage(trace("function"))["device_exact_pct"] == 0.0
