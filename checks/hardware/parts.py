"""The parts a ``hardware`` finding is about, as the history store reads them
(``Check.parts_named``): the GPUs it names by index (``gpus``), the GPU an XID names by its PCI
address, and the GPUs among the devices that counted PCIe errors (``devices``).
"""

from __future__ import annotations

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
    return {host: refs} if refs else {}
