"""The kernel log's part of the ``hardware`` judge: the XID lines each node reported, and the GPUs
its log says fell off the bus without one, judged by the action NVIDIA's XID catalogue gives
(checks/hardware/xid.py) and named with the GPU they are on.

What fails a node: an XID whose action is to reboot, reset the GPU, drain it or inspect it. What
warns: an XID the catalogue does not list (named with where to look), one whose action depends on
decoding the line, and application XIDs that recur. What is a note, failing nothing: XIDs the
catalogue puts on the application (RESTART_APP: 13, 31, 68, 94 ...) or records for
information (IGNORE: 43, 45, 63, 92 ...). An application XID recurs when one GPU logs them from
``RECUR_PROCESSES`` or more processes: a faulty program raises its XID (often several lines of one
fault) in its own process, so the same XID from several processes points at the GPU, as the
catalogue's investigatory workflow for 13 and 31 does when the error repeats across applications.
The last XID 154 of a GPU is its recovery action now: one back to 0x0 (None) is a note.

The SXID lines of the node's NVSwitches are judged beside them (checks/hardware/sxid.py), folded by
SXID and NVSwitch with the links they name. The severity a line prints decides first: "Fatal"
fails the node, "Correctable" is a note, "Non-fatal" warns unless NVIDIA's Fabric Manager User
Guide says the SXID has no impact (a note). An SXID whose lines print no severity takes its class
from the guide: fatal and always fatal fail, non-fatal warns, no impact is a note; one the table
does not list warns, with where to look.

The errors the node's ConnectX cards' driver (mlx5_core) logged are judged beside them
(checks/hardware/nic_log.py): one finding per node, failing it where a card's firmware or PCI
channel failed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from checks.hardware import sxid as sxids
from checks.hardware.details import Sxid, SxidEvent, Xid, XidEvent
from checks.hardware.nic_log import nic_findings
from checks.hardware.xid import ACTION_TEXT, CATALOGUE_URL, Action, action_of, name_of
from preflight.facts import NodeFacts
from preflight.model import CheckResult
from preflight.node.hardware import pci_key
from preflight.status import Status

NAME = "hardware"
RECUR_PROCESSES = 3
FAILING: tuple[Action, ...] = ("reboot", "drain", "reset_gpu", "inspect")
# Worst first; None is an XID the catalogue does not list.
ORDER: tuple[Action | None, ...] = (*FAILING, None, "investigate", "application", "info")
_PID = re.compile(r"pid=(?P<pid>\d+|'?<unknown>'?)")


@dataclass(frozen=True)
class XidOnGpu:
    """One XID on one GPU: how many lines, from which processes, the action and the GPU it is."""

    xid: int
    pci: str
    lines: int
    processes: frozenset[str]
    action: Action | None
    without_xid_line: bool
    gpu: str | None  # "GPU 3, serial 1652..." where the facts list the address

    @property
    def label(self) -> str:
        name = name_of(self.xid)
        what = f"XID {self.xid}" + (f" ({name})" if name else " (not in preflight's table of the catalogue)")
        if self.without_xid_line:
            what = "GPU fell off the bus, with no Xid line (XID 79)"
        where = self.pci + (f" ({self.gpu})" if self.gpu else "")
        return f"{what} on {where}" + (f" \u00d7{self.lines}" if self.lines > 1 else "")


def gpus_by_pci(node: NodeFacts) -> dict[str, str]:
    """The node's GPUs by their PCI address as the Xid lines write it: "GPU 3, serial ..."."""
    named: dict[str, str] = {}
    for gpu in node.gpus or []:
        address = gpu.raw.get("pci_bus_id")
        if isinstance(address, str) and address:
            serial = f", serial {gpu.serial}" if gpu.serial else ""
            named[pci_key(address)] = f"GPU {gpu.index if gpu.index is not None else '?'}{serial}"
    return named


def _seen(events: Sequence[Mapping[str, Any]], node: NodeFacts) -> list[XidOnGpu]:
    """The node's XID events folded by (XID, GPU), in the order first logged, each with its
    action; XID 154 takes the action of the last one its GPU logged."""
    gpus = gpus_by_pci(node)
    last_recovery = {str(e.get("pci")): str(e.get("detail") or "") for e in events if e["xid"] == 154}
    lines: Counter[tuple[int, str]] = Counter()
    processes: dict[tuple[int, str], set[str]] = {}
    first: dict[tuple[int, str], Mapping[str, Any]] = {}
    for event in events:
        key = (int(event["xid"]), str(event.get("pci")))
        lines[key] += 1
        first.setdefault(key, event)
        found = _PID.search(str(event.get("detail") or ""))
        processes.setdefault(key, set()).add(found.group("pid").strip("'") if found else "?")
    seen: list[XidOnGpu] = []
    for (xid, pci), event in first.items():
        detail = last_recovery[pci] if xid == 154 else str(event.get("detail") or "")
        seen.append(
            XidOnGpu(
                xid=xid,
                pci=pci,
                lines=lines[(xid, pci)],
                processes=frozenset(processes[(xid, pci)]),
                action=action_of(xid, detail),
                without_xid_line=bool(event.get("without_xid_line")),
                gpu=gpus.get(pci) or ("not a GPU the driver lists" if gpus else None),
            )
        )
    return seen


