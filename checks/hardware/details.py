"""The JSON contract of the ``hardware`` check's details: what was audited (the pass, or added to
the first finding), and for each finding its ``item``, the node and what it found there.
"""

from __future__ import annotations

from typing import NotRequired, Required, TypedDict

from checks.hardware.sxid import Kind, Severity
from checks.hardware.xid import Action


class Ports(TypedDict, total=False):
    """How many InfiniBand/RoCE ports (and of them ACTIVE) were seen, and the nodes whose kernel
    log could not be read (why)."""

    ib_ports: int
    ib_ports_active: int
    xid_not_readable: dict[str, str]


class Audited(Ports, total=False):
    """The pass: how many GPUs were seen, with the ports. The first finding carries these keys too,
    its own ``gpus`` (a list of indices) in place of the count where it has one."""

    gpus: int


class Finding(Ports):
    """A finding named by its ``item`` alone (``persistence_mode``)."""

    item: Required[str]


class NodeFinding(Finding):
    """A finding about one node (``gpu_pcie_gen``, ``ib_hcas``, ``ib_rate``, ``ib_counters``,
    ``nic_pcie_width``)."""

    node: Required[str]


class MemoryBelow(NodeFinding):
    """A node with less memory than the nodes of its kind (``item`` ``memory_below_peers``)."""

    memory_bytes: Required[int]
    peers_bytes: Required[int]  # the kind's reference: its median, or the larger of two


class CpusDiffer(NodeFinding):
    """A node with another count of online CPUs than the nodes of its kind (``item``
    ``cpus_below_peers``, or the note ``cpus_above_peers``)."""

    cpus: Required[int]
    peers_cpus: Required[int]


class NvmeModelCount(TypedDict):
    model: str
    count: int
    peers_count: int


class NvmeMissing(NodeFinding):
    """A node with fewer local NVMe disks of a model than the nodes of its kind (``item``
    ``nvme_missing``)."""

    models: Required[list[NvmeModelCount]]


class PcieDevice(TypedDict):
    device: str  # "GPU 3, serial 1652... (0000:18:00.0)", "NIC (0000:3b:00.0)"
    errors: str  # "2 non-fatal uncorrectable, 340 correctable (like devices' median 0)"
    kind: str  # "gpu", "nic"
    pci: str  # its PCI address, as sysfs names it


class PcieErrors(NodeFinding):
    """A node's GPUs and NICs that counted PCIe errors since boot where their like devices did not
    (``item`` ``pcie_errors``, a note)."""

    devices: Required[list[PcieDevice]]


class PcieNumaLayout(Finding):
    """Nodes whose GPUs and NICs hang off other NUMA nodes than their kind's majority's (``item``
    ``pcie_numa_layout``): the nodes, and the majority's layout (None where none has a majority)."""

    nodes: Required[list[str]]
    usual: Required[str | None]


class HcasMissing(Finding):
    """HCAs the other nodes have and this one lacks (``item`` ``ib_hcas``)."""

    missing: Required[list[str]]


class GpusFinding(NodeFinding):
    """GPUs of one node, by index."""

    gpus: Required[list[int | None]]


class FabricLogLine(TypedDict):
    """An error or warning line of the fabric manager's log: its level (``ERROR``, ``WARNING``; a
    journal line that says a failure is ``ERROR``), the line as logged, and whether it came after
    the fabric manager last started."""

    level: str
    line: str
    since_start: bool


class FabricFinding(GpusFinding, total=False):
    """An NVSwitch node's fabric manager (``item`` ``fabric_manager``: not running,
    ``fabric_manager_version``: another version than the driver's, ``fabric_manager_log``: errors
    in its log, a warning) or its GPUs not registered with the fabric (``gpu_fabric``): the GPUs
    not registered (or registered with an error) by index, and where the node said them, the
    unit's state where it is not running (``nvidia-fabricmanager is failed (exit-code, status
    1)``), the fabric manager's and the driver's versions, its log's error and warning lines (the
    last 20) and where the log was read (its file, or ``journalctl``)."""

    unit_state: str
    version: str
    driver_version: str
    log: list[FabricLogLine]
    log_source: str


class GpuPcieWidth(GpusFinding):
    """GPUs on fewer PCIe lanes than they can use, with their serials (``item`` ``gpu_pcie_width``)."""

    serials: Required[list[str | None]]


class GpuSlowdown(GpusFinding):
    """GPUs slowing themselves down, and the clock-event reasons (``item`` ``gpu_slowdown``)."""

    reasons: Required[list[str]]


class GpuNvlink(GpusFinding):
    """GPUs with NVLinks down, their inactive links by GPU index (``item`` ``gpu_nvlink``)."""

    inactive: Required[dict[str, list[int]]]


class IbPortDown(NodeFinding):
    """InfiniBand/RoCE ports not ACTIVE or not LinkUp (``item`` ``ib_port_down``)."""

    ports: Required[list[str]]


