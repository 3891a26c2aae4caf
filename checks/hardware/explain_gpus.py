"""What each GPU, NVSwitch fabric, kernel-log and GPU-setting item of ``hardware``'s findings means
(``preflight explain``); the InfiniBand, PCIe and resource items are explained beside them.
"""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS_GPUS = (
    Explanation(
        item="gpu_pcie_width",
        means=(
            "A GPU's PCIe link trained on fewer lanes than the GPU can use (x8 of x16, say): its "
            "host-to-device copies, and whatever traffic it sends over PCIe to the NICs or other GPUs, "
            "run at a fraction of its peers' bandwidth, and a data-parallel job waits for it every step. "
            "It is a seating, riser, retimer or slot fault, not a setting."
        ),
        measured=(
            "On every node, NVML's current and maximum PCIe link width of each GPU "
            "(nvmlDeviceGetCurrPcieLinkWidth and nvmlDeviceGetMaxPcieLinkWidth; nvidia-smi's "
            "pcie.link.width.current and .max where the node has no pynvml), read before the job."
        ),
        threshold="",
        first=(
            "Confirm on the node with `nvidia-smi -q -d PCIE -i N` (or `lspci -vv -s ADDR`: LnkSta "
            "against LnkCap). Drain the node and reseat the GPU, or its riser or retimer, and check the "
            "slot; a link that comes back narrow after a reseat needs the board or slot replaced."
        ),
        healthy="Every GPU's current link width equals its maximum (x16 of x16).",
    ),
    Explanation(
        item="gpu_pcie_gen",
        means=(
            "A GPU's PCIe link runs at an older generation (a lower speed per lane) than most GPUs of "
            "the same kind in the run do now: its PCIe traffic is slower than its peers', which "
            "can hold back a job that copies to and from the host or crosses PCIe to its NIC. A warning, "
            "since a link may also lower its speed on purpose while the GPU idles."
        ),
        measured=(
            "NVML's current and maximum PCIe link generation of each GPU (nvidia-smi's "
            "pcie.link.gen.current and .max where the node has no pynvml), read before the job. For each "
            "maximum generation, the current generation most GPUs of the run with that maximum show is "
            "the usual one; a GPU below it is named."
        ),
        threshold="",
        first=(
            "Check it again under load (`nvidia-smi -q -d PCIE -i N` while a job runs): an idle link "
            "may train down. If it stays below its peers, check the BIOS's PCIe speed settings against a "
            "peer's, then the slot, riser and retimer, as for a narrow link."
        ),
        healthy=(
            "Every GPU at the same current generation as the other GPUs of its kind (at load, its "
            "maximum: Gen5 of Gen5 on an H100)."
        ),
    ),
    Explanation(
        item="gpu_slowdown",
        means=(
            "A GPU was already slowing its own clocks before the job started, for heat or power (a "
            "hardware slowdown, thermal slowdown or the board's power brake): under load it will run "
            "slower still, and every step of the job waits for it. A hot or power-starved GPU at idle "
            "points at cooling, a fan or a power supply."
        ),
        measured=(
            "NVML's clock-event (throttle) reasons of each GPU at the time the node was probed "
            "(nvmlDeviceGetCurrentClocksEventReasons), with its temperature. Only the reasons of the "
            "GPU's own slowing count: hw_slowdown, hw_thermal, sw_thermal and hw_power_brake; idle, "
            "applications clocks, the power cap and sync boost do not."
        ),
        threshold="",
        first=(
            "Read the reason and temperature in the finding, then `nvidia-smi -q -d "
            "PERFORMANCE,TEMPERATURE,POWER -i N` on the node. Check the node's fans, airflow and power "
            "supplies (the BMC's sensors and event log); a power brake is the board's input asserted by "
            "the chassis or a supply. Drain the node while it stays in slowdown."
        ),
        healthy=(
            "At idle, no clock-event reason but GPU Idle (and perhaps Applications Clocks Setting), "
            "and a temperature like its peers'."
        ),
    ),
    Explanation(
        item="persistence_mode",
        means=(
            "Persistence mode is off on a node's GPUs where the other nodes have it on, or off on every "
            "GPU of the run: without it the driver tears each GPU down when its last client exits, so "
            "each job's CUDA start initialises the GPUs again (seconds per GPU, more on some nodes than "
            "others), and clocks or limits set by hand do not stay. A warning."
        ),
        measured=(
            "NVML's persistence mode of each GPU (nvmlDeviceGetPersistenceMode; nvidia-smi's "
            "persistence_mode where the node has no pynvml). Nodes with any GPU disabled are named where "
            "other nodes have it enabled on every GPU, and every node is named where every GPU that "
            "reported reads disabled."
        ),
        threshold="",
        first=(
            "Enable it as the other nodes have it: `systemctl enable --now nvidia-persistenced` (the "
            "daemon NVIDIA recommends), or `nvidia-smi -pm 1` as root until the next reboot. Check with "
            "`nvidia-smi --query-gpu=index,persistence_mode --format=csv`."
        ),
        healthy="Persistence Mode Enabled on every GPU of every node, nvidia-persistenced running.",
    ),
    Explanation(
        item="gpu_nvlink",
        means=(
            "A GPU has NVLinks down that the same GPUs elsewhere in the run have up: its traffic to the "
            "other GPUs of its node goes over fewer links (or PCIe), so every collective inside the node "
            "slows and the whole job with it. The job's findings about this node's speed are named as "
            "caused by it. A link that trained down is a board, cable or NVSwitch port fault."
        ),
        measured=(
            "Each GPU's NVLink states from NVML (nvmlDeviceGetNvLinkState for every link; `nvidia-smi "
            "nvlink --status` where the node has no pynvml), read before the job. A GPU with links "
            "listed inactive (or all inactive) and fewer links up than the most any GPU of its model in "
            "the run has is named; GPUs whose unused links read inactive alike are not, nor a GPU that "
            "answers only errors (gpu_unreadable)."
        ),
        threshold="",
        first=(
            "On the node, `nvidia-smi nvlink -s -i N` lists the links and `nvidia-smi nvlink -e -i N` "
            "their error counters. Drain the node, reset the GPU (`nvidia-smi -r`, with nothing running "
            "on it) or reboot; a link that stays down needs the GPU baseboard or NVSwitch tray looked at."
        ),
        healthy=(
            "Every GPU with as many links up as its peers of the same model (18 on an H100 SXM), each "
            "listed with its speed and none inactive."
        ),
    ),
    Explanation(
        item="fabric_manager",
        means=(
            "A node with NVSwitches has no NVIDIA Fabric Manager running: without it the GPUs do not "
            "register with the NVSwitch fabric, CUDA does not start on them (or peer traffic through the "
            "switches fails), and no rank on the node can work."
        ),
        measured=(
            "On a node that lists NVSwitches (/proc/driver/nvidia-nvswitch/devices), whether a process "
            "named nv-fabricmanager runs; where none is seen and systemd knows the nvidia-fabricmanager "
            "unit, its state (`systemctl show`: active, activating or reloading count as running); else "
            "it is taken as not running. The "
            "finding carries the unit's state, the versions and its log's first error since it last "
            "started (the file fabricmanager.cfg names, else the unit's journal)."
        ),
        threshold="",
        first=(
            "Read why it stopped: `systemctl status nvidia-fabricmanager` and "
            "`/var/log/fabricmanager.log` (or `journalctl -u nvidia-fabricmanager -b`). Fix that, then "
            "`systemctl start nvidia-fabricmanager`; if it stopped while the GPUs were in use, reset the "
            "GPUs and NVSwitches (`nvidia-smi -r` with nothing holding them) or reboot first."
        ),
        healthy=(
            "nvidia-fabricmanager active (running) on every NVSwitch node, and every GPU's fabric state "
            "Completed with status Success."
        ),
    ),
    Explanation(
        item="fabric_manager_version",
        means=(
            "A node's fabric manager is of another version than its GPU driver: it refuses to start "
            "against a driver it was not built for (or runs against one), so the GPUs do not register "
            "with the NVSwitch fabric and CUDA cannot use them. Usually one package was upgraded without "
            "the other. This is reported before a fabric manager that is not running, as its cause."
        ),
        measured=(
            "On a node with NVSwitches, the version `nv-fabricmanager --version` prints (else the one its "
            "log names at its last start or in its failed version check) against the driver's version "
            "the node reported; any difference is named."
        ),
        threshold="",
        first=(
            "Compare `nv-fabricmanager --version` with `cat /proc/driver/nvidia/version`. Install the "
            "nvidia-fabricmanager package of exactly the driver's version (and hold both packages), or "
            "reboot into the driver it was installed for, then `systemctl restart nvidia-fabricmanager`."
        ),
        healthy="The fabric manager's version equals the driver's (570.124.06 both).",
    ),
    Explanation(
        item="fabric_manager_log",
        means=(
            "A running fabric manager logged errors since it last started: NVLink training or NVSwitch "
            "errors on a fabric that stays up can degrade or stop the GPUs' peer traffic, and the job's "
            "collectives inside the node with it. A warning: the node may still run."
        ),
        measured=(
            "The end of the fabric manager's log (the file its configuration names, the last 256 KiB, "
            "else the unit's journal of this boot): its ERROR, CRITICAL and FATAL lines, and journal "
            "lines that say a failure, after its last start line. Lines from before that start count "
            "only where its GPUs' registration is not known to have completed. NVSwitch errors it copies "
            "from the kernel log are left to the sxid item where that log was read."
        ),
        threshold="",
        first=(
            "Read the lines in the finding, and compare with a peer's log. If the errors recur, drain "
            "the node, reset the GPUs and NVSwitches (`nvidia-smi -r`) and restart "
            "nvidia-fabricmanager; have the baseboard looked at if they come back."
        ),
        healthy="No ERROR line in the fabric manager's log since it last started.",
    ),
    Explanation(
        item="gpu_fabric",
        means=(
            "GPUs have not registered with their NVSwitch fabric (registration not started or still in "
            "progress), so CUDA cannot start on them (cudaErrorSystemNotReady); or they completed "
            "registration with an error where the same GPUs on other nodes succeeded. Either way the "
            "node's ranks cannot use the GPUs' NVLink fabric."
        ),
        measured=(
            "Each GPU's fabric state and status from NVML (nvmlDeviceGetGpuFabricInfo; nvidia-smi's "
            "fabric.state and fabric.status where the node has no pynvml). A GPU not_started or "
            "in_progress is named; one completed with another status than Success only where GPUs of "
            "its model elsewhere in the run completed with Success. Reported where the fabric manager's "
            "own state is not the cause."
        ),
        threshold="",
        first=(
            "Check the fabric manager (`systemctl status nvidia-fabricmanager` and its log) and "
            "`nvidia-smi -q | grep -A2 Fabric`. Restart the fabric manager; if the GPUs stay "
            "unregistered, reset the GPUs and NVSwitches or reboot the node."
        ),
        healthy="Every GPU's Fabric State Completed and Status Success.",
    ),
    Explanation(
        item="xid",
        means=(
            "The node's kernel log holds NVIDIA XID errors: the GPU driver's reports of a fault on a "
            "GPU, either of the GPU itself (memory errors, fallen off the bus, NVLink errors) or of a "
            "program that ran on it. A hardware XID means the GPU may fail or corrupt the job's work "
            "until it is reset; an application XID alone is a program's fault and leaves the node fit."
        ),
        measured=(
            'The kernel log (`dmesg`, else `journalctl -k -b`), read by the probe: every "Xid" line\'s '
            "GPU and number, plus an XID 79 for a GPU the log says fell off the bus without one; each "
            "folded by XID and GPU and given the immediate action NVIDIA's XID catalogue lists. Hardware "
            "actions (reboot, reset the GPU, drain, inspect the power cables) fail the node. An XID the "
            "table does not list, or whose action depends on decoding the line, warns. Application XIDs "
            "(RESTART_APP: 13, 31, 68, 94 ...) and those recorded for information (43, 45, 63, 92 ...) "
            "are a note. A node whose kernel log could not be read is noted as unknown, not failed."
        ),
        threshold=(
            "An application XID warns where one GPU logged application XIDs from 3 or more processes "
            "(fixed): the same fault across programs points at the GPU. XID 154 takes the recovery "
            "action its GPU's last one names, and the NVLink5 XIDs (144-150) fail only where the line "
            "says Fatal. XIDs listed in {ignore_xids} are never reported."
        ),
        first=(
            "Follow the action the finding gives. A hardware XID: drain the node, reset the GPU "
            "(`nvidia-smi -r -i N` with nothing on it) or reboot, and check it with `dcgmi diag -r 3`; "
            "79 needs a reboot and the GPU's seating and power checked. Application XIDs recurring "
            "across processes: run `dcgmi diag -r 3` before trusting the GPU. The lines stay in the "
            "kernel log until the node reboots: `dmesg -T | grep -i xid` shows when they were logged."
        ),
        healthy="No Xid line in the kernel log since boot, or only XIDs set aside in [hardware] ignore_xids.",
    ),
    Explanation(
        item="sxid",
        means=(
            "An NVSwitch of the node reported errors on its NVLinks (SXIDs) in the kernel log: a fatal "
            "one stops the traffic of the GPUs whose links cross that port (or, for some, the whole "
            "fabric), so collectives inside the node hang or fail; a non-fatal one may stall or slow it."
        ),
        measured=(
            'The kernel log\'s "SXid" lines of the NVSwitch driver, folded by SXID and switch with the '
            "links they name. The severity a line prints decides: Fatal fails the node, Correctable is a "
            "note, Non-fatal warns unless NVIDIA's Fabric Manager User Guide says the SXID has no impact "
            "(a note). An SXID whose lines print none takes the guide's class: fatal fails, non-fatal "
            "warns, no impact is a note; one preflight's table does not list warns."
        ),
        threshold="",
        first=(
            "`dmesg -T | grep -i sxid` on the node. After a fatal SXID, drain the node and reset its "
            "GPUs and NVSwitches (`nvidia-smi -r`) or reboot it; one that fails the whole fabric needs a "
            "reboot. If it comes back on the same link, have the NVSwitch tray, the baseboard and that "
            "link inspected. A non-fatal one: look it up in the guide's appendix D."
        ),
        healthy="No SXid line in the kernel log since boot, or only corrected ones.",
    ),
    Explanation(
        item="gpu_power_limit",
        means=(
            "A GPU enforces another power limit than its default, and another than most GPUs of its "
            "model in the run: a lower limit makes it clock down under load, and a "
            "synchronous job runs at the pace of its slowest GPU. Where most GPUs of the model share "
            "the same non-default limit, it is the site's choice and only a note."
        ),
        measured=(
            "NVML's enforced power limit and default limit of each GPU "
            "(nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetPowerManagementDefaultLimit; nvidia-smi "
            "where the node has no pynvml). GPUs away from their default are grouped by value: those at "
            "another value than most GPUs of their model warn, those at the most common one are a note."
        ),
        threshold="",
        first=(
            "Restore it with the command the finding gives (`nvidia-smi -i N -pl WATTS`, as root); "
            "`nvidia-smi -q -d POWER -i N` shows the current, requested and default limits. If it does "
            "not move, the limit comes from outside the node's OS (the BMC or the rack's power manager)."
        ),
        healthy="Every GPU's enforced power limit at its default, or the same on every GPU of its model.",
    ),
    Explanation(
        item="gpu_app_clocks",
        means=(
            "A GPU's applications clocks (the graphics and memory clocks it targets when running work) "
            "were set away from its defaults, and differ from most GPUs of its model in the run: "
            "lowered clocks make it slower than its peers, and the job waits for it. The value most GPUs "
            "of the model share is the site's choice and only a note."
        ),
        measured=(
            "NVML's applications clocks and default applications clocks of each GPU "
            "(nvmlDeviceGetApplicationsClock, nvmlDeviceGetDefaultApplicationsClock; nvidia-smi where "
            "the node has no pynvml), compared as for the power limit. GPUs whose driver no longer "
            "reports them (newer drivers deprecate them) are not compared."
        ),
        threshold="",
        first=(
            "Reset them with `nvidia-smi -i N -rac` (as root); `nvidia-smi -q -d CLOCK -i N` shows them. "
            "Clocks locked with -lgc or -lmc are reset with `nvidia-smi -rgc` and `-rmc`. Find what set "
            "them (a tuning script, a site default) so it does not come back."
        ),
        healthy="Every GPU's applications clocks equal to its default applications clocks.",
    ),
    Explanation(
        item="gpu_compute_mode",
        means=(
            "A GPU is in another compute mode than Default: Prohibited lets no process use it, so the "
            "rank on it cannot start (a failure); Exclusive_Process lets only one process hold a context, "
            "so a second process that touches the GPU fails, a warning where its peers are in another "
            "mode. The mode most GPUs of a model share (but Prohibited) is the site's choice, a note."
        ),
        measured=(
            "NVML's compute mode of each GPU (nvmlDeviceGetComputeMode; nvidia-smi's compute_mode where "
            "the node has no pynvml) against Default, grouped as for the power limit; Prohibited fails "
            "wherever it is."
        ),
        threshold="",
        first=(
            "Set it back with `nvidia-smi -i N -c 0` (as root), and find what set it (a scheduler's "
            "prolog, a site script) so it does not come back. Check with `nvidia-smi "
            "--query-gpu=index,compute_mode --format=csv`."
        ),
        healthy="Compute Mode Default on every GPU, or the same mode on every GPU of its model.",
    ),
    Explanation(
        item="gpu_ecc_pending",
        means=(
            "A GPU's ECC mode will change at its next reboot: the node the job meets afterwards is not "
            "the one checked, since turning ECC on or off changes the memory the job can use and "
            "whether memory errors are corrected. A failure, whatever its peers do."
        ),
        measured=(
            "NVML's current and pending ECC mode of each GPU (nvmlDeviceGetEccMode; nvidia-smi's "
            "ecc.mode.current and ecc.mode.pending where the node has no pynvml); any GPU whose pending "
            "mode differs from its current one is named."
        ),
        threshold="",
        first=(
            "Decide which mode the node should have. To keep the current one, run the command the "
            "finding gives (`nvidia-smi -i N -e 1`, or `-e 0`); to take the new one, reset the GPUs or "
            "reboot the node before the job, then rerun. `nvidia-smi -q -d ECC -i N` shows both modes."
        ),
        healthy="Every GPU's pending ECC mode equal to its current one (Enabled on data-centre GPUs).",
    ),
    Explanation(
        item="gpu_mig_pending",
        means=(
            "A GPU's MIG mode will change at its next reset or reboot: the node would then differ from "
            "the one checked, and a GPU that turns MIG on no longer shows as a whole GPU to CUDA (only "
            "its MIG instances, none until they are created), so the job's rank on it fails. A failure."
        ),
        measured=(
            "NVML's current and pending MIG mode of each GPU (nvmlDeviceGetMigMode; nvidia-smi's "
            "mig.mode.current and mig.mode.pending where the node has no pynvml); any GPU whose pending "
            "mode differs from its current one is named."
        ),
        threshold="",
        first=(
            "Keep the current mode with the command the finding gives (`nvidia-smi -i N -mig 0` keeps "
            "MIG off), or reset the GPUs (`nvidia-smi -r`) before the job to apply the change, then "
            "rerun. `nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv` shows "
            "both."
        ),
        healthy="Every GPU's pending MIG mode equal to its current one (Disabled for a training node).",
    ),
    Explanation(
        item="driver_mismatch",
        means=(
            "The node's NVIDIA user-space library is of another version than the loaded kernel module, "
            "usually after a driver upgrade without a reboot: NVML and CUDA refuse to start "
            '("Driver/library version mismatch"), so no rank on the node can use a GPU.'
        ),
        measured=(
            "NVML's initialisation (or nvidia-smi) on the node failing with \"Driver/library version "
            "mismatch\"; the kernel module's version is read from /proc/driver/nvidia/version, the "
            "library's from nvidia-smi's message or the file libnvidia-ml.so.1 links to."
        ),
        threshold="",
        first=(
            "Reboot the node. Where it cannot reboot, stop what holds the GPUs (nvidia-persistenced, "
            "DCGM's nv-hostengine, nvidia-fabricmanager, GPU containers) and reload the module: `rmmod "
            "nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia`. Hold the driver packages "
            "so an unattended upgrade cannot do it again."
        ),
        healthy="`nvidia-smi` runs, and its driver version equals /proc/driver/nvidia/version's.",
    ),
    Explanation(
        item="denylisted_module",
        means=(
            "The open-source nouveau driver is loaded on a node of a run with NVIDIA GPUs: it holds the "
            "GPUs, so the NVIDIA driver cannot drive them and neither CUDA nor NVML can use them. DCGM "
            "lists it as a module that must not be loaded."
        ),
        measured=(
            "/proc/modules on each node: nouveau listed as loaded, where any node of the run reported "
            "NVIDIA GPUs (through NVML, nvidia-smi or a GPU among its PCI devices)."
        ),
        threshold="",
        first=(
            "Drain the node. Blacklist nouveau (a file in /etc/modprobe.d with `blacklist nouveau` and "
            "`options nouveau modeset=0`), rebuild the initramfs (`update-initramfs -u`, or `dracut "
            "-f`) and reboot; check with `lsmod | grep nouveau`."
        ),
        healthy="`lsmod | grep nouveau` prints nothing, and the nvidia module is loaded.",
    ),
    Explanation(
        item="gpu_link_errors",
        means=(
            "A GPU counted far more PCIe replays or NVLink errors since the driver loaded than the other "
            "GPUs of its model in the run, or had an NVLink recovery (a link that went down and "
            "retrained) where they had none: a link going bad, which slows or breaks its traffic when it "
            "worsens. A note: the counts say what happened, not that the link is bad now."
        ),
        measured=(
            "NVML's field values of each GPU (its PCIe replay counter and its NVLink CRC flit, CRC data, "
            "replay and recovery error totals over its links; `nvidia-smi -q -d PCIE` and `nvidia-smi "
            "nvlink -e` where the node has no pynvml), each compared with the median of the run's GPUs of "
            "the same model."
        ),
        threshold=(
            "A count of at least 100 and at least 10 times the like GPUs' median, both fixed; or any "
            "NVLink recovery where the like GPUs' median is 0."
        ),
        first=(
            "Note the counts and compare them after the next run (`nvidia-smi -q -d PCIE -i N`, "
            "`nvidia-smi nvlink -e -i N`): counts that grow between runs are a link going bad. Reseat "
            "the GPU or its riser for PCIe; for NVLink, have the baseboard or NVSwitch tray looked at."
        ),
        healthy="Replay and NVLink error counts at or near zero, like the other GPUs of its model.",
    ),
    Explanation(
        item="gpu_unreadable",
        means=(
            'A GPU answers its driver nothing but errors ("GPU is lost", "Unknown Error", "GPU '
            'requires reset"), or cannot be opened at all: it fell off the bus or waits for a reset. '
            "Any rank placed on it fails, and the job with it."
        ),
        measured=(
            "The probe's NVML calls (nvidia-smi's queries where the node has no pynvml) for each GPU: a "
            "GPU whose handle could not be opened, or that answered an error for every reading but those "
            'that name it. "Not Supported" and "N/A" are not errors, and "Insufficient '
            "Permissions\" is the probe's rights (reading_permissions), not the GPU's fault."
        ),
        threshold="",
        first=(
            "Drain the node. `nvidia-smi -q -i N` shows what fails and `dmesg -T | grep -i xid` the XID "
            "that came with it (79: fallen off the bus). Where the words say a reset is required, reset "
            "it with nothing running on it (`nvidia-smi -r -i N`); otherwise reboot, and reseat or "
            "replace a GPU that is lost again."
        ),
        healthy="Every GPU opens and answers its readings with values, none with an error.",
    ),
    Explanation(
        item="gpu_reading_errors",
        means=(
            "A GPU answers some of its readings (temperature, memory, ECC mode ...) with an error such "
            'as "Unknown Error" while others still work: the GPU or its driver is in a faulty state, '
            "and a job on it may fail the same way."
        ),
        measured=(
            "The probe's NVML calls (nvidia-smi's queries where the node has no pynvml) for each GPU: "
            "the readings answered with an error, by reading, on a GPU that still answers others. "
            '"Not Supported", "N/A" and "Insufficient Permissions" do not count, nor "Corrupted '
            'infoROM" where the versions check names the InfoROM.'
        ),
        threshold="",
        first=(
            "`nvidia-smi -q -i N` shows the readings in error; look for XIDs in the kernel log (`dmesg "
            "-T | grep -i xid`). Drain the node, reset the GPU (`nvidia-smi -r -i N`) or reboot, and "
            "have it looked at if the errors come back."
        ),
        healthy="Every reading of every GPU answered with a value.",
    ),
)
