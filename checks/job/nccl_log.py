"""Which transport NCCL really used, parsed from its ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET`` lines:
network, devices and link layers, each channel's transport, GPUDirect RDMA, version and warnings.

The evidence of a transport between nodes is a connection line: ``Channel 00/0 : 0[0] -> 8[0] [send]
via NET/IB/0/GDRDMA`` (NCCL 2.8 and later, ``Channel 00 :`` before 2.12), ``Ring 00 : 6 -> 2 [receive]
via NET/IB/0`` (2.3-2.7) or ``CollNet 05/0 : 5 [receive] via COLLNET/SHARP/5/GDRDMA`` (``Coll 00 :`` in
2.6-2.8). ``Using network IB`` names the network NCCL would use: a log of one node says it and
then connects its GPUs over P2P or SHM alone, so there it says nothing about the network between
nodes. A log of ranks on several hosts (or one with CollNet connections, which only run between
nodes) that names a network and has no point-to-point connection line (a log cut short, or one
with ``NCCL_DEBUG_SUBSYS=INIT`` alone) crossed the network it names: ``Using network IBext`` with
CollNet lines over ``COLLNET/SHARP`` is IBext between nodes, SHARP being the plug-in of the
collectives alone.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# How many distinct warnings a transport keeps (a failing job repeats the same few thousands of times).
MAX_WARNINGS = 20

# ``host:pid:tid [dev] [file:line] NCCL INFO|WARN ``, after any prefix (mpirun's ``[1,0]<stdout>:``,
# a timestamp, a rank number). Ranks that write to one stream at once can leave two of these on one
# line (``h:1:2 [1] NCCL INFO h:1:3 [2] NCCL INFO Ring 05 : ...``): the message follows the last.
_NCCL_PREFIX_RE = re.compile(
    r"(?P<host>[^\s:\[\]|]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:(?P<where>\S+) )?"
    r"NCCL (?P<level>INFO|WARN|TRACE) ?"
)
# A connection line: NCCL 2.3-2.7 ``Ring``, 2.4 and later ``Channel``, ``Tree``, and the CollNet
# forms ``Coll`` (2.6-2.8) and ``CollNet``; each names its transport after ``via``.
_CONNECTION_RE = re.compile(r"^(?:Channel|Ring|Tree|Coll|CollNet) \d+\b.*\bvia (?P<via>.+?)\s*$")
_VERSION_RE = re.compile(r"NCCL version (?P<version>\d+\.\d+\.\d+\S*)")
# ``Using network IB`` (2.4 and later), ``Using internal Network IB`` (2.3).
_NETWORK_RE = re.compile(r"^Using (?:internal )?[Nn]etwork (?P<name>.+?)\s*$")
_IB_USING_RE = re.compile(r"^NET/IB\s*:\s*Using\b(?P<rest>.*)$")
# NCCL 2.3 lists one device a line: ``NET/IB: [0] mlx5_1:1/IB``.
_IB_OLD_DEVICE_RE = re.compile(r"^NET/IB\s*:\s*\[\d+\]\s*[\w.-]+:\d+/(?:IB|RoCE)")
_IB_DEVICE_RE = re.compile(r"\[(?P<index>\d+)\]\s*(?P<name>[\w.-]+):(?P<port>\d+)/(?P<layer>IB|RoCE)")
_SOCKET_USING_RE = re.compile(r"^NET/Socket\s*:\s*Using\b(?P<rest>.*)$")
_SOCKET_DEVICE_RE = re.compile(r"\[(?P<index>\d+)\](?P<name>[^\s:\[\]]+):(?P<address>\S+)")
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
        """The connections that crossed the network (between nodes): ``NET/*`` and ``COLLNET/*``."""
        return {name: count for name, count in self.channels.items() if name.startswith(("NET/", "COLLNET/"))}

    @property
    def inter_node(self) -> str | None:
        """The network transport between nodes: ``NET/IB``, ``NET/Socket``, ``NET/<plugin>`` (the most
        used connection line); else ``NET/<network>`` where NCCL named its network and the log shows
        ranks on several hosts or CollNet connections; else ``COLLNET/<plugin>`` where only CollNet
        connections crossed it; None where nothing shows a connection between nodes (the log of one
        host that names a network and connects inside the host alone)."""
        net = self.net_channels
        point_to_point = {name: count for name, count in net.items() if name.startswith("NET/")}
        if point_to_point:
            return max(sorted(point_to_point), key=lambda name: point_to_point[name])
        if self.network and (len(self.hosts) > 1 or net):
            return f"NET/{self.network}"
        if net:
            return max(sorted(net), key=lambda name: net[name])
        return None

    @property
    def rdma_channels(self) -> dict[str, int]:
        """Network connections over an RDMA transport: any but plain sockets (``NET/IB``, ``NET/IBext_v8``
        of the HPC-X plugin, ``NET/AWS Libfabric``, ``COLLNET/SHARP``...)."""
        return {name: count for name, count in self.net_channels.items() if name != "NET/Socket"}

    @property
    def uses_socket(self) -> bool:
        """Some traffic between nodes went over plain TCP sockets: a connection line says so, or
        the network between nodes is the socket network NCCL named."""
        return "NET/Socket" in self.net_channels or self.inter_node == "NET/Socket"

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
    (``NET/IB``, True); ``COLLNET/SHARP/5/GDRDMA`` -> (``COLLNET/SHARP``, True); ``P2P/IPC/read`` ->
    (``P2P/IPC``, False); ``SHM/direct/direct`` -> (``SHM``, False).
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
        prefixes = list(_NCCL_PREFIX_RE.finditer(line))
        if not prefixes:
            # Older NCCL prints the version line bare; a connection line whose prefix went to the
            # line before it (two ranks writing at once) is still a connection.
            bare = _CONNECTION_RE.match(line.strip())
            if bare:
                transport, channel_gdr = channel_transport(bare.group("via"))
                channels[transport] += 1
                gdrdma = gdrdma or channel_gdr
            if found_version or bare:
                lines += 1
            continue
        lines += 1
        match = prefixes[-1]
        host = match.group("host")
        if host not in hosts:
            hosts.append(host)
        message = line[match.end() :].strip()
        if match.group("level") == "WARN":
            warning_count += 1
            if message not in warnings and len(warnings) < MAX_WARNINGS:
                warnings.append(message)
            continue
        using = _NETWORK_RE.match(message)
        if using:
            network = using.group("name")
            continue
        ib_using = _IB_USING_RE.match(message)
        if ib_using:
            _merge_devices(ib, _ib_devices(ib_using.group("rest")))
            continue
        if _IB_OLD_DEVICE_RE.match(message):
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
        connection = _CONNECTION_RE.match(message)
        if connection:
            transport, channel_gdr = channel_transport(connection.group("via"))
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