def _recurs(seen: Sequence[XidOnGpu], pci: str) -> bool:
    """Whether application XIDs on the GPU at ``pci`` came from RECUR_PROCESSES processes or more."""
    pids = {p for s in seen if s.pci == pci and s.action == "application" for p in s.processes}
    return len(pids) >= RECUR_PROCESSES


def _status(item: XidOnGpu, seen: Sequence[XidOnGpu]) -> Status | None:
    """fail, warn, or None for a note."""
    if item.action in FAILING:
        return "fail"
    if item.action in (None, "investigate"):
        return "warn"
    if item.action == "application" and _recurs(seen, item.pci):
        return "warn"
    return None


def _advice(items: Sequence[XidOnGpu], seen: Sequence[XidOnGpu]) -> str:
    actions = {s.action for s in items}
    worst = next(a for a in ORDER if a in actions)
    if worst is None:
        return f"look the XID up in NVIDIA's XID catalogue ({CATALOGUE_URL}) and the driver's release notes"
    if worst == "application" and any(_recurs(seen, s.pci) for s in items):
        return (
            f"application XIDs from {RECUR_PROCESSES} or more processes on one GPU: "
            "run the GPU's diagnostics (dcgmi diag -r 3) before trusting it"
        )
    return ACTION_TEXT[worst]


def _finding(
    host: str, status: Status | None, items: Sequence[XidOnGpu], seen: Sequence[XidOnGpu]
) -> CheckResult:
    actions = {s.action for s in items}
    worst = next(a for a in ORDER if a in actions)
    shown = ", ".join(s.label for s in items)
    events: list[XidEvent] = [
        {"xid": s.xid, "pci": s.pci, "lines": s.lines, "action": s.action, "gpu": s.gpu} for s in items
    ]
    details: Xid = {
        "item": "xid",
        "node": host,
        "xids": sorted({s.xid for s in items}),
        "action": worst,
        "events": events,
    }
    if status is None:
        summary = f"{host}: {shown} in the kernel log: {_advice(items, seen)}; nothing for the node to fix"
        return CheckResult.note(NAME, summary, (host,), details)
    return CheckResult(
        NAME, status, f"{host}: {shown} in the kernel log: {_advice(items, seen)}", (host,), details
    )


# Worst first: the severity an SXID line prints.
SEVERITY_ORDER: tuple[sxids.Severity, ...] = ("Fatal", "Non-fatal", "Correctable")
SXID_ADVICE: dict[str, str] = {
    "always_fatal": "the whole NVLink fabric is down: drain the node and reboot it",
    "fail": "drain the node and reset its GPUs and NVSwitches (or reboot it); if the SXID comes back on "
    "the same link, have the NVSwitch tray, the GPU baseboard and the link inspected",
    "warn": f"look the SXID up in NVIDIA's Fabric Manager User Guide ({sxids.GUIDE_URL}, appendix D); "
    "reset the GPUs and NVSwitches if NVLink traffic stalls",
    "note": "recorded for information",
}


@dataclass(frozen=True)
class SxidOnSwitch:
    """One SXID on one NVSwitch: the links its lines name, how many lines, the worst severity they
    print and the class NVIDIA's guide gives it."""

    sxid: int
    switch: str
    pci: str
    links: tuple[int, ...]
    lines: int
    severity: sxids.Severity | None
    kind: sxids.Kind | None

    @property
    def status(self) -> Status | None:
        """fail, warn, or None for a note."""
        if self.severity == "Fatal":
            return "fail"
        if self.severity == "Correctable":
            return None
        if self.severity is None and self.kind in ("fatal", "always_fatal"):
            return "fail"
        return None if self.kind == "info" else "warn"

    @property
    def what(self) -> str:
        """The SXID, what the guide calls it and the severity its lines print ("SXID 20034 (LTSSM
        fault up: ...), Fatal,") or, where none prints one, the guide's class."""
        name = sxids.name_of(self.sxid) or "not in preflight's table of the guide"
        if self.severity:
            return f"SXID {self.sxid} ({name}), {self.severity},"
        if self.kind:
            return f"SXID {self.sxid} ({name}), {sxids.KIND_TEXT[self.kind]} by the guide,"
        return f"SXID {self.sxid} ({name})"

    @property
    def where(self) -> str:
        """The NVSwitch, its PCI address and the links its lines name: "nvswitch0 (0000:05:00.0)
        links 62, 63"."""
        if not self.links:
            return f"{self.switch} ({self.pci})"
        links = ", ".join(str(n) for n in self.links)
        return f"{self.switch} ({self.pci}) link{'s' if len(self.links) > 1 else ''} {links}"


