"""The kernel window of a Neuron device profile, and the three parts of its span.

A real ``neuron-profile`` export is not the kernel alone. Measured on the two kinds of real file
(docs/neuron.md, "The kernel window"):

- the 117 inf2/trn1 matmul exports begin with a ~4 us **preamble** of real work (DRAIN, WRITE,
  TENSOR_LOAD, ACT_TABLE_LOAD, the 32 KiB identity-matrix DMA, instruction fetch), then a
  1.85-1.87 ms **fixed wait** in which only ``EVENT_SEMAPHORE`` rows run (no other instruction,
  no DMA), then the **kernel** (6.5-12 us);
- the trn2 exports (``tests/data/neuron/trn2_attention``) have no long wait: their kernel layer
  (``layer_summary`` ``/sg00/Unknown``) starts 13.2-14.0 us in, after ~175 preamble
  instructions and instruction-fetch DMA, and its row is not always the first.

So the kernel starts at the kernel layer's own start where ``layer_summary`` gives one, and at
the end of the longest stretch in which only waits run when that stretch holds at least
``FIXED_WAIT_SHARE`` of the span (whichever is later); otherwise at the first work row. It ends
at the kernel layer's end where there is one (after it, measured on trn2: ~1.7 us of DRAIN,
NOTIFY, COMPARE_BRANCH and semaphore clears with no layer, the runtime's epilogue), otherwise
at the end of the last work row (an instruction that is not a wait, a DMA row, a collective).
Everything priced "over the kernel" (MFU, engines and DMA in the kernel, the verdict, ``diff
--metric kernel``, ``compare``) uses this window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.collectors.neuron.model import ENGINES, DeviceProfile, busy_rows, real_dma_rows, union_ns

#: A stretch in which only semaphore waits run is the fixed wait before the kernel when it holds
#: at least this share of the span (assumed; measured: 98-99% on the matmul exports, at most 7%
#: on the trn2 exports, whose waits are short barrier rounds inside the kernel).
FIXED_WAIT_SHARE = 0.25
PARTS = ("preamble", "fixed_wait", "kernel")


@dataclass(frozen=True)
class KernelWindow:
    """Device-relative ns. ``wait_start``..``wait_end`` is the fixed wait (empty when there is
    none: both equal the kernel start); the preamble is everything before the kernel that is
    not the fixed wait; ``source`` says how the start was found: ``layer`` (the kernel layer
    of ``layer_summary``), ``wait`` (the end of the fixed wait) or ``work`` (the first work row)."""

    start: int
    end: int
    wait_start: int
    wait_end: int
    source: str
    layer: str | None = None

    @property
    def duration(self) -> int:
        return self.end - self.start

    def intervals(self, part: str) -> list[tuple[int, int]]:
        if part == "kernel":
            return [(self.start, self.end)]
        if part == "fixed_wait":
            return [(self.wait_start, self.wait_end)] if self.wait_end > self.wait_start else []
        spans = (
            [(0, self.wait_start), (self.wait_end, self.start)]
            if self.wait_end > self.wait_start
            else [(0, self.start)]
        )
        return [(a, b) for a, b in spans if b > a]

    def length(self, part: str) -> int:
        return sum(b - a for a, b in self.intervals(part))

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "layer": self.layer,
            "start_ns": self.start,
            "end_ns": self.end,
            "wait_start_ns": self.wait_start,
            "wait_end_ns": self.wait_end,
            **{f"{p}_ns": self.length(p) for p in PARTS},
        }


def _work(profile: DeviceProfile) -> list[pd.DataFrame]:
    ins = profile.instructions
    work = ins[~ins["is_wait"]] if len(ins) and "is_wait" in ins else ins
    return [df for df in (work, real_dma_rows(profile.dmas), profile.ccops) if len(df)]


def _kernel_layer(profile: DeviceProfile) -> tuple[int, int, str] | None:
    """(start, end, name) of the kernel layers of ``layer_summary``: the rows below a subgraph
    (``/sg00/x``), not a subgraph's own row (``/sg00``); from the earliest start to the latest
    end, named by the earliest (``+N`` when there are more)."""
    layers = profile.layers
    if not len(layers):
        return None
    name = layers["name"].astype(str)
    sub = layers["subgraph"].astype(str)
    nested = (name != sub) & name.str.contains("/", regex=False)
    nested &= (sub == "") | pd.Series([n.startswith(s + "/") for n, s in zip(name, sub)], index=name.index)
    nested &= name.str.strip("/").str.count("/") >= 1
    rows = layers[nested.to_numpy()].dropna(subset=["start_ns", "end_ns"])
    rows = rows[rows["end_ns"] > rows["start_ns"]]
    if not len(rows):
        return None
    rows = rows.sort_values("start_ns", kind="stable")
    label = str(rows["name"].iloc[0]) + (f" +{len(rows) - 1}" if len(rows) > 1 else "")
    return int(rows["start_ns"].iloc[0]), int(rows["end_ns"].max()), label


def _longest_wait(starts: np.ndarray, ends: np.ndarray) -> tuple[int, int] | None:
    """The longest stretch between merged work intervals (nothing but waits run in it)."""
    if len(starts) < 2:
        return None
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    gaps = s[1:] - reach[:-1]
    i = int(np.argmax(gaps))
    if gaps[i] <= 0:
        return None
    return int(reach[i]), int(s[i + 1])


def kernel_window(profile: DeviceProfile) -> KernelWindow | None:
    """The kernel window (see the module docstring), or None without work rows."""
    parts = _work(profile)
    if not parts:
        return None
    starts = np.concatenate([df["start_ns"].to_numpy(np.int64) for df in parts])
    ends = starts + np.concatenate([df["dur_ns"].to_numpy(np.int64) for df in parts])
    first, end = int(starts.min()), int(ends.max())
    if end <= first:
        return None
    start, source, wait, layer_name = first, "work", None, None
    ins = profile.instructions
    if len(ins) and "is_wait" in ins and first > 0:
        waits = ins[ins["is_wait"].to_numpy(bool)]
        if len(waits) and int(waits["start_ns"].min()) < first:
            # Waits before any work (the old synthetic files, assumed for others): the stretch
            # from the span's start to the first work row is a candidate too.
            starts, ends = np.append(starts, 0), np.append(ends, 0)
    gap = _longest_wait(starts, ends)
    if gap is not None and (gap[1] - gap[0]) >= FIXED_WAIT_SHARE * end:
        wait, start, source = gap, gap[1], "wait"
    layer = _kernel_layer(profile)
    if layer is not None and start <= layer[0] < end:
        # The layer rows bound the kernel: what runs after its end (DRAIN, NOTIFY, the closing
        # semaphores, measured on trn2) is the runtime's epilogue, counted in after_kernel_ns.
        start, source, layer_name = layer[0], "layer", layer[2]
        end = min(end, layer[1]) if layer[1] > start else end
    ws, we = wait if wait is not None else (start, start)
    return KernelWindow(start=start, end=end, wait_start=ws, wait_end=we, source=source, layer=layer_name)


def clipped_union(df: pd.DataFrame, spans: list[tuple[int, int]]) -> int:
    """Union length of ``df``'s intervals inside ``spans`` (disjoint)."""
    if not len(df) or not spans:
        return 0
    s = df["start_ns"].to_numpy(np.int64)
    e = s + df["dur_ns"].to_numpy(np.int64)
    return sum(union_ns(np.clip(s, a, b), np.clip(e, a, b)) for a, b in spans)


