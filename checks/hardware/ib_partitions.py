"""InfiniBand partitions and RoCE GID indices, judged against like ports: the same port (device and
port number, on a card of the same kind) on the other nodes, as ``ib_ports.like_ports`` groups
them. Only ports up (ACTIVE and LinkUp) whose table the node could read are compared; ports down are
``ib_ports``' to judge, and a port no other node has is not compared.

P_Keys (``ib_pkeys``, a warning): the keys of a port's table, membership bit as read (``0xffff`` a
full member of the default partition, ``0x7fff`` a limited one). A port whose keys differ from the
keys most of its like ports have (more than half of them: ``preflight.nodeset.minority``) is named;
where no set of keys has a majority, every port is named and the finding says that no majority
decides. A port without the key of the job's partition cannot reach its peers in it.

RoCE GID indices (``roce_gid_index``, a warning): a job sets one ``NCCL_IB_GID_INDEX`` for every
node, so the index must hold the same kind of GID everywhere. Each address of a RoCE interface adds
a GID of each type (``IB/RoCE v1``, ``RoCE v2``) at the next free indices, the link-local address
first; NCCL takes, when unset, a RoCE v2 GID of an IPv4 address and never a link-local one. The
index compared is therefore a port's smallest RoCE v2 index of the best kind it has: an IPv4
address, else another address that is not link-local, else a link-local one; compared with the kind
of address it holds. A node whose index differs from its like ports' majority (an IPv6 address added
before the IPv4 one, moving the IPv4 RoCE v2 GID from 3 to 5; an interface that lost its IPv4
address) is named; an address added after the others (an extra IPv6 address at a higher index)
changes nothing. A port whose table holds GIDs but none of RoCE v2 fails on its own
(``roce_v2_missing``): RoCE v1 is not routed, and NCCL over RoCE needs a RoCE v2 GID in practice. A
port whose GID table is empty is not judged: the kernel gives the inactive slave of a bond no GID.

Several ports of one node that differ alike are one finding for that node. Pure: ports in, findings
out.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from checks.hardware.details import GidPort, IbPkeys, PkeyPort, RoceGidIndex, RoceV2Missing
from checks.hardware.ib_ports import Key, is_up, like_ports, port_label
from preflight.facts import IbPort, NodeFacts
from preflight.model import CheckResult
from preflight.nodeset import fold, group_by_value, minority

NAME = "hardware"
ETHERNET = "Ethernet"
ROCE_V2 = "RoCE v2"  # drivers/infiniband/core/cache.c, gid_type_str
IPV4_MAPPED = "0000:0000:0000:0000:0000:ffff:"  # ::ffff:a.b.c.d as the kernel writes it (%pI6)
LINK_LOCAL = "fe80:0000:0000:0000:"
# The kinds of address a RoCE v2 GID holds, best first: the order NCCL prefers them in.
ADDRESS_KINDS = ("IPv4", "IPv6", "link-local IPv6")

# A RoCE port's GID as compared: its index and the kind of address it holds.
Gid = tuple[int, str]
V = TypeVar("V", bound=Hashable)


def address_kind(gid: str) -> str:
    """``IPv4`` for an IPv4-mapped GID, ``link-local IPv6`` for fe80::/64, else ``IPv6``."""
    if gid.startswith(IPV4_MAPPED):
        return "IPv4"
    return "link-local IPv6" if gid.startswith(LINK_LOCAL) else "IPv6"


def roce_v2_gid(port: IbPort) -> Gid | None:
    """The RoCE v2 GID a port's index is compared by (the module's rule); None where it has none."""
    found = [(ADDRESS_KINDS.index(address_kind(g)), i) for i, kind, g in port.gids or () if kind == ROCE_V2]
    if not found:
        return None
    rank, index = min(found)
    return index, ADDRESS_KINDS[rank]


def gid_text(gid: Gid) -> str:
    return f"{gid[0]} ({gid[1]})"


def pkeys_text(pkeys: frozenset[str]) -> str:
    return ", ".join(sorted(pkeys)) or "none"


@dataclass(frozen=True)
class Odd(Generic[V]):
    """A port whose value differs from its like ports': its own value as text, the majority's value
    (None where no majority decides) and the other nodes by value, as text."""

    port: IbPort
    own: str
    usual: V | None
    others: tuple[tuple[str, tuple[str, ...]], ...]  # (value as text, nodes), largest group first

    def peers_text(self, what: str) -> str:
        """``on node[1-2,4] have 0x8001, 0xffff``, each side where no majority decides."""
        sides = " and ".join(f"on {fold(hosts)} {what} {value}" for value, hosts in self.others)
        return sides if self.usual is not None else f"{sides} (no majority decides)"


def _odd_ports(
    values: Mapping[Key, Mapping[str, V]],
    ports: Mapping[Key, Mapping[str, IbPort]],
    text: Callable[[V], str],
) -> dict[str, list[Odd[V]]]:
    """Per node, its ports whose value differs from their like ports' (``values`` by port key,
    then by node; at least two nodes a key)."""
    odd: dict[str, list[Odd[V]]] = {}
    for key, by_host in values.items():
        if len(by_host) < 2:
            continue
        usual, named = minority(by_host)
        for host in named:
            others = tuple(
                (text(value), tuple(hosts))
                for value, hosts in group_by_value({h: v for h, v in by_host.items() if h != host})
                if usual is None or value == usual
            )
            odd.setdefault(host, []).append(Odd(ports[key][host], text(by_host[host]), usual, others))
    return odd


def _clauses(found: Sequence[Odd[V]], what: str, peers_what: str) -> str:
    """The node's odd ports, those that differ alike in one clause: ``mlx5_0 port 1, mlx5_1 port 1
    P_Keys 0xffff where their like ports on node[1-2] have 0x8001, 0xffff``."""
    alike: dict[tuple[str, str], list[Odd[V]]] = {}
    for odd in found:
        alike.setdefault((odd.own, odd.peers_text(peers_what)), []).append(odd)
    clauses = []
    for (own, peers), group in alike.items():
        labels = ", ".join(port_label(o.port) for o in group)
        whose = "its" if len(group) == 1 else "their"
        clauses.append(f"{labels} {what} {own} where {whose} like ports {peers}")
    return "; ".join(clauses)


def _up_ports(nodes: Mapping[str, NodeFacts]) -> dict[Key, dict[str, IbPort]]:
    """Like ports that are up, by port key and node."""
    up: dict[Key, dict[str, IbPort]] = {}
    for key, members in like_ports(nodes).items():
        found = {h: p for h, p in members.items() if is_up(p)}
        if found:
            up[key] = found
    return up


def _pkey_findings(up: Mapping[Key, Mapping[str, IbPort]], hosts: Sequence[str]) -> list[CheckResult]:
    values = {
        key: {h: frozenset(p.pkeys) for h, p in members.items() if p.pkeys is not None}
        for key, members in up.items()
    }
    odd = _odd_ports(values, up, pkeys_text)
    results = []
    for host in (h for h in hosts if h in odd):
        found = odd[host]
        ports: list[PkeyPort] = [
            {
                "port": port_label(o.port),
                "pkeys": sorted(o.port.pkeys or ()),
                "peers_pkeys": sorted(o.usual) if o.usual is not None else None,
                "peers": [h for _, hosts in o.others for h in hosts],
            }
            for o in found
        ]
        details: IbPkeys = {"item": "ib_pkeys", "node": host, "ports": ports}
        summary = f"{host}: {_clauses(found, 'P_Keys', 'have')}"
        results.append(CheckResult(NAME, "warn", summary, (host,), details))
    return results


def _gid_port(odd: Odd[Gid]) -> GidPort:
    own = roce_v2_gid(odd.port)
    usual = odd.usual
    return {
        "port": port_label(odd.port),
        "index": own[0] if own else None,
        "address": own[1] if own else None,
        "peers_index": usual[0] if usual else None,
        "peers_address": usual[1] if usual else None,
        "peers": [h for _, hosts in odd.others for h in hosts],
    }


def _gid_findings(up: Mapping[Key, Mapping[str, IbPort]], hosts: Sequence[str]) -> list[CheckResult]:
    """RoCE ports: ``roce_v2_missing`` for ports with GIDs but none of RoCE v2, then the index of
    the others against their like ports'."""
    results = []
    missing: dict[str, list[IbPort]] = {}
    values: dict[Key, dict[str, Gid]] = {}
    for key, members in up.items():
        for host, port in members.items():
            if port.link_layer != ETHERNET or not port.gids:
                continue
            gid = roce_v2_gid(port)
            if gid is None:
                missing.setdefault(host, []).append(port)
            else:
                values.setdefault(key, {})[host] = gid
    for host in (h for h in hosts if h in missing):
        ports = missing[host]
        shown = ", ".join(port_label(p) for p in ports)
        types = sorted({kind for p in ports for _, kind, _ in p.gids or ()})
        summary = (
            f"{host}: {shown} ACTIVE on RoCE with GIDs of type {', '.join(types)} only, none of RoCE v2: "
            "NCCL over RoCE needs a RoCE v2 GID in practice (RoCE v1 is not routed)"
        )
        lacking: RoceV2Missing = {
            "item": "roce_v2_missing",
            "node": host,
            "ports": [port_label(p) for p in ports],
        }
        results.append(CheckResult(NAME, "fail", summary, (host,), lacking))
    odd = _odd_ports(values, up, gid_text)
    for host in (h for h in hosts if h in odd):
        found = odd[host]
        details: RoceGidIndex = {
            "item": "roce_gid_index",
            "node": host,
            "ports": [_gid_port(o) for o in found],
        }
        summary = (
            f"{host}: {_clauses(found, 'RoCE v2 GID at index', 'have it at')}; "
            "one NCCL_IB_GID_INDEX for the whole job names another GID on this node"
        )
        results.append(CheckResult(NAME, "warn", summary, (host,), details))
    return results


def judge_ib_partitions(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Per node, one warning for its ports whose P_Keys differ from their like ports', one for its
    RoCE ports whose RoCE v2 GID sits at another index, and one fail for its RoCE ports without a
    RoCE v2 GID."""
    up = _up_ports(nodes)
    return _pkey_findings(up, list(nodes)) + _gid_findings(up, list(nodes))
