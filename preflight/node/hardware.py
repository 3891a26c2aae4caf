"""Hardware health beside the GPUs: NVSwitches, whether the fabric manager runs, and the XID errors
of the kernel log, with the SXID errors its NVSwitches reported and the errors its ConnectX cards'
driver (mlx5_core) reported.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Sink, Unavailable, read_text, run_command

if TYPE_CHECKING:
    JsonDict = dict[str, Any]

PROC_NVSWITCH = "/proc/driver/nvidia-nvswitch/devices"
SYS_BUS_PCI = "/sys/bus/pci/devices"
# The fabric manager's process name as /proc/PID/comm shows it (15 characters at most).
FABRIC_MANAGER_COMM = "nv-fabricmanage"


# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
# (older drivers: "NVRM: Xid (0000:03:00): 13, ..."). Whatever precedes "NVRM:" on the line (a
# dmesg, journalctl or syslog prefix) is not read.
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+), ?(?P<detail>.*)$")
# A GPU lost without an Xid line, on one line: "NVRM: GPU at PCI:0000:01:00: GPU has fallen off
# the bus.", "NVRM: GPU at 0000:01:00.0 has fallen off the bus.", "NVRM: GPU 0000:06:00.0: GPU has
# fallen off the bus."
_FALLEN_LINE = re.compile(
    r"NVRM: GPU (?:at )?(?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?):?"
    r" (?:GPU )?has fallen off the bus"
)
# The form drivers print when the GPU is lost at load, one sentence that newer drivers split over
# several "NVRM:" lines: "NVRM: The NVIDIA GPU 0000:b3:00.0 / NVRM: (PCI ID: 10de:26b5) installed
# in this system has / NVRM: fallen off the bus and is not responding to commands."
_FALLEN_SENTENCE = re.compile(
    r"The NVIDIA GPU (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\s+"
    r"(?:\(PCI ID: [0-9A-Fa-f:]+\)\s+)?(?:installed in this system\s+)?has\s+fallen off the bus"
)
FALLEN_OFF_BUS_XID = 79
# An NVSwitch's SXID line, as the NVSwitch driver prints it ("nvidia-%s: SXid (PCI:...): %05d, "):
# "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up", "Non-fatal"
# or "Correctable" in place of "Fatal". Companion lines of the same report carry no severity:
# "..., 20034, Severity 1 Engine instance 60 Sub-engine instance 00", "..., 20034, Data {0x...}".
_SXID_RE = re.compile(
    r"nvidia-(?P<switch>\w+): SXid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<sxid>\d+), ?(?P<detail>.*)$"
)
_SXID_SEVERITY = re.compile(
    r"^(?P<severity>Fatal|Non-fatal|Correctable),\s*(?:Link (?P<link>\d+)\s*)?(?P<what>.*)$"
)

# A ConnectX driver line about one PCI function: "mlx5_core 0000:3b:00.0: <message>", or with the
# network interface after the address ("mlx5_core 0000:01:00.0 enp1s0np0: Link up"). Whatever
# precedes "mlx5_core" on the line (a dmesg, journalctl or syslog prefix) is not read.
_MLX5_RE = re.compile(
    r"mlx5_core (?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])(?: [^\s:]+)?: (?P<message>.*)$"
)
# The error forms of the driver's messages (drivers/net/ethernet/mellanox/mlx5/core: health.c,
# cmd.c, main.c, events.c), the first that matches naming the line. Everything else the driver
# prints (its boot lines, link changes, port module events, commands the firmware refused with an
# error status: "mlx5_cmd_out_err ... failed, status bad operation") is left out.
MLX5_ERRORS = (
    # The firmware's health counter stopped advancing.
    ("health_compromised", re.compile(r"health compromised")),
    # The PCI error handlers ran, or the card's registers read back as all ones.
    (
        "pci_error",
        re.compile(
            r"mlx5_pci_err_detected|PCI slot (?:\d+ )?is unavailable|PCI channel offline"
            r"|PCI reads still not working"
        ),
    ),
    # A fatal sensor tripped ("Fatal error 1 detected"), or the fatal firmware reporter ran.
    ("fw_fatal", re.compile(r"Fatal error (?:\d+ )?detected|mlx5_fw_fatal_reporter_err_work")),
    # The health buffer's syndrome, printed after either of the above: "synd 0x10: High temperature".
    ("fw_syndrome", re.compile(r"(?:^|[\s:])synd 0x[0-9A-Fa-f]+: ")),
    # The driver put the function in its internal error state.
    (
        "internal_error",
        re.compile(
            r"mlx5_enter_error_state|mlx5_error_sw_reset|NIC IFC still|Driver is in error state"
            r"|health recovery failed|internal error state"
        ),
    ),
    # A firmware command never completed.
    ("cmd_timeout", re.compile(r"timeout\. Will cause a leak of a command resource")),
    # The slot gives the card less power than it needs.
    ("insufficient_power", re.compile(r"Detected insufficient power on the PCIe slot")),
)


def pci_key(address: str) -> str:
    """A GPU's PCI address as the Xid lines write it, lower case: "0000:3b:00" from "PCI:0000:3b:00",
    "0000:3b:00.0" or nvidia-smi's "00000000:3B:00.0"."""
    text = address.strip().lower()
    text = text[4:] if text.startswith("pci:") else text
    parts = text.split(".")[0].split(":")
    if len(parts) == 3:
        parts[0] = parts[0][-4:].rjust(4, "0")
    return ":".join(parts)


