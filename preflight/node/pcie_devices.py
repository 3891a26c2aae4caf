"""Each GPU and network card on the node's PCI bus (``/sys/bus/pci/devices/ADDR``): the NUMA node it
hangs off (``numa_node``, -1 where the firmware gives none) and its PCIe error counts since boot, as
the kernel's AER driver keeps them: ``aer_dev_correctable``, ``aer_dev_nonfatal`` and
``aer_dev_fatal`` (Linux 4.19 and later; drivers/pci/pcie/aer.c writes one ``NAME COUNT`` line per
error type, then ``TOTAL_ERR_COR``, ``TOTAL_ERR_NONFATAL`` or ``TOTAL_ERR_FATAL``). A device
without the files (no AER capability, an older kernel, a virtual function) has no counts (None).
Virtual functions (they have a ``physfn`` link) are left out: they share their card's link. A file
whose read fails with an I/O error (a device that no longer answers) is named in the device's
``errors`` (``{"aer_dev_fatal": "Input/output error"}``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from preflight.node.gathering import Sink, read_text
from preflight.node.sysfs_counters import read_sysfs

if TYPE_CHECKING:
    from typing import Any

    JsonDict = dict[str, Any]

SYS_BUS_PCI = "/sys/bus/pci/devices"
NVIDIA = "0x10de"
# PCI classes (base class and subclass) of the devices read: NVIDIA's VGA and 3D controllers (the
# GPUs), Ethernet and InfiniBand controllers (the NICs and HCAs).
GPU_CLASSES = ("0x0300", "0x0302")
NIC_CLASSES = ("0x0200", "0x0207")
AER_FILES = (
    ("correctable", "aer_dev_correctable"),
    ("nonfatal", "aer_dev_nonfatal"),
    ("fatal", "aer_dev_fatal"),
)


def parse_aer(text: str) -> int | None:
    """The total of one ``aer_dev_*`` file: its ``TOTAL_ERR_*`` line, else the sum of its counts;
    None for text with no count in it."""
    counts = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            continue
        if parts[0].startswith("TOTAL_ERR_"):
            return int(parts[1])
        counts.append(int(parts[1]))
    return sum(counts) if counts else None


def device_kind(pci_class: str | None, vendor: str | None) -> str | None:
    """``gpu`` for an NVIDIA display controller, ``nic`` for an Ethernet or InfiniBand controller."""
    prefix = (pci_class or "").strip().lower()[:6]
    if prefix in GPU_CLASSES and (vendor or "").strip().lower() == NVIDIA:
        return "gpu"
    return "nic" if prefix in NIC_CLASSES else None


def pci_devices(root: str = SYS_BUS_PCI) -> list[JsonDict]:
    """Each GPU and NIC by PCI address: its kind, NUMA node, and correctable, non-fatal and fatal
    error counts."""
    try:
        addresses = sorted(os.listdir(root))
    except OSError:
        return []
    found = []
    for address in addresses:
        device = os.path.join(root, address)
        kind = device_kind(
            read_text(os.path.join(device, "class")), read_text(os.path.join(device, "vendor"))
        )
        if kind is None or os.path.exists(os.path.join(device, "physfn")):
            continue
        errors: dict[str, str] = {}
        numa = (read_sysfs(os.path.join(device, "numa_node"), errors, "numa_node") or "").strip()
        counts: JsonDict = {"numa_node": int(numa) if numa.lstrip("-").isdigit() else None}
        for key, name in AER_FILES:
            text = read_sysfs(os.path.join(device, name), errors, name)
            counts[key] = parse_aer(text) if text is not None else None
        found.append({"address": address, "kind": kind, **counts})
        if errors:
            found[-1]["errors"] = errors
    return found


def gather_pci_devices(sink: Sink) -> None:
    sink.facts["pci_devices"] = pci_devices()
