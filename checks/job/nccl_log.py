"""Which transport NCCL really used, parsed from its ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET`` lines:
network, devices and link layers, each channel's transport, GPUDirect RDMA, version and warnings.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# How many distinct warnings a transport keeps (a failing job repeats the same few thousands of times).
MAX_WARNINGS = 20

# ``host:pid:tid [dev] [file:line] NCCL INFO|WARN message``, after any prefix (mpirun's
# ``[1,0]<stdout>:``, a timestamp, a rank number).
_NCCL_LINE_RE = re.compile(
    r"(?P<host>[^\s:\[\]|]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:(?P<where>\S+) )?"
    r"NCCL (?P<level>INFO|WARN|TRACE) ?(?P<message>.*)$"
)
_VERSION_RE = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+\S*)")
_NETWORK_RE = re.compile(r"Using network (?P<name>.+?)\s*$")
_IB_USING_RE = re.compile(r"^NET/IB\s*:\s*Using\b(?P<rest>.*)$")
_IB_OLD_DEVICE_RE = re.compile(
    r"^NET/IB\s*:\s*\[(?P<index>\d+)\]\s*(?P<name>[\w.-]+):(?P<port>\d+)/(?P<layer>IB|RoCE)"
)
_IB_DEVICE_RE = re.compile(r"\[(?P<index>\d+)\](?P<name>[\w.-]+):(?P<port>\d+)/(?P<layer>IB|RoCE)")
_SOCKET_USING_RE = re.compile(r"^NET/Socket\s*:\s*Using\b(?P<rest>.*)$")
_SOCKET_DEVICE_RE = re.compile(r"\[(?P<index>\d+)\](?P<name>[^\s:\[\]]+):(?P<address>\S+)")
_VIA_RE = re.compile(r"\bvia (?P<via>.+?)\s*$")
_GDR_ENABLED_RE = re.compile(r"GPU Direct RDMA Enabled", re.IGNORECASE)


@dataclass(frozen=True)
class NetDevice:
    """One device NCCL said it would use: an IB/RoCE port or a socket interface."""

    index: int
    name: str
    port: int | None = None  # IB port
    link_layer: str | None = None  # "IB" | "RoCE"
    address: str | None = None  # socket interface address

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "port": self.port,
            "link_layer": self.link_layer,
            "address": self.address,
        }


@dataclass(frozen=True)
class NcclTransport:
    """What one node's NCCL log says about the transports it used."""

    nccl_lines: int = 0  # lines that came from NCCL; 0 means the log had none
    version: str | None = None
    network: str | None = None  # as NCCL named it: "IB", "Socket", "IBext", "AWS Libfabric", ...
    ib_devices: tuple[NetDevice, ...] = ()
    ib_no_device: bool = False  # NCCL looked for IB/RoCE devices and found none
    socket_devices: tuple[NetDevice, ...] = ()
    # Channel transport -> number of channel lines: "NET/IB", "NET/Socket", "P2P/IPC", "SHM", ...
    channels: Mapping[str, int] = field(default_factory=dict)
    gdrdma: bool = False
    warnings: tuple[str, ...] = ()
    warning_count: int = 0
    hosts: tuple[str, ...] = ()

    @property
    def link_layers(self) -> tuple[str, ...]:
        return tuple(sorted({d.link_layer for d in self.ib_devices if d.link_layer}))

    @property
    def net_channels(self) -> dict[str, int]:
        """The channels that crossed the network (between nodes)."""
        return {name: count for name, count in self.channels.items() if name.startswith("NET/")}

    @property
    def inter_node(self) -> str | None:
        """The network transport between nodes: ``NET/IB``, ``NET/Socket``, ``NET/<plugin>``; None if unseen.

        Channel lines are the evidence; without them, the network NCCL said it would use.
        """
        net = self.net_channels
        if net:
            return max(sorted(net), key=lambda name: net[name])
        return f"NET/{self.network}" if self.network else None

    @property
    def rdma_channels(self) -> dict[str, int]:
        """Network channels over an RDMA transport: any ``NET/*`` but plain sockets (``NET/IB``,
        ``NET/IBext_v8`` of the HPC-X plugin, ``NET/AWS Libfabric``...)."""
        return {name: count for name, count in self.net_channels.items() if name != "NET/Socket"}

    @property
    def uses_socket(self) -> bool:
        """Some traffic between nodes went over plain TCP sockets."""
        if self.net_channels:
            return "NET/Socket" in self.net_channels
        return self.network == "Socket"

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "network": self.network,
            "inter_node": self.inter_node,
            "ib_devices": [d.to_dict() for d in self.ib_devices],
            "ib_no_device": self.ib_no_device,
            "link_layers": list(self.link_layers),
            "socket_devices": [d.to_dict() for d in self.socket_devices],
            "channels": dict(self.channels),
            "gdrdma": self.gdrdma,
            "warnings": list(self.warnings),
            "warning_count": self.warning_count,
            "nccl_lines": self.nccl_lines,
        }


