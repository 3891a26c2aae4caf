"""This node's network counters, as the heartbeat of each node's first rank carries them: the
kernel's TCP counters (``/proc/net/snmp``, ``/proc/net/netstat``), the interfaces' errors and drops
(``/sys/class/net/*/statistics``), the InfiniBand ports' counters summed over the node's ports,
and, per peer address, the TCP segments retransmitted to it and
the bytes sent to and received from it (``ss -tin``). The controller compares them between the
start of a phase and its end (or the timeout) to tell which node lost its traffic.

Node code: standard library only, Python 3.8. Every reader returns what it could read; a counter
a node does not have is left out.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Any

from checks.job.node.counters import NET_COUNTERS, ib_ports
from preflight.node.sysfs_counters import SYS_CLASS_INFINIBAND, SYS_CLASS_NET
from preflight.node.sysfs_counters import interface_counters as sysfs_interface_counters

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

# The kernel's counters kept: the table (as /proc names it) and its fields.
SNMP_FIELDS: Mapping[str, Sequence[str]] = {
    "Tcp": ("RetransSegs", "InErrs", "OutRsts", "EstabResets", "InSegs", "OutSegs"),
}
NETSTAT_FIELDS: Mapping[str, Sequence[str]] = {
    "TcpExt": ("TCPLostRetransmit", "TCPTimeouts", "TCPBacklogDrop", "TCPRcvQDrop", "TCPSynRetrans"),
}
# Seconds `ss` may take before its answer is left out.
SS_TIMEOUT_S = 2.0


def parse_proc_table(text: str, wanted: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """The ``wanted`` fields of a /proc/net/snmp or /proc/net/netstat text (each table is a line of
    names and a line of values, both starting with ``Table:``), as ``Table.Field``."""
    found: dict[str, int] = {}
    lines = text.splitlines()
    for names_line, values_line in zip(lines[::2], lines[1::2]):  # noqa: B905 - Python 3.8, pairs
        table, _, names = names_line.partition(":")
        other, _, values = values_line.partition(":")
        if table != other or table not in wanted:
            continue
        for name, value in zip(names.split(), values.split()):  # noqa: B905 - Python 3.8
            if name in wanted[table]:
                try:
                    found[f"{table}.{name}"] = int(value)
                except ValueError:
                    continue
    return found


def _address(endpoint: str) -> str:
    """``10.0.0.1`` from ``10.0.0.1:22``, ``[::1]:22`` or ``[::ffff:10.0.0.1]:22``."""
    host = endpoint.rpartition(":")[0].strip("[]")
    return host[7:] if host.startswith("::ffff:") else host


def parse_ss(text: str) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Per peer address, from ``ss -tin`` (a socket's line, then its indented info line):
    ``retrans`` (segments retransmitted, the total of ``retrans:N/TOTAL``), ``bytes_sent`` and
    ``bytes_received``, summed over the connections to that peer; and this node's own addresses
    (the connections' local ends), by which the controller knows whose address a peer's is."""
    peers: dict[str, dict[str, int]] = {}
    local: list[str] = []
    peer: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            words = line.split()
            # State? Recv-Q Send-Q Local Peer: the two address-looking words.
            endpoints = [w for w in words if ":" in w and not w.startswith(("users:", "timer:"))]
            peer = _address(endpoints[-1]) if len(endpoints) >= 2 else None
            if peer is not None and _address(endpoints[-2]) not in local:
                local.append(_address(endpoints[-2]))
            continue
        if peer is None:
            continue
        counts = peers.setdefault(peer, {"retrans": 0, "bytes_sent": 0, "bytes_received": 0})
        for word in line.split():
            name, _, value = word.partition(":")
            if name == "retrans":
                value = value.rpartition("/")[2]
            elif name not in ("bytes_sent", "bytes_received"):
                continue
            try:
                counts[name] += int(value)
            except ValueError:
                continue
        peer = None
    return peers, local


def interface_counters(root: str = SYS_CLASS_NET) -> dict[str, int]:
    """Errors and drops summed over the node's interfaces but the loopback."""
    totals: dict[str, int] = {}
    for counters in sysfs_interface_counters(NET_COUNTERS, root).values():
        for field, value in counters.items():
            totals[f"if.{field}"] = totals.get(f"if.{field}", 0) + value
    return totals


def _read(path: str) -> str:
    try:
        with open(path) as handle:
            return handle.read()
    except OSError:
        return ""


def _ss() -> str:
    try:
        run = subprocess.run(
            ["ss", "-Htin", "state", "established"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=SS_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return run.stdout.decode("utf-8", "replace")


def infiniband_counters(root: str = SYS_CLASS_INFINIBAND) -> dict[str, int]:
    """Each InfiniBand port counter summed over the node's ports, as ``ib.NAME``: NCCL over
    InfiniBand verbs moves no TCP segment, and these are where its losses show."""
    totals: dict[str, int] = {}
    for found in ib_ports(root).values():
        for name, value in found["counters"].items():
            totals[f"ib.{name}"] = totals.get(f"ib.{name}", 0) + int(value)
    return totals


def sample() -> dict[str, Any]:
    """This node's counters now: ``counters`` (kernel, interfaces and InfiniBand ports), ``peers``
    (per address) and ``local`` (its own addresses)."""
    counters_now = parse_proc_table(_read("/proc/net/snmp"), SNMP_FIELDS)
    counters_now.update(parse_proc_table(_read("/proc/net/netstat"), NETSTAT_FIELDS))
    counters_now.update(interface_counters())
    counters_now.update(infiniband_counters())
    peers, local = parse_ss(_ss())
    return {"counters": counters_now, "peers": peers, "local": local}
