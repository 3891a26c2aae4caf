"""The kernel log's hardware errors beyond XIDs, as each node's probe read and folded them
(:mod:`preflight.node.kernel_errors`, facts ``hardware.xid``: ``pcie_events``,
``machine_check_events``, ``block_io_events``): PCIe AER reports, machine checks and memory errors,
and block devices' I/O errors. One finding per node and kind, naming the device (and its GPU or
NIC), the error class, the count and the last line.

PCIe (``pcie_aer``). The kernel's AER driver (drivers/pci/pcie/aer.c) prints, on the root port that
received the error message, ``AER: [Multiple ]Corrected|Uncorrected (Non-Fatal)|Uncorrected (Fatal)
error received: <source>`` (older kernels ``id=00e5``; Linux 6.x ``Correctable``/``Uncorrectable
... error message received from <source>``), then for each device that erred its own ``PCIe Bus
Error: severity=..., type=<layer>, (<agent>)`` line with the device's IDs and the error bits
(``[14] CmpltTO``). An error is the device's whose ``PCIe Bus Error`` line it is, else the source's
the port names. A port's own error on the link to a GPU or NIC is that GPU's or NIC's: the devices
the recovery reached below the port without a handler (``nvidia 0000:03:00.0: AER: can't recover
(no error_detected callback)``, older ``device has no AER-aware driver``) say which, and so does
the bus below a port in a firmware-first report (APEI GHES, ``{N}[Hardware Error]: section_type:
PCIe error``, ``device_id``, ``secondary_bus``; ``fatal`` is fatal there, ``recoverable``
non-fatal). A fatal uncorrected error on a GPU's or NIC's link fails the node, a non-fatal one
warns; elsewhere (a port above a disk, a chipset device) a fatal one warns and a non-fatal one is a
note. Corrected errors are retried by the link: on a GPU's or NIC's link a note, elsewhere nothing,
unless the node's count stands out from the other nodes' (:func:`stands_out`): then a warning, or a
note for another device. The link's own counters since boot (``pcie_errors``) say the same errors
once: a class the log already names on a device is left out of the counter finding.

Machine checks and memory errors (``machine_check``). The x86 machine-check handler's
``[Hardware Error]: CPU 3: Machine Check[ Exception]: 0 Bank 5: <status>`` (bit 61 of the bank's
status set: not corrected), AMD's decoder ``[Hardware Error]: CPU:0 (19:1:1) MC15_STATUS[...|CE|...]``
(``UE`` or ``Deferred``: not corrected), EDAC's ``EDAC MC0: 1 CE|UE <what> on <DIMM label> (...)``,
``mce: Uncorrected hardware memory error in user-access``, and a GHES record's non-PCIe section
(where its DIMM location or FRU text says). ``Machine check events logged`` says events went to the
log daemon (mcelog, rasdaemon) undecoded: counted, never failing. A decoder's lines around an error
(``EDAC skx MC0: HANDLING MCE MEMORY ERROR``, ``EDAC sbridge MC1: CPU 1: Machine Check Event: ...``)
are counted by its EDAC line. An uncorrected error fails the node; corrected ones are a note, a
warning where the node's count stands out from the other nodes'. Thermal lines (``mce: CPU2: Core
temperature above threshold``) and boot lines (``EDAC MC: Ver: 3.0.0``, ``mce: CPU0: Thermal
monitoring enabled``) are neither.

Block I/O (``block_io_errors``). ``I/O error, dev sda, sector ...`` (``blk_update_request: ``,
``print_req_error: `` before Linux 5.16; ``critical medium``, ``critical target`` ... for the other
failed statuses), ``Buffer I/O error on dev sdb1, logical block ...``, ``nvme nvme0: I/O ... QID 3
timeout, aborting|reset controller``, ``nvme nvme0: controller is down`` or ``Removing after probe
failure``, ``EXT4-fs error (device ...)`` and ``XFS (...): metadata|log I/O error``: a warning naming
each disk (a partition is its disk's) and its counts; the job may read its data or write its
checkpoints there. A VM's empty virtual CD-ROM or floppy (``sr0``, ``fd0``) and loop devices are left
out by the probe.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checks.hardware.details import (
    AerDevice,
    BlockIoDisk,
    BlockIoErrors,
    MachineCheck,
    MachineCheckEvent,
    PcieAer,
)
from checks.hardware.nic_log import BOOT_LOGS
from checks.hardware.pcie_errors import stands_out
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.status import Status

NAME = "hardware"
PCIE_ITEM, MACHINE_ITEM, BLOCK_ITEM = "pcie_aer", "machine_check", "block_io_errors"
# Worst first.
PCIE_ORDER = ("fatal", "nonfatal", "corrected")
PCIE_TEXT = {"fatal": "fatal uncorrected", "nonfatal": "non-fatal uncorrected", "corrected": "corrected"}
MACHINE_ORDER = ("uncorrected", "corrected", "unknown")
MACHINE_WHAT = {"edac": "memory error", "mce": "machine check", "ghes": "firmware-reported hardware error"}
BLOCK_TEXT = {
    "io_error": "I/O error",
    "buffer_io_error": "buffer I/O error",
    "nvme_timeout": "NVMe command timeout",
    "nvme_down": "NVMe controller down",
    "fs_error": "filesystem error",
}
LINKED = ("gpu", "nic")
# Shown in a summary; the details list them all.
SHOWN = 3
_PARTITION = re.compile(r"^((?:sd|vd|xvd|hd)[a-z]+)\d+$|^((?:nvme\d+n\d+|mmcblk\d+))p\d+$")
Reported = dict[str, set[tuple[str, str]]]


def pci_function(address: str) -> str:
    """A PCI function's address as the kernel writes it, lower case: "0000:3b:00.0" from
    nvidia-smi's "00000000:3B:00.0" (function 0 where none is written)."""
    head, _, function = address.strip().lower().removeprefix("pci:").partition(".")
    parts = head.split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts) + "." + (function or "0")


