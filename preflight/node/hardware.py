"""Hardware health beside the GPUs: NVSwitches, whether the fabric manager runs, and the XID errors
of the kernel log.
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
# The fabric manager's process name as /proc/PID/comm shows it (15 characters at most).
FABRIC_MANAGER_COMM = "nv-fabricmanage"


# "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus."
# (older drivers: "NVRM: Xid (0000:03:00): 13, ...").
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\): (?P<xid>\d+), ?(?P<detail>.*)$")


def parse_xid_lines(text: str) -> list[JsonDict]:
    """Every XID line of a kernel log: the GPU's PCI address, the XID number and the rest."""
    events: list[JsonDict] = []
    for line in text.splitlines():
        found = _XID_RE.search(line)
        if found:
            events.append(
                {"pci": found.group("pci").lower(), "xid": int(found.group("xid")),
                 "detail": found.group("detail").strip()[:200]}
            )  # fmt: skip
    return events


def _running_comm(name: str) -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (read_text(os.path.join("/proc", pid, "comm")) or "").strip() == name:
            return True
    return False


def hardware_facts() -> JsonDict:
    """NVSwitches and whether the fabric manager runs; XID lines from the kernel log, or why it
    could not be read (which is not the same as none)."""
    facts: JsonDict = {}
    nvswitches = sorted(os.listdir(PROC_NVSWITCH)) if os.path.isdir(PROC_NVSWITCH) else []
    facts["nvswitches"] = len(nvswitches)
    facts["fabric_manager_running"] = _running_comm(FABRIC_MANAGER_COMM)
    dmesg = shutil.which("dmesg") or next(
        (p for p in ("/usr/bin/dmesg", "/bin/dmesg") if os.access(p, os.X_OK)), None
    )
    if dmesg is None:
        facts["xid"] = {"readable": False, "reason": "dmesg not found"}
        return facts
    try:
        text = run_command([dmesg, "--kernel"])
    except Unavailable as exc:
        facts["xid"] = {"readable": False, "reason": str(exc)[:200]}
        return facts
    facts["xid"] = {"readable": True, "events": parse_xid_lines(text)[-200:]}
    return facts


def gather_hardware(sink: Sink) -> None:
    sink.facts["hardware"] = hardware_facts()
