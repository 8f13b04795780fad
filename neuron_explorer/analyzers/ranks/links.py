"""The peak bandwidth of the links a collective can run over, per device and instance type.

A trace does not record its interconnect, but it records the device model (Kineto
``deviceProperties`` name) and, for Trainium, the instance type; the links follow from those.
Figures are from the vendors' datasheets (docs/rules.md, "Link peaks", cites each one) and are
given as NCCL-tests' *bus bandwidth* is meant to be compared: the bandwidth of one rank's link
in one direction (NCCL-tests ``doc/PERFORMANCE.md``: the bus bandwidth is made comparable with
the hardware's peak whatever the number of ranks). So an NVLink figure
quoted as "900 GB/s" (both directions, all links of one H100) is 450 GB/s here.

A group of ranks that fits in one node (its size at most the node's GPUs) runs over the
intra-node link; a larger one is held to the network's peak, which is known only from the
instance type (EFA on AWS); without it the network peak is unknown and ``peak_for`` says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from neuron_explorer.analyzers.core.hardware import Hardware


@dataclass(frozen=True)
class LinkPeak:
    """One link: its name, its peak bus bandwidth (GB/s, per rank and direction) and where the
    figure comes from."""

    link: str
    busbw_gbps: float
    source: str
    scope: str = "intra-node"  # or "network"


#: Intra-node links by device model (regex over the ``deviceProperties`` name), with the GPUs
#: of one node (HGX/OAM boards: 8). First match wins: PCIe variants before the NVLink parts.
INTRA_NODE: tuple[tuple[str, int, LinkPeak], ...] = (
    (r"V100.*PCI|T4\b", 8, LinkPeak("PCIe", 16.0, "PCIe 3.0 x16: 15.8 GB/s per direction (PCI-SIG)")),
    (r"A100.*PCI|L4\b|L40|A10\b", 8,
     LinkPeak("PCIe", 32.0, "PCIe 4.0 x16: 31.5 GB/s per direction (PCI-SIG); PCIe parts have no NVLink between all GPUs")),
    (r"V100", 8, LinkPeak("NVLink 2", 150.0, "NVIDIA V100 datasheet: NVLink 300 GB/s (both directions)")),
    (r"A100|A800", 8, LinkPeak("NVLink 3", 300.0, "NVIDIA A100 datasheet: NVLink 600 GB/s (both directions)")),
    (r"H100.*PCI", 8, LinkPeak("PCIe", 64.0, "PCIe 5.0 x16: 63 GB/s per direction (PCI-SIG)")),
    (r"H100|H200|H800|H20\b", 8, LinkPeak("NVLink 4", 450.0, "NVIDIA H100/H200 datasheet: NVLink 900 GB/s (both directions)")),
    (r"B200|B100|GB200|B300", 8, LinkPeak("NVLink 5", 900.0, "NVIDIA Blackwell datasheet: NVLink 1.8 TB/s (both directions)")),
    (r"MI300|MI325", 8, LinkPeak("xGMI (Infinity Fabric)", 448.0,
     "AMD Instinct MI300X datasheet: 896 GB/s aggregate peer-to-peer Infinity Fabric (both directions, 7 links)")),
    (r"MI250|MI210", 8, LinkPeak("xGMI (Infinity Fabric)", 400.0,
     "AMD Instinct MI250X datasheet: up to 800 GB/s aggregate Infinity Fabric (both directions)")),
)  # fmt: skip

#: Network (EFA) peaks per node by instance-type prefix: the node's total, as an inter-node
#: NCCL-tests bus bandwidth approaches it (each rank's ring traffic leaves through all NICs).
NETWORK: tuple[tuple[str, LinkPeak], ...] = (
    ("p5", LinkPeak("EFA", 400.0, "AWS p5.48xlarge: 3200 Gbps EFA per node", "network")),
    ("p4d", LinkPeak("EFA", 50.0, "AWS p4d.24xlarge: 400 Gbps EFA per node", "network")),
    ("p4de", LinkPeak("EFA", 50.0, "AWS p4de.24xlarge: 400 Gbps EFA per node", "network")),
    ("trn1n", LinkPeak("EFA", 200.0, "AWS Trn1n.32xlarge: 1600 Gbps EFA per node (Neuron docs)", "network")),
    ("trn1", LinkPeak("EFA", 100.0, "AWS Trn1.32xlarge: 800 Gbps EFA per node (Neuron docs)", "network")),
)


def intra_node_link(hw: Hardware) -> tuple[LinkPeak, int] | None:
    """The intra-node link of this device model and the GPUs of a node, or None (unknown model)."""
    if not hw.name or hw.device_type not in ("cuda", "hip"):
        return None
    for pattern, per_node, peak in INTRA_NODE:
        if re.search(pattern, hw.name):
            return peak, per_node
    return None


def network_link(instance_type: str | None) -> LinkPeak | None:
    """The network peak of an instance type (``p5.48xlarge``, ``trn1.32xlarge``), or None."""
    if not instance_type:
        return None
    t = instance_type.lower()
    for prefix, peak in sorted(NETWORK, key=lambda x: -len(x[0])):  # trn1n before trn1
        if t.startswith(prefix):
            return peak
    return None


def peak_for(hw: Hardware, group_size: int, instance_type: str | None = None) -> tuple[LinkPeak | None, str]:
    """The link a group of ``group_size`` ranks runs over and why; the peak is None with the
    reason when the trace does not say enough (an unknown device, a multi-node group without
    an instance type)."""
    intra = intra_node_link(hw)
    if intra is not None:
        peak, per_node = intra
        if group_size <= per_node:
            return peak, f"intra-node: a group of {group_size} ranks fits in one node of {per_node} GPUs ({hw.name})"
        net = network_link(instance_type)
        if net is not None:
            return net, f"network: a group of {group_size} ranks spans nodes of {per_node} GPUs ({instance_type})"
        return None, (
            f"a group of {group_size} ranks spans nodes of {per_node} GPUs and the trace does not name the network "
            "(instance type)"
        )
    net = network_link(instance_type)
    if net is not None:
        return net, f"network peak of {instance_type}"
    return None, f"the trace's device ({hw.name or hw.device_type}) is not in the link table"


def instance_type(metadata: dict) -> str | None:
    """The instance type a trace names (``instance_type``, or a Neuron profile's), else None."""
    neuron = metadata.get("neuron")
    value = metadata.get("instance_type") or (neuron.get("instance_type") if isinstance(neuron, dict) else None)
    return str(value) if value else None