@dataclass(frozen=True)
class Part:
    """What a PCI function is on its node: ``gpu`` or ``nic`` and how a summary names it."""

    kind: str
    label: str


def parts_by_function(node: NodeFacts) -> dict[str, Part]:
    """The node's GPUs and NICs by PCI function: its PCI listing, nvidia-smi's GPUs ("GPU 3 (serial
    1654...)") and the RDMA devices its NIC driver's lines or sysfs named ("NIC mlx5_2")."""
    parts = {
        pci_function(str(d["address"])): Part(str(d["kind"]), str(d["kind"]).upper())
        for d in node.pci_devices
    }
    for gpu in node.gpus or []:
        address = gpu.raw.get("pci_bus_id")
        if isinstance(address, str) and address:
            serial = f" (serial {gpu.serial})" if gpu.serial else ""
            parts[pci_function(address)] = Part(
                "gpu", f"GPU {gpu.index if gpu.index is not None else '?'}{serial}"
            )
    for event in _log(node).get("nic_events") or []:
        if isinstance(event, Mapping) and event.get("pci") and event.get("hca"):
            parts[pci_function(str(event["pci"]))] = Part("nic", f"NIC {event['hca']}")
    return parts


def _log(node: NodeFacts) -> Mapping[str, Any]:
    found = node.hardware.get("xid")
    return found if isinstance(found, Mapping) and found.get("readable") else {}


def _records(log: Mapping[str, Any], key: str, *fields: str) -> list[Mapping[str, Any]]:
    """The log's ``key`` entries that carry ``fields`` as text, with a count."""
    return [
        e for e in log.get(key) or []
        if isinstance(e, Mapping) and all(isinstance(e.get(f), str) for f in fields)
        and isinstance(e.get("count"), int)
    ]  # fmt: skip


def _span(log: Mapping[str, Any]) -> str:
    return " since boot" if log.get("source") in BOOT_LOGS else ""


def _median_by_node(counts: Mapping[str, Mapping[str, int]], kind: str) -> float:
    return statistics.median(c.get(kind, 0) for c in counts.values()) if counts else 0.0


@dataclass(frozen=True)
class Device:
    """One PCI function's errors in one node's log: what it is, its counts by class, and the rest."""

    pci: str
    kind: str  # gpu, nic, other: the link's
    where: str  # "GPU 0 (serial 1654...) (0000:18:00.0)", "0000:00:03.0, the port above GPU 0 ..."
    label: str | None
    counts: Mapping[str, int]
    errors: tuple[str, ...]
    recovery: str | None
    line: str

    @property
    def severity(self) -> str:
        return next(s for s in PCIE_ORDER if self.counts.get(s))

    def status(self, stands: bool) -> Status | None:
        """fail, warn, pass for a note, or None for nothing to say."""
        linked = self.kind in LINKED
        if self.severity == "fatal":
            return "fail" if linked else "warn"
        if self.severity == "nonfatal":
            return "warn" if linked else "pass"
        if stands:
            return "warn" if linked else "pass"
        return "pass" if linked else None

    @property
    def text(self) -> str:
        counted = " and ".join(f"{self.counts[s]} {PCIE_TEXT[s]}" for s in PCIE_ORDER if self.counts.get(s))
        plural = "s" if sum(self.counts.values()) > 1 else ""
        detail = ", ".join(self.errors)
        detail = "; ".join(d for d in (detail, f"recovery {self.recovery}" if self.recovery else "") if d)
        return f"{counted} PCIe error{plural} on {self.where}" + (f" ({detail})" if detail else "")