def channel_transport(via: str) -> tuple[str, bool]:
    """The transport of a channel and whether it used GPUDirect RDMA.

    ``NET/IB/0/GDRDMA`` -> (``NET/IB``, True); ``NET/IBext_v8/2`` -> (``NET/IBext_v8``, False);
    ``NET/IB/0(1)/GDRDMA(PCI)/Shared`` (NCCL 2.27: through a proxy rank, GPUDirect over PCI) ->
    (``NET/IB``, True); ``P2P/IPC/read`` -> (``P2P/IPC``, False); ``SHM/direct/direct`` -> (``SHM``, False).
    """
    parts = via.split("/")
    gdrdma = any(part.startswith("GDRDMA") for part in parts)
    if parts[0] in ("NET", "P2P", "COLLNET") and len(parts) > 1:
        return f"{parts[0]}/{parts[1]}", gdrdma
    if parts[0] in ("SHM", "NVL", "NVLS"):
        return parts[0], gdrdma
    return via, gdrdma  # older NCCL: "direct shared memory", "direct pointer"


def _merge_devices(known: list[NetDevice], found: Iterable[NetDevice]) -> None:
    names = {(d.name, d.port, d.address) for d in known}
    for device in found:
        if (device.name, device.port, device.address) not in names:
            known.append(device)
            names.add((device.name, device.port, device.address))


def _ib_devices(rest: str) -> list[NetDevice]:
    return [
        NetDevice(int(m.group("index")), m.group("name"), int(m.group("port")), m.group("layer"))
        for m in _IB_DEVICE_RE.finditer(rest.split(";")[0])
    ]


def _socket_devices(rest: str) -> list[NetDevice]:
    devices = []
    for m in _SOCKET_DEVICE_RE.finditer(rest):
        address = re.sub(r"<\d+>$", "", m.group("address"))
        devices.append(NetDevice(int(m.group("index")), m.group("name"), address=address))
    return devices


def parse_nccl_log(text: str) -> NcclTransport:
    """Everything the log says about transports; lines that are not NCCL's are ignored."""
    version: str | None = None
    network: str | None = None
    ib: list[NetDevice] = []
    sockets: list[NetDevice] = []
    ib_no_device = False
    channels: Counter[str] = Counter()
    gdrdma = False
    warnings: list[str] = []
    warning_count = 0
    hosts: list[str] = []
    lines = 0
    for raw in text.splitlines():
        line = raw.rstrip()
        found_version = _VERSION_RE.search(line)
        if found_version and version is None:
            version = found_version.group("version")
        match = _NCCL_LINE_RE.search(line)
        if match is None:
            if found_version:
                lines += 1  # older NCCL prints the version line bare
            continue
        lines += 1
        host = match.group("host")
        if host not in hosts:
            hosts.append(host)
        message = match.group("message").strip()
        if match.group("level") == "WARN":
            warning_count += 1
            if message not in warnings and len(warnings) < MAX_WARNINGS:
                warnings.append(message)
            continue
        using = _NETWORK_RE.search(message)
        if using and message.startswith("Using network"):
            network = using.group("name")
            continue
        ib_using = _IB_USING_RE.match(message)
        if ib_using:
            _merge_devices(ib, _ib_devices(ib_using.group("rest")))
            continue
        old_ib = _IB_OLD_DEVICE_RE.match(message)
        if old_ib:
            _merge_devices(ib, _ib_devices(message))
            continue
        if re.match(r"^NET/IB\s*:\s*No device found", message):
            ib_no_device = True
            continue
        socket_using = _SOCKET_USING_RE.match(message)
        if socket_using:
            _merge_devices(sockets, _socket_devices(socket_using.group("rest")))
            continue
        if _GDR_ENABLED_RE.search(message):
            gdrdma = True
        via = _VIA_RE.search(message)
        if via and re.match(r"^(Channel|Ring|Tree)\b", message):
            transport, channel_gdr = channel_transport(via.group("via"))
            channels[transport] += 1
            gdrdma = gdrdma or channel_gdr
    return NcclTransport(
        nccl_lines=lines,
        version=version,
        network=network,
        ib_devices=tuple(ib),
        ib_no_device=ib_no_device,
        socket_devices=tuple(sockets),
        channels=dict(sorted(channels.items())),
        gdrdma=gdrdma,
        warnings=tuple(warnings),
        warning_count=warning_count,
        hosts=tuple(hosts),
    )
