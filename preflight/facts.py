"""Typed, read-only views over what a node reported about itself (the facts probe's JSON).

A node's facts stay a plain mapping in the run model (the JSON contract); ``HostReport.node``
builds one :class:`NodeFacts` per host, once, and every check and the report read it. Nodes
are not trusted to send well-formed data: a missing or ill-typed field reads as ``None``
(or empty), never as an exception.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

# GpuFacts and PcieLink are read from here, with the other views.
from preflight.facts_gpu import GpuFacts as GpuFacts
from preflight.facts_gpu import PcieLink as PcieLink
from preflight.facts_values import _float, _int, _map, _str, records


def version_text(value: Any) -> str:
    """A version as text: ``torch.cuda.nccl.version()`` is a tuple on some builds (``2.21.5``)."""
    if isinstance(value, list | tuple):
        return ".".join(str(v) for v in value)
    return str(value)


def lookup(facts: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value at ``path`` (``("torch", "version")``), None where any step is missing."""
    node: Any = facts
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


@dataclass(frozen=True)
class TorchFacts:
    """The training stack as the node's torch reports it."""

    raw: Mapping[str, Any]

    @property
    def version(self) -> str | None:
        return _str(self.raw.get("version"))

    @property
    def cuda(self) -> str | None:
        return _str(self.raw.get("cuda"))

    @property
    def cuda_available(self) -> bool:
        return self.raw.get("cuda_available") is True

    @property
    def device_count(self) -> int | None:
        return _int(self.raw.get("device_count"))


@dataclass(frozen=True)
class Interface:
    name: str
    addresses: tuple[str, ...]  # with prefix length: "10.0.0.11/24"
    mtu: int | None
    state: str | None
    pcie: PcieLink | None = None  # the NIC's PCIe link; None for virtual interfaces
    mac: str | None = None  # the link's hardware address: "52:54:00:12:34:56"

    def has_address(self, address: str) -> bool:
        return any(a.split("/")[0] == address for a in self.addresses)


@dataclass(frozen=True)
class IbPort:
    """One InfiniBand or RoCE port (``/sys/class/infiniband/<device>/ports/<port>``)."""

    device: str
    port: int | str | None
    state: str | None  # "ACTIVE", "DOWN", ...
    rate: str | None
    link_layer: str | None  # "InfiniBand" | "Ethernet" (RoCE)
    phys_state: str | None = None  # "LinkUp", "Polling", "Disabled", ...
    counters: Mapping[str, int] = field(default_factory=dict)  # link_downed, symbol_error, ...
    pcie: PcieLink | None = None  # the HCA's own PCIe link
    width: str | None = None  # "4X", as the rate line names it
    hca_type: str | None = None  # the card's chip: "MT4129" (ConnectX-7), "MT41692" (BlueField-3)
    board_id: str | None = None  # the board's part: "MT_0000000838"
    fw_ver: str | None = None
    node_desc: str | None = None
    node_guid: str | None = None  # the card's GUID, its stable identity: "946d:ae03:00cd:e72c"
    virtual: bool | None = None  # an SR-IOV virtual function (None: not read)
    pkeys: tuple[str, ...] | None = None  # its P_Key table's keys: ("0x8001", "0xffff"); None: not read
    # A RoCE port's GIDs in use, (index, type, gid): (3, "RoCE v2", "0000:...:ffff:0a00:000b"); None:
    # not read (or an InfiniBand port).
    gids: tuple[tuple[int, str, str], ...] | None = None

    @staticmethod
    def read_pkeys(raw: Any) -> tuple[str, ...] | None:
        """The ``pkeys`` the node reported: a list of ``0x%04x`` strings."""
        return tuple(k for k in raw if isinstance(k, str)) if isinstance(raw, list) else None

    @staticmethod
    def read_gids(raw: Any) -> tuple[tuple[int, str, str], ...] | None:
        """The ``gids`` the node reported: a list of ``[index, type, gid]``; ill-typed entries left out."""
        if not isinstance(raw, list):
            return None
        return tuple(
            (g[0], g[1], g[2])
            for g in raw
            if isinstance(g, list) and len(g) == 3 and type(g[0]) is int
            and isinstance(g[1], str) and isinstance(g[2], str)
        )  # fmt: skip

    @property
    def rate_gbps(self) -> float | None:
        """The rate in Gb/s: ``400 Gb/sec (4X NDR)`` -> 400.0; None where the rate is unknown."""
        found = re.match(r"\s*(\d+(?:\.\d+)?)", self.rate or "")
        return float(found.group(1)) if found else None

    @property
    def lanes(self) -> int | None:
        """The lanes of the link's width: ``4X`` -> 4."""
        found = re.fullmatch(r"(\d+)X", self.width or "")
        return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Limit:
    """A resource limit; None means unlimited."""

    soft: int | None
    hard: int | None