def _starting_in(df: pd.DataFrame, spans: list[tuple[int, int]]) -> np.ndarray:
    s = df["start_ns"].to_numpy(np.int64)
    mask = np.zeros(len(df), bool)
    for a, b in spans:
        mask |= (s >= a) & (s < b)
    return mask


def moved_rows(dmas: pd.DataFrame) -> pd.DataFrame:
    """The DMA rows whose bytes are counted: the packets where the export lists packets (an
    aggregated row omits its group's semaphore packets: sum packets, never the aggregated row),
    else the transfers."""
    if not len(dmas):
        return dmas
    transfer = dmas["is_transfer"].to_numpy(bool) if "is_transfer" in dmas else np.ones(len(dmas), bool)
    dup = dmas["duplicate"].to_numpy(bool) if "duplicate" in dmas else np.zeros(len(dmas), bool)
    synthetic = dmas["synthetic"].to_numpy(bool) if "synthetic" in dmas else np.zeros(len(dmas), bool)
    packet = ~transfer & ~dup
    if packet.any():
        return dmas[packet]
    return dmas[transfer & ~synthetic]


def part_metrics(profile: DeviceProfile, window: KernelWindow) -> dict[str, Any]:
    """Per part (preamble, fixed wait, kernel): its length, the non-wait instructions and
    MATMULs that start in it, the DMA bytes whose packets start in it, and the engines' and DMA
    queues' busy time inside it (unions)."""
    ins = profile.instructions
    work = ins[~ins["is_wait"]] if len(ins) and "is_wait" in ins else ins
    busy, dma, moved = busy_rows(profile), real_dma_rows(profile.dmas), moved_rows(profile.dmas)
    out: dict[str, Any] = {}
    for part in PARTS:
        spans = window.intervals(part)
        out[f"{part}_ns"] = window.length(part)
        if len(work):
            starts = _starting_in(work, spans)
            out[f"{part}_instructions"] = int(starts.sum())
            out[f"{part}_matmul_instructions"] = int(
                (starts & (work["opcode"].astype(str) == "MATMUL").to_numpy()).sum()
            )
            flops = pd.to_numeric(work["raw_flops"], errors="coerce") if "raw_flops" in work else None
            if flops is not None and flops.notna().any():
                out[f"{part}_hardware_flops"] = int(flops[starts].fillna(0).clip(lower=0).sum())
        if len(moved):
            out[f"{part}_dma_bytes"] = int(
                pd.to_numeric(moved["bytes"], errors="coerce")[_starting_in(moved, spans)].fillna(0).sum()
            )
        out[f"{part}_engines_active_ns"] = clipped_union(busy, spans)
        if len(dma):
            out[f"{part}_dma_active_ns"] = clipped_union(dma, spans)
    out["wait_start_ns"], out["wait_end_ns"] = window.wait_start, window.wait_end
    span = profile.span_ns
    if span:
        out["after_kernel_ns"] = max(int(span) - window.end, 0)
    return out


