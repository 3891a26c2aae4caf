"""The kernel log's ConnectX errors: what the cards' driver (mlx5_core) logged about a card whose
firmware or PCIe link failed, as each node's probe read them (preflight.node.hardware,
``parse_mlx5_lines``), named with the card's RDMA device where the node's sysfs gave one.

What fails a node: a card whose firmware stopped answering (``health_compromised``), reported a
fatal error or its health syndrome (``fw_fatal``, ``fw_syndrome``), whose PCI channel failed
(``pci_error``) or that the driver put in its internal error state (``internal_error``): the card
cannot carry the job's traffic reliably until it is reset. What warns: a firmware command that never
completed (``cmd_timeout``, the driver leaks the command's slot and carries on) and a slot that gives
the card less power than it needs (``insufficient_power``). The log is the current boot's (dmesg's
ring buffer, or ``journalctl -k -b``), so a card that failed and recovered since is still named.
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
}
# The logs a node reads for the current boot only.
BOOT_LOGS = ("dmesg", "journalctl")
# What a form's line adds to its name: the syndrome, the command that timed out, the slot's power.
_DETAIL = {
    "fw_syndrome": re.compile(r"(?P<detail>synd 0x[0-9A-Fa-f]+: .*)$"),
    "cmd_timeout": re.compile(r"(?P<detail>[A-Z0-9_]+)\(0x[0-9A-Fa-f]+\)(?: Async,)? timeout\."),
    "insufficient_power": re.compile(r"\((?P<detail>\d+W)\)"),
}


@dataclass(frozen=True)
class SeenNic:
    """One error form on one PCI function: how many lines, the first of them, the RDMA device."""

    pci: str
    hca: str | None
    kind: str
    lines: int
    line: str

    @property
    def status(self) -> Status:
        """fail or warn; a form this judge does not know (a newer probe's) warns."""
        return KINDS.get(self.kind, ("warn", ""))[0]

    @property
    def rank(self) -> int:
        return list(KINDS).index(self.kind) if self.kind in KINDS else len(KINDS)

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
        """The function as the driver names it, with its RDMA device: "0000:3b:00.0 (mlx5_2)"."""
        return f"{self.pci} ({self.hca})" if self.hca else self.pci


def _seen(events: Sequence[Mapping[str, Any]]) -> list[SeenNic]:
    """The node's events folded by (PCI function, form), worst first, then in the order logged."""
    folded: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for event in events:
        folded.setdefault((str(event["pci"]), str(event["kind"])), []).append(event)
    seen = [
        SeenNic(
            pci=pci,
            hca=next((str(e["hca"]) for e in lines if isinstance(e.get("hca"), str)), None),
            kind=kind,
            lines=len(lines),
            line=str(lines[0].get("line") or ""),
        )
        for (pci, kind), lines in folded.items()
    ]
    return sorted(seen, key=lambda s: s.rank)


def nic_findings(host: str, log: Mapping[str, Any]) -> list[CheckResult]:
    """One finding for a node whose kernel log (its ``hardware.xid`` facts) holds ConnectX driver
    errors: fail where a card failed, warn for command timeouts and a slot short of power; none
    where it holds none."""
    events = [
        e
        for e in log.get("nic_events") or []
        if isinstance(e, Mapping) and isinstance(e.get("pci"), str) and isinstance(e.get("kind"), str)
    ]
    seen = _seen(events)
    if not seen:
        return []
    status: Status = "fail" if any(s.status == "fail" for s in seen) else "warn"
    source = log.get("source")
    span = " since boot" if source in BOOT_LOGS else ""
    worst = seen[0]
    more = f" (+{len(seen) - 1} more)" if len(seen) > 1 else ""
    summary = f"{host}: mlx5_core {worst.where}: {worst.label} in the kernel log{span}{more}"
    shown: list[NicEvent] = [
        {"pci": s.pci, "hca": s.hca, "kind": s.kind, "status": s.status, "lines": s.lines, "line": s.line}
        for s in seen
    ]
    details: NicDriverErrors = {
        "item": ITEM,
        "node": host,
        "kinds": list(dict.fromkeys(s.kind for s in seen)),
        "events": shown,
        "source": source if isinstance(source, str) else None,
    }
    return [CheckResult(NAME, status, summary, (host,), dict(details))]