def _limit(raw: Any) -> Limit | None:
    """A limit as reported (a number or "unlimited" on each side); None where either side is
    neither, which is not the same as unlimited."""
    if not isinstance(raw, Mapping):
        return None
    sides: list[int | None] = []
    for key in ("soft", "hard"):
        value = raw.get(key)
        if value == "unlimited":
            sides.append(None)
        elif (number := _int(value)) is not None:
            sides.append(number)
        else:
            return None
    return Limit(sides[0], sides[1])


@dataclass(frozen=True)
class Shm:
    """``/dev/shm``: its size and what is free on it."""

    size_bytes: int
    free_bytes: int | None


@dataclass(frozen=True)
class ScratchPlace:
    """A place the job or its libraries write (``tmp``, ``torch``, ``inductor``, ``triton``,
    ``huggingface``, ``hf_datasets``): its path, the variable it came from ("default": none), the
    directory measured (the path, or the nearest one above it that exists), the filesystem under it
    (``device``, ``mount``: places on one filesystem share its numbers) and whether the job's user
    may write there. A number is None where the node could not tell, or the filesystem sets no
    limit."""

    place: str
    path: str
    source: str | None
    measured: str | None
    device: str | None
    mount: str | None
    total_bytes: int | None
    free_bytes: int | None
    total_inodes: int | None
    free_inodes: int | None
    writable: bool | None

    @staticmethod
    def read(place: str, raw: Any) -> ScratchPlace | None:
        found = _map(raw)
        path = _str(found.get("path"))
        if path is None:
            return None
        writable = found.get("writable")
        return ScratchPlace(
            place=place,
            path=path,
            source=_str(found.get("source")),
            measured=_str(found.get("measured")),
            device=_str(found.get("device")),
            mount=_str(found.get("mount")),
            total_bytes=_int(found.get("total_bytes")),
            free_bytes=_int(found.get("free_bytes")),
            total_inodes=_int(found.get("total_inodes")),
            free_inodes=_int(found.get("free_inodes")),
            writable=writable if isinstance(writable, bool) else None,
        )


@dataclass(frozen=True)
class NcclConfFile:
    """An NCCL configuration file: ``user`` (``NCCL_CONF_FILE`` or ``~/.nccl.conf``) or ``system``
    (``/etc/nccl.conf``), what it sets, and the names it sets that NCCL never reads."""

    role: str
    path: str
    present: bool
    settings: Mapping[str, str]
    unread: tuple[str, ...]


@dataclass(frozen=True)
class NcclFacts:
    """What NCCL reads besides the environment: its configuration files and network plugins."""

    conf_files: tuple[NcclConfFile, ...]
    net_plugins: tuple[tuple[str, str], ...]  # (library name, path) of every libnccl-net* found
    net_plugin_wanted: tuple[str, ...]  # what NCCL tries to load, in order (none: no plugin)
    net_plugin: str | None  # the path it would load, None where it finds none


@dataclass(frozen=True)
class TimeFacts:
    """Whether the kernel's clock is kept synchronised, and by which services."""

    synchronised: bool | None
    state: str | None
    services: tuple[str, ...]


@dataclass(frozen=True)
class NameResolution:
    """How a node resolved a name: its addresses in the resolver's order, or why it did not."""

    name: str
    addresses: tuple[str, ...]
    canonical: str | None
    error: str | None

    @classmethod
    def from_raw(cls, raw: Any) -> NameResolution | None:
        found = _map(raw)
        name = _str(found.get("name"))
        if name is None:
            return None
        addresses = found.get("addresses")
        return cls(
            name=name,
            addresses=tuple(str(a) for a in addresses) if isinstance(addresses, list) else (),
            canonical=_str(found.get("canonical")),
            error=_str(found.get("error")),
        )