def _where(
    pci: str, events: Sequence[Mapping[str, Any]], parts: Mapping[str, Part]
) -> tuple[str, str, str | None]:
    """(the link's kind, how a summary names the function, its GPU or NIC label)."""
    hca = next((str(e["hca"]) for e in events if e.get("hca")), None)
    if pci in parts:
        label = f"NIC {hca}" if hca and parts[pci].label == "NIC" else parts[pci].label
        return parts[pci].kind, f"{label} ({pci})", label
    same = next((p for f, p in parts.items() if f[:-2] == pci[:-2]), None)
    if same:
        return same.kind, f"{same.label}, function {pci[-1]} ({pci})", same.label
    below = [a for e in events for a in e.get("affected") or [] if isinstance(a, str)]
    buses = {e["secondary_bus"] for e in events if isinstance(e.get("secondary_bus"), str)}
    linked = [p for f, p in parts.items() if f in below or f[:7] in buses]
    if linked:
        kind = "gpu" if any(p.kind == "gpu" for p in linked) else "nic"
        labels = ", ".join(dict.fromkeys(p.label for p in linked))
        return kind, f"{pci}, the port above {labels}", labels
    if hca:
        return "nic", f"NIC {hca} ({pci})", f"NIC {hca}"
    ids = next((f" [{e['id']}]" for e in events if isinstance(e.get("id"), str)), "")
    return "other", f"{pci}{ids}", None


def _devices(node: NodeFacts) -> list[Device]:
    """The node's PCIe errors by device, worst first, then in the order last logged."""
    by_pci: dict[str, list[Mapping[str, Any]]] = {}
    for event in _records(_log(node), "pcie_events", "pci", "severity", "line"):
        by_pci.setdefault(pci_function(str(event["pci"])), []).append(event)
    parts = parts_by_function(node)
    devices = []
    for pci, events in by_pci.items():
        counts = Counter({str(e["severity"]): int(e["count"]) for e in events if e["severity"] in PCIE_TEXT})
        if not counts:
            continue
        kind, where, label = _where(pci, events, parts)
        worst = next(s for s in PCIE_ORDER if counts.get(s))
        last = [e for e in events if e["severity"] == worst][-1]
        errors = tuple(dict.fromkeys(str(x) for e in events for x in e.get("errors") or []))
        recovery = next((str(e["recovery"]) for e in events if e.get("recovery")), None)
        devices.append(Device(pci, kind, where, label, counts, errors, recovery, str(last["line"])))
    return sorted(devices, key=lambda d: PCIE_ORDER.index(d.severity))


def _device_details(device: Device, status: Status) -> AerDevice:
    return {
        "pci": device.pci,
        "device": device.label,
        "kind": device.kind,
        "severity": device.severity,
        "counts": dict(device.counts),
        "errors": list(device.errors),
        "status": status,
        "line": device.line,
    }


def _summary(host: str, texts: Sequence[str], log: Mapping[str, Any], line: str) -> str:
    more = f" (+{len(texts) - SHOWN} more)" if len(texts) > SHOWN else ""
    return f"{host}: {'; '.join(texts[:SHOWN])}{more} in the kernel log{_span(log)}; last: {line}"


def _finding(host: str, status: Status, summary: str, details: Mapping[str, Any]) -> CheckResult:
    if status == "pass":
        return CheckResult.note(NAME, summary, (host,), details)
    return CheckResult(NAME, status, summary, (host,), details)


def _worst(statuses: Sequence[Status]) -> Status:
    return "fail" if "fail" in statuses else "warn" if "warn" in statuses else "pass"


def _pcie_findings(nodes: Mapping[str, NodeFacts]) -> tuple[list[CheckResult], Reported]:
    """A finding for the GPUs' and NICs' links that need action, a note for the rest, per node; and
    the (function, class) each names, so that the link counters' finding does not say them again."""
    devices = {host: _devices(node) for host, node in nodes.items() if "pcie_events" in _log(node)}
    corrected: dict[str, Counter[str]] = {}
    for host, found in devices.items():
        corrected[host] = Counter()
        for device in found:
            corrected[host][device.kind] += device.counts.get("corrected", 0)
    results: list[CheckResult] = []
    reported: Reported = {}
    for host, found in devices.items():
        judged: list[tuple[Device, Status]] = []
        for device in found:
            status = device.status(
                stands_out(corrected[host][device.kind], _median_by_node(corrected, device.kind))
            )
            if status is not None:
                judged.append((device, status))
        acting = [(d, s) for d, s in judged if s != "pass"]
        quiet = [(d, s) for d, s in judged if s == "pass"]
        for group in (acting, quiet):
            if not group:
                continue
            details: PcieAer = {
                "item": PCIE_ITEM,
                "node": host,
                "devices": [_device_details(d, s) for d, s in group],
                "source": _log(nodes[host]).get("source"),
            }
            summary = _summary(host, [d.text for d, _ in group], _log(nodes[host]), group[0][0].line)
            results.append(_finding(host, _worst([s for _, s in group]), summary, dict(details)))
            reported.setdefault(host, set()).update((d.pci, s) for d, _ in group for s in d.counts)
    return results, reported


