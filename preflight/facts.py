"""Typed, read-only views over what a node reported about itself (the facts probe's JSON).

A node's facts stay a plain mapping in the run model (the JSON contract); ``HostReport.node``
builds one :class:`NodeFacts` per host, once, and every check and the report read it. Nodes
are not trusted to send well-formed data: a missing or ill-typed field reads as ``None``
(or empty), never as an exception.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    # NVML answers "not supported" for some fields on some GPUs; the probe writes null.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _records(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


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
class PcieLink:
    """A PCIe link as the device trained it (current) and as it could (max): generation and lanes."""

    gen_current: int | None
    gen_max: int | None
    width_current: int | None
    width_max: int | None

    @staticmethod
    def read(value: Any) -> PcieLink | None:
        found = _map(value)
        if not found:
            return None
        return PcieLink(
            _int(found.get("gen_current")),
            _int(found.get("gen_max")),
            _int(found.get("width_current")),
            _int(found.get("width_max")),
        )

    @property
    def narrow(self) -> bool:
        """Fewer lanes than the device can use: a reseat, a riser or a slot problem."""
        current, top = self.width_current, self.width_max
        return current is not None and top is not None and current < top

    def text(self) -> str:
        def part(current: int | None, top: int | None, prefix: str) -> str:
            shown = ["?" if v is None else str(v) for v in (current, top)]
            return f"{prefix}{shown[0]} of {prefix}{shown[1]}"

        return (
            f"{part(self.width_current, self.width_max, 'x')}, {part(self.gen_current, self.gen_max, 'Gen')}"
        )


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as NVML or nvidia-smi described it."""

    raw: Mapping[str, Any]

    @property
    def index(self) -> int | None:
        return _int(self.raw.get("index"))

    @property
    def name(self) -> str | None:
        return _str(self.raw.get("name"))

    @property
    def uuid(self) -> str | None:
        return _str(self.raw.get("uuid"))

    @property
    def memory_total_bytes(self) -> int | None:
        return _int(self.raw.get("memory_total_bytes"))

    @property
    def memory_used_bytes(self) -> int | None:
        return _int(self.raw.get("memory_used_bytes"))

    @property
    def memory_free_bytes(self) -> int | None:
        return _int(self.raw.get("memory_free_bytes"))

    @property
    def fabric_state(self) -> str | None:
        """Registration with the NVSwitch fabric: not_started, in_progress, completed; None where the
        GPU has no such fabric or its driver does not say."""
        return _str(_map(self.raw.get("fabric")).get("state"))

    @property
    def fabric_status(self) -> str | None:
        """The error of a completed fabric registration, or "Success"."""
        return _str(_map(self.raw.get("fabric")).get("status"))

    @property
    def nvlinks_up(self) -> int | None:
        """How many of its NVLinks are up; None where it has none or the node did not say."""
        return _int(_map(self.raw.get("nvlink")).get("active"))

    @property
    def nvlinks_all_inactive(self) -> bool:
        """Its driver says every NVLink is inactive, without listing them."""
        return _map(self.raw.get("nvlink")).get("all_inactive") is True

    @property
    def nvlinks_inactive(self) -> list[int]:
        """The NVLinks (by number) that its driver lists as inactive."""
        found = _map(self.raw.get("nvlink")).get("inactive")
        return (
            [n for n in found if isinstance(n, int) and not isinstance(n, bool)]
            if isinstance(found, list)
            else []
        )

    @property
    def unregistered(self) -> bool:
        """Not (yet) registered with its NVSwitch fabric: CUDA cannot start on this GPU
        (cudaErrorSystemNotReady) until the fabric manager has registered it."""
        return self.fabric_state in ("not_started", "in_progress")

    @property
    def ecc_mode(self) -> str | None:
        return _str(self.raw.get("ecc_mode"))

    @property
    def ecc_uncorrected_volatile(self) -> int | None:
        return _int(self.raw.get("ecc_uncorrected_volatile"))

    @property
    def ecc_uncorrected_aggregate(self) -> int | None:
        return _int(self.raw.get("ecc_uncorrected_aggregate"))

    @property
    def remapped_rows(self) -> Mapping[str, Any]:
        return _map(self.raw.get("remapped_rows"))

    @property
    def mig_mode(self) -> str | None:
        """ "enabled" | "disabled"; None where MIG is not supported (before Ampere) or not reported."""
        return _str(self.raw.get("mig_mode"))

    @property
    def retired_pages_pending(self) -> bool | None:
        value = self.raw.get("retired_pages_pending")
        return value if isinstance(value, bool) else None

    @property
    def processes(self) -> list[Mapping[str, Any]] | None:
        """Processes on the GPU; None where the node could not say (not the same as none)."""
        value = self.raw.get("processes")
        return _records(value) if isinstance(value, list) else None

    @property
    def temperature_c(self) -> float | None:
        return _float(self.raw.get("temperature_c"))

    @property
    def power_w(self) -> float | None:
        return _float(self.raw.get("power_w"))

    @property
    def serial(self) -> str | None:
        return _str(self.raw.get("serial"))

    @property
    def pcie_link(self) -> PcieLink | None:
        return PcieLink.read(self.raw.get("pcie_link"))

    @property
    def persistence_mode(self) -> str | None:
        """ "enabled" | "disabled"; None where not reported."""
        return _str(self.raw.get("persistence_mode"))

    @property
    def clock_event_reasons(self) -> int | None:
        """NVML's clock-event (throttle) reason bits at the time of the probe."""
        return _int(self.raw.get("clock_event_reasons"))

    @property
    def power_limit_w(self) -> float | None:
        """The power limit the GPU enforces now (watts)."""
        return _float(self.raw.get("power_limit_w"))

    @property
    def power_default_limit_w(self) -> float | None:
        """The power limit the GPU enforces by default (watts)."""
        return _float(self.raw.get("power_default_limit_w"))

    @property
    def applications_clocks(self) -> Mapping[str, int]:
        """Applications clocks (MHz) by domain ("graphics", "memory"); empty where not reported."""
        return {k: v for k, v in _map(self.raw.get("clocks_applications_mhz")).items() if _int(v) is not None}

    @property
    def default_applications_clocks(self) -> Mapping[str, int]:
        """The GPU's default applications clocks (MHz) by domain; empty where not reported."""
        found = _map(self.raw.get("clocks_default_applications_mhz"))
        return {k: v for k, v in found.items() if _int(v) is not None}

    @property
    def ecc_mode_pending(self) -> str | None:
        """The ECC mode the GPU takes at its next reboot: "enabled" | "disabled"."""
        return _str(self.raw.get("ecc_mode_pending"))

    @property
    def mig_mode_pending(self) -> str | None:
        """The MIG mode the GPU takes at its next reset: "enabled" | "disabled"."""
        return _str(self.raw.get("mig_mode_pending"))

    @property
    def compute_mode(self) -> str | None:
        """ "default", "exclusive_process", "exclusive_thread" or "prohibited"."""
        return _str(self.raw.get("compute_mode"))


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
        return [GpuFacts(g) for g in _records(listed)] if isinstance(listed, list) else None

    @property
    def gpu_count(self) -> int:
        return len(self.gpus or [])

    @property
    def uses_cuda(self) -> bool:
        """GPUs present and visible to the node's torch: the job runs NCCL on CUDA here."""
        return bool(self.gpus) and self.torch is not None and self.torch.cuda_available

    @cached_property
    def env(self) -> Mapping[str, str]:
        """The variables NCCL, torch, CUDA and gloo read (``NCCL_*``, ``CUDA_*``...), as the node's
        SSH session has them (secret values masked on the node)."""
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
            )
            for i in _records(_map(self.raw.get("net")).get("interfaces"))
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
            )
            for d in _records(_map(self.raw.get("net")).get("ib_devices"))
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
            for f in _records(found.get("conf_files"))
        )
        wanted = found.get("net_plugin_wanted")
        return NcclFacts(
            conf_files=files,
            net_plugins=tuple(
                (str(p.get("name")), str(p.get("path"))) for p in _records(found.get("net_plugins"))
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
