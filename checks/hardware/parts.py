"""The parts a ``hardware`` finding is about, as the history store reads them
(``Check.parts_named``): the GPUs it names by index (``gpus``), the GPU an XID names by its PCI
address, the GPUs among the devices that counted PCIe errors (``devices``), and the InfiniBand/RoCE
ports a port finding names (by ``mlx5_2 port 1``, placed as the facts place them: ``mlx5_2/1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from checks.hardware.ib_ports import port_slot
from preflight.facts_values import records
from preflight.measures import PartRef
from preflight.model import CheckResult


def parts_named(result: CheckResult) -> dict[str, list[PartRef]]:
    """The node's parts the finding names, by the node's name; none for a finding about no one
    node (a layout, the fabric's ports unused) or the audit's pass (its ``gpus`` is a count)."""
    details = result.details
    host = details.get("node")
    if not isinstance(host, str):
        return {}
    gpus = details.get("gpus")
    refs = [PartRef("gpu", slot=str(i)) for i in gpus if isinstance(i, int)] if isinstance(gpus, list) else []
    if details.get("item") == "xid":
        refs += [PartRef("gpu", pci=str(e["pci"])) for e in records(details.get("events")) if e.get("pci")]
    refs += [
        PartRef("gpu", pci=device["pci"])
        for device in records(details.get("devices"))
        if device.get("kind") == "gpu" and isinstance(device.get("pci"), str)
    ]
    refs += [PartRef("hca", slot=slot) for label in _port_labels(details) if (slot := port_slot(label))]
    return {host: refs} if refs else {}


# The port findings and where each keeps the ports it names: a list of labels, records with a
# ``port`` label, or labels as the keys of a table.
_PORT_LABELS = ("ib_port_down", "ib_rate", "roce_v2_missing")
_PORT_RECORDS = ("ib_pkeys", "roce_gid_index")
_PORT_KEYS = ("ib_counters",)


def _port_labels(details: Mapping[str, Any]) -> list[str]:
    """The labels of the ports a port finding names (``mlx5_2 port 1``); none for another finding."""
    item, ports = details.get("item"), details.get("ports")
    if item in _PORT_LABELS and isinstance(ports, list):
        return [label for label in ports if isinstance(label, str)]
    if item in _PORT_RECORDS:
        return [str(record["port"]) for record in records(ports) if isinstance(record.get("port"), str)]
    counters = details.get("counters")
    if item in _PORT_KEYS and isinstance(counters, Mapping):
        return [str(label) for label in counters]
    return []
