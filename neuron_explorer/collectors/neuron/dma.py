"""DMA rows of both Neuron formats: queue names and types, transfers versus packets, flags.

Real exports list DMA *packets* and, beside them, *aggregated transfers* whose packets are also
listed (legacy JSON ``aggregated: "yes"``; Parquet ``DmaPacketAggregated`` beside ``DmaPacket``).
Counting every row would count a transfer's bytes twice, so each row gets ``is_transfer``: when
the profile has aggregated rows, they are the transfers and every other row is a packet; without
them, every row that is not flagged ``duplicate`` is a transfer. Packets stay in the trace (as
annotations on their queue), transfers become the ``memcpy`` events the rules count.

Queues: the legacy ``subgroup`` is ``<queue>-Q<n>-E<engine>`` (queue x DMA engine), so it is not
the queue; the real names and types are in ``dma_queues_info`` (``q_name``, ``q_type``,
``q_idx``). A queue is spill traffic when its type says so (``q_type``); only when no type is
known does its name decide (``qSyncSpillReload0`` carries weights: its type says ``weights``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.collectors.neuron.frames import ensure, flags, memory_location, pcore_index
from neuron_explorer.collectors.neuron.model import DeviceProfile

_SPILL = re.compile(r"spill|reload", re.I)
_SUBGROUP = r"^(?P<prefix>.*?)-?Q(?P<q>\d+)-E(?P<e>\d+)$"


def queue_table(records: Any) -> pd.DataFrame:
    """``dma_queues_info`` (or a Parquet queue table) as ``q_name``, ``q_type``, ``q_idx``,
    ``q_eng_idx`` and ``subgraph`` (empty where the file has none)."""
    cols = ["q_name", "q_type", "q_idx", "q_eng_idx", "subgraph"]
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame.from_records(records[:100_000])
    df = ensure(df, {"q_name": None, "q_type": None, "q_idx": np.nan, "q_eng_idx": np.nan, "subgraph": ""})
    df["q_idx"] = pd.to_numeric(df["q_idx"], errors="coerce")
    df["q_eng_idx"] = pd.to_numeric(df["q_eng_idx"], errors="coerce")
    df["q_name"] = df["q_name"].where(df["q_name"].notna(), None)
    df["subgraph"] = _text(df["subgraph"]).str.strip("/")
    return df[cols]


def _lookup(keys: pd.DataFrame, table: pd.DataFrame, on: list[str]) -> pd.Series:
    """The ``q_name`` of each row of ``keys`` where ``on`` matches exactly one name in
    ``table``; NaN where it matches none or several (an ambiguous key names nothing)."""
    t = table.dropna(subset=[*on, "q_name"])
    if not len(t):
        return pd.Series(np.nan, index=keys.index, dtype=object)
    names = t.groupby(on, sort=False)["q_name"].agg(lambda s: s.iloc[0] if s.astype(str).nunique() == 1 else None)
    names = names.dropna().astype(str).rename("_name").reset_index()
    out = keys[on].reset_index().merge(names, on=on, how="left").set_index("index")["_name"]
    return out.reindex(keys.index)


def _text(series: pd.Series) -> pd.Series:
    return series.astype(object).where(series.notna(), "").astype(str).str.strip()


def resolve_queues(df: pd.DataFrame, info: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The queue name and type of every DMA row (see the module docstring for the order)."""
    n = len(df)
    name = _text(df["queue"]) if "queue" in df else pd.Series("", index=df.index)
    qidx = pd.Series(np.nan, index=df.index)
    if "dma_queue" in df:
        dq = df["dma_queue"]
        num = pd.to_numeric(dq, errors="coerce")
        qidx = qidx.fillna(num)
        text = _text(dq)
        name = name.where(name != "", text.where(num.isna() & (text != ""), ""))
    if "subgroup" in df:
        # Few distinct subgroups among many rows: parse each once.
        codes, uniques = pd.factorize(_text(df["subgroup"]))
        parsed = pd.Series(uniques, dtype=object).str.extract(_SUBGROUP)
        sub_q = pd.to_numeric(parsed["q"], errors="coerce").to_numpy(np.float64)
        sub_prefix = parsed["prefix"].fillna("").to_numpy(dtype=object)
        qidx = qidx.fillna(pd.Series(sub_q[codes] if len(uniques) else np.nan, index=df.index))
        name = name.where(name != "", pd.Series(sub_prefix[codes] if len(uniques) else "", index=df.index))
    if "queue_idx" in df:
        qidx = qidx.fillna(pd.to_numeric(df["queue_idx"], errors="coerce"))
    qidx = qidx.where(np.isfinite(qidx) & (qidx == np.round(qidx)) & (qidx.abs() < 2**31))
    if len(info) and (name == "").any():
        eng = (
            pd.to_numeric(df["engine_idx"], errors="coerce")
            if "engine_idx" in df
            else pd.Series(np.nan, index=df.index)
        )
        sub = _text(df["subgraph"]).str.strip("/") if "subgraph" in df else pd.Series("", index=df.index)
        keys = pd.DataFrame({"q_idx": qidx, "q_eng_idx": eng, "subgraph": sub}, index=df.index)
        # Most specific first: (subgraph, queue, DMA engine), then (subgraph, queue), then queue;
        # each only where it names one queue. Measured on trn2: q_idx 14 of sg00 is both
        # qScalarTable and qDveTable, and no q_eng_idx (73, 74, 79, 90) is a row's DMA engine
        # (64-85), so those rows stay "queue 14" rather than borrow either name.
        looked = pd.Series(np.nan, index=df.index, dtype=object)
        for on in (["subgraph", "q_idx", "q_eng_idx"], ["subgraph", "q_idx"], ["q_idx"]):
            if on[0] == "subgraph" and not ((info["subgraph"] != "").any() and (sub != "").any()):
                continue
            looked = looked.where(looked.notna(), _lookup(keys, info, on))
            ambiguous = _ambiguous(keys, info, on)
            looked = looked.where(looked.notna() | ~ambiguous, "")
        name = name.where(name != "", looked.fillna(""))
    fallback = pd.Series("dma_queue", index=df.index)
    if "subgroup" in df:
        fallback = _text(df["subgroup"]).where(lambda s: s != "", fallback)
    fallback = ("queue " + qidx.astype("Int64").astype(str)).where(qidx.notna(), fallback)
    name = name.where(name != "", fallback) if n else name
    # The row's own queue_type first (measured on trn2: rows say software_dynamic, instruction,
    # hardware_dynamic where dma_queues_info says weights or unknown), then the queue's q_type.
    types = pd.Series(None, index=df.index, dtype=object)
    if "queue_type" in df:
        own = _text(df["queue_type"])
        types = own.where((own != "") & (own.str.lower() != "unknown"), None)
    named = info.dropna(subset=["q_name"]).drop_duplicates("q_name")
    if len(named):
        types = types.where(types.notna(), name.map(dict(zip(named["q_name"].astype(str), named["q_type"]))))
    return name.astype(str), types.astype(object).where(types.notna(), None)