def _fallen_off_bus(text: str) -> list[tuple[str, str]]:
    """The GPUs a kernel log says fell off the bus without an Xid line: (PCI address, message)."""
    found: list[tuple[str, str]] = []
    messages: list[str] = []
    for line in text.splitlines():
        at = line.find("NVRM: ")
        if at < 0:
            continue
        one = _FALLEN_LINE.search(line)
        if one:
            found.append((pci_key(one.group("pci")), line[at + 6 :].strip()))
        messages.append(line[at + 6 :].strip())
    joined = " ".join(messages)
    for sentence in _FALLEN_SENTENCE.finditer(joined):
        found.append((pci_key(sentence.group("pci")), re.sub(r"\s+", " ", sentence.group(0))))
    return found


def parse_xid_lines(text: str) -> list[JsonDict]:
    """Every XID line of a kernel log (the GPU's PCI address, the XID number and the rest), then
    one XID 79 event, marked ``without_xid_line``, for each GPU the log says fell off the bus where
    no XID 79 line names it."""
    events: list[JsonDict] = []
    for line in text.splitlines():
        found = _XID_RE.search(line)
        if found:
            events.append(
                {"pci": pci_key(found.group("pci")), "xid": int(found.group("xid")),
                 "detail": found.group("detail").strip()[:200]}
            )  # fmt: skip
    seen = {e["pci"] for e in events if e["xid"] == FALLEN_OFF_BUS_XID}
    for pci, message in _fallen_off_bus(text):
        if pci not in seen:
            seen.add(pci)
            events.append(
                {"pci": pci, "xid": FALLEN_OFF_BUS_XID, "detail": message[:200], "without_xid_line": True}
            )
    return events


def parse_sxid_lines(text: str) -> list[JsonDict]:
    """Every SXID line of a kernel log that says its severity: the NVSwitch ("nvswitch1"), its PCI
    address, the SXID, "Fatal", "Non-fatal" or "Correctable", the link (None where the line names
    none) and the rest. A line without a severity (the "Data {...}" and "Severity N Engine
    instance" lines) is kept, with severity None, only where no line of the same SXID on the same
    NVSwitch says it."""
    events: list[JsonDict] = []
    for line in text.splitlines():
        found = _SXID_RE.search(line)
        if not found:
            continue
        detail = found.group("detail").strip()
        graded = _SXID_SEVERITY.match(detail)
        link = graded.group("link") if graded else None
        events.append(
            {"switch": found.group("switch"), "pci": found.group("pci").lower(),
             "sxid": int(found.group("sxid")), "severity": graded.group("severity") if graded else None,
             "link": int(link) if link is not None else None,
             "detail": (graded.group("what") if graded else detail).strip()[:200]}
        )  # fmt: skip
    graded_keys = {(e["pci"], e["sxid"]) for e in events if e["severity"]}
    return [e for e in events if e["severity"] or (e["pci"], e["sxid"]) not in graded_keys]