class XidEvent(TypedDict):
    """One XID on one GPU: its PCI address, how many lines, the action NVIDIA's catalogue gives
    (None where it does not list it) and the GPU it is ("GPU 3, serial ...") where the facts say."""

    xid: int
    pci: str
    lines: int
    action: Action | None
    gpu: str | None


class Xid(NodeFinding):
    """XID errors in the node's kernel log and the worst action they ask for (``item`` ``xid``);
    a note (``note`` true) when they only concern the application or are for information."""

    xids: Required[list[int]]
    action: Required[Action | None]
    events: NotRequired[list[XidEvent]]


class SxidEvent(TypedDict):
    """One SXID on one NVSwitch: the switch ("nvswitch1") and its PCI address, the links its lines
    name, how many lines, the worst severity they print (None where none does) and the class
    NVIDIA's Fabric Manager User Guide gives it (None where preflight's table does not list it)."""

    sxid: int
    switch: str
    pci: str
    links: list[int]
    lines: int
    severity: Severity | None
    kind: Kind | None


class Sxid(NodeFinding):
    """NVSwitch SXID errors in the node's kernel log (``item`` ``sxid``): a fail for a fatal one, a
    warning for a non-fatal one that needs action or one the table does not list, a note (``note``
    true) for those with no impact."""

    sxids: Required[list[int]]
    events: Required[list[SxidEvent]]


class IbPortRate(NodeFinding):
    """InfiniBand/RoCE ports at a lower rate or width than their like ports (``item`` ``ib_rate``)."""

    ports: Required[list[str]]


class UnusedPort(TypedDict):
    """A port down on every node that has it: ``mlx5_2 port 1``, its card's kind, the nodes."""

    port: str
    kind: str
    nodes: list[str]


class IbPortUnused(Finding):
    """The note on ports down on every node that has them (``item`` ``ib_port_unused``)."""

    ports: Required[list[UnusedPort]]


class IbCounters(NodeFinding, total=False):
    """Error counters above 0 as the facts found them, by port (``item`` ``ib_counters``): a note,
    or a warning that names the counters a port counts alone (``alone``: port -> counters), and
    the ports counting ``link_downed`` alone."""

    counters: Required[dict[str, dict[str, int]]]
    link_downed_alone: list[str]
    alone: dict[str, list[str]]


class GrowthRow(TypedDict):
    """One counter that grew during the job: the port (``mlx5_1 port 1``) or interface, the
    counter, its values before and after, its growth and its rate per second."""

    where: str
    counter: str
    before: int
    after: int
    growth: int
    per_s: float | None


class CounterGrowth(TypedDict):
    """Counters that grew on one node while the job ran (``item`` ``counter_growth``, a finding of
    the check that judges the job's traffic), and the seconds between the two samples."""

    item: str
    node: str
    seconds: float
    growth: list[GrowthRow]


class GpuSetting(Finding, total=False):
    """A GPU setting away from its default (``gpu_power_limit``, ``gpu_app_clocks``,
    ``gpu_compute_mode``) or changing at the next reboot or reset (``gpu_ecc_pending``,
    ``gpu_mig_pending``): the GPUs by value and node, the default (for a pending mode, the
    current one), the command that restores it and, where it fails, the action."""

    setting: Required[str]
    values: Required[dict[str, dict[str, list[int | None]]]]
    default: Required[str]
    command: Required[str]
    action: str


class DriverMismatch(NodeFinding):
    """NVML refused the loaded kernel module (``item`` ``driver_mismatch``): both versions, None
    where unknown."""

    module: Required[str | None]
    library: Required[str | None]
    action: Required[str]


class GpuLinkErrors(GpusFinding):
    """GPUs whose PCIe replays or NVLink errors since the driver loaded stand out from their like
    GPUs' (``item`` ``gpu_link_errors``, a note): each one's counts by GPU index."""

    counts: Required[dict[str, dict[str, int]]]


class PkeyPort(TypedDict):
    """A port whose P_Keys differ from its like ports': ``mlx5_2 port 1``, its keys, the keys most
    of its like ports have (None where no majority decides) and the nodes it was compared with."""

    port: str
    pkeys: list[str]
    peers_pkeys: list[str] | None
    peers: list[str]


class IbPkeys(NodeFinding):
    """A node's ports whose P_Keys differ from their like ports' (``item`` ``ib_pkeys``)."""

    ports: Required[list[PkeyPort]]


class GidPort(TypedDict):
    """A RoCE port whose RoCE v2 GID sits at another index than its like ports': ``mlx5_2 port 1``,
    the index compared and the kind of address it holds (``IPv4``, ``IPv6``, ``link-local IPv6``),
    the like ports' (None where no majority decides) and the nodes it was compared with."""

    port: str
    index: int | None
    address: str | None
    peers_index: int | None
    peers_address: str | None
    peers: list[str]


class RoceGidIndex(NodeFinding):
    """A node's RoCE ports whose RoCE v2 GID sits at another index (``item`` ``roce_gid_index``)."""

    ports: Required[list[GidPort]]


