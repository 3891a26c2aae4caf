"""The kernel log's NIC driver errors: what the ConnectX cards' driver (mlx5_core) logged about a
card whose firmware or PCIe link failed, and what the AWS EFA driver (efa) logged about a device
that stopped answering, as each node's probe read them (preflight.node.hardware,
``parse_nic_lines``), named with the driver, the PCI function and the RDMA device where the line or
the node's sysfs gave one.

What fails a node, on a ConnectX card: firmware that stopped answering (``health_compromised``), a
fatal error or its health syndrome (``fw_fatal``, ``fw_syndrome``), a failed PCI channel
(``pci_error``) or the driver's internal error state (``internal_error``): the card cannot carry
the job's traffic reliably until it is reset. On an EFA device: an admin command the device never
completed (``admin_cmd_timeout``) or the admin queue the driver closed after one
(``admin_queue_closed``): the driver sends the device no command (no queue pair, no memory
registration) until it is reloaded; a register read the device did not answer
(``mmio_read_timeout``), a reset that did not finish (``reset_failed``), a device not ready
(``device_not_ready``) or a probe that gave up (``probe_failed``; dropped where the function
registered its device later in the log). What warns: a ConnectX firmware command that never
completed (``cmd_timeout``, the driver leaks the command's slot and carries on), a slot that gives
the card less power than it needs (``insufficient_power``), and an EFA device event the driver has
no handler for (``device_event``: the device's fatal-error and warning reports land there, unread,
among others). A command either device refused with an error status is no fault: the device
answered. The log is the current boot's (dmesg's ring buffer, or ``journalctl -k -b``), so a card
that failed and recovered since is still named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checks.hardware.details import NicDriverErrors, NicEvent
from preflight.model import CheckResult
from preflight.status import Status

NAME = "hardware"
ITEM = "nic_driver_errors"
# Each error form, worst first: its status and how a summary names it.
KINDS: dict[str, tuple[Status, str]] = {
    "pci_error": ("fail", "PCI channel error"),
    "health_compromised": ("fail", "firmware fatal error (health compromised)"),
    "fw_fatal": ("fail", "firmware fatal error"),
    "fw_syndrome": ("fail", "firmware fatal error"),
    "internal_error": ("fail", "driver in internal error state"),
    "cmd_timeout": ("warn", "firmware command timeout"),
    "insufficient_power": ("warn", "insufficient power on the PCIe slot"),
    "admin_cmd_timeout": ("fail", "admin command timeout"),
    "admin_queue_closed": ("fail", "admin queue closed"),
    "mmio_read_timeout": ("fail", "register read timeout (device not answering)"),
    "reset_failed": ("fail", "device reset failed"),
    "device_not_ready": ("fail", "device not ready"),
    "probe_failed": ("fail", "probe failed"),
    "device_event": ("warn", "device event without a handler"),
}
# The driver an older probe's events came from: it read mlx5_core only.
DEFAULT_DRIVER = "mlx5_core"
# The logs a node reads for the current boot only.
BOOT_LOGS = ("dmesg", "journalctl")
# What a form's line adds to its name: the syndrome, the command that timed out, the slot's power.
_DETAIL = {
    "fw_syndrome": re.compile(r"(?P<detail>synd 0x[0-9A-Fa-f]+: .*)$"),
    "cmd_timeout": re.compile(r"(?P<detail>[A-Z0-9_]+)\(0x[0-9A-Fa-f]+\)(?: Async,)? timeout\."),
    "insufficient_power": re.compile(r"\((?P<detail>\d+W)\)"),
    "admin_cmd_timeout": re.compile(r"admin cmd (?P<detail>[A-Z0-9_]+)\("),
    "probe_failed": re.compile(r"^(?P<detail>.{1,80})"),
}


@dataclass(frozen=True)
class NicErrorForm:
    """One error form on one PCI function (or RDMA device, where the line named no function) of one
    driver: how many lines, the first of them, the RDMA device."""

    driver: str
    pci: str | None
    hca: str | None
    kind: str
    lines: int
    line: str

    @property
    def status(self) -> Status:
        """fail or warn; a form this judge does not know (a newer probe's) warns."""
        return KINDS.get(self.kind, ("warn", ""))[0]

    @property
    def rank(self) -> tuple[int, int]:
        """Failures first, then by the form's place in :data:`KINDS` (a form it lacks last)."""
        place = list(KINDS).index(self.kind) if self.kind in KINDS else len(KINDS)
        return (0 if self.status == "fail" else 1, place)

    @property
    def label(self) -> str:
        """The form as a summary names it, with what its line adds: "firmware fatal error (synd
        0x10: High temperature)", "firmware command timeout (CREATE_DCT)"."""
        text = KINDS[self.kind][1] if self.kind in KINDS else self.kind.replace("_", " ")
        pattern = _DETAIL.get(self.kind)
        found = pattern.search(self.line) if pattern else None
        return f"{text} ({found.group('detail').strip()})" if found else text

    @property
    def where(self) -> str:
        """The function as the driver names it, with its RDMA device: "0000:3b:00.0 (mlx5_2)"; the
        RDMA device alone where no function is known ("efa_0")."""
        if self.pci is None:
            return self.hca or "?"
        return f"{self.pci} ({self.hca})" if self.hca else self.pci


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _seen(events: Sequence[Mapping[str, Any]]) -> list[NicErrorForm]:
    """The node's events folded by (driver, PCI function or RDMA device, form), worst first, then
    in the order logged."""
    folded: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for event in events:
        driver = _text(event.get("driver")) or DEFAULT_DRIVER
        where = _text(event.get("pci")) or str(event.get("hca"))
        folded.setdefault((driver, where, str(event["kind"])), []).append(event)
    seen = [
        NicErrorForm(
            driver=driver,
            pci=next((p for e in lines if (p := _text(e.get("pci")))), None),
            hca=next((h for e in lines if (h := _text(e.get("hca")))), None),
            kind=kind,
            lines=len(lines),
            line=str(lines[0].get("line") or ""),
        )
        for (driver, _, kind), lines in folded.items()
    ]
    return sorted(seen, key=lambda s: s.rank)


def _judged(event: Any) -> bool:
    """An event this judge can name: its form, and its PCI function or RDMA device."""
    if not isinstance(event, Mapping) or not isinstance(event.get("kind"), str):
        return False
    return bool(_text(event.get("pci")) or _text(event.get("hca")))


def _event(seen: NicErrorForm) -> dict[str, Any]:
    """One folded form as the finding lists it (``NicEvent``)."""
    shown: NicEvent = {
        "driver": seen.driver,
        "pci": seen.pci,
        "hca": seen.hca,
        "kind": seen.kind,
        "status": seen.status,
        "lines": seen.lines,
        "line": seen.line,
    }
    return dict(shown)


def nic_findings(host: str, log: Mapping[str, Any]) -> list[CheckResult]:
    """One finding for a node whose kernel log (its ``hardware.xid`` facts) holds NIC driver errors:
    fail where a card or device failed, warn for lesser forms; none where it holds none. The
    summary names the worst form's driver and function: "efa 0000:00:1b.0 (efa_0): ..."."""
    events = [e for e in log.get("nic_events") or [] if _judged(e)]
    seen = _seen(events)
    if not seen:
        return []
    status: Status = "fail" if any(s.status == "fail" for s in seen) else "warn"
    source = log.get("source")
    span = " since boot" if source in BOOT_LOGS else ""
    worst = seen[0]
    more = f" (+{len(seen) - 1} more)" if len(seen) > 1 else ""
    summary = f"{host}: {worst.driver} {worst.where}: {worst.label} in the kernel log{span}{more}"
    details: NicDriverErrors = {
        "item": ITEM,
        "node": host,
        "kinds": list(dict.fromkeys(s.kind for s in seen)),
        "events": [],
        "source": source if isinstance(source, str) else None,
    }
    return [CheckResult(NAME, status, summary, (host,), {**details, "events": [_event(s) for s in seen]})]