def _sxid_labels(items: Sequence[SxidOnSwitch]) -> str:
    """The SXIDs, each with the NVSwitches and links it was logged on, in the order first logged."""
    places: dict[str, list[str]] = {}
    for item in items:
        places.setdefault(item.what, []).append(item.where)
    return "; ".join(f"{what} on {', '.join(where)}" for what, where in places.items())


def _seen_sxids(events: Sequence[Mapping[str, Any]]) -> list[SxidOnSwitch]:
    """The node's SXID events folded by (SXID, NVSwitch), in the order first logged."""
    folded: dict[tuple[int, str, str], list[Mapping[str, Any]]] = {}
    for event in events:
        folded.setdefault((int(event["sxid"]), str(event.get("switch")), str(event.get("pci"))), []).append(
            event
        )
    seen: list[SxidOnSwitch] = []
    for (sxid, switch, pci), lines in folded.items():
        printed = {e.get("severity") for e in lines}
        links = sorted({e["link"] for e in lines if isinstance(e.get("link"), int)})
        seen.append(
            SxidOnSwitch(
                sxid=sxid,
                switch=switch,
                pci=pci,
                links=tuple(links),
                lines=len(lines),
                severity=next((s for s in SEVERITY_ORDER if s in printed), None),
                kind=sxids.kind_of(sxid),
            )
        )
    return seen


def _sxid_finding(host: str, status: Status | None, items: Sequence[SxidOnSwitch]) -> CheckResult:
    shown = _sxid_labels(items)
    events: list[SxidEvent] = [
        {
            "sxid": s.sxid,
            "switch": s.switch,
            "pci": s.pci,
            "links": list(s.links),
            "lines": s.lines,
            "severity": s.severity,
            "kind": s.kind,
        }
        for s in items
    ]
    details: Sxid = {"item": "sxid", "node": host, "sxids": sorted({s.sxid for s in items}), "events": events}
    if status is None:
        summary = (
            f"{host}: NVSwitch {shown} in the kernel log: {SXID_ADVICE['note']}; nothing for the node to fix"
        )
        return CheckResult.note(NAME, summary, (host,), details)
    fabric_down = any(s.kind == "always_fatal" and s.status == "fail" for s in items)
    advice = SXID_ADVICE["always_fatal" if fabric_down else status]
    return CheckResult(
        NAME, status, f"{host}: NVSwitch {shown} in the kernel log: {advice}", (host,), details
    )


def sxid_findings(host: str, events: Sequence[Mapping[str, Any]]) -> tuple[list[CheckResult], bool]:
    """The findings for one node's SXID events (a fail or warn for what needs action, a note for
    the rest), and whether any needs action."""
    seen = _seen_sxids([e for e in events if isinstance(e, Mapping) and isinstance(e.get("sxid"), int)])
    acting = [s for s in seen if s.status is not None]
    quiet = [s for s in seen if s.status is None]
    results: list[CheckResult] = []
    if acting:
        status: Status = "fail" if any(s.status == "fail" for s in acting) else "warn"
        results.append(_sxid_finding(host, status, acting))
    if quiet:
        results.append(_sxid_finding(host, None, quiet))
    return results, bool(acting)


def xid_findings(
    nodes: Mapping[str, NodeFacts], ignore: Sequence[int]
) -> tuple[list[CheckResult], dict[str, str], list[str]]:
    """Findings for the kernel logs by node (XIDs, SXIDs and ConnectX driver errors: a fail or warn
    for what needs action, a note for the rest), the nodes whose kernel log could not be read (why),
    and the nodes with only notes."""
    results: list[CheckResult] = []
    unreadable: dict[str, str] = {}
    noted: list[str] = []
    for host, node in nodes.items():
        found = node.hardware.get("xid")
        xid: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        if not xid:
            continue
        if not xid.get("readable"):
            unreadable[host] = str(xid.get("reason") or "not readable")
            continue
        events = [
            e
            for e in xid.get("events") or []
            if isinstance(e, Mapping) and isinstance(e.get("xid"), int) and e["xid"] not in ignore
        ]
        seen = _seen(events, node)
        judged = [(s, _status(s, seen)) for s in seen]
        acting = [s for s, status in judged if status is not None]
        quiet = [s for s, status in judged if status is None]
        if acting:
            status: Status = "fail" if any(st == "fail" for _, st in judged) else "warn"
            results.append(_finding(host, status, acting, seen))
        if quiet:
            results.append(_finding(host, None, quiet, seen))
        switch_results, switch_acting = sxid_findings(host, xid.get("sxid_events") or [])
        results += switch_results + nic_findings(host, xid)
        if (quiet or switch_results) and not acting and not switch_acting:
            noted.append(host)
    return results, unreadable, noted
