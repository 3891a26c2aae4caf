"""The PCIe errors each GPU and network card counted since boot (the kernel's AER counters,
:mod:`preflight.node.pcie_devices`), against the like devices of the other nodes: DCGM's ``pcie``
plugin, NVSentinel's PCIe watch and ClusterMAX's "PCIe errors via NVML and DCGM counters" ask for
them.

A count since boot says what happened, not what happens: a link that retrained once at boot counts
a few correctable errors forever. So a device is named in a note, and only where it stands out from
its like devices (GPUs with GPUs, NICs with NICs, across the run): non-fatal uncorrectable errors
where the like devices' median is none; correctable errors at least :data:`CORRECTABLE_FLOOR` and
:data:`CORRECTABLE_RATIO` times the like devices' median. A fatal uncorrectable error on a GPU's or
NIC's link fails its node whatever the others counted: the link went down. The kernel log says the
same errors with their lines (``pcie_aer``, :mod:`checks.hardware.kernel_errors`): a class the log's
finding already names on a device is left out here. What the link does under the job's traffic is
the all-reduce's to judge.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Mapping
from typing import Any

from checks.hardware.details import PcieDevice, PcieErrors
from checks.hardware.kernel_log import gpus_by_pci
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.node.hardware import pci_key

NAME = "hardware"
CORRECTABLE_FLOOR = 100
CORRECTABLE_RATIO = 10.0
KIND_TEXT = {"gpu": "GPU", "nic": "NIC"}


def _count(device: Mapping[str, Any], *keys: str) -> int:
    return sum(v for k in keys if isinstance(v := device.get(k), int))


def _medians(nodes: Mapping[str, NodeFacts]) -> dict[tuple[str, str], float]:
    """(kind, "uncorrectable" or "correctable") -> the median count over every such device of the run."""
    counts: dict[tuple[str, str], list[int]] = {}
    for node in nodes.values():
        for device in node.pci_devices:
            kind = str(device["kind"])
            counts.setdefault((kind, "uncorrectable"), []).append(_count(device, "nonfatal", "fatal"))
            counts.setdefault((kind, "correctable"), []).append(_count(device, "correctable"))
    return {key: statistics.median(values) for key, values in counts.items()}


def stands_out(count: int, typical: float) -> bool:
    """Whether an error count since boot stands out from its like devices': at least
    :data:`CORRECTABLE_FLOOR` and :data:`CORRECTABLE_RATIO` times their median."""
    return count >= CORRECTABLE_FLOOR and count >= CORRECTABLE_RATIO * max(typical, 1)


def _odd(
    device: Mapping[str, Any], medians: Mapping[tuple[str, str], float], logged: Collection[str]
) -> tuple[list[str], bool]:
    """What the device counted that stands out, leaving out the classes the kernel log's finding
    names (``logged``: ``fatal``, ``nonfatal``, ``corrected``); and whether it counted fatal errors
    the log does not name."""
    kind = str(device["kind"])
    found = []
    fatal = 0 if "fatal" in logged else _count(device, "fatal")
    nonfatal = 0 if "nonfatal" in logged else _count(device, "nonfatal")
    if fatal or (nonfatal and medians[(kind, "uncorrectable")] == 0):
        parts = [f"{fatal} fatal" if fatal else "", f"{nonfatal} non-fatal" if nonfatal else ""]
        found.append(" and ".join(p for p in parts if p) + " uncorrectable")
    correctable = 0 if "corrected" in logged else _count(device, "correctable")
    typical = medians[(kind, "correctable")]
    if stands_out(correctable, typical):
        found.append(f"{correctable} correctable (like devices' median {typical:g})")
    return found, bool(fatal)


def _finding(host: str, rows: list[PcieDevice], fatal: bool) -> CheckResult:
    shown = "; ".join(f"{row['device']}: {row['errors']}" for row in rows)
    details: PcieErrors = {"item": "pcie_errors", "node": host, "devices": rows}
    summary = f"{host}: PCIe errors since boot: {shown}"
    if fatal:
        return CheckResult(NAME, "fail", summary, (host,), dict(details))
    return CheckResult.note(NAME, summary, (host,), dict(details))


def judge_pcie_errors(
    nodes: Mapping[str, NodeFacts], logged: Mapping[str, Collection[tuple[str, str]]] | None = None
) -> list[CheckResult]:
    """Per node, a failure for its GPUs and NICs that counted fatal errors, and a note for those
    that counted errors their like devices did not; ``logged``: by node, the (PCI function, class)
    the kernel log's findings already name."""
    medians = _medians(nodes)
    results = []
    for host, node in nodes.items():
        gpus = gpus_by_pci(node)
        named = (logged or {}).get(host, ())
        rows: dict[bool, list[PcieDevice]] = {True: [], False: []}
        for device in node.pci_devices:
            address = str(device.get("address", ""))
            odd, fatal = _odd(device, medians, {c for pci, c in named if pci == address.lower()})
            if odd:
                where = gpus.get(pci_key(address)) or KIND_TEXT[str(device["kind"])]
                row: PcieDevice = {
                    "device": f"{where} ({address})",
                    "errors": ", ".join(odd),
                    "kind": str(device["kind"]),
                    "pci": address,
                }
                rows[fatal].append(row)
        results += [_finding(host, rows[fatal], fatal) for fatal in (True, False) if rows[fatal]]
    return results
