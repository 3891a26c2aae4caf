"""The node's network: interfaces and their links, InfiniBand/RoCE/EFA ports with their counters, the
PCIe links of both, and how the node resolves its own name.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import threading
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Sink, Unavailable, read_text, run_command
from preflight.node.sysfs_counters import (
    SYS_CLASS_INFINIBAND,
    SYS_CLASS_NET,
    efa_counters,
    is_efa,
    port_counters,
    read_sysfs,
)

if TYPE_CHECKING:
    JsonDict = dict[str, Any]

# Port counters read from /sys/class/infiniband/DEV/ports/N/counters.
IB_COUNTERS = ("link_downed", "symbol_error", "link_error_recovery", "port_rcv_errors",
               "port_rcv_remote_physical_errors", "port_xmit_discards")  # fmt: skip
# Files under /sys/class/infiniband/DEV that say which card a port is on: the chip (MT4129 is a
# ConnectX-7), the board's part (MT_0000000838), its firmware and the node description.
IB_DEVICE_FILES = ("hca_type", "board_id", "fw_ver", "node_desc")
PCIE_LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
PCIE_RATES_GT = ((1, 2.5), (2, 5.0), (3, 8.0), (4, 16.0), (5, 32.0), (6, 64.0), (7, 128.0))

# Where ip lives when the SSH session's PATH has no sbin directory in it.
IP_FALLBACK_PATHS = ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip")


def parse_ip_addr_json(text: str) -> list[JsonDict]:
    """``ip -j addr show`` -> interfaces (name, "addr/prefix" list, mtu, state, and the link's
    hardware address as ``mac`` where it has one); ``lo`` left out."""
    interfaces: list[JsonDict] = []
    for link in json.loads(text or "[]"):
        if not isinstance(link, dict):
            continue
        name = link.get("ifname")
        if not name or name == "lo" or link.get("link_type") == "loopback":
            continue
        addresses = [
            f"{info['local']}/{info['prefixlen']}" if "prefixlen" in info else str(info["local"])
            for info in link.get("addr_info") or []
            if isinstance(info, dict) and info.get("local")
        ]
        mtu = link.get("mtu")
        state = link.get("operstate")
        interfaces.append(
            {
                "name": str(name),
                "addresses": addresses,
                "mtu": int(mtu) if isinstance(mtu, int) else None,
                "state": str(state).lower() if state else None,
            }
        )
        mac = link.get("address")
        if isinstance(mac, str) and mac:
            interfaces[-1]["mac"] = mac.lower()
    return interfaces


def parse_link_speed(text: str | None) -> int | None:
    """``/sys/class/net/NAME/speed`` in Mb/s; None when missing, invalid or unknown (-1)."""
    if text is None:
        return None
    try:
        speed = int(text.strip())
    except ValueError:
        return None
    # -1 (or -1 read as unsigned) means unknown: no link, or a virtual device.
    return speed if 0 < speed < 0xFFFFFFFF else None


def parse_ib_state(text: str) -> str:
    """``/sys/class/infiniband/DEV/ports/N/state`` -> "ACTIVE" (from "4: ACTIVE")."""
    value = text.strip()
    return value.split(":", 1)[1].strip() if ":" in value else value


def parse_ib_width(rate: str) -> str | None:
    """The link width a port's rate line names: ``400 Gb/sec (4X NDR)`` -> ``4X``; None where the
    line names none (``40 Gb/sec``)."""
    found = re.search(r"\((\d+X)\b", rate)
    return found.group(1) if found else None


def _ib_device_files(device_dir: str) -> JsonDict:
    """The device files of ``IB_DEVICE_FILES`` that exist and are not empty, stripped."""
    found: JsonDict = {}
    for name in IB_DEVICE_FILES:
        text = (read_text(os.path.join(device_dir, name)) or "").strip()
        if text:
            found[name] = text
    return found


# The link layer of a RoCE port (drivers/infiniband/core/sysfs.c, link_layer_show).
ETHERNET = "Ethernet"


# Consecutive empty entries after which a table is read no further: the kernel fills a GID table
# from its lowest free index and a subnet manager a P_Key table from its first, so what is in use
# sits at the front (a GID table has 256 entries, a P_Key table 128, and on mlx5 each P_Key read is
# a query to the card's firmware).
EMPTY_RUN = {"pkeys": 4, "gids": 8}


def _is_empty(text: str) -> bool:
    """An all-zero entry (``0x0000``, ``0000:...:0000``), or one that is not a number."""
    try:
        return int(text.replace(":", ""), 16) == 0
    except ValueError:
        return True


def _table_entries(port_dir: str, table: str) -> list[tuple[int, str]] | None:
    """The entries of a port's table (``pkeys``, ``gids``) in index order as read, up to
    :data:`EMPTY_RUN` empty entries in a row (entries whose read fails left out); None where the
    directory cannot be listed."""
    table_dir = os.path.join(port_dir, table)
    try:
        names = os.listdir(table_dir)
    except OSError:
        return None
    entries: list[tuple[int, str]] = []
    empty_run = 0
    for name in sorted((n for n in names if n.isdigit()), key=int):
        text = read_text(os.path.join(table_dir, name))
        if text is None:
            continue
        entries.append((int(name), text.strip()))
        empty_run = empty_run + 1 if _is_empty(text.strip()) else 0
        if empty_run >= EMPTY_RUN[table]:
            break
    return entries


def port_pkeys(port_dir: str) -> list[str] | None:
    """The distinct P_Keys of a port's table (``pkeys/N``, ``0x%04x`` each), sorted, with the
    membership bit as read (``0xffff`` full member, ``0x7fff`` limited); empty entries (``0x0000``)
    left out. None where the table cannot be listed."""
    entries = _table_entries(port_dir, "pkeys")
    if entries is None:
        return None
    keys: set[str] = set()
    for _, text in entries:
        try:
            value = int(text, 16)
        except ValueError:
            continue
        if value:
            keys.add(f"0x{value:04x}")
    return sorted(keys)


def port_gids(port_dir: str) -> list[list[Any]] | None:
    """A RoCE port's GIDs in use: ``[index, type, gid]`` for each entry of ``gids/`` that is not all
    zeros (``%pI6``), its type read from ``gid_attrs/types/I`` (``IB/RoCE v1`` or ``RoCE v2``). An
    entry whose type cannot be read was emptied since (the kernel refuses the type of an empty
    entry) and is left out. None where either directory cannot be listed."""
    entries = _table_entries(port_dir, "gids")
    types_dir = os.path.join(port_dir, "gid_attrs", "types")
    if entries is None or not os.path.isdir(types_dir):
        return None
    gids: list[list[Any]] = []
    for index, gid in entries:
        if _is_empty(gid):
            continue
        gid_type = read_text(os.path.join(types_dir, str(index)))
        if gid_type is not None and gid_type.strip():
            gids.append([index, gid_type.strip(), gid.lower()])
    return gids


NAME_LOOKUP_TIMEOUT_S = 5.0


def resolve_name(
    name: str, timeout_s: float = NAME_LOOKUP_TIMEOUT_S, slots: threading.Semaphore | None = None
) -> JsonDict:
    """How this node resolves ``name``: its addresses in the resolver's order (the first is what
    gloo and most tools use), its canonical name, or why it does not resolve. ``slots`` bounds the
    lookups in flight at once when many run side by side."""
    answer: JsonDict = {"name": name}

    def lookup() -> None:
        try:
            with slots or contextlib.nullcontext():
                infos = socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM, 0, socket.AI_CANONNAME)
        except (OSError, UnicodeError) as exc:
            answer["error"] = getattr(exc, "strerror", None) or str(exc)
            return
        answer["addresses"] = list(dict.fromkeys(str(info[4][0]) for info in infos))
        answer["canonical"] = next((info[3] for info in infos if info[3]), None)

    worker = threading.Thread(target=lookup, daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        return {"name": name, "error": f"no answer within {timeout_s:g} s"}
    return answer


def gather_name_resolution(sink: Sink) -> None:
    sink.facts["name_resolution"] = resolve_name(socket.gethostname())


def _sysfs_interfaces(net_root: str) -> list[JsonDict]:
    interfaces: list[JsonDict] = []
    for name in sorted(os.listdir(net_root)):
        if name == "lo":
            continue
        mtu = (read_text(os.path.join(net_root, name, "mtu")) or "").strip()
        state = (read_text(os.path.join(net_root, name, "operstate")) or "").strip()
        interfaces.append(
            {
                "name": name,
                "addresses": [],
                "mtu": int(mtu) if mtu.isdigit() else None,
                "state": state.lower() or None,
            }
        )
        mac = (read_text(os.path.join(net_root, name, "address")) or "").strip()
        if mac:
            interfaces[-1]["mac"] = mac.lower()
    return interfaces


def parse_pcie_speed(text: str | None) -> float | None:
    """``/sys/bus/pci/devices/*/current_link_speed`` -> GT/s: ``16.0 GT/s PCIe`` -> 16.0, ``2.5 GT/s`` -> 2.5;
    None for ``Unknown`` or an unreadable file."""
    found = re.match(r"\s*([\d.]+)\s*GT/s", text or "")
    return float(found.group(1)) if found else None


def pcie_generation(gt_per_s: float | None) -> int | None:
    """The PCIe generation of a per-lane rate: 2.5 -> 1, 5 -> 2, 8 -> 3, 16 -> 4, 32 -> 5, 64 -> 6."""
    if gt_per_s is None:
        return None
    return next((gen for gen, rate in PCIE_RATES_GT if abs(gt_per_s - rate) < 0.5), None)


def pcie_link(device_dir: str) -> JsonDict | None:
    """A PCI device's link from sysfs (``current_link_speed/width``, ``max_link_speed/width``), as
    generations and lane counts; None where the device has no such files (virtual devices)."""
    values = {name: read_text(os.path.join(device_dir, name)) for name in PCIE_LINK_FILES}
    if all(value is None for value in values.values()):
        return None

    def width(name: str) -> int | None:
        value = (values[name] or "").strip()
        return int(value) if value.isdigit() and int(value) > 0 else None

    return {
        "gen_current": pcie_generation(parse_pcie_speed(values["current_link_speed"])),
        "gen_max": pcie_generation(parse_pcie_speed(values["max_link_speed"])),
        "width_current": width("current_link_width"),
        "width_max": width("max_link_width"),
    }


def ib_devices(ib_root: str = SYS_CLASS_INFINIBAND) -> list[JsonDict]:
    """InfiniBand/RoCE ports from sysfs (an empty list where there are none): each port's state,
    physical state, rate (and the width its rate line names), link layer and counters (an EFA
    port's: its error ``hw_counters``, :func:`efa_counters`), with the
    files of its device that say which card it is on and its ``node_guid`` (the card's stable
    identity, ``946d:ae03:00cd:e72c``) and whether it is a virtual function (``virtual``), its
    P_Keys (``pkeys``) and, on a RoCE port, its GIDs in use (``gids``); files and tables that are
    missing or cannot be listed are left out, and a port file whose read fails with an I/O error
    is named in the port's ``errors`` (``{"state": "Input/output error"}``)."""
    devices: list[JsonDict] = []
    if not os.path.isdir(ib_root):
        return devices
    for device in sorted(os.listdir(ib_root)):
        ports_dir = os.path.join(ib_root, device, "ports")
        if not os.path.isdir(ports_dir):
            continue
        card = _ib_device_files(os.path.join(ib_root, device))
        guid = (read_text(os.path.join(ib_root, device, "node_guid")) or "").strip()
        if guid:
            card["node_guid"] = guid.lower()
        # An SR-IOV virtual function links to its physical function.
        card["virtual"] = os.path.exists(os.path.join(ib_root, device, "device", "physfn"))
        device_dir = os.path.join(ib_root, device)
        efa = is_efa(device_dir)
        ports = sorted(
            os.listdir(ports_dir), key=lambda p: (not p.isdigit(), int(p) if p.isdigit() else 0, p)
        )
        for port in ports:
            base = os.path.join(ports_dir, port)
            errors: dict[str, str] = {}
            state, rate, link_layer, phys_state = (
                read_sysfs(os.path.join(base, name), errors, name)
                for name in ("state", "rate", "link_layer", "phys_state")
            )
            devices.append(
                {
                    "name": device,
                    "port": int(port) if port.isdigit() else port,
                    "state": parse_ib_state(state) if state is not None else None,
                    "rate": rate.strip() if rate is not None else None,
                    "link_layer": link_layer.strip() if link_layer is not None else None,
                    "phys_state": parse_ib_state(phys_state) if phys_state is not None else None,
                    "counters": efa_counters(device_dir, base, errors)
                    if efa
                    else port_counters(base, IB_COUNTERS, errors),
                    "pcie": pcie_link(os.path.join(ib_root, device, "device")),
                }
            )
            width = parse_ib_width(rate) if rate is not None else None
            if width is not None:
                devices[-1]["width"] = width
            pkeys = port_pkeys(base)
            if pkeys is not None:
                devices[-1]["pkeys"] = pkeys
            # An InfiniBand port's GID 0 is its port GUID: only RoCE ports' GIDs say anything.
            gids = port_gids(base) if devices[-1]["link_layer"] == ETHERNET else None
            if gids is not None:
                devices[-1]["gids"] = gids
            devices[-1].update(card)
            if errors:
                devices[-1]["errors"] = errors
    return devices


def net_facts(net_root: str = SYS_CLASS_NET, ib_root: str = SYS_CLASS_INFINIBAND) -> JsonDict:
    """Interfaces from ``ip -j addr show`` (or sysfs without ``ip``) and IB ports."""
    interfaces: list[JsonDict] | None = None
    ip = shutil.which("ip") or next((p for p in IP_FALLBACK_PATHS if os.access(p, os.X_OK)), None)
    if ip is not None:
        try:
            interfaces = parse_ip_addr_json(run_command([ip, "-j", "addr", "show"]))
        except (Unavailable, ValueError):
            interfaces = None  # e.g. an old iproute2 without -j: fall back to sysfs
    if interfaces is None:
        if not os.path.isdir(net_root):
            raise Unavailable(f"ip not usable and {net_root} missing")
        interfaces = _sysfs_interfaces(net_root)
    for interface in interfaces:
        speed_path = os.path.join(net_root, interface["name"], "speed")
        interface["speed_mbps"] = parse_link_speed(read_text(speed_path))
        interface["pcie"] = pcie_link(os.path.join(net_root, interface["name"], "device"))
        if interface["pcie"] is not None:
            interface.update(card_counters(os.path.join(net_root, interface["name"])))
    return {"interfaces": interfaces, "ib_devices": ib_devices(ib_root)}


# The error counters of a network card's interface since boot (``statistics/``), and how often its
# link went down or up (``carrier_changes``).
NIC_ERROR_COUNTERS = (
    "rx_errors",
    "tx_errors",
    "rx_crc_errors",
    "rx_frame_errors",
    "rx_missed_errors",
    "rx_fifo_errors",
    "tx_carrier_errors",
    "rx_dropped",
    "tx_dropped",
)


def card_counters(interface_dir: str) -> JsonDict:
    """A network card's interface: its driver, its error counters since boot and its link's state
    changes; what cannot be read is left out."""
    found: JsonDict = {}
    driver = os.path.join(interface_dir, "device", "driver")
    if os.path.exists(driver):
        found["driver"] = os.path.basename(os.path.realpath(driver))
    counts = {}
    for name in NIC_ERROR_COUNTERS:
        text = (read_text(os.path.join(interface_dir, "statistics", name)) or "").strip()
        if text.isdigit():
            counts[name] = int(text)
    if counts:
        found["statistics"] = counts
    changes = (read_text(os.path.join(interface_dir, "carrier_changes")) or "").strip()
    if changes.isdigit():
        found["carrier_changes"] = int(changes)
    return found


def gather_net(sink: Sink) -> None:
    sink.facts["net"] = net_facts()