def kernel_metrics(profile: DeviceProfile, span: int | None, window: KernelWindow | None = None) -> dict[str, Any]:
    """The kernel window (``window``, else computed), its parts and the engines' and DMA
    queues' activity in the kernel."""
    window = window or kernel_window(profile)
    if window is None:
        return {}
    k = window.duration
    spans = window.intervals("kernel")
    busy, dma = busy_rows(profile), real_dma_rows(profile.dmas)
    out: dict[str, Any] = {
        "kernel_start_ns": window.start,
        "kernel_end_ns": window.end,
        "kernel_time_ns": k,
        "kernel_window_source": window.source,
    }
    out.update(part_metrics(profile, window))
    if span:
        out["kernel_share_of_span_pct"] = 100.0 * k / span
    eng = clipped_union(busy, spans)
    out["kernel_engines_active_time_ns"] = eng
    out["kernel_engines_active_pct"] = 100.0 * eng / k
    for engine in ENGINES:
        rows = busy[busy["engine"] == engine] if len(busy) else busy
        out[f"kernel_{engine.lower()}_engine_active_pct"] = 100.0 * clipped_union(rows, spans) / k
    if len(dma):
        out["kernel_dma_active_pct"] = 100.0 * clipped_union(dma, spans) / k
        both = pd.concat([busy[["start_ns", "dur_ns"]], dma[["start_ns", "dur_ns"]]]) if len(busy) else dma
        out["kernel_engines_dma_active_pct"] = 100.0 * clipped_union(both, spans) / k
        if span:
            spanned = union_ns(
                both["start_ns"].to_numpy(np.int64), (both["start_ns"] + both["dur_ns"]).to_numpy(np.int64)
            )
            out["engines_dma_active_time_ns"] = spanned
            out["engines_dma_active_time_pct"] = 100.0 * spanned / span
    return out