def _ambiguous(keys: pd.DataFrame, table: pd.DataFrame, on: list[str]) -> pd.Series:
    """Rows whose ``on`` key matches two or more queue names in ``table``."""
    t = table.dropna(subset=[*on, "q_name"])
    if not len(t):
        return pd.Series(False, index=keys.index)
    many = t.groupby(on, sort=False)["q_name"].agg(lambda s: s.astype(str).nunique() > 1)
    many = many[many].rename("_many").reset_index()
    if not len(many):
        return pd.Series(False, index=keys.index)
    out = keys[on].reset_index().merge(many, on=on, how="left").set_index("index")["_many"]
    return out.reindex(keys.index).fillna(False).astype(bool)


def finish_dmas(df: pd.DataFrame, profile: DeviceProfile, info: pd.DataFrame | None = None) -> pd.DataFrame:
    """DMA rows with ``queue``, ``queue_type``, memories, ``bytes`` and the boolean flags."""
    info = info if info is not None else queue_table(None)
    df = ensure(
        df,
        {
            "engine_idx": -1,
            "pcore": 0,
            "bytes": np.nan,
            "read_bytes": np.nan,
            "write_bytes": np.nan,
            "source": None,
            "dest": None,
            "variable": None,
            "throughput": np.nan,
            "is_cc": False,
            "aggregated": False,
            "duplicate": False,
        },
    )
    b = pd.to_numeric(df["bytes"], errors="coerce")
    for alt in ("write_bytes", "read_bytes"):
        b = b.where(b.notna(), pd.to_numeric(df[alt], errors="coerce"))
    df["bytes"] = b
    df["queue"], df["queue_type"] = resolve_queues(df, info)
    df["pcore"] = pcore_index(df["pcore"])
    df["src_mem"] = memory_location(df["source"])
    df["dst_mem"] = memory_location(df["dest"])
    typed = df["queue_type"].notna()
    by_type = df["queue_type"].astype(str).str.contains(_SPILL, na=False)
    by_name = df["queue"].str.contains(_SPILL, na=False) | df["variable"].astype(str).str.contains(_SPILL, na=False)
    df["is_spill"] = np.where(typed, by_type, by_name)
    df["is_cc"] = flags(df["is_cc"])
    df["aggregated"] = flags(df["aggregated"])
    df["duplicate"] = flags(df["duplicate"])
    return df


def _group_ids(df: pd.DataFrame) -> pd.Series | None:
    """The logical transfer each row belongs to: ``packet_aggregation_id`` (legacy rows and
    Parquet ``DmaPacket``); a Parquet ``DmaPacketAggregated`` row is named by its own ``id``."""
    if "packet_aggregation_id" not in df:
        return None
    group = pd.to_numeric(df["packet_aggregation_id"], errors="coerce")
    if "id" in df:
        own = pd.to_numeric(df["id"], errors="coerce")
        group = group.where(group.notna() | ~df["aggregated"].astype(bool), own)
    return group if group.notna().any() else None