def _machine_text(event: Mapping[str, Any]) -> str:
    count, severity = int(event["count"]), str(event["severity"])
    if event["source"] == "logged":
        return f"{count} machine check event{'s' if count > 1 else ''} logged undecoded"
    what = MACHINE_WHAT.get(str(event["source"]), "hardware error")
    where = f" on {event['where']}" if event.get("where") else ""
    return f"{count} {severity} {what}{'s' if count > 1 else ''}{where}"


def _machine_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Per node: a failure for an uncorrected machine check or memory error, else a note for the
    rest, a warning where its corrected count stands out from the other nodes'."""
    logs = {h: _log(n) for h, n in nodes.items() if "machine_check_events" in _log(n)}
    events = {
        h: _records(log, "machine_check_events", "source", "severity", "line") for h, log in logs.items()
    }
    corrected = {
        h: {"corrected": sum(e["count"] for e in es if e["severity"] == "corrected")}
        for h, es in events.items()
    }
    typical = _median_by_node(corrected, "corrected")
    results = []
    for host, found in events.items():
        if not found:
            continue
        ordered = sorted(
            found,
            key=lambda e: MACHINE_ORDER.index(str(e["severity"])) if e["severity"] in MACHINE_ORDER else 3,
        )
        uncorrected = sum(e["count"] for e in found if e["severity"] == "uncorrected")
        status: Status = (
            "fail" if uncorrected else "warn" if stands_out(corrected[host]["corrected"], typical) else "pass"
        )
        rows: list[MachineCheckEvent] = [
            {"source": str(e["source"]), "severity": str(e["severity"]), "where": e.get("where"),
             "count": int(e["count"]), "line": str(e["line"])}
            for e in ordered
        ]  # fmt: skip
        details: MachineCheck = {
            "item": MACHINE_ITEM,
            "node": host,
            "uncorrected": uncorrected,
            "corrected": corrected[host]["corrected"],
            "events": rows,
            "source": logs[host].get("source"),
        }
        summary = _summary(host, [_machine_text(e) for e in ordered], logs[host], str(ordered[0]["line"]))
        results.append(_finding(host, status, summary, dict(details)))
    return results


def disk_of(device: str) -> str:
    """The disk a block device is on: "sdb" for "sdb1", "nvme0n1" for "nvme0n1p2"."""
    found = _PARTITION.match(device)
    return (found.group(1) or found.group(2)) if found else device


def _block_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """A warning per node whose disks logged I/O errors, naming each disk and its counts."""
    results = []
    for host, node in nodes.items():
        log = _log(node)
        by_disk: dict[str, list[Mapping[str, Any]]] = {}
        for event in _records(log, "block_io_events", "dev", "kind", "line"):
            by_disk.setdefault(disk_of(str(event["dev"])), []).append(event)
        if not by_disk:
            continue
        disks: list[BlockIoDisk] = []
        for disk, events in by_disk.items():
            kinds = Counter[str]()
            for event in events:
                kinds[str(event["kind"])] += int(event["count"])
            disks.append(
                {
                    "disk": disk,
                    "count": sum(kinds.values()),
                    "kinds": dict(kinds.most_common()),
                    "line": str(events[-1]["line"]),
                }
            )
        disks.sort(key=lambda d: -d["count"])
        texts = [
            f"{d['disk']} ("
            + ", ".join(
                f"{n} {BLOCK_TEXT.get(k, k.replace('_', ' '))}{'s' if n > 1 else ''}"
                for k, n in d["kinds"].items()
            )
            + ")"
            for d in disks
        ]
        details: BlockIoErrors = {
            "item": BLOCK_ITEM,
            "node": host,
            "disks": disks,
            "source": log.get("source"),
        }
        summary = _summary(host, [f"I/O errors on {', '.join(texts)}"], log, disks[0]["line"])
        results.append(_finding(host, "warn", summary, dict(details)))
    return results


def kernel_error_findings(nodes: Mapping[str, NodeFacts]) -> tuple[list[CheckResult], Reported]:
    """Every node's PCIe, machine-check and block I/O findings from its kernel log; and by node the
    (PCI function, class: ``fatal``, ``nonfatal``, ``corrected``) its PCIe findings name."""
    pcie, reported = _pcie_findings(nodes)
    return pcie + _machine_findings(nodes) + _block_findings(nodes), reported