@dataclass(frozen=True)
class NodeFacts:
    """Everything one node said about itself, typed. ``raw`` is the mapping as reported."""

    raw: Mapping[str, Any]

    def value(self, path: Sequence[str]) -> Any:
        return lookup(self.raw, path)

    @property
    def hostname(self) -> str | None:
        return _str(self.raw.get("hostname"))

    @property
    def unavailable(self) -> Mapping[str, Any]:
        """Why a fact is missing, by fact name ("torch": "torch not importable: ...")."""
        return _map(self.raw.get("unavailable"))

    @property
    def os_name(self) -> str | None:
        return _str(self.value(("os", "name")))

    @property
    def python_version(self) -> str | None:
        return _str(self.value(("python", "version")))

    @property
    def cpu_count(self) -> int | None:
        return _int(self.value(("cpu", "count")))

    @property
    def cpu_model(self) -> str | None:
        return _str(self.value(("cpu", "model")))

    @property
    def pci_devices(self) -> list[Mapping[str, Any]]:
        """The node's GPUs and NICs on its PCI bus, as its probe listed them (``address``, ``kind``:
        ``gpu`` or ``nic``, ``numa_node``, AER counts); none from an older probe."""
        return [d for d in records(self.raw.get("pci_devices")) if d.get("kind") in ("gpu", "nic")]

    @property
    def nvme_models(self) -> list[str] | None:
        """The model of each local NVMe controller (PCIe, live), in name order; None where the
        node did not say (an older probe)."""
        found = self.raw.get("nvme")
        if not isinstance(found, list):
            return None
        return [
            str(c.get("model") or "")
            for c in found
            if isinstance(c, Mapping)
            and c.get("transport") in (None, "pcie")
            and c.get("state") in (None, "live")
        ]

    @property
    def memory_total_bytes(self) -> float | None:
        return _float(self.value(("memory", "total_bytes")))

    @property
    def driver_version(self) -> str | None:
        return _str(self.value(("driver", "version")))

    @property
    def driver_mismatch(self) -> Mapping[str, Any]:
        """Where NVML refused the loaded kernel module: ``module`` and ``library`` versions (either
        None where unknown) and what NVML said; empty where there is no mismatch."""
        return _map(self.raw.get("driver_mismatch"))

    @cached_property
    def torch(self) -> TorchFacts | None:
        """None where torch could not be imported (``unavailable["torch"]`` says why)."""
        found = self.raw.get("torch")
        return TorchFacts(found) if isinstance(found, Mapping) and found else None

    @cached_property
    def gpus(self) -> list[GpuFacts] | None:
        """The node's GPUs; None where the node did not report them (``unavailable["gpus"]``)."""
        listed = self.raw.get("gpus")
        return [GpuFacts(g) for g in records(listed)] if isinstance(listed, list) else None

    @property
    def gpu_count(self) -> int:
        return len(self.gpus or [])

    @property
    def uses_cuda(self) -> bool:
        """GPUs present and visible to the node's torch: the job runs NCCL on CUDA here."""
        return bool(self.gpus) and self.torch is not None and self.torch.cuda_available

    @cached_property
    def env(self) -> Mapping[str, str]:
        """The variables NCCL, torch, CUDA and gloo read (``NCCL_*``, ``CUDA_*``...), as the session
        the node is reached in (SSH or srun) has them (secret values masked on the node)."""
        found = self.raw.get("env")
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}

    @cached_property
    def packages(self) -> Mapping[str, str] | None:
        """Installed packages, name -> version as pip lists them; None where the node could not
        list them (``unavailable["packages"]`` says why)."""
        listed = self.raw.get("packages")
        return {str(k): version_text(v) for k, v in listed.items()} if isinstance(listed, Mapping) else None

    @cached_property
    def sysctl(self) -> Mapping[str, int | str]:
        """Kernel settings the node reported (``net.ipv4.neigh.default.gc_thresh3``): a number
        as an int, anything else as text."""
        return {
            str(k): v
            for k, v in _map(self.raw.get("sysctl")).items()
            if isinstance(v, int | str) and not isinstance(v, bool)
        }

    @cached_property
    def interfaces(self) -> list[Interface]:
        return [
            Interface(
                name=str(i.get("name")),
                addresses=tuple(str(a) for a in i.get("addresses") or []),
                mtu=_int(i.get("mtu")),
                state=_str(i.get("state")),
                pcie=PcieLink.read(i.get("pcie")),
                mac=_str(i.get("mac")),
            )
            for i in records(_map(self.raw.get("net")).get("interfaces"))
        ]

    def interface_with(self, address: str) -> Interface | None:
        """The interface that holds ``address``."""
        return next((i for i in self.interfaces if i.has_address(address)), None)

    @cached_property
    def ib_ports(self) -> list[IbPort]:
        return [
            IbPort(
                device=str(d.get("name")),
                port=d.get("port") if isinstance(d.get("port"), int | str) else None,
                state=_str(d.get("state")),
                rate=_str(d.get("rate")),
                link_layer=_str(d.get("link_layer")),
                phys_state=_str(d.get("phys_state")),
                counters={str(k): v for k, v in _map(d.get("counters")).items() if _int(v) is not None},
                pcie=PcieLink.read(d.get("pcie")),
                width=_str(d.get("width")),
                hca_type=_str(d.get("hca_type")),
                board_id=_str(d.get("board_id")),
                fw_ver=_str(d.get("fw_ver")),
                node_desc=_str(d.get("node_desc")),
                node_guid=_str(d.get("node_guid")),
                virtual=d.get("virtual") if isinstance(d.get("virtual"), bool) else None,
                pkeys=IbPort.read_pkeys(d.get("pkeys")),
                gids=IbPort.read_gids(d.get("gids")),
            )
            for d in records(_map(self.raw.get("net")).get("ib_devices"))
        ]

    @cached_property
    def addresses(self) -> tuple[str, ...]:
        """Every address of the node's interfaces, without prefix lengths."""
        return tuple(a.split("/")[0] for i in self.interfaces for a in i.addresses)

    @cached_property
    def env_secret_digests(self) -> Mapping[str, str]:
        """Masked values as digests keyed for this run: equal digests, equal values."""
        return {str(k): str(v) for k, v in _map(self.raw.get("env_secret_digests")).items()}

    @cached_property
    def limits(self) -> Mapping[str, Limit]:
        """Resource limits by name (``memlock``, ``nofile``, ``nproc``, ``stack``)."""
        return {
            str(name): limit
            for name, v in _map(self.raw.get("limits")).items()
            if (limit := _limit(v)) is not None
        }

    @cached_property
    def shm(self) -> Shm | None:
        found = _map(self.raw.get("shm"))
        size = _int(found.get("size_bytes"))
        return None if size is None else Shm(size, _int(found.get("free_bytes")))

    @cached_property
    def scratch(self) -> Mapping[str, ScratchPlace]:
        """Where the job and its libraries write, by place (``tmp``, ``torch``...), in the node's
        order; empty where the node did not say (an older probe)."""
        found = {str(k): ScratchPlace.read(str(k), v) for k, v in _map(self.raw.get("scratch")).items()}
        return {k: v for k, v in found.items() if v is not None}

    @property
    def dmi(self) -> Mapping[str, str]:
        """What the firmware says the machine is (``bios_version``, ``board_name``...); empty where
        the node has no DMI or did not say."""
        return {str(k): v for k, v in _map(self.raw.get("dmi")).items() if isinstance(v, str)}

    @cached_property
    def nccl(self) -> NcclFacts | None:
        found = self.raw.get("nccl")
        if not isinstance(found, Mapping):
            return None
        files = tuple(
            NcclConfFile(
                role=str(f.get("role")),
                path=str(f.get("path")),
                present=f.get("present") is True,
                settings={str(k): str(v) for k, v in _map(f.get("settings")).items()},
                unread=tuple(str(u) for u in f.get("unread") or [] if isinstance(u, str)),
            )
            for f in records(found.get("conf_files"))
        )
        wanted = found.get("net_plugin_wanted")
        return NcclFacts(
            conf_files=files,
            net_plugins=tuple(
                (str(p.get("name")), str(p.get("path"))) for p in records(found.get("net_plugins"))
            ),
            net_plugin_wanted=tuple(str(w) for w in wanted) if isinstance(wanted, list) else (),
            net_plugin=_str(found.get("net_plugin")),
        )

    @cached_property
    def time(self) -> TimeFacts | None:
        found = self.raw.get("time")
        if not isinstance(found, Mapping):
            return None
        synchronised = found.get("synchronised")
        services = found.get("services")
        return TimeFacts(
            synchronised=synchronised if isinstance(synchronised, bool) else None,
            state=_str(found.get("state")),
            services=tuple(str(s) for s in services) if isinstance(services, list) else (),
        )

    @cached_property
    def name_resolution(self) -> NameResolution | None:
        """How the node resolves its own host name."""
        return NameResolution.from_raw(self.raw.get("name_resolution"))

    @property
    def hardware(self) -> Mapping[str, Any]:
        """NVSwitches, the fabric manager, XID lines of the kernel log (``{}`` where not reported)."""
        return _map(self.raw.get("hardware"))

    @property
    def connection(self) -> Mapping[str, Any]:
        """How the controller reached the node (added by the controller, not the node)."""
        return _map(self.raw.get("connection"))
