"""How ``hardware`` presents itself: one row per node (GPUs and their PCIe links, GPUs slowing
themselves down, InfiniBand ports active, XID and SXID lines in the kernel log or why it was not
read), the fabric manager's log lines under a finding about it, and what to do about each kind of
finding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from checks.hardware.ib_ports import ACTIVE_IB
from checks.hardware.judge import NAME, SELF_SLOWDOWN
from checks.job.node.nvml import reason_names
from preflight.model import CheckResult, HostReport, RunReport
from preflight.nodeset import natural_key
from preflight.view import MAX_TABLE_ROWS, Block, Presentation, Table, TCell, advice_by_item, plain


def _row(host: HostReport) -> list[TCell]:
    node = host.node
    gpus = node.gpus or []
    narrow = [g for g in gpus if g.pcie_link is not None and g.pcie_link.narrow]
    slowing = [g for g in gpus if any(n in SELF_SLOWDOWN for n in reason_names(g.clock_event_reasons or 0))]
    ports = node.ib_ports
    active = sum(1 for p in ports if p.state == ACTIVE_IB)
    xid = node.hardware.get("xid")
    if not isinstance(xid, dict):
        xid_text = "\u2014"
    elif not xid.get("readable"):
        xid_text = f"not readable ({plain(xid.get('reason') or '')})"
    else:
        counted = (("events", "XID"), ("sxid_events", "SXID"), ("nic_events", "NIC driver error"))
        seen = [
            f"{len(lines)} {what} line{'s' if len(lines) != 1 else ''}"
            for key, what in counted
            if (lines := xid.get(key) or [])
        ]
        # The PCIe, machine-check and block I/O errors, each entry a device's or a place's count.
        for key, what in (("pcie_events", "PCIe AER error"), ("machine_check_events", "machine check"),
                          ("block_io_events", "block I/O error")):  # fmt: skip
            if n := sum(e.get("count") or 1 for e in xid.get(key) or [] if isinstance(e, dict)):
                seen.append(f"{n} {what}{'s' if n != 1 else ''}")
        xid_text = ", ".join(seen) or "none"
    return [
        TCell(plain(host.name), "mono"),
        TCell(str(len(gpus)), "num"),
        TCell(str(len(narrow)), "num odd odd-fail" if narrow else "num"),
        TCell(str(len(slowing)), "num odd odd-fail" if slowing else "num"),
        TCell(f"{active} / {len(ports)}", "num odd odd-fail" if active < len(ports) else "num"),
        TCell(xid_text),
    ]


def evidence(report: RunReport) -> Sequence[Block]:
    if not report.results_for(NAME):
        return []
    hosts = sorted((h for h in report.hosts if h.reachable), key=lambda h: natural_key(h.name))
    if not hosts:
        return []
    shown = hosts[:MAX_TABLE_ROWS]
    return [
        Table(
            ["node", "GPUs", "narrow PCIe", "slowing down", "IB ports active", "kernel log"],
            [_row(h) for h in shown],
            title="Hardware by node",
            note=f"{len(hosts) - len(shown)} more nodes in the JSON report"
            if len(hosts) > len(shown)
            else "",
        )
    ]


def fabric_log(result: CheckResult) -> list[Block]:
    """The fabric manager's error and warning lines a finding about it carries, oldest first."""
    lines = result.details.get("log")
    if not isinstance(lines, list) or not lines:
        return []
    rows = [
        [TCell(plain(str(line.get("level")))), TCell("yes" if line.get("since_start") else "no"),
         TCell(plain(str(line.get("line"))), "mono")]
        for line in lines[-MAX_TABLE_ROWS:] if isinstance(line, Mapping)
    ]  # fmt: skip
    source = result.details.get("log_source")
    title = f"The fabric manager's log ({plain(str(source))})" if source else "The fabric manager's log"
    return [Table(("level", "since it last started", "line"), rows, title=title)]


