"""The kernel log's PCIe AER, machine-check, memory and block I/O errors: pure, text in, events out,
folded per device and class with their count and last line. The forms read, and their sources, are
described where they are judged (checks/hardware/kernel_errors.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    JsonDict = dict[str, Any]

KEEP = 100
FN = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_SEV = r"(?P<sev>Correct\w+|Uncorrect\w+ \((?:Non-)?Fatal\))"
RECEIVED = re.compile(
    rf"(?P<port>{FN}): AER: (?:Multiple )?{_SEV} error (?:message )?received(?::| from) "
    rf"(?:id=(?P<id>\w{{4}})|(?P<src>{FN}))"
)
BUS_ERROR = re.compile(rf"(?P<pci>{FN}): (?:AER: )?PCIe Bus Error: severity={_SEV}, type=(?P<type>[^,]*)")
DETAIL = re.compile(
    rf"(?P<pci>{FN}): (?:AER: )?\s*(?:\[\s*\d+\s*\] (?P<bit>[A-Za-z][\w /-]*?)\s*(?:\(First\))?\s*$"
    r"|device \[(?P<id>\w{4}:\w{4})\])"
)
NO_HANDLER = re.compile(rf"(?P<pci>{FN}): (?:AER: )?(?:can't recover \(no error_d|device has no AER-aware)")
RECOVERY = re.compile(r"AER: (?:[Dd]evice recovery|subordinate device reset) (failed|successful)")
GHES = re.compile(r"\{(?P<n>\d+)\}\[Hardware Error\]:\s*(?P<key>[^:]*?)(?:: (?P<value>.*?))?\s*$")
GHES_PCIE = {"fatal": "fatal", "recoverable": "nonfatal", "corrected": "corrected"}
GHES_MEMORY = {"fatal": "uncorrected", "recoverable": "uncorrected", "corrected": "corrected"}
MCE = re.compile(
    r"\[Hardware Error\]: CPU (?P<cpu>\d+): Machine Check(?P<exc> Exception)?: \w+ Bank (?P<bank>\d+): "
    r"(?:0x)?(?P<status>[0-9a-fA-F]{1,16})\b"
    r"|\[Hardware Error\]: CPU:(?P<acpu>\d+) \([\w:]+\) MC(?P<abank>\d+)_STATUS\[(?P<flags>[^\]]*)\]"
)
EDAC = re.compile(r"EDAC MC(?P<mc>\d+): (?P<n>\d+) (?P<sev>[CU])E .*?(?:\bon (?P<at>.+?)(?: \(|\s*$)|$)")
_DEV = r"(?P<dev>[\w.-]+)"
BLOCK = (
    ("io_error", re.compile(
        r"\b(?:I/O|critical (?:medium|target|nexus|protection)|timeout|recoverable transport|device offline)"
        rf" error, dev {_DEV}, sector"
    )),
    ("buffer_io_error", re.compile(rf"Buffer I/O error on dev(?:ice)? {_DEV}, logical block")),
    ("nvme_timeout", re.compile(r"nvme (?P<dev>nvme\d+): I/O .*\btimeout, (?:abort|reset|disable)")),
    ("nvme_down", re.compile(r"nvme (?P<dev>nvme\d+): (?:controller is down|Removing after probe fail)")),
    ("fs_error", re.compile(rf"EXT4-fs error \(device {_DEV}\)")),
    ("fs_error", re.compile(rf"XFS \({_DEV}\): (?:metadata|log) I/O error")),
)  # fmt: skip
BENIGN_DEVICE = re.compile(r"^(?:sr|fd|loop)\d+$")


def _severity(text: str) -> str:
    return "corrected" if text.startswith("Correct") else "nonfatal" if "Non-" in text else "fatal"


def _ghes(
    found: re.Match[str], line: str, record: JsonDict, pcie: list[JsonDict], machine: list[JsonDict]
) -> None:
    """One line of an APEI GHES record: a PCIe section is a PCIe event, any other a machine check."""
    key, value = found.group("key"), found.group("value") or ""
    if found.group("n") != record.get("n") or key.startswith("Hardware error from"):
        record.clear()
        record["n"] = found.group("n")
    if key == "event severity" or key.startswith("Error "):
        record["sev"], record["line"] = value, line.strip()[:240]
    elif key == "fru_text":
        record["at"] = value
    elif key == "port_type":
        record["port"] = value.endswith("port")
    elif key == "section_type" and "PCIe" not in value and record.get("sev") in GHES_MEMORY:
        where = record.get("at") or value
        machine.append({"source": "ghes", "severity": GHES_MEMORY[record["sev"]], "where": where})
        record["last"] = machine[-1]
        machine[-1]["line"] = record["line"]
    elif key == "device_id" and re.match(FN + "$", value) and record.get("sev") in GHES_PCIE:
        pcie.append({"pci": value.lower(), "severity": GHES_PCIE[record["sev"]], "line": record["line"]})
        record["last"] = pcie[-1]
    elif key == "DIMM location" and "last" in record:
        record["last"]["where"] = value
    elif key == "secondary_bus" and record.get("port") and "last" in record:
        record["last"]["secondary_bus"] = record["last"]["pci"][:5] + value[-2:].lower()


def _report(pcie: list[JsonDict], report: JsonDict | None) -> None:
    """Ends an AER report: an event per device that printed its error (else the source named)."""
    if report is None:
        return
    for event in report["events"] or [
        {"pci": report["src"], "severity": report["sev"], "line": report["line"]}
    ]:
        affected = [p for p in dict.fromkeys(report["affected"]) if p != event["pci"]][:8]
        pcie.append({**event, **({"affected": affected} if affected else {}), **report["recovery"]})


def _aer(
    line: str, report: JsonDict | None, latest: dict[str, JsonDict], pcie: list[JsonDict]
) -> JsonDict | None:
    """One line of an AER report; the report open after it."""
    found = RECEIVED.search(line)
    if found:
        _report(pcie, report)
        port, rid = found.group("port").lower(), int(found.group("id") or "0", 16)
        source = found.group("src") or f"{port[:4]}:{rid >> 8:02x}:{rid >> 3 & 31:02x}.{rid & 7}"
        return {"src": source.lower(), "sev": _severity(found.group("sev")), "line": line.strip()[:240],
                "events": [], "affected": [], "recovery": {}}  # fmt: skip
    found = BUS_ERROR.search(line)
    if found:
        pci = found.group("pci").lower()
        latest[pci] = {"pci": pci, "severity": _severity(found.group("sev")),
                       "type": found.group("type").strip(), "line": line.strip()[:240]}  # fmt: skip
        (report["events"] if report else pcie).append(latest[pci])
        return report
    found = DETAIL.search(line)
    target = latest.get(found.group("pci").lower()) if found else None
    if found and target is not None:
        errors = target.setdefault("errors", [])
        if found.group("id"):
            target["id"] = found.group("id").lower()
        elif found.group("bit") not in errors and len(errors) < 6:
            errors.append(found.group("bit"))
    found = NO_HANDLER.search(line)
    if found and report is not None:
        report["affected"].append(found.group("pci").lower())
    found = RECOVERY.search(line)
    if found and report is not None:
        report["recovery"] = {"recovery": found.group(1)}
    return report


def _machine_check(line: str) -> JsonDict | None:
    """A machine-check or memory error line as an event."""
    found = MCE.search(line)
    if found and found.group("cpu"):
        uncorrected = found.group("exc") or int(found.group("status"), 16) >> 61 & 1
        return {"source": "mce", "severity": "uncorrected" if uncorrected else "corrected",
                "where": f"CPU {found.group('cpu')} bank {found.group('bank')}"}  # fmt: skip
    if found:
        flags = set(found.group("flags").split("|"))
        return {"source": "mce", "severity": "uncorrected" if flags & {"UE", "Deferred"} else "corrected",
                "where": f"CPU {found.group('acpu')} bank {found.group('abank')}"}  # fmt: skip
    found = EDAC.search(line)
    if found and int(found.group("n")):
        where = " ".join(w for w in (f"MC{found.group('mc')}", found.group("at")) if w)
        severity = "uncorrected" if found.group("sev") == "U" else "corrected"
        return {"source": "edac", "severity": severity, "where": where, "count": int(found.group("n"))}
    if "Uncorrected hardware memory error in user-access" in line:
        return {"source": "mce", "severity": "uncorrected", "where": "memory"}
    if "[Hardware Error]: Machine check events logged" in line:
        return {"source": "logged", "severity": "unknown", "where": None}
    return None


def parse_lines(text: str) -> tuple[list[JsonDict], list[JsonDict], list[JsonDict]]:
    """The log's PCIe, machine-check and block I/O error events, in the order logged."""
    pcie: list[JsonDict] = []
    machine: list[JsonDict] = []
    block: list[JsonDict] = []
    report: JsonDict | None = None
    record: JsonDict = {}
    latest: dict[str, JsonDict] = {}
    for line in text.splitlines():
        found = GHES.search(line)
        if found:
            _ghes(found, line, record, pcie, machine)
            if pcie and "pci" in record.get("last", {}):
                latest[pcie[-1]["pci"]] = pcie[-1]
            continue
        record.clear()
        report = _aer(line, report, latest, pcie)
        event = _machine_check(line)
        if event:
            machine.append({**event, "line": line.strip()[:240]})
        for kind, pattern in BLOCK:
            found = pattern.search(line)
            if found and not BENIGN_DEVICE.match(found.group("dev")):
                block.append({"dev": found.group("dev"), "kind": kind, "line": line.strip()[:240]})
                break
    _report(pcie, report)
    return pcie, machine, block


def fold(events: Iterable[JsonDict], key: tuple[str, ...]) -> list[JsonDict]:
    """One entry per ``key``: the events' summed ``count`` (1 each by default), merged lists, the
    last one's other fields; the last ``KEEP`` entries."""
    folded: dict[tuple[Any, ...], JsonDict] = {}
    for event in events:
        name = tuple(event.get(k) for k in key)
        entry = folded.pop(name, {"count": 0})
        lists = {
            k: list(dict.fromkeys([*entry.get(k, []), *v]))[:8] for k, v in event.items() if type(v) is list
        }
        folded[name] = {**entry, **event, **lists, "count": entry["count"] + int(event.get("count") or 1)}
    return list(folded.values())[-KEEP:]


def kernel_errors(text: str) -> JsonDict:
    """The log's errors as the node's ``hardware.xid`` facts carry them."""
    pcie, machine, block = parse_lines(text)
    return {
        "pcie_events": fold(pcie, ("pci", "severity")),
        "machine_check_events": fold(machine, ("source", "severity", "where")),
        "block_io_events": fold(block, ("dev", "kind")),
    }
