"""What each item of ``hardware``'s findings about the host around the GPUs means (``preflight
explain``): its InfiniBand/RoCE ports and network cards, memory, CPUs and disks, PCIe links and
layout, the readings its tools could not make, and its kernel log's hardware errors."""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS_HOST = (
    Explanation(
        item="ib_hcas",
        means=(
            "A node lacks InfiniBand/RoCE devices (HCAs) that the other nodes have, or has none at all "
            "while most nodes do. The job loses those rails: NCCL carries its traffic over fewer cards "
            "on that node, or fails to start where `NCCL_IB_HCA` names a device that is not there."
        ),
        measured=(
            "Each node lists its RDMA devices under `/sys/class/infiniband`. The set of device names "
            "most nodes have is the reference; a node missing any of them is named, and a node with "
            "no device at all is named where more than half of the nodes have some."
        ),
        threshold="",
        first=(
            "On the node, compare `ibv_devinfo -l` (or `ls /sys/class/infiniband`) with a peer's, then "
            "look for the missing card: `lspci | grep -i -e mellanox -e infiniband`, and "
            "`dmesg | grep -e mlx5_core -e efa` for a card that failed to probe or a driver not loaded. "
            "A device present under another name points at udev naming rules. Drain the node until "
            "every card is back."
        ),
        healthy="The same RDMA device names on every node (`mlx5_0` ... `mlx5_N` alike).",
    ),
    Explanation(
        item="ib_port_down",
        means=(
            "An InfiniBand/RoCE port is not up (DOWN, INIT or ARMED, or its physical link Polling) "
            "where the same port on the other nodes is ACTIVE, or it is cabled (physical link up) but "
            "not ACTIVE. The job's "
            "traffic over that rail has no path from this node: NCCL fails or falls back to fewer "
            "cards, and the whole job runs at the node's speed."
        ),
        measured=(
            "Each port's `state` and `phys_state` under `/sys/class/infiniband/DEV/ports/N`, compared "
            "with its like ports: the same device and port number on a card of the same kind (link "
            "layer, chip, board) on the other nodes, where at least half of them have it up (ACTIVE "
            "and LinkUp); a port no other node has is compared with its node's ports on cards of the "
            "same kind, most of which must be up. A port whose physical link is up but which is not "
            "ACTIVE is named whatever its like ports do; one whose state could not be read is "
            "`port_reading_errors` instead."
        ),
        threshold="",
        first=(
            "On the node, `ibstat DEV` (or `cat /sys/class/infiniband/DEV/ports/N/phys_state`). "
            "Polling or Disabled is no link: reseat or swap the cable or transceiver and check the "
            "switch port. LinkUp with INIT or ARMED is a link waiting for the subnet manager: check "
            "that the SM sees the port (`sminfo`, the SM's log). Drain the node until the port is "
            "ACTIVE."
        ),
        healthy="`State: Active` and `Physical state: LinkUp` on every port its peers have up.",
    ),
    Explanation(
        item="ib_rate",
        means=(
            "An InfiniBand/RoCE port is up at a lower rate or on fewer lanes than the same port on "
            "the other nodes: a cable, transceiver or switch port that trained down. Collectives run "
            "at the speed of their slowest link, so this one port slows every step of the job."
        ),
        measured=(
            "Each port's `rate` file under `/sys/class/infiniband/DEV/ports/N` (`400 Gb/sec (4X NDR)`: "
            "the Gb/s and the lane count), compared with its like ports that are up (the same port on "
            "cards of the same kind on the other nodes, or the node's own ports of that kind for a "
            "port no other node has). The rate and width most of them run at is the reference (the "
            "faster on a tie); a port below it in either is named."
        ),
        threshold="",
        first=(
            "On the node, `ibstat DEV` for the rate and width, and `mlxlink -d DEV` (MFT) for the "
            "speed the link negotiated and its errors. Reseat or replace the cable or transceiver, "
            "and check the switch port's configured speed; drain the node until the port runs at its "
            "peers' rate."
        ),
        healthy="The same rate and width (`400 Gb/sec (4X NDR)`) on the port as on its like ports.",
    ),
    Explanation(
        item="ib_port_unused",
        means=(
            "A note: ports down on every node that has them, taken as ports this site does not use (the "
            "second port of a dual-port card nobody cabled, a spare virtual function). Nothing is "
            "wrong unless the job was meant to use them."
        ),
        measured=(
            "The same port state as `ib_port_down`: a port down on every node that has it (or, alone "
            "on its node, with no port of its kind up there) is listed once for the run. A port whose "
            "physical link is up is left out: it is `ib_port_down`."
        ),
        threshold="",
        first=(
            "Nothing to fix if those ports carry no traffic here. If the job should use them, cable "
            "them and bring them up; if `NCCL_IB_HCA` names them, take them out of it."
        ),
        healthy="No note, or the same uncabled ports listed run after run.",
    ),
    Explanation(
        item="ib_counters",
        means=(
            "A port's error counters are above 0. They count since they were last cleared, so most "
            "of this is old noise a healthy fabric gathers: a note. It is a warning where a port counts "
            "`link_downed` (or one of EFA's failure counters) while the same port on every other node "
            "counts none: that link has gone down before, and may again during the job."
        ),
        measured=(
            "The error counters under `/sys/class/infiniband/DEV/ports/N/counters` (`symbol_error`, "
            "`link_downed`, `link_error_recovery`, `port_rcv_errors`, "
            "`port_rcv_remote_physical_errors`, `port_xmit_discards`), or an EFA port's error "
            "`hw_counters`, as the node read them before the job. A counter at its maximum is marked: "
            "it counts no more until cleared. What grows while the job runs is judged by the job "
            "(`counter_growth`)."
        ),
        threshold="",
        first=(
            "Compare the counters with the same port on a peer (`perfquery -x` or the `counters` files), "
            "then look at whether they grow: a later run's `counter_growth` says so. For a "
            "`link_downed` alone, check the kernel log for the port's link going down and the cable "
            "(`mlxlink -d DEV -c` shows its error rate)."
        ),
        healthy="Counters at 0, or at the same small counts as the other nodes' same port, and not growing.",
    ),
    Explanation(
        item="nic_pcie_width",
        means=(
            "A network card or HCA trained its PCIe link on fewer lanes than it can use (x8 of x16): "
            "a card not seated fully, a riser or slot fault. Its PCIe link then carries less than the "
            "network port, so that rail of the job is capped below line rate."
        ),
        measured=(
            "`current_link_width` against `max_link_width` of each network interface's PCI device "
            "(`/sys/class/net/NAME/device`) and each RDMA device's (`/sys/class/infiniband/DEV/device`). "
            "A fixed rule: fewer lanes than the maximum is named; the link's generation is not judged "
            "here."
        ),
        threshold="",
        first=(
            "On the node, `lspci -vv -s ADDR | grep -e LnkCap -e LnkSta` to confirm the width, then "
            "check the slot's bifurcation setting in the BIOS against a peer's and reseat the card or "
            "its riser. Drain the node until the link trains at full width."
        ),
        healthy="`LnkSta` at the same width as `LnkCap` (x16 of x16) on every network card.",
    ),
    Explanation(
        item="memory_below_peers",
        means=(
            "A node has markedly less memory than the nodes of its kind: a DIMM the firmware mapped "
            "out, or a memory channel down. The job runs, with less room for its data loaders and "
            "pinned buffers, and a node that pages is slower than its peers."
        ),
        measured=(
            "`MemTotal` from `/proc/meminfo`, compared with the nodes of the same kind (the same CPU "
            "model and GPU model): with two nodes the larger is the reference, with three or more the "
            "median."
        ),
        threshold=(
            "More than 2 % below the reference (fixed in code): one DIMM of 32 is 3 %, while kernel and "
            "BIOS reservations move `MemTotal` by well under 0.5 %."
        ),
        first=(
            "Compare `dmidecode -t memory` (as root: the DIMMs fitted and their sizes) with a peer's, "
            "and look for a DIMM disabled by the firmware in the BMC's event log (`ipmitool sel list`) "
            "and for EDAC errors in the kernel log. Schedule the node for repair; drain it if the job "
            "needs its memory."
        ),
        healthy="`MemTotal` within 2 % of the other nodes of the same CPU and GPU model.",
    ),
    Explanation(
        item="memory_above_peers",
        means=(
            "A note: a node has more memory than the nodes of its kind. Nothing is wrong with the node "
            "itself, but its peers may be the ones short, or it may be another build under the same "
            "CPU and GPU model."
        ),
        measured=(
            "`MemTotal` from `/proc/meminfo`, against the median of the nodes of the same CPU and GPU "
            "model (with two nodes the larger is the reference, so this needs three or more)."
        ),
        threshold="More than 2 % above the reference (fixed in code).",
        first=(
            "Check that the node's memory configuration is the intended one (`dmidecode -t memory` "
            "against a peer's); if the peers are the ones short, they carry `memory_below_peers`."
        ),
        healthy="`MemTotal` within 2 % of the other nodes of the same CPU and GPU model.",
    ),
    Explanation(
        item="cpus_below_peers",
        means=(
            "A node has fewer CPUs online than the nodes of its kind: cores taken offline, SMT off in "
            "the BIOS or the kernel command line, or a socket that did not come up. The job's data "
            "loaders and NCCL's proxy threads get fewer cores there, and the node can fall behind."
        ),
        measured=(
            "The node's online logical CPUs (Python's `os.cpu_count()`: the whole node's, not the "
            "job's cgroup or affinity), compared with the nodes of the same CPU and GPU model. The "
            "count most of them have is the reference, the largest where two counts are as common; "
            "any count below it is named."
        ),
        threshold="",
        first=(
            "On the node, `lscpu` (on-line CPUs, threads per core, sockets) and "
            "`cat /sys/devices/system/cpu/offline /sys/devices/system/cpu/smt/control` against a peer; "
            "look for `nosmt` or `maxcpus=` in `/proc/cmdline` and the BIOS's SMT setting. Bring "
            "offline cores back (`echo 1 > /sys/devices/system/cpu/cpuN/online`) or fix the setting."
        ),
        healthy="The same number of online CPUs as the other nodes of the same CPU and GPU model.",
    ),
    Explanation(
        item="cpus_above_peers",
        means=(
            "A note: a node has more CPUs online than the nodes of its kind, most often SMT on here "
            "and off on its peers, or its peers with cores offline. The node is not at fault, but the "
            "nodes are not built alike."
        ),
        measured=(
            "The node's online logical CPUs (`os.cpu_count()`), against the count most nodes of the "
            "same CPU and GPU model have (the largest where two counts are as common)."
        ),
        threshold="",
        first=(
            "Compare `lscpu` (threads per core, on-line CPUs) with a peer's and decide which setting "
            "the cluster should have; make the nodes alike in the BIOS or on the kernel command line."
        ),
        healthy="The same number of online CPUs as the other nodes of the same CPU and GPU model.",
    ),
    Explanation(
        item="nvme_missing",
        means=(
            "A node has fewer local NVMe disks of a model than the nodes of its kind: a disk dead, "
            "gone, or its controller not live. The job's local scratch or data cache there may be "
            "smaller, slower or missing (a RAID 0 over the disks fails with one of them)."
        ),
        measured=(
            "The NVMe controllers under `/sys/class/nvme` that are local (PCIe transport) and live, "
            "counted by model, against the count most nodes of the same CPU and GPU model have (the "
            "largest where two counts are as common). Network volumes that show as NVMe (AWS EBS, "
            "Google Persistent Disk) are left out."
        ),
        threshold="",
        first=(
            "On the node, `nvme list` and `cat /sys/class/nvme/nvme*/state` against a peer's, and "
            "`dmesg | grep nvme` for a controller that timed out or was removed. Replace or reseat the "
            "disk; drain the node if the job's data or scratch lives on it."
        ),
        healthy="The same number of live NVMe disks of each model as its peers.",
    ),
    Explanation(
        item="pcie_errors",
        means=(
            "A GPU or network card counted PCIe errors since boot that its like devices did not. "
            "Mostly a note: a link that retrained once counts errors forever. A fatal uncorrectable "
            "error fails the node: the link went down, and the device may not carry the job's traffic "
            "reliably."
        ),
        measured=(
            "The kernel's AER counters of each GPU's and NIC's PCI device since boot "
            "(`/sys/bus/pci/devices/ADDR/aer_dev_correctable`, `aer_dev_nonfatal`, `aer_dev_fatal`; "
            "virtual functions left out), compared with the median of the same kind of device (GPUs "
            "with GPUs, NICs with NICs) across the run. A class of error the kernel log's finding "
            "(`pcie_aer`) already names on the device is left out here."
        ),
        threshold=(
            "Any fatal error fails; non-fatal errors are named where the like devices' median is 0; "
            "correctable errors where they are at least 100 and at least 10 times the like devices' "
            "median (both fixed in code)."
        ),
        first=(
            "On the node, `lspci -vvv -s ADDR` for the device's error status and link, and the kernel "
            "log for its AER lines. For a fatal error, drain the node and have the slot, riser or "
            "card looked at; for a note, watch whether the count grows after a reboot."
        ),
        healthy="AER counts at 0, or the same few correctable errors as the like devices.",
    ),
    Explanation(
        item="pcie_numa_layout",
        means=(
            "A node's GPUs and NICs hang off other NUMA nodes than on most nodes of its kind: a card "
            "in another slot, or a BIOS with other NUMA settings (sub-NUMA clustering, NPS). NCCL "
            "plans its rings and GPU-NIC pairs from this layout, so the node moves data over other "
            "paths than its peers, often slower ones."
        ),
        measured=(
            "How many GPUs and NICs sit on each NUMA node (`/sys/bus/pci/devices/ADDR/numa_node`, -1 "
            "where the firmware gives none), compared with the layout more than half of the nodes of "
            "the same CPU and GPU model have; where no layout has a majority, every node of the kind "
            "is named in one finding."
        ),
        threshold="",
        first=(
            "Compare `nvidia-smi topo -m` and `lscpu | grep NUMA` on the node with a peer's. A different "
            "NUMA count is a BIOS setting (SNC, NPS) to align; the same count with cards moved is a "
            "card in the wrong slot."
        ),
        healthy="The same number of GPUs and NICs on each NUMA node as the other nodes of its kind.",
    ),
    Explanation(
        item="ib_pkeys",
        means=(
            "An ACTIVE InfiniBand/RoCE port holds other partition keys (P_Keys) than the same port on "
            "most other nodes. A port without the key of the job's partition cannot reach its peers "
            "in it: the job hangs or fails when NCCL connects over that port."
        ),
        measured=(
            "The non-zero keys of each up port's table (`/sys/class/infiniband/DEV/ports/N/pkeys/*`, "
            "with the membership bit: `0xffff` full, `0x7fff` limited), compared with the keys more "
            "than half of its like ports on the other nodes have; where no set has a majority, every "
            "port is named."
        ),
        threshold="",
        first=(
            "Compare `cat /sys/class/infiniband/DEV/ports/N/pkeys/*` on the node and on a peer, then "
            "the subnet manager's partition configuration for the port's GUID (opensm's "
            "`partitions.conf`, or UFM); make the port a member of the same partitions."
        ),
        healthy="The same P_Keys on the port as on its like ports on every node.",
    ),
    Explanation(
        item="roce_gid_index",
        means=(
            "A RoCE port's RoCE v2 GID sits at another index than on the same port of most other nodes "
            "(an IPv6 address added before the IPv4 one, an interface that lost its IPv4 address). A "
            "job sets one `NCCL_IB_GID_INDEX` for every node, so on this node it names another GID, "
            "and NCCL's connections fail or go over the wrong address."
        ),
        measured=(
            "Each ACTIVE RoCE port's GID table (`/sys/class/infiniband/DEV/ports/N/gids/*` with "
            "`gid_attrs/types/*`): the smallest index of a RoCE v2 GID of the best address it holds "
            "(IPv4, else another non-link-local address, else a link-local one), with that address's "
            "kind, compared with what more than half of its like ports on the other nodes have."
        ),
        threshold="",
        first=(
            "Compare `show_gids` (or the `gids` and `gid_attrs/types` files) on the node and a peer, "
            "and `ip addr show` of the port's interface. Give the interface the same addresses in the "
            "same order as its peers, or leave `NCCL_IB_GID_INDEX` unset so that NCCL picks the RoCE "
            "v2 IPv4 GID on each node."
        ),
        healthy="The RoCE v2 GID of the port's IPv4 address at the same index on every node.",
    ),
    Explanation(
        item="roce_v2_missing",
        means=(
            "An ACTIVE RoCE port has GIDs, but none of RoCE v2. RoCE v1 is not routed, and NCCL over "
            "RoCE needs a RoCE v2 GID in practice, so the job cannot use this port as its peers do."
        ),
        measured=(
            "The GID table of each ACTIVE port on an Ethernet link layer "
            "(`/sys/class/infiniband/DEV/ports/N/gids/*` and `gid_attrs/types/*`): GIDs present, none "
            "typed `RoCE v2`. A port whose table is empty (a bond's inactive slave) is not judged."
        ),
        threshold="",
        first=(
            "On the node, `cat /sys/class/infiniband/DEV/ports/N/gid_attrs/types/*` against a peer's, "
            "then compare the NIC's driver and firmware (`ethtool -i IFACE`, `ibv_devinfo`) and its "
            "RoCE configuration with a peer's: a card or driver with RoCE v2 off lists v1 GIDs only."
        ),
        healthy="A `RoCE v2` GID beside each `IB/RoCE v1` one, for each address of the interface.",
    ),
    Explanation(
        item="nic_driver_errors",
        means=(
            "The kernel log holds errors from a network card's driver: a ConnectX card's firmware "
            "fatal error, failed PCI channel or internal error state, or an AWS EFA device that "
            "stopped answering its driver. Such a card cannot carry the job's traffic reliably until "
            "it is reset; lesser forms (a firmware command timeout, too little slot power, an "
            "unhandled device event) warn."
        ),
        measured=(
            "The current boot's kernel log (`dmesg`, or `journalctl -k -b` where dmesg is refused), "
            "read for `mlx5_core` and `efa` error lines, folded by driver, PCI function and form. A "
            "failure for a card or device that failed, a warning for the lesser forms; a command the "
            "device refused with an error status is no fault. A card that failed and recovered since "
            "boot is still named."
        ),
        threshold="",
        first=(
            "Read the lines on the node (`dmesg -T | grep -e mlx5_core -e efa`). For a failure, drain "
            "the node and reset the card (a reboot, or `mlxfwreset` on a ConnectX; reload the driver "
            "or stop and start the instance for EFA); if it recurs, check its firmware, temperature "
            "and slot, and replace it."
        ),
        healthy="No mlx5_core or efa error line in the kernel log since boot.",
    ),
    Explanation(
        item="port_reading_errors",
        means=(
            "Reading an InfiniBand/RoCE port's files failed with an I/O error: the card's firmware or "
            "driver did not answer. A card in that state cannot be trusted with the job's traffic, and "
            "its state and rate are unknown."
        ),
        measured=(
            "The port's files under `/sys/class/infiniband/DEV/ports/N` (`state`, `phys_state`, "
            "`rate`, `link_layer`, the `counters`, an EFA port's `hw_counters`): a read that fails "
            "with EIO is named with the kernel's words. A port named here is not judged as down or "
            "slow."
        ),
        threshold="",
        first=(
            "On the node, `cat` the file again and read the kernel log for the card "
            "(`dmesg | grep mlx5_core`: health or command timeouts). Drain the node and reset the card "
            "(reboot); replace it if the reads still fail."
        ),
        healthy="Every port file reads without error.",
    ),
    Explanation(
        item="pci_reading_errors",
        means=(
            "Reading a GPU's or network card's PCI device files failed with an I/O error: the device "
            "no longer answers on its PCIe link (often fallen off the bus). The job cannot rely on it."
        ),
        measured=(
            "The files of each GPU's and NIC's device under `/sys/bus/pci/devices/ADDR` (`numa_node`, "
            "`aer_dev_correctable`, `aer_dev_nonfatal`, `aer_dev_fatal`): a read that fails with EIO "
            "is named. A GPU's device is left out where the GPU's own readings already failed "
            "(`gpu_unreadable`, `gpu_reading_errors`)."
        ),
        threshold="",
        first=(
            "On the node, `lspci -vvv -s ADDR` (a config space of all ones, `Unknown header type 7f`, "
            "is a device gone from the bus) and the kernel log for AER errors or XID 79. Drain the "
            "node; reboot it, and reseat or replace the device if it does not come back."
        ),
        healthy="Every GPU's and NIC's PCI files read without error.",
    ),
    Explanation(
        item="reading_permissions",
        means=(
            'A tool answered "Insufficient Permissions" for some of a node\'s readings (mostly NVML '
            "or nvidia-smi on a GPU): the probe's user may not read them. Not a fault of the part, "
            "but what those readings would show (a GPU's settings or errors) is not judged."
        ),
        measured=(
            "The readings each GPU and port answered with a permission error, as the probe read them "
            "as the user the probe runs as; nodes that answer the same are named in one "
            "finding."
        ),
        threshold="",
        first=(
            "Run the same query as that user on the node (`nvidia-smi -q -i N`) and compare it with "
            "root's. Give the user the rights (outside a restricted container or VM profile), or "
            "accept that those readings stay unjudged."
        ),
        healthy='Every reading returns a value (or "Not Supported", which is no error).',
    ),
    Explanation(
        item="pcie_aer",
        means=(
            "The kernel log holds PCIe AER errors. A fatal uncorrected error on a GPU's or NIC's link "
            "fails the node (the link went down and the device may be lost mid-job); a non-fatal one "
            "warns. Corrected errors are retried by the link: a note, a warning where the node counts "
            "far more of them than its peers."
        ),
        measured=(
            "The current boot's kernel log (`dmesg`, or `journalctl -k -b`): the AER driver's "
            "`error received` and `PCIe Bus Error` lines and firmware-first (GHES) PCIe records, "
            "counted per device and class. A port's error on the link to a GPU or NIC is that "
            "device's. Elsewhere (a disk's port, a chipset device) a fatal error warns and a non-fatal "
            "one is a note."
        ),
        threshold=(
            "Any fatal or non-fatal uncorrected error on a GPU's or NIC's link counts. Corrected errors "
            "warn where the node's count on those links is at least 100 and at least 10 times the "
            "median of the nodes' counts (both fixed in code)."
        ),
        first=(
            "Read the lines on the node (`dmesg -T | grep -i aer`) and `lspci -vvv -s ADDR` for the "
            "device's error status. For an uncorrected error, drain the node and have the slot, riser "
            "or card looked at; for corrected errors that stand out, reseat at the next maintenance."
        ),
        healthy="No AER line in the kernel log since boot, or a few corrected errors like its peers'.",
    ),
    Explanation(
        item="machine_check",
        means=(
            "The kernel log holds machine checks or memory errors. An uncorrected one fails the node: "
            "a CPU or DIMM produced bad data, and a process (the job's) may have been killed or "
            "computed wrong. Corrected errors are a note, a warning where the node counts far more "
            "than its peers: often the DIMM that fails next."
        ),
        measured=(
            "The current boot's kernel log (`dmesg`, or `journalctl -k -b`): x86 machine-check bank "
            "lines, AMD's decoder, EDAC's `CE`/`UE` lines with the DIMM label, and firmware (GHES) "
            'memory records, counted as corrected or uncorrected. "Machine check events logged" '
            "(undecoded, sent to mcelog or rasdaemon) is counted but never fails."
        ),
        threshold=(
            "Any uncorrected error fails. Corrected errors warn where the node's count is at least 100 "
            "and at least 10 times the median of the nodes' counts (both fixed in code)."
        ),
        first=(
            "Read the lines on the node (`dmesg -T | grep -i -e mce -e edac -e 'Hardware Error'`, "
            "`ras-mc-ctl --errors` where rasdaemon runs) and the BMC's event log for the DIMM or CPU. "
            "For an uncorrected error, drain the node and replace the part; schedule a DIMM that "
            "stands out for replacement."
        ),
        healthy="No machine-check or EDAC error line in the kernel log since boot.",
    ),
    Explanation(
        item="block_io_errors",
        means=(
            "The kernel log holds I/O errors on a node's disks: failed reads or writes, NVMe command "
            "timeouts, a controller down, or filesystem errors. The job may read its data or write its "
            "checkpoints there, and a failing disk can stall or corrupt them."
        ),
        measured=(
            "The current boot's kernel log (`dmesg`, or `journalctl -k -b`): `I/O error, dev ...`, "
            "`Buffer I/O error`, NVMe timeouts and controller-down lines, `EXT4-fs error` and XFS I/O "
            "errors, counted per disk (a partition is its disk's). A VM's empty CD-ROM or floppy and "
            "loop devices are left out."
        ),
        threshold="",
        first=(
            "Read the lines on the node (`dmesg -T | grep -i -e 'I/O error' -e nvme -e EXT4-fs -e XFS`) "
            "and the disk's health (`smartctl -a /dev/DISK`, `nvme smart-log /dev/nvmeN`). Find what "
            "is mounted there (`lsblk`); drain the node if the job's data, scratch or checkpoints "
            "live on it, and replace the disk."
        ),
        healthy="No block I/O error line in the kernel log since boot.",
    ),
)
