"""Where each node's GPUs and NICs sit, against the nodes of its kind: the NUMA node each hangs off
(``/sys/bus/pci/devices/ADDR/numa_node``). AzNHC's ``check_hw_topology`` holds a node's PCI devices
per NUMA node against a topology file per machine type; here the other nodes of the same kind
(the same CPU and GPU models, :func:`checks.hardware.resources.kind_of`) are the file.

A node whose layout differs from the layout most of its kind have (a GPU or NIC in another slot, a
BIOS with other NUMA settings: sub-NUMA clustering, NPS) is named: NCCL plans its rings and its
GPU-NIC pairs from this layout, so the node moves data over other paths than its peers. Where no
layout has a majority (two nodes that differ), every node of the kind is named in one finding. A
virtual machine whose firmware gives no NUMA node (-1) on every device is alike with its peers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from checks.hardware.details import PcieNumaLayout
from checks.hardware.pcie_errors import KIND_TEXT
from checks.hardware.resources import kinds_of
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.nodeset import fold, minority

NAME = "hardware"
Layout = tuple[tuple[str, int, int], ...]  # (kind, NUMA node, devices), sorted


def layout_of(node: NodeFacts) -> Layout:
    """How many GPUs and NICs hang off each NUMA node (-1: none given)."""
    counts: Counter[tuple[str, int]] = Counter()
    for device in node.pci_devices:
        numa = device.get("numa_node")
        counts[(str(device["kind"]), numa if isinstance(numa, int) else -1)] += 1
    return tuple(sorted((kind, numa, count) for (kind, numa), count in counts.items()))


def layout_text(layout: Layout) -> str:
    """``GPUs on NUMA 0 (4), 1 (4); NICs on NUMA 0 (5), 1 (4)``."""
    parts = []
    for kind in KIND_TEXT:
        where = [f"{numa} ({count})" for k, numa, count in layout if k == kind]
        if where:
            parts.append(f"{KIND_TEXT[kind]}s on NUMA {', '.join(where)}")
    return "; ".join(parts) or "no GPU or NIC"


def judge_pcie_topology(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """A warning per node whose GPUs and NICs sit on other NUMA nodes than its kind's majority's."""
    results = []
    for hosts in kinds_of(nodes).values():
        layouts = {h: layout for h in hosts if (layout := layout_of(nodes[h]))}
        if len(layouts) < 2:
            continue
        usual, odd = minority(layouts)
        if usual is None and odd:
            shown = "; ".join(f"{fold(h for h in odd if layouts[h] == layout)}: {layout_text(layout)}"
                              for layout in dict.fromkeys(layouts[h] for h in odd))  # fmt: skip
            details: PcieNumaLayout = {"item": "pcie_numa_layout", "nodes": sorted(odd), "usual": None}
            summary = f"{fold(odd)} place their GPUs and NICs differently, no majority: {shown}"
            results.append(CheckResult(NAME, "warn", summary, tuple(odd), details))
            continue
        for host in odd:
            peers = fold(h for h in layouts if layouts[h] == usual)
            details = {"item": "pcie_numa_layout", "nodes": [host], "usual": layout_text(usual or ())}
            summary = f"{host}: {layout_text(layouts[host])}, where {peers} have {layout_text(usual or ())}"
            results.append(CheckResult(NAME, "warn", summary, (host,), details))
    return results