class RoceV2Missing(NodeFinding):
    """A node's ACTIVE RoCE ports with GIDs but none of RoCE v2 (``item`` ``roce_v2_missing``)."""

    ports: Required[list[str]]


class NicEvent(TypedDict):
    """One error form of a NIC driver (``driver``: ``mlx5_core`` or ``efa``) on one card: the PCI
    function's address as the driver printed it (None where an efa line named its RDMA device only
    and sysfs linked it to none), the RDMA device (``mlx5_2``, ``efa_0``; None where neither the
    line nor sysfs named one), the form (``health_compromised``, ``fw_fatal``, ``admin_cmd_timeout``
    ...: ``preflight.node.hardware``'s catalogues), ``fail`` or ``warn``, how many lines and the
    first line's message."""

    driver: str
    pci: str | None
    hca: str | None
    kind: str
    status: str
    lines: int
    line: str


class NicDriverErrors(NodeFinding):
    """A node whose kernel log holds ConnectX driver errors (``item`` ``nic_driver_errors``): the
    forms, worst first, each form's events by PCI function, and the log read (``dmesg``,
    ``journalctl``)."""

    kinds: Required[list[str]]
    events: Required[list[NicEvent]]
    source: Required[str | None]


class ReadingError(TypedDict):
    """One part whose readings a tool answered with an error: how the finding names it (``GPU 3
    (serial 1654922005123)``, ``mlx5_2 port 1``, ``NIC (0000:3b:00.0)``), its GPU index (None for a
    port or a PCI device, or where unknown), and the tool's words by reading (the facts' key:
    ``temperature_c``, ``counters/symbol_error``, ``aer_dev_fatal``; ``handle``: it could not be
    opened)."""

    part: str
    gpu: int | None
    errors: dict[str, str]


class ReadingErrors(NodeFinding, total=False):
    """A node's parts whose readings a tool answered with an error (``item`` ``gpu_unreadable``,
    ``gpu_reading_errors``, ``port_reading_errors``, ``pci_reading_errors``): the parts, their GPU
    indexes (GPU items) and what to do (``action``: ``reset_gpu`` or ``drain``)."""

    parts: Required[list[ReadingError]]
    gpus: list[int | None]
    action: Required[str]


class ReadingPermissions(Finding):
    """Readings the probe's user may not make ("Insufficient Permissions"; ``item``
    ``reading_permissions``, a warning): the nodes that say the same, the first one's parts, and
    ``action`` ``fix_config``."""

    nodes: Required[list[str]]
    parts: Required[list[ReadingError]]
    action: Required[str]


class AerDevice(TypedDict):
    """One PCI function's PCIe errors in a node's kernel log: its address, the GPU or NIC it is or
    whose link it is on ("GPU 0 (serial 1654...)", "NIC mlx5_2"; None for another device), the link's
    kind (``gpu``, ``nic``, ``other``), the worst class (``fatal``, ``nonfatal``, ``corrected``), the
    count by class, the error bits' names, its status (``pass`` for a note) and the worst class's
    last line."""

    pci: str
    device: str | None
    kind: str
    severity: str
    counts: dict[str, int]
    errors: list[str]
    status: str
    line: str


class PcieAer(NodeFinding):
    """PCIe AER errors in the node's kernel log (``item`` ``pcie_aer``): the devices, worst first,
    and the log read (``dmesg``, ``journalctl``)."""

    devices: Required[list[AerDevice]]
    source: Required[str | None]


class MachineCheckEvent(TypedDict):
    """Machine checks or memory errors of one source (``mce``, ``edac``, ``ghes``; ``logged``: the
    kernel's "Machine check events logged"), class (``uncorrected``, ``corrected``, ``unknown``) and
    place (a CPU's bank, a DIMM; None where the line names none): how many, and the last line."""

    source: str
    severity: str
    where: str | None
    count: int
    line: str


class MachineCheck(NodeFinding):
    """Machine checks and memory errors in the node's kernel log (``item`` ``machine_check``): the
    uncorrected and corrected counts, the events worst first and the log read."""

    uncorrected: Required[int]
    corrected: Required[int]
    events: Required[list[MachineCheckEvent]]
    source: Required[str | None]


class BlockIoDisk(TypedDict):
    """One disk's I/O errors (``sdb``, ``nvme0n1``, ``nvme0``, ``dm-7``; a partition's are its
    disk's): how many, by form (``io_error``, ``buffer_io_error``, ``nvme_timeout``, ``nvme_down``,
    ``fs_error``), and the last line."""

    disk: str
    count: int
    kinds: dict[str, int]
    line: str


class BlockIoErrors(NodeFinding):
    """Block devices' I/O errors in the node's kernel log (``item`` ``block_io_errors``, a warning):
    the disks, most errors first, and the log read."""

    disks: Required[list[BlockIoDisk]]
    source: Required[str | None]
