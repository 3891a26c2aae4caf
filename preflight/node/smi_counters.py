"""A GPU's link error counters from nvidia-smi's text reports, where NVML is not usable: the NVLink
errors of ``nvidia-smi nvlink --errorcounters`` summed over the GPU's links, and the PCIe replays
of ``nvidia-smi -q -d PCIE``, as the GPU's ``link_errors``: the counters of
:data:`LINK_ERROR_KEYS`, which NVML's path reads as field values (:mod:`preflight.node.nvml`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    JsonDict = dict[str, Any]

# The two reports, one nvidia-smi command each for all GPUs.
NVLINK_ERRORS_ARGS = ("nvlink", "--errorcounters")
PCIE_ARGS = ("-q", "-d", "PCIE")
# The counters of a GPU's ``link_errors``, on both paths: counted since the driver loaded, the
# NVLink ones summed over the GPU's links.
LINK_ERROR_KEYS = ("pcie_replays", "nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay", "nvlink_recovery")
# Each counter line of ``nvlink --errorcounters`` (lowercased) and the key it adds to. Drivers of
# the Volta to Hopper eras print "CRC Errors", the flow-control (flit) CRC count that NVML names
# NVML_NVLINK_ERROR_DL_CRC_FLIT; older ones printed nvml.h's own words for each of the four.
# Blackwell-era drivers print other counters (packet, recovery event and BER counts), none of these.
NVLINK_ERROR_LINES = {
    "replay errors": "nvlink_replay",
    "recovery errors": "nvlink_recovery",
    "crc errors": "nvlink_crc_flit",
    "data link transmit replay error counter": "nvlink_replay",
    "data link transmit recovery error counter": "nvlink_recovery",
    "data link receive flow control digit crc error counter": "nvlink_crc_flit",
    "data link receive data crc error counter": "nvlink_crc_data",
}
_GPU_INDEX_RE = re.compile(r"^GPU (\d+): ")
_COUNTER_RE = re.compile(r"^\s+Link \d+: (.+?)\s*:\s*(\d+)\s*$")
# ``-q``'s heading of a GPU ("GPU 00000000:18:00.0") and its replay count; older drivers wrote
# "Replays since reset".
_GPU_BUS_RE = re.compile(r"^GPU ([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f])\s*$")
_REPLAYS_RE = re.compile(r"^\s+Replays Since Reset\s*:\s*(\d+)\s*$", re.IGNORECASE)


def nvlink_errors_from_smi(text: str) -> dict[int, dict[str, int]]:
    """``nvidia-smi nvlink --errorcounters`` by GPU index: each counter it prints summed over the
    GPU's links. A GPU that prints none of :data:`NVLINK_ERROR_LINES` (no NVLink, or a driver that
    counts other things) has no entry."""
    found: dict[int, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in text.splitlines():
        if gpu := _GPU_INDEX_RE.match(line):
            current = found.setdefault(int(gpu.group(1)), {})
        elif current is not None and (counter := _COUNTER_RE.match(line)):
            key = NVLINK_ERROR_LINES.get(counter.group(1).lower())
            if key is not None:
                current[key] = current.get(key, 0) + int(counter.group(2))
    return {index: counts for index, counts in found.items() if counts}


def bus_key(bus_id: str) -> str:
    """A PCI bus id as both reports can be matched on: nvidia-smi writes an 8-digit domain
    ("00000000:18:00.0"), other tools a 4-digit one."""
    return bus_id.strip().lower()[-12:]


def pcie_replays_from_smi(text: str) -> dict[str, int]:
    """``nvidia-smi -q`` (or ``-q -d PCIE``) by bus id (:func:`bus_key`): each GPU's PCIe replays
    since the driver loaded ("Replays Since Reset")."""
    found: dict[str, int] = {}
    bus: str | None = None
    for line in text.splitlines():
        if heading := _GPU_BUS_RE.match(line):
            bus = bus_key(heading.group(1))
        elif bus is not None and (replays := _REPLAYS_RE.match(line)):
            found[bus] = int(replays.group(1))
    return found


def add_link_errors(gpus: Iterable[JsonDict], nvlink_text: str | None, pcie_text: str | None) -> None:
    """Each GPU's ``link_errors`` from the two reports (None: that report failed, or was not asked):
    the NVLink counts of its index, the replays of its bus id, each None where its report does not
    give it; None altogether where neither gives any (a report that failed, a GPU that answers
    nothing), which is not a count of zero."""
    nvlink = nvlink_errors_from_smi(nvlink_text) if nvlink_text is not None else {}
    replays = pcie_replays_from_smi(pcie_text) if pcie_text is not None else {}
    for gpu in gpus:
        index, bus = gpu.get("index"), gpu.get("pci_bus_id")
        counts = dict(nvlink.get(index, {})) if isinstance(index, int) else {}
        if isinstance(bus, str) and bus_key(bus) in replays:
            counts["pcie_replays"] = replays[bus_key(bus)]
        gpu["link_errors"] = {key: counts.get(key) for key in LINK_ERROR_KEYS} if counts else None