def mark_transfers(df: pd.DataFrame, profile: DeviceProfile) -> pd.DataFrame:
    """``is_transfer`` on every row (see the module docstring); sets ``dma_granularity``.

    Real files group packets into logical transfers by ``packet_aggregation_id`` and list an
    aggregated row for only some of them (one group of three on the 117 real exports). A group
    without an aggregated row is a transfer too: one row is added for it (``synthetic``), from
    its first packet to its last, with its packets' bytes summed; its packets stay annotations.
    """
    if not len(df):
        return df
    agg = df["aggregated"].to_numpy(bool)
    dup = df["duplicate"].to_numpy(bool)
    df["synthetic"] = False
    if not agg.any():
        df["is_transfer"] = ~dup
        profile.dma_granularity = "packet"
        return df
    df["is_transfer"] = agg & ~dup
    profile.dma_granularity = "transfer"
    group = _group_ids(df)
    if group is None:
        return df
    _packet_bytes(df, group, agg & ~dup)
    covered = set(group[agg & ~dup].dropna().tolist())
    orphan = ~agg & ~dup & group.notna().to_numpy() & ~group.isin(covered).to_numpy()
    if not orphan.any():
        return df
    return pd.concat([df, _group_transfers(df[orphan], group[orphan])], ignore_index=True)


def _packet_bytes(df: pd.DataFrame, group: pd.Series, transfer: np.ndarray) -> None:
    """An aggregated row's bytes are its group's packets' sum where that is larger.
    Measured on the 117 real matmul exports (reference neuron-formats.md): the identity-matrix
    row says 32,768 B and leaves out its group's 16 four-byte semaphore packets (32,832 B)."""
    pk = ~df["aggregated"].to_numpy(bool) & ~df["duplicate"].to_numpy(bool) & group.notna().to_numpy()
    if not pk.any() or not transfer.any():
        return
    for col in ("bytes", "read_bytes", "write_bytes"):
        if col not in df:
            continue
        sums = pd.to_numeric(df[col], errors="coerce")[pk].groupby(group[pk].to_numpy()).sum(min_count=1)
        mapped = group[transfer].map(sums)
        own = pd.to_numeric(df.loc[transfer, col], errors="coerce")
        # The larger of the two: a file that lists only some of a transfer's packets keeps its row.
        df.loc[transfer, col] = np.fmax(mapped.to_numpy(np.float64), own.to_numpy(np.float64))


def _group_transfers(packets: pd.DataFrame, group: pd.Series) -> pd.DataFrame:
    """One transfer per packet group: first packet's queue and memories, bytes summed, and as
    long as its packets were busy (their union) from its first packet. Measured on the matmul
    exports (reference neuron-formats.md): the instruction fetch sends 2 packets in the preamble
    and 1 in the kernel, 1.85 ms apart, for ~55 ns of work; first-to-last would call it busy
    throughout."""
    pk = packets.assign(_group=group.to_numpy(), _end=packets["start_ns"] + packets["dur_ns"])
    pk = pk.sort_values(["_group", "start_ns"], kind="stable")
    g = pk.groupby("_group", sort=True)
    out = g.first()
    out["start_ns"] = g["start_ns"].min()
    # Union per group, vectorized: a packet adds what it reaches beyond its group's reach so far.
    reach = pk.groupby("_group", sort=False)["_end"].cummax()
    before = reach.groupby(pk["_group"].to_numpy(), sort=False).shift(1)
    added = np.where(
        before.isna(), pk["_end"] - pk["start_ns"], np.clip(pk["_end"] - np.maximum(pk["start_ns"], before), 0, None)
    )
    out["dur_ns"] = pd.Series(added, index=pk.index).groupby(pk["_group"].to_numpy()).sum().astype(np.int64)
    for col in ("bytes", "read_bytes", "write_bytes"):
        out[col] = g[col].sum(min_count=1)
    out["is_spill"] = g["is_spill"].any()
    out["is_cc"] = g["is_cc"].any()
    packets_n = g.size()
    out["throughput"] = np.where(out["dur_ns"] > 0, out["bytes"] / (out["dur_ns"] / 1e9), np.nan)
    out["args"] = [
        json.dumps(
            {
                "packet_aggregation_id": _plain(gid),
                "packets": int(n),
                "transfer_size": _plain(b),
                "note": "no aggregated row in the export: this transfer is the sum of its packets",
            }
        )
        for gid, n, b in zip(out.index, packets_n, out["bytes"])
    ]
    out["aggregated"] = False
    out["is_transfer"] = True
    out["synthetic"] = True
    out["packet_aggregation_id"] = out.index
    return out.reset_index(drop=True).drop(columns=["_end"], errors="ignore")


def _plain(v: Any) -> Any:
    if v is None or (isinstance(v, float) and v != v):
        return None
    f = float(v)
    return int(f) if f.is_integer() else f
