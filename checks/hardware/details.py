"""The JSON contract of the ``hardware`` check's details: what was audited (the pass, or added to
the first finding), and for each finding its ``item``, the node and what it found there.
"""

from __future__ import annotations

from typing import Required, TypedDict

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


class HcasMissing(Finding):
    """HCAs the other nodes have and this one lacks (``item`` ``ib_hcas``)."""

    missing: Required[list[str]]


class GpusFinding(NodeFinding):
    """GPUs of one node, by index (``gpu_fabric``, ``fabric_manager``)."""

    gpus: Required[list[int | None]]


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


class Xid(NodeFinding):
    """XID errors in the node's kernel log and the worst action they ask for (``item`` ``xid``)."""

    xids: Required[list[int]]
    action: Required[Action | None]


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
