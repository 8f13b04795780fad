"""The device spec an analysis uses, its coverage figures and Trainium's MFU / HFU / MBU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_explorer.analyzers.core.context import TraceFrames
from neuron_explorer.analyzers.perf import devices
from neuron_explorer.analyzers.perf.devices import DeviceSpec
from neuron_explorer.analyzers.perf.op_perf import op_perf


def resolve_spec(frames: TraceFrames, device_spec: DeviceSpec | str | None) -> tuple[DeviceSpec | None, str]:
    """The spec to use and where it came from: ``--device-spec`` (a name or TOML file) or the
    device name in the trace metadata."""
    if isinstance(device_spec, DeviceSpec):
        return device_spec, "given"
    if device_spec:
        return devices.load_spec(device_spec), f"--device-spec {device_spec}"
    names = devices.device_names(frames.metadata)
    by_name = devices.detect(names)
    spec, why = devices.detect_variant(frames.device_properties, by_name)
    if spec is None:
        return None, f"not detected (device names: {', '.join(sorted(set(names))) or 'none'})"
    if by_name is None:
        return spec, why
    named = f"trace device name {next(n for n in names if devices.detect([n]) is by_name)!r}"
    return spec, f"{named}, {why}" if why else named


def perf_tables(
    frames: TraceFrames, device_spec: DeviceSpec | str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(op_perf, op_categories, perf_summary) of one trace; see the package docstring."""
    spec, source = resolve_spec(frames, device_spec)
    host_only = not len(frames.device)
    if host_only and spec is not None and not device_spec:
        # the trace names an accelerator but holds none of its work (kernels not recorded): the
        # ops' host time is their launch, not their math, so no roof of that device bounds it
        source = (
            f"{source}; not used: the trace holds no device events, so op host time is not {spec.name} "
            "kernel time (no roofline; give --device-spec to hold host time against a CPU's peaks)"
        )
        spec = None
    table, cats = op_perf(frames, spec)
    total = float(cats["kernel_time_us"].sum()) if len(cats) else 0.0
    modelled = float((cats["kernel_time_us"] * cats["modelled_pct"].fillna(0) / 100).sum()) if len(cats) else 0.0
    other = float(cats.loc[cats["category"] == "other", "kernel_time_us"].sum()) if len(cats) else 0.0
    summary: dict[str, Any] = {
        "device": spec.to_dict() if spec else None,
        "device_source": source,
        # on a host-only (CPU) trace the ops' own host time stands in for kernel time
        "time_source": "host op self time" if host_only else "device kernels",
        "device_time_us": total,
        "categorized_pct": 100.0 * (total - other) / total if total else None,
        "modelled_pct": 100.0 * modelled / total if total else None,
        "op_groups": len(table),
        "modelled_groups": int(table["gflops"].notna().sum()) if len(table) else 0,
    }
    over = over_roof(table, spec)
    if over:
        summary["over_roof"] = over
    neuron = neuron_utilization(frames, spec)
    if neuron:
        summary["neuron"] = neuron
    return table, cats, summary


#: Above this share of a roof a figure is impossible on the device: the entry (or its variant) is wrong.
OVER_ROOF_PCT = 100.0


def over_roof(table: pd.DataFrame, spec: DeviceSpec | None) -> dict[str, Any] | None:
    """Op groups above 100% of their roof: the device entry is wrong (a variant: A100 40 GB vs
    80 GB, H100 PCIe vs SXM), so none of the roofline figures can be trusted as they stand. The
    renderers flag these rows instead of printing their percentage; rules never judge them."""
    if spec is None or not len(table):
        return None
    over = table[table["pct_of_peak"] > OVER_ROOF_PCT]
    if not len(over):
        return None
    return {
        "groups": len(over),
        "max_pct": float(over["pct_of_peak"].max()),
        "bounds": sorted({str(b) for b in over["bound"].dropna()}),
        "note": (
            f"{len(over)} op group(s) exceed the {spec.name}'s "
            f"{' and '.join(sorted({str(b) for b in over['bound'].dropna()}))} roof, impossible on that device: "
            "the device entry is wrong or a variant of it; give the right peaks with --device-spec (docs/perf.md)"
        ),
    }


def _num(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and np.isfinite(v) else None


def neuron_utilization(frames: TraceFrames, spec: DeviceSpec | None) -> list[dict[str, Any]]:
    """Per NeuronCore: MFU and HFU as the Neuron profile's summary states them, and MBU (HBM
    bytes read + written over the run, against the HBM bandwidth the profile or the spec
    names). Only what the trace metadata already carries; nothing is estimated here."""
    out = []
    props = {int(p.get("id", -1)): p for p in frames.device_properties if isinstance(p, dict)}
    for d in (frames.metadata.get("neuron") or {}).get("devices") or []:
        m = d.get("metrics") or {}
        row: dict[str, Any] = {"device": d.get("device")}
        for key, name in (("mfu_estimated_pct", "mfu_pct"), ("hfu_estimated_pct", "hfu_pct")):
            if _num(m, key) is not None:
                row[name] = _num(m, key)
        total_ns = _num(m, "total_time_ns")
        hbm = sum(v for v in (_num(m, "hbm_read_bytes"), _num(m, "hbm_write_bytes")) if v is not None)
        bw = _num(props.get(int(d.get("device", -1) or 0), {}), "hbm_ddr_bandwidth_bytes_per_s")
        if bw is None and spec is not None:
            bw = spec.mem_bw
        if total_ns and hbm and bw:
            row["mbu_pct"] = 100.0 * hbm / (total_ns / 1e9) / bw
        if len(row) > 1:
            out.append(row)
    return out
