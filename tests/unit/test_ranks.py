"""Cross-rank analysis: a planted slow rank and its line are named, a balanced run names nobody,
and the cross-rank tables of the real two-rank fixtures equal a computation from the raw JSON."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import neuron_explorer as ne
from neuron_explorer.analyzers import Analysis, analyze
from tests.conftest import shared_fixture

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import synth_ranks

DATA = Path(__file__).resolve().parents[1] / "data" / "kineto" / "hta"
RULES = ["culprit_rank", "rank_imbalance", "slow_collective"]


@cache
def synthetic(tmp: str, n: int, slow: int | None, slow_ms: float = 20.0) -> Analysis:
    out = Path(tmp) / f"run_{n}_{slow}_{slow_ms}"
    synth_ranks.write_run(out, n, slow_rank=slow, slow_ms=slow_ms, seed=3)
    return analyze(ne.load(out), rules=RULES)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("ranks"))


@pytest.mark.parametrize(("n", "slow"), [(4, 2), (6, 0), (6, 5)])
def test_planted_slow_rank_and_line_are_named(tmp: str, n: int, slow: int) -> None:
    a = synthetic(tmp, n, slow)
    found = [f for f in a.findings if f.rule_id == "culprit_rank"]
    assert len(found) == 1
    f = found[0]
    assert f.rank == slow
    top = f.source_lines[0]
    assert (top["file"], top["line"], top["op"]) == (
        synth_ranks.PLANTED_FILE,
        synth_ranks.PLANTED_LINE,
        synth_ranks.PLANTED_OP,
    )
    # the planted work is 20 ms per step, 3 steps: the line's extra device time is that (+-2% jitter)
    assert top["ns"] == pytest.approx(3 * 20e6, rel=0.03)
    # at the first bucket's all-reduce every other rank waits ~20 ms for the slow one
    first = a.collectives[a.collectives["seq"] == 0]
    assert (first["last_rank"] == slow).all()
    assert first["wait_ns"].to_numpy() == pytest.approx((n - 1) * 20e6, rel=0.05)
    assert f"Rank {slow}" in f.title and "model.py:77" in f.title
    # the planted work is also a load imbalance: the slow rank is the busiest in every step
    (imb,) = [f for f in a.findings if f.rule_id == "rank_imbalance"]
    assert imb.rank == slow and imb.metrics["busiest_rank"]["value"] == slow


def test_balanced_run_names_nobody(tmp: str) -> None:
    a = synthetic(tmp, 6, None)
    assert [f.rule_id for f in a.findings] == []
    assert len(a.collectives) == 3 * 4  # 3 steps of 4 buckets, each matched on all ranks
    assert (a.collectives["num_ranks"] == 6).all()


def test_small_planted_delay_below_threshold_is_not_named(tmp: str) -> None:
    # 0.2 ms on a ~70 ms step: under min_wait_pct (5% of the others' step time)
    a = synthetic(tmp, 4, 1, slow_ms=0.2)
    assert not [f for f in a.findings if f.rule_id == "culprit_rank"]


def test_bus_bandwidth_of_synthetic_allreduce(tmp: str) -> None:
    # generated with a 100 GB/s bus: xfer = 2(n-1)/n * bytes / 100
    c = synthetic(tmp, 4, 2).collectives
    assert c["bytes"].eq(25 * (1 << 20)).all()
    assert c["busbw_gbps"].to_numpy() == pytest.approx(100.0, rel=1e-3)


def test_slow_collective_needs_and_uses_a_peak(tmp: str) -> None:
    out = Path(tmp) / "run_peak"
    synth_ranks.write_run(out, 4, seed=1)
    trace = ne.load(out)
    a = analyze(trace, rules=["slow_collective"])
    assert a.skipped and "peak bus bandwidth" in a.skipped[0][1]
    fast = analyze(trace, rules=["slow_collective"], thresholds={"slow_collective.peak_busbw_gbps": 300})
    assert not fast.findings  # 100 GB/s is over 25% of 300
    slow = analyze(trace, rules=["slow_collective"], thresholds={"slow_collective.peak_busbw_gbps": 1000})
    (f,) = slow.findings
    assert f.metrics["slow_collectives"]["value"] == 12
    assert f.metrics["median_busbw_gbps"]["value"] == pytest.approx(100.0, rel=1e-3)


# ---------------------------------------------------------------- real fixtures, independent reference
def _raw(path: Path) -> dict:
    with gzip.open(path, "rt") as fh:
        return json.load(fh)


def _reference_arrivals(paths: list[Path]) -> pd.DataFrame:
    """NCCL kernels of each rank from the raw JSON: (rank, stream, step, seq, arrival, dur)."""
    rows = []
    for p in paths:
        d = _raw(p)
        rank = d["distributedInfo"]["rank"]
        ev = d["traceEvents"]
        steps = [(int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"]) for e in ev
                 if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]  # fmt: skip
        kernels = sorted(
            (e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("nccl")), key=lambda e: e["ts"]
        )
        seq: dict[tuple[int, int], int] = {}
        for e in kernels:
            step = next(s for s, a, b in steps if a <= e["ts"] < b)
            key = (e["args"]["stream"], step)
            rows.append((rank, *key, seq.get(key, 0), round(e["ts"] * 1000), round(e["dur"] * 1000)))
            seq[key] = seq.get(key, 0) + 1
    return pd.DataFrame(rows, columns=["rank", "stream", "step", "seq", "arrival", "dur"])


def test_real_two_ranks_match_raw_json(tmp_path: Path) -> None:
    paths = [DATA / "sampled_rank-0.json.gz", DATA / "sampled_rank-1.json.gz"]
    ref = _reference_arrivals(paths)
    inst = ref.groupby(["stream", "step", "seq"])
    expect = pd.DataFrame(
        {
            "first": inst["arrival"].min(),
            "last": inst["arrival"].max(),
            "n": inst["rank"].nunique(),
        }
    )
    expect["skew"] = expect["last"] - expect["first"]
    last_rows = ref.loc[inst["arrival"].idxmax()].set_index(["stream", "step", "seq"])
    expect["last_rank"] = last_rows["rank"]
    expect["xfer"] = last_rows["dur"]
    expect["wait"] = expect["n"] * expect["last"] - inst["arrival"].sum()
    assert (expect["n"] == 2).all() and len(expect) == 10

    run = tmp_path / "run"
    run.mkdir()
    for p in paths:
        shutil.copy(p, run / p.name)
    a = analyze(ne.load(run), rules=RULES)
    got = a.collectives.assign(stream=a.collectives["pg"].str.removeprefix("stream ").astype(int))
    got = got.set_index(["stream", "step", "seq"]).sort_index()
    expect = expect.sort_index()
    assert got.index.tolist() == expect.index.tolist()
    np.testing.assert_array_equal(got["skew_ns"], expect["skew"])
    np.testing.assert_array_equal(got["last_rank"], expect["last_rank"])
    np.testing.assert_array_equal(got["wait_ns"], expect["wait"])
    np.testing.assert_array_equal(got["xfer_ns"], expect["xfer"])
    assert got["bytes"].isna().all()  # these traces record no message size: bandwidth stays unknown
    # per rank and step: the wall time is the ProfilerStep span
    walls = {(d["distributedInfo"]["rank"], int(e["name"].split("#")[1])): round(e["dur"] * 1000)
             for d in map(_raw, paths) for e in d["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}  # fmt: skip
    rs = a.rank_steps.set_index(["rank", "step"])["wall_ns"]
    assert rs.to_dict() == walls
    # the culprit: the rank causing most of the wait, as the reference says
    caused = expect.groupby("last_rank")["wait"].sum()
    culprit = [f for f in a.findings if f.rule_id == "culprit_rank"]
    assert len(culprit) == 1 and culprit[0].rank == int(caused.idxmax())
    assert culprit[0].metrics["caused_wait_ns"]["value"] == int(caused.max())


def test_report_ranks_section_matches_raw_json(tmp_path: Path) -> None:
    from neuron_explorer.reports.html.data import build_report_data

    paths = [DATA / "sampled_rank-0.json.gz", DATA / "sampled_rank-1.json.gz"]
    ref = _reference_arrivals(paths)
    inst = ref.groupby(["stream", "step", "seq"])
    last = ref.loc[inst["arrival"].idxmax()]
    wait = (inst["arrival"].transform("max") - ref["arrival"]).groupby([ref["stream"], ref["step"], ref["seq"]]).sum()
    caused = pd.Series(wait.to_numpy(), index=last["rank"].to_numpy()).groupby(level=0).sum()
    steps = {}
    for d in map(_raw, paths):
        for e in d["traceEvents"]:
            if e.get("name", "").startswith("ProfilerStep#"):
                steps.setdefault(d["distributedInfo"]["rank"], []).append(round(e["dur"] * 1000))
    run = tmp_path / "run"
    run.mkdir()
    for p in paths:
        shutil.copy(p, run / p.name)
    trace = ne.load(run)
    data = build_report_data(trace, analyze(trace))
    t = data["tables"]["ranks"]
    rows = {r: i for i, r in enumerate(t["rows"]["rank"])}
    assert sorted(rows) == [0, 1] and t["total_rows"] == 2
    for rank, i in rows.items():
        assert t["rows"]["steps"][i] == len(steps[rank])
        assert t["rows"]["wall_ns"][i] == pytest.approx(sum(steps[rank]) / len(steps[rank]), abs=1)
        assert t["rows"]["times_last"][i] == int((last["rank"] == rank).sum())
        assert t["rows"]["caused_wait_ns"][i] == int(caused.get(rank, 0))
    c = data["tables"]["collectives"]
    skews = sorted((inst["arrival"].max() - inst["arrival"].min()).tolist(), reverse=True)
    assert c["total_rows"] == len(skews) and c["rows"]["skew_ns"] == skews[: c["shown_rows"]]
    # one rank alone: no ranks section
    one = ne.load(paths[0])
    alone = build_report_data(one, analyze(one))["tables"]
    assert alone["ranks"]["shown_rows"] == 0 and not alone["ranks"]["columns"]


def test_message_bytes_and_bus_bandwidth_from_nccl_metadata() -> None:
    path = shared_fixture("kineto/hta/nccl_parser_config/nccl_data.json.gz")
    d = _raw(path)
    size = {"Float": 4, "Long": 8}  # c10 ScalarType sizes of the dtypes the file holds
    ref = sorted(
        (
            e["ts"],
            max(e["args"]["In msg nelems"], e["args"]["Out msg nelems"]) * size[e["args"]["dtype"]],
            e["dur"],
            e["args"]["Collective name"],
            e["args"]["Group size"],
        )
        for e in d["traceEvents"]
        if e.get("cat") == "kernel" and "Collective name" in e.get("args", {})
    )
    c = analyze(ne.load(path), rules=RULES).collectives.sort_values("first_arrival_ns")
    assert len(c) == len(ref)
    assert c["bytes"].tolist() == [r[1] for r in ref]
    assert (c["pg"] == "pg 0").all() and (c["num_ranks"] == 1).all()
    # group of 2: all_reduce's factor 2(n-1)/n = 1, broadcast's 1
    expect_bw = np.array([r[1] / (r[2] * 1000) for r in ref])
    np.testing.assert_allclose(c["busbw_gbps"].to_numpy(), expect_bw, rtol=1e-3)
    assert sorted(set(c["collective_name"])) == sorted({r[3] for r in ref})


def test_planted_slow_link_is_named_by_slow_collective(tmp: str) -> None:
    out = Path(tmp) / "run_slow_link"
    synth_ranks.write_run(out, 4, seed=2, slow_link_bucket=2, slow_link_gbps=10.0)
    a = analyze(ne.load(out), rules=RULES, thresholds={"slow_collective.peak_busbw_gbps": 100})
    c = a.collectives
    slow = c[c["busbw_gbps"] < 50]
    assert slow["seq"].tolist() == [2, 2, 2]  # the planted bucket of each of the 3 steps, nothing else
    assert slow["busbw_gbps"].to_numpy() == pytest.approx(10.0, rel=1e-3)
    (f,) = [f for f in a.findings if f.rule_id == "slow_collective"]
    assert f.metrics["slow_collectives"]["value"] == 3
    # each runs 10x slower than at peak: the time lost is 9/10 of their transfer time
    lost = 0.9 * slow["xfer_ns"].sum()
    assert f.metrics["lost_ns"]["value"] == pytest.approx(lost, rel=1e-3)
    # a slow link delays every rank alike: nobody is the culprit
    assert not [f for f in a.findings if f.rule_id == "culprit_rank"]


_COLLECTIVE_ARGS = {
    "process_group": "Process Group Name",
    "process_group_desc": "Process Group Description",
    "in_msg_nelems": "In msg nelems",
    "out_msg_nelems": "Out msg nelems",
    "msg_dtype": "dtype",
    "group_size": "Group size",
}


def test_collective_metadata_columns_equal_the_raw_args(tmp_path: Path) -> None:
    """Schema 1.2 keeps record_param_comms' metadata as columns: every event's value is its
    argument as the JSON holds it, on the kernels and on the CPU ops, through a Parquet file."""
    path = shared_fixture("kineto/hta/nccl_parser_config/nccl_data.json.gz")
    ref = {
        (e["ts"], e["name"]): tuple(e.get("args", {}).get(a) for a in _COLLECTIVE_ARGS.values())
        for e in _raw(path)["traceEvents"]
        if e.get("ph") == "X" and "Collective name" in e.get("args", {})
    }
    assert len(ref) > 40
    out = tmp_path / "nccl.parquet"
    ne.load(path).write(out)
    t = ne.load(out).events.to_pandas()
    t = t[t["collective_name"].notna()]
    base = ne.load(out).metadata["base_time_ns"]
    got = {}
    for row in t.itertuples():
        key = ((row.start_ns - base) / 1000, row.name)
        got[key] = tuple(None if pd.isna(getattr(row, c)) else getattr(row, c) for c in _COLLECTIVE_ARGS)
    assert len(got) == len(ref)
    for key, values in ref.items():
        (match,) = [v for k, v in got.items() if k[1] == key[1] and abs(k[0] - key[0]) < 1e-3]
        assert [None if v is None else (str(v) if isinstance(v, str) else int(v)) for v in match] == list(values)
    # an event without the metadata has nulls there
    other = ne.load(out).events.to_pandas()
    assert other.loc[other["collective_name"].isna(), list(_COLLECTIVE_ARGS)].isna().all().all()


def test_a_file_written_before_the_collective_columns_reads_them_from_args(tmp_path: Path) -> None:
    """A schema 1.1 file has no collective columns: its collectives' groups and bytes come from
    the args, as before, and equal those of the same trace written with the columns."""
    import pyarrow.parquet as pq

    from neuron_explorer.trace.schema import METADATA_KEY

    new = tmp_path / "new.parquet"
    ne.load(shared_fixture("kineto/hta/nccl_parser_config/nccl_data.json.gz")).write(new)
    table = pq.read_table(new)
    meta = json.loads(table.schema.metadata[METADATA_KEY])
    meta["schema_version"] = "1.1.0"
    old_table = table.drop_columns(
        ["process_group", "process_group_desc", "in_msg_nelems", "out_msg_nelems", "msg_dtype"]
    )
    old_table = old_table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()})
    old = tmp_path / "old.parquet"
    pq.write_table(old_table, old)
    old_trace = ne.load(old)
    assert not old_trace.metadata.get("repairs")  # columns a file predates are not a repair
    a_new = analyze(ne.load(new), rules=RULES).collectives
    a_old = analyze(old_trace, rules=RULES).collectives
    pd.testing.assert_frame_equal(a_old, a_new)
    assert a_new["bytes"].notna().all() and (a_new["pg"] == "pg 0").all()
    # the same file claiming 1.2 without the columns: nothing read from args, groups by stream
    meta["schema_version"] = "1.2.0"
    pq.write_table(old_table.replace_schema_metadata({METADATA_KEY: json.dumps(meta).encode()}), old)
    c = analyze(ne.load(old), rules=RULES).collectives
    assert c["pg"].str.startswith("stream ").all()


def test_nccl_algorithm_and_protocol_from_kernel_names() -> None:
    from neuron_explorer.analyzers.ranks import algorithm_and_protocol

    names = pd.Series(
        [
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",  # nccl_data.json.gz
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",  # sampled_rank-0
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",  # tracelens b200 eager trace
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",  # NCCL >= 2.19
            "ncclDevKernel_AllReduce_Sum_bf16_TREE_LL128",
            "ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE",
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",  # names neither
            "ncclDevKernel_Generic_4",
        ]
    )
    got = algorithm_and_protocol(names)
    assert list(got["algorithm"]) == ["RING", "RING", "RING", "RING", "TREE", "NVLS_TREE", None, None]
    assert list(got["protocol"]) == ["LL", "SIMPLE", "LL", "LL", "LL128", "SIMPLE", None, None]


def test_bandwidth_by_size_equals_a_computation_from_the_raw_json(tmp_path: Path) -> None:
    """Per (collective, algorithm, protocol, power-of-two size): count and median bus bandwidth,
    recomputed from the file's kernels with Python's own arithmetic."""
    import re
    import statistics

    path = shared_fixture("kineto/hta/nccl_parser_config/nccl_data.json.gz")
    size = {"Float": 4, "Long": 8}
    groups: dict[tuple, list[float]] = {}
    for e in _raw(path)["traceEvents"]:
        a = e.get("args", {})
        if e.get("cat") != "kernel" or "Collective name" not in a:
            continue
        nbytes = max(a["In msg nelems"], a["Out msg nelems"]) * size[a["dtype"]]
        n = a["Group size"]
        factor = 2 * (n - 1) / n if a["Collective name"] == "allreduce" else 1.0
        algo, proto = re.search(r"_(RING|TREE)_(LL|LL128|SIMPLE)_", e["name"]).groups()
        bucket = 1 << (nbytes.bit_length() - 1)
        groups.setdefault((a["Collective name"], algo, proto, bucket), []).append(nbytes / (e["dur"] * 1e3) * factor)
    a = analyze(ne.load(path), rules=RULES)
    t = a.collective_sizes
    got = {
        (r.collective_name, r.algorithm, r.protocol, r.size_bytes): (r.count, r.busbw_median_gbps)
        for r in t.itertuples()
    }
    assert set(got) == set(groups)
    for key, bws in groups.items():
        assert got[key][0] == len(bws)
        assert got[key][1] == pytest.approx(statistics.median(bws), rel=1e-3)
    assert set(a.collectives["algorithm"]) == {"RING"} and set(a.collectives["protocol"]) == {"LL"}


def test_slow_collective_names_the_algorithm_and_gives_nccl_advice_on_gpus() -> None:
    path = shared_fixture("kineto/hta/nccl_parser_config/nccl_data.json.gz")
    a = analyze(ne.load(path), rules=["slow_collective"], thresholds={"slow_collective.peak_busbw_gbps": 1000,
                                                                      "slow_collective.min_bytes": 1})  # fmt: skip
    (f,) = a.findings
    assert "NCCL chose RING/LL for" in f.message
    assert "NCCL_ALGO/NCCL_PROTO" in f.recommendation