#: Columns of the per-engine table (``engine_table``): one row per engine and per DMA queue.
ENGINE_TABLE_COLUMNS = (
    "device",
    "core",
    "unit",
    "type",
    "queue_type",
    "instructions",
    "waits",
    "transfers",
    "bytes",
    "active_ns",
    "kernel_active_ns",
    "kernel_util_pct",
    "span_util_pct",
)


def engine_table(profile: DeviceProfile, span: int | None, window: KernelWindow | None = None) -> list[dict[str, Any]]:
    """Per physical core, per engine (Tensor, Vector, Scalar, GpSimd, Sync) and per DMA queue:
    instructions (DMA: packet rows), active time (union, waits excluded), its share of the
    kernel window and of the span. Bytes are the packets' (``moved_rows``)."""
    window = window or kernel_window(profile)
    k = window.duration if window else 0
    spans = window.intervals("kernel") if window else []
    ins, busy, dma = profile.instructions, busy_rows(profile), real_dma_rows(profile.dmas)
    rows: list[dict[str, Any]] = []

    def add(core: int, unit: str, kind: str, part: pd.DataFrame, **extra: Any) -> None:
        active = (
            union_ns(part["start_ns"].to_numpy(), (part["start_ns"] + part["dur_ns"]).to_numpy()) if len(part) else 0
        )
        inside = clipped_union(part, spans)
        rows.append(
            {
                "device": profile.device,
                "core": core,
                "unit": unit,
                "type": kind,
                **extra,
                "active_ns": int(active),
                "kernel_active_ns": int(inside),
                "kernel_util_pct": 100.0 * inside / k if k else None,
                "span_util_pct": 100.0 * active / span if span else None,
            }
        )

    def core_of(df: pd.DataFrame) -> np.ndarray:
        return df["pcore"].to_numpy(np.int64) if "pcore" in df and len(df) else np.zeros(len(df), np.int64)

    cores = sorted({int(c) for df in (ins, busy, dma) for c in set(core_of(df).tolist())}) or [0]
    for core in cores:
        for engine in ENGINES:
            mine = ins[(ins["engine"] == engine).to_numpy() & (core_of(ins) == core)] if len(ins) else ins
            part = busy[(busy["engine"] == engine).to_numpy() & (core_of(busy) == core)] if len(busy) else busy
            if not len(mine) and not len(part):
                continue
            waits = int(mine["is_wait"].sum()) if len(mine) and "is_wait" in mine else 0
            add(
                core,
                engine,
                "engine",
                part,
                instructions=len(mine),
                waits=waits,
                transfers=None,
                bytes=None,
                queue_type=None,
            )
    if len(dma):
        all_rows = profile.dmas
        moved = moved_rows(all_rows)
        transfer = all_rows["is_transfer"].to_numpy(bool) if "is_transfer" in all_rows else np.ones(len(all_rows), bool)
        packets = moved is not all_rows and len(moved) and not moved["is_transfer"].to_numpy(bool).all()
        keys = sorted(set(zip(core_of(dma).tolist(), dma["queue"].astype(str).tolist())))
        for core, queue in keys:
            on_queue = (all_rows["queue"].astype(str) == queue).to_numpy() & (core_of(all_rows) == core)
            here = (moved["queue"].astype(str) == queue).to_numpy() & (core_of(moved) == core)
            part = dma[(dma["queue"].astype(str) == queue).to_numpy() & (core_of(dma) == core)]
            kinds = part["queue_type"].dropna().astype(str).unique().tolist() if "queue_type" in part else []
            add(
                core,
                queue,
                "dma",
                part,
                queue_type=kinds[0] if len(kinds) == 1 else None,
                instructions=int(here.sum()) if packets else int((on_queue & transfer).sum()),
                waits=None,
                transfers=int((on_queue & transfer).sum()),
                bytes=int(pd.to_numeric(moved.loc[here, "bytes"], errors="coerce").fillna(0).sum()),
            )
    for r in rows:
        for c in ENGINE_TABLE_COLUMNS:
            r.setdefault(c, None)
    return [{c: r[c] for c in ENGINE_TABLE_COLUMNS} for r in rows]