def parse_mlx5_lines(text: str) -> list[JsonDict]:
    """Every ConnectX driver (mlx5_core) line of a kernel log in one of the error forms of
    ``MLX5_ERRORS``: the PCI function's address as printed (lower case), the form's name, and the
    message after the address (300 characters at most)."""
    events: list[JsonDict] = []
    for line in text.splitlines():
        found = _MLX5_RE.search(line)
        if not found:
            continue
        message = found.group("message").strip()
        kind = next((name for name, pattern in MLX5_ERRORS if pattern.search(message)), None)
        if kind:
            events.append({"pci": found.group("pci").lower(), "kind": kind, "line": message[:300]})
    return events


def hca_name(pci: str, root: str) -> str | None:
    """The RDMA device a PCI function carries now ("mlx5_2"), from sysfs under ``root``
    (/sys/bus/pci/devices); None where it has none."""
    try:
        names = sorted(os.listdir(os.path.join(root, pci, "infiniband")))
    except OSError:
        return None
    return names[0] if names else None


def _nic_events(text: str) -> list[JsonDict]:
    """The last 200 ConnectX driver errors of a kernel log, each with its function's RDMA device
    (``hca``) where sysfs names one."""
    events = parse_mlx5_lines(text)[-200:]
    names = {pci: hca_name(pci, SYS_BUS_PCI) for pci in {e["pci"] for e in events}}
    for event in events:
        if names[event["pci"]]:
            event["hca"] = names[event["pci"]]
    return events


def _running_comm(name: str) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (read_text(os.path.join("/proc", pid, "comm")) or "").strip() == name:
            return True
    return False


def _kernel_log() -> tuple[str | None, str]:
    """The kernel log from ``dmesg``, or from the journal (``journalctl -k``) where dmesg is
    missing or refused (kernel.dmesg_restrict); else None and why neither could be read."""
    reasons: list[str] = []
    for name, argv in (("dmesg", ["--kernel"]), ("journalctl", ["-k", "-b", "-q", "--no-pager"])):
        path = shutil.which(name) or next(
            (p for p in ("/usr/bin/" + name, "/bin/" + name) if os.access(p, os.X_OK)), None
        )
        if path is None:
            reasons.append(name + " not found")
            continue
        try:
            return run_command([path, *argv]), name
        except Unavailable as exc:
            reasons.append(str(exc))
    return None, "; ".join(reasons)


def hardware_facts() -> JsonDict:
    """NVSwitches and whether the fabric manager runs; XID and SXID lines and the ConnectX driver's
    errors from the kernel log (and which command read it), or why it could not be read (which is
    not the same as none)."""
    facts: JsonDict = {}
    nvswitches = sorted(os.listdir(PROC_NVSWITCH)) if os.path.isdir(PROC_NVSWITCH) else []
    facts["nvswitches"] = len(nvswitches)
    facts["fabric_manager_running"] = _running_comm(FABRIC_MANAGER_COMM)
    text, source = _kernel_log()
    if text is None:
        facts["xid"] = {"readable": False, "reason": source[:200]}
        return facts
    facts["xid"] = {
        "readable": True,
        "source": source,
        "events": parse_xid_lines(text)[-200:],
        "sxid_events": parse_sxid_lines(text)[-200:],
        "nic_events": _nic_events(text),
    }
    return facts


def gather_hardware(sink: Sink) -> None:
    sink.facts["hardware"] = hardware_facts()