ADVICE = {
    "gpu_pcie_width": "Reseat the GPU (or its riser or retimer) and check the slot; "
    "nvidia-smi -q -d PCIE shows the link. A narrow link cuts host-device and peer bandwidth.",
    "gpu_nvlink": "nvidia-smi nvlink -s lists the links and nvlink -e their error counters; reset the GPU "
    "(nvidia-smi -r) or reboot, and if the link stays down have the board or NVSwitch tray looked at. "
    "A GPU with links down slows every collective inside its node.",
    "gpu_pcie_gen": "Check the slot and the BIOS PCIe settings; an idle GPU may downshift, "
    "so check again under load.",
    "gpu_slowdown": "Check the GPU's cooling and power "
    "(nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER); drain the node if it stays in slowdown.",
    "persistence_mode": "Enable persistence (nvidia-persistenced, or nvidia-smi -pm 1) "
    "as on the other nodes.",
    "ib_port_down": "Check the cable, transceiver and switch port (ibstat, ibportstate); "
    "the job would run on fewer rails or fall back.",
    "ib_rate": "The port trained at a lower rate: check the cable and the switch port's speed.",
    "ib_port_unused": "Ports down on every node are taken as unused at this site and not judged; "
    "if the job should use one, check its cabling and switch ports on every node.",
    "ib_hcas": "An HCA is missing: check lspci, the driver (mlx5_core) and the firmware on the node.",
    "ib_pkeys": "The subnet manager sets each port's P_Keys (opensm's partitions.conf, UFM): add the "
    "port's GUID to the job's partition; cat /sys/class/infiniband/DEV/ports/N/pkeys/* shows them, and "
    "NCCL_IB_PKEY names the partition NCCL uses.",
    "roce_gid_index": "show_gids lists each port's GIDs; the RoCE v2 GID follows the interface's IP "
    "addresses: give the interface the same addressing as its peers, or set NCCL_IB_GID_INDEX per node "
    "(NCCL >= 2.21 picks one itself when unset).",
    "roce_v2_missing": "show_gids (or ibv_devinfo -v) lists each GID's type: a port whose driver gives it "
    "RoCE v1 GIDs only cannot carry NCCL across a routed fabric; compare its driver, firmware and their "
    "RoCE settings with a peer's.",
    "ib_counters": "Counts since the counters were last cleared: compare with perfquery after a while, "
    "or clear them (perfquery -R) and rerun; link_downed on one port alone means its link went down "
    "since, so check its cable and switch port. An EFA device's counters (rdma -p statistic show, or "
    "/sys/class/infiniband/DEV/ports/1/hw_counters) count since the driver loaded: retransmission "
    "timeouts, unresponsive or impaired remotes and failed RDMA operations on one node alone point "
    "at its device or its path; compare after a while, and stop and start the instance if they grow.",
    "memory_below_peers": "Compare dmidecode -t memory (or the BMC's inventory) with a peer's: a DIMM "
    "the firmware mapped out after errors, or one not seated, shows as an empty or disabled slot; "
    "the BMC's event log says which.",
    "cpus_below_peers": "lscpu shows the CPUs online and the threads per core: bring offline cores back "
    "(/sys/devices/system/cpu/cpuN/online), or match the BIOS's SMT setting to the other nodes'.",
    "nvme_missing": "ls /sys/class/nvme and nvme list show the disks the node sees: a disk gone or "
    "not live has failed or lost its slot (the BMC's log says which); the node's local scratch is "
    "smaller or its RAID degraded until it is replaced.",
    "pcie_errors": "Counts since boot (the kernel's AER counters, /sys/bus/pci/devices/ADDR/aer_dev_*): "
    "the kernel log's 'PCIe Bus Error' lines say when; a count that grows between runs is a slot, "
    "riser or retimer going bad: reseat the card and check its link (lspci -vv, nvidia-smi -q -d PCIE).",
    "pcie_numa_layout": "nvidia-smi topo -m and lstopo show where each GPU and NIC sits: compare with a "
    "peer's; a card in another slot, or a BIOS with other NUMA settings (sub-NUMA clustering, NPS), "
    "gives NCCL other paths on this node than on its peers.",
    "gpu_link_errors": "Counts since the driver loaded: nvidia-smi -q -d PCIE shows the replays and "
    "nvidia-smi nvlink -e the NVLink error counters; counts that grow between runs are a link going "
    "bad (reseat the GPU or its riser; for NVLink, have the board or NVSwitch tray looked at).",
    "nic_pcie_width": "Reseat the NIC and check its slot: a narrow PCIe link caps its bandwidth.",
    "fabric_manager": "Without the fabric manager an NVSwitch system's GPUs do not register with the "
    "fabric and CUDA does not start on them. Read why it stopped (systemctl status nvidia-fabricmanager, "
    "/var/log/fabricmanager.log), fix that, then start it (systemctl start nvidia-fabricmanager); if it "
    "was stopped while the GPUs were in use, reset the GPUs and NVSwitches (nvidia-smi -r, with nothing "
    "holding them) or reboot before starting it again.",
    "fabric_manager_version": "The fabric manager starts only with the driver of its own version "
    "(nv-fabricmanager --version against nvidia-smi's driver version): install the "
    "nvidia-fabricmanager package of exactly the driver's version (and hold both), or reboot into the "
    "driver the fabric manager was installed for, then restart nvidia-fabricmanager.",
    "fabric_manager_log": "The fabric manager logged errors since it started (the lines are in the "
    "finding): NVLink training or NVSwitch errors on a fabric that stays up degrade or stop the GPUs' "
    "peer traffic. Compare with a peer's log; if they recur, drain the node, reset the GPUs and "
    "NVSwitches (nvidia-smi -r) and restart nvidia-fabricmanager, and have the baseboard looked at if "
    "they come back.",
    "gpu_fabric": "Check the fabric manager (systemctl status nvidia-fabricmanager and its log): its "
    "version must match the driver's. nvidia-smi -q shows each GPU's Fabric State; restart the fabric "
    "manager, and reset or reboot the node if the GPUs stay unregistered.",
    "xid": "Follow the action given for the XID; ignore known noise with [hardware] ignore_xids.",
    "sxid": "An NVSwitch reported an error on its NVLinks: after a fatal SXID reset the GPUs and NVSwitches "
    "(or reboot the node) before the job; if it recurs on the same link, have the NVSwitch tray and "
    "that link inspected. NVIDIA's Fabric Manager User Guide (appendix D) lists each SXID.",
    "pcie_aer": "The kernel's AER driver (or the firmware, through APEI) logged errors on the device's "
    "PCIe link. A fatal uncorrected error on a GPU's or NIC's link means the link went down or dropped "
    "transactions: drain the node, reseat the card and its riser or retimer, and check the link (lspci -vv "
    "-s ADDR: LnkSta and the AER capability's UESta/CESta; nvidia-smi -q -d PCIE for a GPU) before it "
    "runs a job again. A non-fatal one corrupted a transaction the driver may not have recovered: reset "
    "the device or reboot. Corrected errors are retried by the link; a count far above the other nodes' "
    "is a slot, riser or cable going bad.",
    "machine_check": "The CPU or the memory reported a hardware error. An uncorrected one lost data (the "
    "kernel may have offlined a page or killed a process): drain the node and have the DIMM or CPU the "
    "line names checked (ras-mc-ctl --errors, mcelog --client, edac-util -v, the BMC's event log). "
    "Corrected memory errors far above the other nodes' are a DIMM wearing out: plan its replacement. "
    "'Machine check events logged' alone: the log daemon (rasdaemon, mcelog) has the decoded event.",
    "block_io_errors": "A disk of the node failed reads or writes: the job may fail to read its data or "
    "to write its checkpoints there. smartctl -a /dev/DEV (nvme smart-log and nvme error-log for NVMe) "
    "shows the disk's health; a filesystem error needs the filesystem checked (fsck, xfs_repair) after "
    "unmounting; NVMe timeouts point at the drive's firmware or its PCIe link. Replace a failing disk, or "
    "keep the job's data and checkpoints off it.",
    "nic_driver_errors": "A ConnectX card's firmware or PCIe link failed: devlink health show pci/ADDR "
    "counts the fw and fw_fatal reporters' errors, devlink health diagnose pci/ADDR reporter fw gives the "
    "syndrome. A reset (mlxfwreset -d ADDR reset, or a reboot) recovers the card; one that fails again "
    "needs new firmware or replacing. A command timeout leaks a command slot until the driver reloads. "
    "For a slot short of power, lspci -vv -s ADDR shows the slot's power limit (SlotPowerLimit): compare "
    "it with a peer's, and check the card's seating, riser and the BMC's power settings. An EFA device "
    "(efa) whose admin command timed out or whose admin queue closed takes no command (queue pairs, "
    "memory registration) until the driver reloads: stop its users and rmmod efa && modprobe efa, or "
    "reboot; one that fails again, or that did not answer its register reads, reset or probe, needs "
    "the instance stopped and started (a new host) or an AWS support case.",
    "gpu_power_limit": "Restore the power limit with the command given (nvidia-smi -pl, as root); "
    "nvidia-smi -q -d POWER shows the current, requested and default limits. A lower limit slows "
    "that GPU, and a synchronous job runs at the pace of its slowest GPU.",
    "gpu_app_clocks": "Reset the applications clocks (nvidia-smi -rac); clocks locked with -lgc or "
    "-lmc are reset with nvidia-smi -rgc and -rmc. nvidia-smi -q -d CLOCK shows them.",
    "gpu_compute_mode": "Set the compute mode back to Default (nvidia-smi -c 0): Prohibited lets no "
    "process use the GPU, Exclusive_Process only one.",
    "gpu_ecc_pending": "An ECC mode change waits for a reboot: keep the current mode with the command "
    "given, or reboot the node (or reset its GPUs) before the job so that it runs as checked.",
    "gpu_mig_pending": "A MIG mode change waits for a GPU reset: keep the current mode with the command "
    "given (nvidia-smi -mig 0 turns MIG off), or reset the GPUs (nvidia-smi -r) before the job.",
    "gpu_unreadable": "The GPU no longer answers its driver: nvidia-smi -q -i N shows which readings fail, "
    "and the kernel log (dmesg) the XID that came with it (79: fallen off the bus). Where the words say a "
    "reset is required, reset it with nothing running on it (nvidia-smi -r -i N) and check again; "
    "otherwise drain the node, then reset the GPU or reboot; a GPU lost again needs reseating or replacing.",
    "gpu_reading_errors": "The driver answers errors for some of the GPU's readings (nvidia-smi -q -i N "
    "shows them): look for XIDs in the kernel log, reset the GPU (nvidia-smi -r -i N) or reboot the node, "
    "and have the GPU looked at if the errors come back. A job on it may fail the same way.",
    "port_reading_errors": "Reading the port's files (/sys/class/infiniband/DEV/ports/N) failed with an I/O "
    "error: the card or its firmware did not answer. Check ibstat and the kernel log's mlx5_core lines; "
    "reset the card (mlxfwreset -d ADDR reset) or reboot, and replace a card that fails again.",
    "pci_reading_errors": "Reading the device's files (/sys/bus/pci/devices/ADDR) failed with an I/O error: "
    "the device no longer answers on its bus. lspci -vv -s ADDR and the kernel log's AER lines say more; "
    "reseat the card or reboot the node.",
    "reading_permissions": "The probe's user may not read these (NVML's Insufficient Permissions): run "
    "preflight as a user allowed to query the GPUs, or lift the restriction (RmProfilingAdminOnly in "
    "/proc/driver/nvidia/params, a container's device access). It says nothing of the part's health.",
    "denylisted_module": "Blacklist nouveau (a modprobe.d file with 'blacklist nouveau' and 'options "
    "nouveau modeset=0'), rebuild the initramfs (update-initramfs -u, or dracut -f) and reboot; the "
    "NVIDIA driver then binds the GPUs.",
    "driver_mismatch": "The user-space driver library and the loaded kernel module differ (an upgrade "
    "without a reboot): reboot the node, or stop what holds the GPUs (nvidia-persistenced, DCGM, "
    "nvidia-fabricmanager, containers) and reload the module: rmmod nvidia_uvm nvidia_drm "
    "nvidia_modeset nvidia && modprobe nvidia.",
}

PRESENTATION = Presentation(
    heading="Hardware",
    about="GPU and fabric health from the facts: PCIe links, clock slowdowns, InfiniBand ports, XID errors",
    evidence=evidence,
    finding=fabric_log,
    advice=advice_by_item(ADVICE),
)
