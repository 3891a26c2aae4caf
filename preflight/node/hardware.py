"""Hardware health beside the GPUs: NVSwitches, whether the fabric manager runs (its unit, version and
log: preflight.node.fabric_manager), and the XID errors of the kernel log, with the SXID errors its
NVSwitches reported, the errors its NICs' drivers reported (ConnectX cards' mlx5_core, AWS EFA
devices' efa), and its PCIe, machine-check and block I/O errors (preflight.node.kernel_errors).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from preflight.node import fabric_manager
from preflight.node.gathering import Sink, Unavailable, find_tool, read_text, run_command
from preflight.node.kernel_errors import kernel_errors

if TYPE_CHECKING:
    JsonDict = dict[str, Any]

PROC_NVSWITCH = "/proc/driver/nvidia-nvswitch/devices"
SYS_BUS_PCI = "/sys/bus/pci/devices"
SYS_CLASS_INFINIBAND = "/sys/class/infiniband"
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

_PCI_FUNCTION = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
# A NIC driver's line about one PCI function, as dev_err() prints it: "mlx5_core 0000:3b:00.0:
# <message>", with a name after the address where the driver printed through its network or RDMA
# device ("mlx5_core 0000:01:00.0 enp1s0np0: Link up"; the efa driver's ibdev_err(): "efa
# 0000:a0:1a.0 rdmap160s26: <message>", the kernel's __ibdev_printk). Whatever precedes the
# driver's name on the line (a dmesg, journalctl or syslog prefix) is not read.
_NIC_RE = re.compile(
    rf"(?<![\w-])(?P<driver>mlx5_core|efa) (?P<pci>{_PCI_FUNCTION})(?: (?P<name>[^\s:]+))?: (?P<message>.*)$"
)
# The same efa messages where the kernel has no ibdev_err() and the driver falls back to dev_err()
# on the RDMA device itself (amzn-drivers efa kcompat.h): "infiniband efa_0: <message>", no PCI
# address. Only EFA devices' names are read ("efa_0", or "rdmap79s0" as rdma-core renames them):
# another RDMA driver's lines under "infiniband" are not this driver's.
_EFA_IBDEV_RE = re.compile(r"(?<![\w-])infiniband (?P<name>efa_\d+|rdmap\w+): (?P<message>.*)$")
# The error forms of the ConnectX driver's messages (drivers/net/ethernet/mellanox/mlx5/core:
# health.c, cmd.c, main.c, events.c), the first that matches naming the line. Everything else the
# driver prints (its boot lines, link changes, port module events, commands the firmware refused
# with an error status: "mlx5_cmd_out_err ... failed, status bad operation") is left out.
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
# The error forms of the AWS EFA driver's messages (amzn-drivers kernel/linux/efa/src, upstream
# drivers/infiniband/hw/efa: efa_com.c, efa_main.c), the first that matches naming the line, each
# judged by what the driver does after printing it. Left out: its boot lines ("enabling device",
# "Setup irq", "IB device registered"), and a command the device answered with an error status
# ("Failed to process command DEREG_MR (opcode 8) comp_status 7 err -22", then "Failed to
# allocate pd[-12]" and the like, efa_com_cmd_exec() and efa_com_cmd.c): the device is answering,
# the command was refused (a resource limit, a race with a process's exit), and the caller gets
# the error; a command that timed out also prints one of the forms below.
EFA_ERRORS = (
    # efa_com_wait_and_process_admin_cq_interrupts() and _polling(): no completion within the
    # admin timeout; the driver then clears EFA_AQ_STATE_RUNNING_BIT, closing its admin queue
    # until the driver is reloaded.
    (
        "admin_cmd_timeout",
        re.compile(
            r"The device didn't send any completion for admin cmd"
            r"|didn't receive any MSI-X interrupt for admin cmd|Wait for completion \(polling\) timeout"
        ),
    ),
    # efa_com_submit_admin_cmd(): every command refused once the queue was closed; efa_com_cmd_exec()
    # and efa_com_alloc_comp_ctx() close it themselves when a completion context is still in use.
    (
        "admin_queue_closed",
        re.compile(
            r"Admin queue is closed|Completion context\[\d+\] is used|Completion context for command_id"
            r" \S+ is occupied|comp_ctx is NULL\. Changing the admin queue running state"
        ),
    ),
    # efa_com_reg_read32(): the device did not answer a register read; the caller gets all ones.
    ("mmio_read_timeout", re.compile(r"Reading register timed out|Reading register failed")),
    # efa_com_dev_reset(): the device did not enter or leave reset; probe and removal fail.
    ("reset_failed", re.compile(r"Reset indication didn't turn (?:on|off)")),
    # efa_com_admin_init() and efa_com_dev_reset(): the device's status register says not ready.
    ("device_not_ready", re.compile(r"Device isn't ready, (?:abort com init|can't reset device)")),
    # efa_probe_device(), efa_device_init(), efa_enable_msix(), efa_request_irq(),
    # efa_request_doorbell_bar(), efa_com_validate_version(), efa_com_get_dma_width(): the probe
    # gave up and registered no RDMA device for the function.
    (
        "probe_failed",
        re.compile(
            r"EFA device init failed|Failed to init readless MMIO|Failed to remap register bar"
            r"|pci_enable_device_mem\(\) failed|^BARs unavailable|Doorbells BAR unavailable"
            r"|pci_request_selected_regions(?: for bar \d+)? failed|Device alloc failed"
            r"|Failed to enable MSI-X|Failed to request (?:admin )?irq|dma_set_mask_and_coherent failed"
            r"|EFA (?:ctrl )?version is lower than the minimal|DMA width illegal value"
        ),
    ),
    # unimplemented_aenq_handler(): the device raised an asynchronous event the driver has no
    # handler for; its fatal-error and warning groups are enabled (EFA_AENQ_ENABLED_GROUPS) and
    # only keep-alive has a handler, so a device's fatal-error report lands here, unread.
    ("device_event", re.compile(r"Unknown event was received or event with unimplemented handler")),
)
# Each driver's catalogue, by the name it prints.
NIC_ERRORS = {"mlx5_core": MLX5_ERRORS, "efa": EFA_ERRORS}
# The forms a probe prints before it gives up, or defers when the device timed out
# (efa_probe_device(): -ETIME becomes -EPROBE_DEFER): a later "IB device registered" for the same
# function (efa_ib_device_add()) says the retry brought the device up.
EFA_PROBE_KINDS = frozenset({"probe_failed", "device_not_ready", "reset_failed", "mmio_read_timeout"})
_EFA_REGISTERED = re.compile(r"^IB device registered")


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


def _nic_line(line: str) -> tuple[str, str | None, str | None, str] | None:
    """A NIC driver's line as (driver, PCI function or None, RDMA device or None, message); None
    for any other line. A name the kernel printed for a device not yet named ("(null)", vsprintf's
    NULL string, before ib_register_device()) is no name."""
    found = _NIC_RE.search(line)
    if found:
        driver = found.group("driver")
        name = found.group("name") if driver == "efa" else None
        name = None if name is None or name.startswith("(") else name
        return driver, found.group("pci").lower(), name, found.group("message").strip()
    found = _EFA_IBDEV_RE.search(line)
    if found:
        return "efa", None, found.group("name"), found.group("message").strip()
    return None


def _retried(event: JsonDict, pci: str | None, name: str | None) -> bool:
    """Whether ``event`` is an efa probe error on the function (``pci``) or RDMA device (``name``)
    that has just registered its device."""
    same = (pci and event.get("pci") == pci) or (name and event.get("hca") == name)
    return bool(same) and event["driver"] == "efa" and event["kind"] in EFA_PROBE_KINDS


def parse_nic_lines(text: str) -> list[JsonDict]:
    """Every NIC driver line of a kernel log in one of its driver's error forms (``NIC_ERRORS``):
    the driver (``mlx5_core``, ``efa``), the PCI function's address as printed (lower case; absent
    where the line names the RDMA device only), the RDMA device where an efa line names it
    (``hca``), the form's name, and the message (300 characters at most). An efa probe's errors on
    a function that registered its device later in the log are dropped: the retry succeeded."""
    events: list[JsonDict] = []
    for line in text.splitlines():
        parsed = _nic_line(line)
        if parsed is None:
            continue
        driver, pci, name, message = parsed
        if driver == "efa" and _EFA_REGISTERED.search(message):
            events = [e for e in events if not _retried(e, pci, name)]
            continue
        kind = next((k for k, pattern in NIC_ERRORS[driver] if pattern.search(message)), None)
        if kind is None:
            continue
        event: JsonDict = {"driver": driver, "kind": kind, "line": message[:300]}
        if pci:
            event["pci"] = pci
        if name:
            event["hca"] = name
        events.append(event)
    return events


def hca_name(pci: str, root: str) -> str | None:
    """The RDMA device a PCI function carries now ("mlx5_2"), from sysfs under ``root``
    (/sys/bus/pci/devices); None where it has none."""
    try:
        names = sorted(os.listdir(os.path.join(root, pci, "infiniband")))
    except OSError:
        return None
    return names[0] if names else None


def hca_function(name: str, root: str) -> str | None:
    """The PCI function an RDMA device is on ("0000:00:1b.0"), from its ``device`` link in sysfs
    under ``root`` (/sys/class/infiniband); None where it has none."""
    target = os.path.realpath(os.path.join(root, name, "device"))
    found = re.fullmatch(_PCI_FUNCTION, os.path.basename(target))
    return found.group(0).lower() if found and os.path.isdir(target) else None


def _nic_events(text: str) -> list[JsonDict]:
    """The last 200 NIC driver errors of a kernel log, each with its function's RDMA device
    (``hca``) where the line or sysfs names one, and its PCI function where only the RDMA device
    was printed and sysfs links it to one."""
    events = parse_nic_lines(text)[-200:]
    for event in events:
        if "pci" not in event:
            pci = hca_function(str(event["hca"]), SYS_CLASS_INFINIBAND)
            if pci:
                event["pci"] = pci
        elif "hca" not in event:
            name = hca_name(str(event["pci"]), SYS_BUS_PCI)
            if name:
                event["hca"] = name
    return events


def _with_hcas(log: JsonDict) -> JsonDict:
    """The log's kernel errors, each PCIe event with the RDMA device its function carries
    (``hca``) where sysfs names one."""
    for event in log["pcie_events"]:
        name = hca_name(str(event["pci"]), SYS_BUS_PCI)
        if name:
            event["hca"] = name
    return log


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
        path = find_tool(name)
        if path is None:
            reasons.append(name + " not found")
            continue
        try:
            return run_command([path, *argv]), name
        except Unavailable as exc:
            reasons.append(str(exc))
    return None, "; ".join(reasons)


def hardware_facts() -> JsonDict:
    """NVSwitches and whether the fabric manager runs (where the node has NVSwitches or the fabric
    manager is installed, its unit, version and log); XID and SXID lines, the NIC drivers' errors
    and the PCIe, machine-check and block I/O errors from the kernel log (and which command read
    it), or why it could not be read (which is not the same as none)."""
    facts: JsonDict = {}
    nvswitches = sorted(os.listdir(PROC_NVSWITCH)) if os.path.isdir(PROC_NVSWITCH) else []
    facts["nvswitches"] = len(nvswitches)
    facts["fabric_manager_running"] = _running_comm(FABRIC_MANAGER_COMM)
    if nvswitches or os.path.exists(fabric_manager.CONFIG) or find_tool("nv-fabricmanager"):
        facts["fabric_manager"] = fabric_manager.fabric_manager_facts()
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
        **_with_hcas(kernel_errors(text)),
    }
    return facts


def gather_hardware(sink: Sink) -> None:
    sink.facts["hardware"] = hardware_facts()
